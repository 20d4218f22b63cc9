"""The description key ``collision: reduced_basis``: loading, refusals, and who uses it."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from soft_inverse_ros.core.contact.basis_file import BasisFile, rest_checksum, save_basis
from soft_inverse_ros.core.contact.correction import contact_model_from_spec
from soft_inverse_ros.core.model.description import DescriptionError, load_robot_description

ROBOT = {
    "name": "pressed",
    "length_unit": "mm",
    "mesh": {"builtin": "diamond"},
    "material": {"young_modulus": "180 kPa", "poisson_ratio": 0.45, "total_mass": "0.5 kg"},
    "gravity": "[0, 0, -9810] mm/s^2",
    "fixed": {"boxes": [{"lower": [-15, -15, -40], "upper": [15, 15, 10]}]},
    "actuators": [{"name": "c1", "type": "cable", "pull_point": [0, 10, 30], "points": [[0, 97, 45]]}],
    "effectors": [{"name": "tip", "points": [[0, 0, 125]]}],
    "collision": {"obstacles": [{"type": "plane", "point": [0, 0, 500], "normal": [0, 0, -1]}]},
}


def _write(folder: Path, collision_extra: dict) -> Path:
    data = copy.deepcopy(ROBOT)
    data["collision"].update(collision_extra)
    path = folder / "robot.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def diamond_rest():
    """Rest points (N, 3) [m] and boundary faces of the robot's built-in mesh."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        desc = load_robot_description(_write(Path(folder), {}))
        mesh = desc.load_mesh()
    return np.asarray(mesh.points, float), mesh.boundary_faces()


def _basis(rest: np.ndarray, faces: np.ndarray, *, k: int = 3, mesh_nodes: int | None = None) -> BasisFile:
    nodes = np.unique(faces)
    psi = np.random.default_rng(0).random((nodes.size, k))
    return BasisFile(nodes=nodes, psi=psi / np.linalg.norm(psi, axis=0), robot="pressed",
                     mesh_nodes=len(rest) if mesh_nodes is None else mesh_nodes, rest_checksum=rest_checksum(rest),
                     sweep=("c1=0:5:1mm",), nnmf="hals", snapshots=10, error_vs_k={1: 0.2, 2: 0.1, 3: 0.05})


def test_the_key_loads_the_basis_relative_to_the_description(tmp_path, diamond_rest):
    rest, faces = diamond_rest
    (tmp_path / "bases").mkdir()
    save_basis(tmp_path / "bases" / "b.npz", _basis(rest, faces))
    desc = load_robot_description(_write(tmp_path, {"reduced_basis": "bases/b.npz"}))
    c = desc.collision
    assert c.reduced_basis == (tmp_path / "bases" / "b.npz").resolve() and c.basis.k == 3
    mesh = desc.load_mesh()  # the same mesh: accepted
    model = contact_model_from_spec(c, mesh.boundary_faces(), mesh.points)
    assert model.basis is not None and model.basis.size == 3 and model.solver == "exact"
    np.testing.assert_array_equal(model.basis.nodes, np.unique(faces))


def test_the_controllers_model_and_the_simulated_robot_use_it(tmp_path, diamond_rest):
    from soft_inverse_ros.core.model.robot_model import RobotModel
    from soft_inverse_ros.core.sim.plant import PlantConfig, SoftRobotPlant

    rest, faces = diamond_rest
    save_basis(tmp_path / "b.npz", _basis(rest, faces, k=4))
    desc = load_robot_description(_write(tmp_path, {"reduced_basis": "b.npz"}))
    model = RobotModel.from_description(desc, factor_reuse=False)
    assert model.basis is not None and model.basis.size == 4
    _, snap = model.update(np.zeros(1), seq=0, stamp=0.0)
    # nothing touches (the plane is far): the block is still k + 1 (the basis and the per-point
    # check's pattern) x k + 1, all zero
    c = snap.contacts
    assert model.reduced_size == 5
    assert c is not None and c.reduced and c.size == 5 and c.w_cc.shape == (5, 5)
    np.testing.assert_array_equal(c.ids, np.arange(5))
    assert not c.w_cc.any() and not c.w_ca.any() and not c.w_ec.any() and not c.force.any()
    plant = SoftRobotPlant(desc, PlantConfig(robot=str(desc.source), model="fem"))
    assert plant.contact is not None and plant.contact.basis is not None and plant.contact.basis.size == 4


def test_a_missing_basis_file_is_one_line(tmp_path):
    with pytest.raises(DescriptionError, match=r"collision.reduced_basis: contact basis .*nope.npz not found") as err:
        load_robot_description(_write(tmp_path, {"reduced_basis": "nope.npz"}))
    assert "\n" not in str(err.value)


def test_a_basis_of_another_mesh_is_refused_when_the_mesh_loads(tmp_path, diamond_rest):
    rest, faces = diamond_rest
    save_basis(tmp_path / "b.npz", _basis(rest, faces, mesh_nodes=len(rest) + 1))
    desc = load_robot_description(_write(tmp_path, {"reduced_basis": "b.npz"}))
    with pytest.raises(DescriptionError, match=f"mesh of {len(rest) + 1} nodes, this mesh has {len(rest)} nodes: "
                                               "rebuild it with soft-inverse-ros reduce-contacts") as err:
        desc.load_mesh()
    assert "\n" not in str(err.value)
    moved = rest.copy()
    moved[0, 0] += 1e-4
    save_basis(tmp_path / "b.npz", _basis(moved, faces))
    desc = load_robot_description(_write(tmp_path, {"reduced_basis": "b.npz"}))
    with pytest.raises(DescriptionError, match="other rest positions"):
        desc.load_mesh()
    with pytest.raises(ValueError, match="other rest positions"):  # also where the model is built
        contact_model_from_spec(desc.collision, faces, rest)


def test_a_reduced_basis_is_frictionless(tmp_path, diamond_rest):
    rest, faces = diamond_rest
    save_basis(tmp_path / "b.npz", _basis(rest, faces))
    with pytest.raises(DescriptionError, match="collision: reduced_basis: the reduced contact basis is frictionless"):
        load_robot_description(_write(tmp_path, {"reduced_basis": "b.npz", "friction": 0.3}))


def test_a_stale_basis_does_not_stop_its_own_rebuild(tmp_path, diamond_rest):
    from soft_inverse_ros.core.contact.basis_builder import sweep_plant

    rest, faces = diamond_rest
    save_basis(tmp_path / "b.npz", _basis(rest, faces, mesh_nodes=len(rest) + 1))
    desc = load_robot_description(_write(tmp_path, {"reduced_basis": "b.npz"}))
    plant = sweep_plant(desc)  # full contact, the stale basis left out
    assert plant.contact is not None and plant.contact.basis is None and plant.contact.obstacles
