"""Mesh obstacles (a closed triangle surface) and moving obstacles: geometry, description,
the contact model's offsets, and the simulated robot pushed by a moving obstacle."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from soft_inverse_ros.core.contact.correction import ContactModel
from soft_inverse_ros.core.contact.geometry import Box, Plane
from soft_inverse_ros.core.contact.mesh_obstacle import MeshGeometry, MeshObstacle
from soft_inverse_ros.core.contact.mesh_obstacle import box_surface as _box_surface
from soft_inverse_ros.core.contact.obstacle_motion import ObstacleMotion
from soft_inverse_ros.core.model.description import DescriptionError, load_robot_description


def box_surface(lo, hi, n: int = 4) -> tuple[np.ndarray, np.ndarray]:
    return _box_surface(lo, hi, n)


LO, HI = (-0.01, -0.02, -0.005), (0.02, 0.01, 0.004)


def test_a_triangulated_box_has_the_analytic_boxs_distance_and_normal():
    v, f = box_surface(LO, HI)
    mesh = MeshObstacle(MeshGeometry(v, f), reach=0.003)
    pts = np.random.default_rng(0).uniform(np.subtract(LO, 0.004), np.add(HI, 0.004), (4000, 3))
    d_ref, n_ref = Box(LO, HI).distance(pts)
    d, n = mesh.distance(pts)
    near = d_ref < 0.003
    assert near.sum() > 1000 and (d_ref[near] < 0).sum() > 100  # inside and outside points
    assert np.abs(d[near] - d_ref[near]).max() < 1e-12
    assert np.abs(n[near] - n_ref[near]).max() < 1e-9  # edge and corner regions included
    assert np.isinf(d[~near]).all()  # beyond reach: not computed


def test_deep_points_are_found_inside_through_the_winding_number():
    """A large finely split box: its centre is farther from every triangle centroid than
    reach + circumradius, so only the winding number tells inside from far outside."""
    lo, hi = (-0.05, -0.05, -0.05), (0.05, 0.05, 0.05)
    v, f = box_surface(lo, hi, n=10)
    mesh = MeshObstacle(MeshGeometry(v, f), reach=1e-3)
    pts = np.array([[0.002, 0.001, -0.003], [0.01, -0.02, 0.015], [0.2, 0.0, 0.0], [0.049, 0.0, 0.0],
                    [0.047, 0.01, 0.0]])  # the last: 3 mm inside, beyond reach, near the face's triangles
    d, n = mesh.distance(pts)
    d_ref, n_ref = Box(lo, hi).distance(pts)
    assert d[:2] == pytest.approx(d_ref[:2], abs=1e-12) and (d[:2] < -0.02).all()
    assert np.allclose(n[:2], n_ref[:2])
    assert d[4] == pytest.approx(-3e-3, abs=1e-12) and np.allclose(n[4], [1, 0, 0])
    assert np.isinf(d[2])  # far outside, inside the search box of nothing
    assert d[3] == pytest.approx(-1e-3, abs=1e-12) and np.allclose(n[3], [1, 0, 0])


def test_contacts_moved_and_bad_surfaces():
    v, f = box_surface(LO, HI)
    geo = MeshGeometry(v, f)
    mesh = MeshObstacle(geo, reach=1e-3)
    x = np.array([[0.0, 0.0, 0.0045], [0.0, 0.0, 0.01]])  # 0.5 mm above the top, and far
    cs = mesh.contacts(x, np.arange(2), alarm=1e-3)
    assert cs.size == 1 and cs.gaps[0] == pytest.approx(5e-4) and np.allclose(cs.normals[0], [0, 0, 1])
    far = mesh.contacts(x, np.arange(2), alarm=6e-3)  # an alarm beyond the obstacle's reach
    assert far.size == 2 and far.gaps[1] == pytest.approx(6e-3)
    moved = mesh.moved((0.0, 0.0, 0.001))  # the top now 0.5 mm above the first point
    assert moved.distance(x[:1])[0][0] == pytest.approx(-5e-4)
    assert mesh.offset == (0.0, 0.0, 0.0)  # frozen: moved() is a new obstacle
    with pytest.raises(ValueError, match="not closed"):
        MeshGeometry(v, f[:-1])
    with pytest.raises(ValueError, match="outward"):
        MeshGeometry(v, f[:, ::-1])


def test_obstacle_motion_law_and_validation():
    m = ObstacleMotion(velocity=(0.0, 0.0, -0.01), stop_after=0.5)
    assert np.allclose(m.offset(0.0), 0) and np.allclose(m.offset(0.2), [0, 0, -0.002])
    assert np.allclose(m.offset(2.0), [0, 0, -0.005])  # held after stop_after
    w = ObstacleMotion(amplitude=(0.002, 0.0, 0.0), frequency=0.5, phase=0.3)
    assert np.allclose(w.offset(0.0), 0)
    assert w.offset(0.5)[0] == pytest.approx(0.002 * (math.sin(math.pi * 0.5 + 0.3) - math.sin(0.3)))
    assert w.offset(2.0)[0] == pytest.approx(0.0, abs=1e-15)  # one period
    for bad, needle in ((dict(), "non-zero"), (dict(amplitude=(0.001, 0, 0)), "frequency"),
                        (dict(velocity=(0.01, 0, 0), stop_after=0.0), "stop_after"),
                        (dict(velocity=(math.nan, 0, 0)), "finite")):
        with pytest.raises(ValueError, match=needle):
            ObstacleMotion(**bad)


def test_contact_model_offsets_move_the_obstacles_from_their_declared_pose():
    plane = Plane((0.0, 0.0, 0.1), (0.0, 0.0, -1.0))
    motion = ObstacleMotion(velocity=(0.0, 0.0, -0.01))
    model = ContactModel(obstacles=(plane, Plane((0, 0, 0), (0, 0, 1))), motions=(motion, None))
    x = np.array([[0.0, 0.0, 0.0995]])
    assert model.moving and model.detect(x).size == 1  # 0.5 mm below the plane
    model.move_obstacles_to(0.1)  # the plane 1 mm lower: 0.5 mm into the point
    cs = model.detect(x)
    assert cs.gaps[cs.obstacle == 0][0] == pytest.approx(-5e-4)
    assert np.allclose(model.obstacle_offsets, [[0, 0, -0.001], [0, 0, 0]])
    model.set_obstacle_offsets(np.zeros((2, 3)))  # as measured: back where declared
    assert model.obstacles[0] is plane
    with pytest.raises(ValueError, match="shape"):
        model.set_obstacle_offsets(np.zeros((1, 3)))
    assert not ContactModel(obstacles=(plane,)).moving


BASE = {
    "name": "bar", "length_unit": "mm", "mesh": {"builtin": "diamond"},
    "material": {"young_modulus": "180 kPa", "poisson_ratio": 0.45, "total_mass": "0.5 kg"},
    "gravity": "[0, 0, -9810] mm/s^2",
    "fixed": {"boxes": [{"lower": [-15, -15, -40], "upper": [15, 15, 10]}]},
    "actuators": [{"name": "c1", "type": "cable", "pull_point": [0, 10, 30], "points": [[0, 97, 45]],
                   "max_stroke": "2 cm"}],
    "effectors": [{"name": "tip", "points": [[0, 0, 125]]}],
}


def _write_stl(path: Path, v_mm: np.ndarray, f: np.ndarray) -> None:
    import meshio

    meshio.write(str(path), meshio.Mesh(v_mm, [("triangle", f)]), file_format="stl", binary=True)


def _describe(tmp_path: Path, collision: dict) -> Path:
    data = copy.deepcopy(BASE)
    data["collision"] = collision
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_mesh_and_moving_obstacles_in_the_description(tmp_path):
    v, f = box_surface((0, 0, 0), (10, 20, 5))  # file in mm
    _write_stl(tmp_path / "block.stl", v, f)
    path = _describe(tmp_path, {"obstacles": [
        {"type": "mesh", "file": "block.stl", "translation": [-5, -10, 140],
         "motion": {"velocity": "[0, 0, -2] mm/s", "stop_after": "3 s"}},
        {"type": "sphere", "centre": [0, 0, 200], "radius": 5,
         "motion": {"amplitude": [0, 0, 1], "frequency": "0.5 Hz", "phase": "90 deg"}}]})
    spec = load_robot_description(path).collision
    mesh, sphere = spec.obstacles
    assert mesh.kind == "mesh" and mesh.get("translation") == pytest.approx((-0.005, -0.01, 0.14))
    assert mesh.motion.velocity == pytest.approx((0, 0, -0.002)) and mesh.motion.stop_after == 3.0
    assert sphere.motion.frequency == 0.5 and sphere.motion.phase == pytest.approx(math.pi / 2)
    geo = mesh.get("geometry")  # loaded, in metres, in the robot frame
    assert geo.lower == pytest.approx([-0.005, -0.01, 0.14]) and geo.upper == pytest.approx([0.005, 0.01, 0.145])


@pytest.mark.parametrize("obstacle, friction, needle", [
    ({"type": "mesh", "file": "missing.stl"}, 0.0, "file not found"),
    ({"type": "mesh", "file": "open.stl"}, 0.0, "obstacle surface"),
    ({"type": "sphere", "centre": [0, 0, 0], "radius": 5, "motion": {"velocity": [0, 0, 1], "speed": 2}},
     0.0, "unknown key"),
    ({"type": "sphere", "centre": [0, 0, 0], "radius": 5, "motion": {"velocity": "[0, 0, 1] N"}},
     0.0, "motion.velocity"),
    ({"type": "sphere", "centre": [0, 0, 0], "radius": 5, "motion": {"velocity": [0, 0, 1]}},
     0.5, "needs friction 0"),
])
def test_bad_obstacles_are_one_line_naming_the_key(tmp_path, obstacle, friction, needle):
    v, f = box_surface((0, 0, 0), (10, 20, 5))
    _write_stl(tmp_path / "open.stl", v, f[:-2])
    with pytest.raises(DescriptionError) as err:
        load_robot_description(_describe(tmp_path, {"obstacles": [obstacle], "friction": friction}))
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_the_simulated_robot_is_pushed_down_by_a_moving_mesh_plate(tmp_path):
    """A plate (mesh obstacle) 1 mm above the (coarse) built-in robot's top moves down at 20 mm/s for
    0.25 s (5 mm): the robot's top follows it down, in contact, with little penetration;
    a fixed plate leaves the robot at rest."""
    from soft_inverse_ros.core.sim.plant import PlantConfig, SoftRobotPlant

    desc = load_robot_description("builtin_diamond")
    top = float(SoftRobotPlant.from_config(PlantConfig(mesh_cell_size=0.011)).positions[:, 2].max())
    v, f = box_surface((-20, -20, 0), (20, 20, 4))  # 40 x 40 x 4 mm plate

    def run(motion):
        _write_stl(tmp_path / "plate.stl", v, f)
        data = yaml.safe_load(Path(desc.source).read_text(encoding="utf-8"))
        data["gravity"] = [0, 0, 0]
        plate = {"type": "mesh", "file": str(tmp_path / "plate.stl"), "unit": "mm",
                 "translation": f"[0, 0, {(top + 1e-3) * 1e3}] mm"}
        if motion:
            plate["motion"] = motion
        data["collision"] = {"obstacles": [plate], "alarm_distance": "1.5 mm"}
        path = tmp_path / "robot.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        plant = SoftRobotPlant.from_config(PlantConfig(robot=str(path), model="fem", dt=0.005,
                                                       mesh_cell_size=0.011, rayleigh_mass=5.0))
        penetration = 0.0
        for _ in range(80):  # 0.4 s
            plant.step()
            c = plant.last_contact
            if c is not None and c.gaps_after is not None and len(c.gaps_after):
                penetration = max(penetration, float(-c.gaps_after.min()))
        return plant, penetration

    fixed, _ = run(None)
    assert fixed.positions[:, 2].max() == pytest.approx(top, abs=1e-6)
    pushed, penetration = run({"velocity": "[0, 0, -20] mm/s", "stop_after": "0.25 s"})
    plate_bottom = top + 1e-3 - 5e-3
    assert np.allclose(pushed.contact.obstacle_offsets[0], [0, 0, -5e-3])
    assert pushed.positions[:, 2].max() == pytest.approx(plate_bottom, abs=3e-4)  # follows the plate
    assert penetration < 1e-4
    assert pushed.last_contact.contacts > 0 and pushed.last_contact.forces.sum() > 0
