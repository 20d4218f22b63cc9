"""Robot descriptions: YAML schema, units, validation errors naming file and key."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from soft_inverse_ros.core.config_files import ConfigNotFoundError, find_config, resolve_robot
from soft_inverse_ros.core.model.description import (
    CableSpec,
    DescriptionError,
    EffectorSpec,
    ForceSpec,
    Material,
    load_robot_description,
)
from soft_inverse_ros.core.model.mesh_generation import box_mesh

BASE: dict[str, Any] = {
    "name": "bar",
    "length_unit": "mm",
    "mesh": {"builtin": "diamond"},
    "material": {"young_modulus": "180 kPa", "poisson_ratio": 0.45, "total_mass": "0.5 kg"},
    "gravity": "[0, 0, -9810] mm/s^2",
    "fixed": {"boxes": [{"lower": [-15, -15, -40], "upper": [15, 15, 10]}]},
    "actuators": [
        {"name": "c1", "type": "cable", "pull_point": [0, 10, 30], "points": [[0, 97, 45]], "max_stroke": "2 cm"},
    ],
    "effectors": [{"name": "tip", "points": [[0, 0, 125]]}],
}


def write(tmp_path: Path, data: dict[str, Any], name: str = "robot.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def variant(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return data


def test_builtin_diamond_yaml_loads_in_si() -> None:
    d = load_robot_description("builtin_diamond")
    assert d.name == "builtin_diamond" and d.frame_id == "base_link"
    assert d.material.young_modulus == pytest.approx(1e6)  # "1 MPa" in the YAML
    assert d.material.poisson_ratio == 0.45 and d.material.total_mass == 0.5 and d.material.density is None
    np.testing.assert_allclose(d.gravity, [0, 0, -9.81])
    assert d.actuator_names == ("cable_left", "cable_back", "cable_right", "cable_front")
    for cable in d.actuators:
        assert isinstance(cable, CableSpec)
        assert cable.min_force == 0.0 and cable.max_stroke == pytest.approx(0.02)
        assert cable.path.shape == (2, 3)
    assert d.effector_row_names == ("tip.x", "tip.y", "tip.z")
    mesh = d.load_mesh()
    fixed = d.fixed.node_indices(mesh.points)
    assert fixed.size > 0 and np.all(mesh.points[fixed, 2] <= 0.010 + 1e-9)
    assert d.material.mass_density(mesh.total_volume) * mesh.total_volume == pytest.approx(0.5)


def test_schema_values_and_length_unit(tmp_path: Path) -> None:
    d = load_robot_description(write(tmp_path, BASE))
    cable = d.actuators[0]
    np.testing.assert_allclose(cable.points, [[0, 0.097, 0.045]])
    np.testing.assert_allclose(cable.pull_point, [0, 0.01, 0.03])
    assert cable.max_stroke == pytest.approx(0.02) and cable.max_force == math.inf
    np.testing.assert_allclose(d.fixed.boxes[0].lower, [-0.015, -0.015, -0.04])
    assert d.source == tmp_path / "robot.yaml"


def test_force_cavity_and_effector_options(tmp_path: Path) -> None:
    stl = tmp_path / "cav.stl"
    import meshio

    cube = box_mesh((10.0, 10.0, 10.0), (1, 1, 1), origin=(-5, -5, 60))
    meshio.write(str(stl), meshio.Mesh(np.asarray(cube.points), [("triangle", cube.boundary_faces())]))
    data = variant()
    data["actuators"] += [
        {"name": "push", "type": "force", "point": [0, 0, 100], "direction": [2, 0, 0], "min_force": "-3 N"},
        {"name": "squeeze", "type": "force", "point": [0, 0, 100], "second_point": [0, 0, 0]},
        {
            "name": "cav",
            "type": "cavity",
            "surface": "cav.stl",
            "max_pressure": "30 kPa",
            "max_volume_growth": 2000,
        },
    ]
    data["effectors"][0].update({"points": [[0, 0, 125], [0, 5, 125]], "mode": "barycenter", "weights": [1, 3], "axes": ["z", "x"]})
    d = load_robot_description(write(tmp_path, data))
    push, squeeze, cav = d.actuators[1:]
    assert isinstance(push, ForceSpec) and isinstance(squeeze, ForceSpec)
    np.testing.assert_allclose(push.direction, [1, 0, 0])
    assert push.min_force == -3.0 and squeeze.direction is None
    assert cav.max_pressure == 30e3 and cav.max_volume_growth == pytest.approx(2e-6)
    assert cav.surface_file == stl and cav.surface_unit_scale == pytest.approx(1e-3)
    pts, tris = cav.load_surface()
    assert len(tris) == 12 and pts[:, 2].min() == pytest.approx(0.06)
    eff = d.effectors[0]
    assert eff.axes == ("x", "z") and eff.row_names() == ("tip.x", "tip.z") and eff.n_rows == 2


def test_mesh_file_relative_to_yaml_and_env_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import meshio

    sub = tmp_path / "meshes"
    sub.mkdir()
    box = box_mesh((200.0, 200.0, 170.0), (2, 2, 2), origin=(-100, -100, -40))
    meshio.write(str(sub / "m.vtu"), meshio.Mesh(np.asarray(box.points), [("tetra", np.asarray(box.tets))]))
    mesh = {"file": "meshes/m.vtu", "unit": "mm", "translation": ["1 cm", 0, 0]}
    d = load_robot_description(write(tmp_path, variant(mesh=mesh)))
    assert d.mesh.file == sub / "m.vtu"
    assert d.mesh.unit_scale == pytest.approx(1e-3) and d.mesh.translation == pytest.approx((10.0, 0.0, 0.0))
    assert d.load_mesh().bounding_box()[0] == pytest.approx([-0.09, -0.1, -0.04])

    env_mesh = {"file": "${SIR_TEST_MESHES}/m.vtu", "unit": "mm"}
    path = write(tmp_path, variant(mesh=env_mesh), "env.yaml")
    monkeypatch.delenv("SIR_TEST_MESHES", raising=False)
    with pytest.raises(DescriptionError, match="SIR_TEST_MESHES is not set"):
        load_robot_description(path)
    monkeypatch.setenv("SIR_TEST_MESHES", str(sub))
    assert load_robot_description(path).mesh.file == sub / "m.vtu"

    default = {"file": "${SIR_TEST_MESHES:-meshes}/m.vtu", "unit": "mm"}
    monkeypatch.delenv("SIR_TEST_MESHES")
    assert load_robot_description(write(tmp_path, variant(mesh=default), "d.yaml")).mesh.file == sub / "m.vtu"


# ------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (variant(material__youngs_modulus="1 kPa", material__young_modulus=None), "material.youngs_modulus: unknown key (did you mean 'young_modulus'?)"),
        (variant(gravty=[0, 0, -9.81]), "gravty: unknown key (did you mean 'gravity'?)"),
        (variant(actuators__0__max_strok=3), "max_strok: unknown key (did you mean 'max_stroke'?)"),
        (variant(material__young_modulus="180 mm"), "material.young_modulus: unit 'mm' is a length, expected a pressure"),
        (variant(actuators__0__max_force="5 kg"), "max_force: unit 'kg' is a mass, expected a force"),
        (variant(length_unit="furlong"), "length_unit: unknown unit 'furlong'"),
        (variant(actuators__0__pull_point=None), "a cable with one point"),
        (variant(actuators__0__min_force="-1 N"), "min_force must be >= 0 N (cables only pull)"),
        (variant(actuators__0__type="cabel"), "unknown actuator type 'cabel' (did you mean 'cable'?)"),
        (variant(material__density="1000 kg/m^3"), "exactly one of 'density' and 'total_mass'"),
        (variant(material__poisson_ratio=0.5), "poisson_ratio must be in (-1, 0.5)"),
        (variant(material=None), "material: missing required key"),
        (variant(gravity=[0, 0, -9810]), "implausible"),
        (variant(fixed={"boxes": []}), "fixed: give at least one box or node index"),
        (variant(fixed__boxes=[{"lower": [1, 0, 0], "upper": [0, 1, 1]}]), "fixed.boxes[0]: box lower"),
        (variant(effectors__0__axes=["x", "w"]), "axes must be a non-empty subset"),
        (variant(effectors__0__mode="centroid"), "mode must be 'points' or 'barycenter'"),
        (variant(mesh={"builtin": "diamant"}), "unknown built-in mesh 'diamant' (did you mean 'diamond'?)"),
        (variant(mesh={"builtin": "diamond", "params": {"cel_size": 5}}), "mesh.params.cel_size: unknown key (did you mean 'cell_size'?)"),
        (variant(mesh={"file": "nowhere.vtu"}), "mesh.file: mesh file"),
        (variant(mesh={}), "mesh: give exactly one of 'file' and 'builtin'"),
        (variant(collision={"self_colision": True}), "collision.self_colision: unknown key (did you mean 'self_collision'?)"),
        (variant(collision={"obstacles": [{"type": "cone"}]}), "collision.obstacles[0].type: expected one of"),
        (variant(collision={"obstacles": [{"type": "sphere", "centre": [0, 0, 0], "radius": "1 kPa"}]}), "radius: unit 'kPa' is a pressure, expected a length"),
        (variant(collision={"obstacles": [{"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 0]}]}), "normal: expected a non-zero finite direction"),
        (variant(collision={"self_collision": True, "friction": -0.2}), "friction must be"),
        (variant(collision={"self_collision": "yes"}), "collision.self_collision: expected true or false"),
        (variant(collision={"alarm_distance": "1 mm"}), "give self_collision: true or at least one obstacle"),
    ],
)
def test_bad_descriptions_name_file_and_key(tmp_path: Path, data: dict[str, Any], needle: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(DescriptionError) as err:
        load_robot_description(path)
    message = str(err.value)
    assert str(path) in message
    assert needle in message


def test_collision_section_in_si(tmp_path: Path) -> None:
    data = variant(collision={
        "self_collision": True, "alarm_distance": "0.5 mm", "friction": [0.6, 0.6],
        "obstacles": [{"type": "plane", "point": [0, 0, -40], "normal": [0, 0, 2], "t1": [1, 0, 0]},
                      {"type": "sphere", "centre": [0, 0, 150], "radius": 10},
                      {"type": "box", "lower": [-5, -5, 140], "upper": [5, 5, 145]}]})
    c = load_robot_description(write(tmp_path, data)).collision
    assert c.self_collision and c.alarm_distance == pytest.approx(5e-4) and c.friction == (0.6, 0.6)
    plane, sphere, box = c.obstacles
    assert plane.get("point") == pytest.approx((0, 0, -0.04)) and plane.get("normal") == pytest.approx((0, 0, 1))
    assert sphere.get("radius") == pytest.approx(0.01) and box.get("upper") == pytest.approx((0.005, 0.005, 0.145))
    assert load_robot_description(write(tmp_path, BASE, "plain.yaml")).collision is None


@pytest.mark.parametrize(("collision", "needle"), [
    # each did nothing or something arbitrary, silently
    ({"self_collision": True, "friction": 0.5}, "friction acts on obstacle contacts only"),
    ({"friction": [0.1, 0.9], "obstacles": [{"type": "sphere", "centre": [0, 0, 150], "radius": 10}]},
     "anisotropic friction [μ_t1, μ_t2] needs each obstacle to be a plane with its tangent t1"),
    ({"obstacles": [{"type": "plane", "point": [0, -0.5, 0], "normal": [0, 1, 0], "t1": [0, 1, 0]}]},
     "collision.obstacles[0].t1: is along the plane's normal"),
    ({"obstacles": [{"type": "box", "lower": [-5, -5, 140], "upper": [5, -5, 145]}]},
     "box lower must be < upper on every axis"),
    ({"obstacles": [{"type": "sphere", "centre": [0, 0, 150], "radius": 10,
                     "motion": {"velocity": "[0, 1, 0] mm/s", "frequency": "5 Hz"}}]},
     "frequency and phase shape the oscillation of an amplitude"),
])
def test_collision_settings_that_would_do_nothing_or_something_arbitrary(tmp_path: Path, collision, needle) -> None:
    with pytest.raises(DescriptionError) as exc:
        load_robot_description(write(tmp_path, variant(collision=collision)))
    assert needle in str(exc.value)


def test_duplicate_actuator_names(tmp_path: Path) -> None:
    data = variant()
    data["actuators"].append(copy.deepcopy(data["actuators"][0]))
    with pytest.raises(DescriptionError, match=r"actuator names must be unique, repeated: \['c1'\]"):
        load_robot_description(write(tmp_path, data))


def test_fixed_box_catching_no_node_fails_on_mesh_load(tmp_path: Path) -> None:
    d = load_robot_description(write(tmp_path, variant(fixed__boxes=[{"lower": [0, 0, 500], "upper": [1, 1, 501]}])))
    with pytest.raises(DescriptionError, match="no mesh node lies in the fixed boxes"):
        d.load_mesh()


def test_points_in_wrong_units_fail_on_mesh_load(tmp_path: Path) -> None:
    d = load_robot_description(write(tmp_path, variant(length_unit="cm")))
    with pytest.raises(DescriptionError, match="outside the mesh bounding box"):
        d.load_mesh()


def test_dataclasses_validate_directly() -> None:
    with pytest.raises(ValueError, match="a cable with one point"):
        CableSpec("c", np.array([[0.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="min_force must be >= 0"):
        CableSpec("c", np.zeros((2, 3)) + [[0, 0, 0], [1, 0, 0]], min_force=-1.0)
    with pytest.raises(ValueError, match="exactly one of direction and second_point"):
        ForceSpec("f", np.zeros(3))
    with pytest.raises(ValueError, match="exactly one of density and total_mass"):
        Material(1e5, 0.3)
    assert Material(1e5, 0.3, density=1000.0).mass_density(2.0) == 1000.0
    e = EffectorSpec("e", np.zeros((2, 3)))
    assert e.row_names()[:2] == ("e[0].x", "e[0].y") and e.n_rows == 6


def test_config_lookup() -> None:
    path = find_config("robots/builtin_diamond.yaml")
    assert path.is_file()
    assert resolve_robot("builtin_diamond") == path
    assert resolve_robot(str(path)) == path
    with pytest.raises(ConfigNotFoundError) as err:
        resolve_robot("no_such_robot")
    assert "builtin_diamond" in str(err.value) and "searched" in str(err.value)


def test_a_folder_given_as_a_robot_is_one_line(tmp_path, monkeypatch):
    from soft_inverse_ros.core.config_files import ConfigNotFoundError, resolve_robot

    with pytest.raises(ConfigNotFoundError, match=r"^robot description .* is a folder, not a YAML file$"):
        resolve_robot(tmp_path)
    (tmp_path / "finger").mkdir()  # a folder named as a robot (demo --out finger) hides nothing
    monkeypatch.chdir(tmp_path)
    assert resolve_robot("finger").name == "finger.yaml"
    (tmp_path / "nosuch").mkdir()
    with pytest.raises(ConfigNotFoundError, match=r"^robot description nosuch is a folder, not a YAML file$"):
        resolve_robot("nosuch")
