"""The real SOFA SoftRobots meshes load with the facts of their scenes (mesh-level checks)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from soft_inverse_ros.core.model.description import CableSpec, CavitySpec, load_robot_description
from soft_inverse_ros.core.model.mesh import load_mesh, load_surface, sniff_format, surface_volume

pytestmark = pytest.mark.shared_data
MM = 1e-3


@pytest.fixture()
def sofa_env(sofa_data: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the robot descriptions' ${SOFA_SOFTROBOTS_DATA} at the shared meshes."""
    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))
    return sofa_data


def test_formats_are_detected_from_content(sofa_data: Path) -> None:
    assert sniff_format(sofa_data / "diamond.vtk") == "vtu"  # VTK XML despite its name
    assert sniff_format(sofa_data / "finger.vtk") == "vtk"  # legacy binary
    assert sniff_format(sofa_data / "Springy.vtu") == "vtu"
    assert sniff_format(sofa_data / "Springy_Cavity.stl") == "stl"
    assert sniff_format(sofa_data / "finger.stl") == "stl"


def test_diamond_mesh_size(sofa_data: Path) -> None:
    m = load_mesh(sofa_data / "diamond.vtk", unit_scale=MM)
    assert (m.n_points, m.n_tets) == (1628, 4147)
    assert m.report.file_format == "vtu" and m.report.dropped_cells == {}
    assert np.all(m.volumes() > 0)
    assert m.face_components()[0] == 1


def test_finger_keeps_only_its_tetrahedra(sofa_data: Path) -> None:
    m = load_mesh(sofa_data / "finger.vtk", unit_scale=MM)
    assert m.n_tets == 389
    assert m.report.dropped_cells == {"vertex": 26, "line": 88, "triangle": 306}
    assert m.n_points + m.report.dropped_nodes == 158
    assert np.all(m.volumes() > 0)


def test_springy_volume_and_closed_cavity(sofa_data: Path) -> None:
    m = load_mesh(sofa_data / "Springy.vtu", unit_scale=1e-2, rotation_deg=(90, 0, 0))
    assert m.n_tets == 2743 and np.all(m.volumes() > 0)
    pts, tris = load_surface(sofa_data / "Springy_Cavity.stl", unit_scale=1e-2)
    assert len(tris) == 568
    assert surface_volume(pts, tris) > 0  # closed, normals out of the cavity
    # the cavity wall lies in the (rotated) accordion
    assert m.contains(pts, tol=0.05).all()


def test_real_diamond_description_facts(sofa_env: Path) -> None:
    d = load_robot_description("diamond")
    m = d.load_mesh()
    lo, hi = m.bounding_box()
    # rx=90 then dz=35 (mm): the base reaches into the fixed box, the effector is at the top
    assert lo[2] == pytest.approx(-0.037, abs=1e-3) and hi[2] == pytest.approx(0.1257, abs=1e-3)
    box = d.fixed.boxes[0]
    np.testing.assert_allclose(box.lower, [-0.015, -0.015, -0.040])
    np.testing.assert_allclose(box.upper, [0.015, 0.015, 0.010])
    assert box.lower[2] < lo[2] < box.upper[2]
    assert d.fixed.node_indices(m.points).size == 58
    tip = d.effectors[0].points
    np.testing.assert_allclose(tip, [[0, 0, 0.125]])
    assert m.contains(tip).all()
    assert d.material.young_modulus == pytest.approx(180e3) and d.material.total_mass == 0.5
    np.testing.assert_allclose(d.gravity, [0, 0, -9.81])
    expected = {
        "cable_left": ([0, 97, 45], [0, 10, 30]),
        "cable_back": ([-97, 0, 45], [-10, 0, 30]),
        "cable_right": ([0, -97, 45], [0, -10, 30]),
        "cable_front": ([97, 0, 45], [10, 0, 30]),
    }
    for cable in d.actuators:
        assert isinstance(cable, CableSpec)
        attach, pull = expected[cable.name]
        np.testing.assert_allclose(cable.points, [np.array(attach) * MM])
        np.testing.assert_allclose(cable.pull_point, np.array(pull) * MM)
        assert cable.min_force == 0.0 and cable.max_stroke == pytest.approx(0.020)
    # the knees are on the (coarse) mesh surface: inside up to a 5 % barycentric slack
    knees = np.vstack([c.points for c in d.actuators])
    assert m.contains(knees, tol=0.05).all()


def test_finger_and_springy_descriptions(sofa_env: Path) -> None:
    finger = load_robot_description("finger")
    fm = finger.load_mesh()
    cable = finger.actuators[0]
    assert isinstance(cable, CableSpec) and cable.path.shape == (15, 3)
    assert fm.contains(cable.points).all() and fm.contains(finger.effectors[0].points).all()
    np.testing.assert_allclose(finger.gravity, [0, -9.81, 0])
    assert finger.fixed.node_indices(fm.points).size > 0

    springy = load_robot_description("springy")
    sm = springy.load_mesh()
    cavity = springy.actuators[0]
    assert isinstance(cavity, CavitySpec)
    pts, _ = cavity.load_surface()
    assert sm.contains(pts, tol=0.05).all()
    assert springy.material.young_modulus == pytest.approx(50e3)
    np.testing.assert_allclose(springy.gravity, [0, 0, -9.81])
    fixed = springy.fixed.node_indices(sm.points)
    assert fixed.size > 0 and sm.points[fixed, 2].max() <= 0.005 + 1e-9
    assert sm.contains(springy.effectors[0].points).all()


def test_mesh_override_replaces_the_file(sofa_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(tmp_path))  # nothing there
    d = load_robot_description("diamond", mesh_override=sofa_data / "diamond.vtk")
    assert d.load_mesh().n_points == 1628
