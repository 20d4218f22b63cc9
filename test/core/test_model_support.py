"""Robots that cannot hold an equilibrium, or whose model would be silently wrong, are
refused where the model is built (and by ``mesh-info --robot``), in one line:
coincident nodes splitting the mesh, parts no fixed node holds, constraints on fixed nodes
only, a cable segment of no length, weights that do nothing."""

from __future__ import annotations

from pathlib import Path

import meshio
import numpy as np
import pytest
import yaml

from soft_inverse_ros import cli
from soft_inverse_ros.bench.fem import box_robot
from soft_inverse_ros.core.model.description import CableSpec, DescriptionError, parse_robot_description
from soft_inverse_ros.core.model.mesh import TetMesh
from soft_inverse_ros.core.model.robot_model import RobotModel
from soft_inverse_ros.core.model.support import coincident_node_pairs, support_problem

BUILTIN = Path(__file__).resolve().parents[2] / "config" / "robots" / "builtin_diamond.yaml"


@pytest.fixture(scope="module")
def box():
    return box_robot(600)


def _split(mesh: TetMesh) -> TetMesh:
    """The mesh with the tets beyond its mid-plane y given their own copies of the plane's
    nodes (the export mistake: two halves meeting along a seam of duplicate nodes)."""
    pts, tets = mesh.points.copy(), mesh.tets.copy()
    levels = np.unique(pts[:, 1])
    mid = levels[len(levels) // 2]
    seam = np.flatnonzero(pts[:, 1] == mid)
    assert seam.size > 0
    copy = {int(n): len(pts) + k for k, n in enumerate(seam)}
    upper = pts[tets].mean(axis=1)[:, 1] > mid
    tets[upper] = np.vectorize(lambda n: copy.get(int(n), int(n)))(tets[upper])
    return TetMesh.from_arrays(np.vstack([pts, pts[seam]]), tets)


def test_a_mesh_split_by_duplicate_nodes_is_refused(box):
    """Both halves were clamped, so it solved: 0.5 N moved the tip 12 mm instead of 2.6."""
    desc, mesh = box
    split = _split(mesh)
    assert split.face_components()[0] == 2
    with pytest.raises(ValueError, match=r"pair\(s\) of mesh nodes coincide .*the mesh is split along them"):
        RobotModel.from_description(desc, mesh=split)
    assert coincident_node_pairs(mesh.points, 1e-12).shape == (0, 2)


def test_a_part_no_fixed_node_holds_is_refused(box):
    desc, mesh = box
    lo, hi = mesh.bounding_box()
    far = mesh.points + [2.0 * (hi - lo)[0], 0.0, 0.0]  # a second copy beyond the tip: floating
    two = TetMesh.from_arrays(np.vstack([mesh.points, far]), np.vstack([mesh.tets, mesh.tets + mesh.n_points]))
    fixed = desc.fixed.node_indices(two.points)
    problem = support_problem(two, fixed)
    assert problem is not None and "of 2 face-connected parts part 2" in problem and "has no fixed node" in problem


@pytest.mark.parametrize(("count", "how"), [(1, "1 fixed node(s)"), (0, "no fixed node")])
def test_one_fixed_node_does_not_hold_a_body(box, count, how):
    desc, mesh = box
    fixed = desc.fixed.node_indices(mesh.points)[:count]
    problem = support_problem(mesh, fixed)
    assert problem is not None and problem.startswith("the mesh can move as a rigid body: part 1") and how in problem


def test_fixed_nodes_on_one_line_do_not_hold_a_body(box):
    desc, mesh = box
    fixed = desc.fixed.node_indices(mesh.points)
    p = mesh.points[fixed]
    line = fixed[np.isclose(p[:, 2], p[:, 2].min()) & np.isclose(p[:, 0], p[:, 0].min())]  # one edge of the clamp
    assert line.size >= 3
    assert "on one line" in support_problem(mesh, line)
    assert support_problem(mesh, fixed) is None


def test_an_effector_on_fixed_nodes_only_is_refused():
    """W was zero: the controller could never move it (bench fem printed a W error of 0)."""
    data = yaml.safe_load(BUILTIN.read_text(encoding="utf-8"))
    data["effectors"] = [{"name": "tip", "points": [[0, 0, -30]]}]  # inside the base block
    desc = parse_robot_description(data, source=BUILTIN)
    with pytest.raises(ValueError, match=r"effector tip lie\(s\) on fixed nodes only"):
        RobotModel.from_description(desc)


def test_weights_in_points_mode_are_refused():
    data = yaml.safe_load(BUILTIN.read_text(encoding="utf-8"))
    data["effectors"] = [{"name": "tip", "points": [[0, 0, 80], [0, 10, 80]], "weights": [1, 5]}]
    with pytest.raises(DescriptionError, match=r"weights: weights apply to mode: barycenter"):
        parse_robot_description(data, source=BUILTIN)
    data["effectors"][0]["mode"] = "barycenter"
    parse_robot_description(data, source=BUILTIN)


def test_a_cable_segment_of_no_length_is_refused():
    with pytest.raises(ValueError, match=r"cable path points 0 and 1 \(the pull point is point 0 when given\) coincide"):
        CableSpec("c", np.array([[0.02, 0.005, 0.0025], [0.038, 0.005, 0.0025]]),
                  pull_point=np.array([0.02, 0.005, 0.0025]))
    with pytest.raises(ValueError, match=r"points 1 and 2 .* coincide"):
        CableSpec("c", np.array([[0.0, 0.0, 0.0], [0.01, 0.0, 0.0], [0.01, 0.0, 0.0]]))


def _write_robot(tmp_path: Path, mesh: TetMesh, desc_changes: dict | None = None) -> Path:
    meshio.write(tmp_path / "robot.vtu", meshio.Mesh(mesh.points * 1e3, [("tetra", mesh.tets)]))
    data = yaml.safe_load(BUILTIN.read_text(encoding="utf-8"))
    data["mesh"] = {"file": "robot.vtu", "unit": "mm"}
    data.update(desc_changes or {})
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_mesh_info_builds_the_model_and_refuses_what_it_refuses(tmp_path, capsys):
    """mesh-info exited 0 (1 when a point lay 5 % out) where the model build refused, and
    1 where its help said 2."""
    from soft_inverse_ros.core.model.description import load_robot_description

    mesh = load_robot_description("builtin_diamond").load_mesh()
    good = _write_robot(tmp_path, mesh)
    assert cli.main(["mesh-info", "--robot", str(good)]) == 0
    split = _write_robot(tmp_path, _split(mesh))
    assert cli.main(["mesh-info", "--robot", str(split)]) == 2
    err = capsys.readouterr().err
    assert "mesh-info: error: robot 'builtin_diamond' cannot be built: robot 'builtin_diamond': " in err
    assert "mesh nodes coincide" in err and "Traceback" not in err


def test_bench_fem_reads_an_overriding_mesh_as_the_description_says(tmp_path, capsys):
    """``--mesh`` ignored the description's ``on_inverted: fix`` (and its checks)."""
    from soft_inverse_ros.bench.fem import _load_robot
    from soft_inverse_ros.core.model.description import load_robot_description
    import argparse

    mesh = load_robot_description("builtin_diamond").load_mesh()
    tets = mesh.tets.copy()
    tets[5] = tets[5][[0, 2, 1, 3]]
    meshio.write(tmp_path / "inverted.vtu", meshio.Mesh(mesh.points * 1e3, [("tetra", tets)]))
    robot = _write_robot(tmp_path, mesh)
    data = yaml.safe_load(robot.read_text(encoding="utf-8"))
    data["mesh"]["on_inverted"] = "fix"
    robot.write_text(yaml.safe_dump(data), encoding="utf-8")
    args = argparse.Namespace(nodes=None, mesh=str(tmp_path / "inverted.vtu"), robot=str(robot))
    loaded = _load_robot(args)
    assert loaded is not None and loaded[1].report.reoriented_tets == 1


def test_a_robot_description_not_in_utf8_names_its_file(tmp_path, capsys):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00bad")
    assert cli.main(["mesh-info", "--robot", str(path)]) == 2
    assert f"{path}: not UTF-8 text (byte 0xff at 0)" in capsys.readouterr().err


def test_no_equilibrium_is_one_line_not_a_traceback(monkeypatch, capsys):
    """A ConvergenceError (a RuntimeError) passed cli.main's handler: every robot without an
    equilibrium ended ``bench fem`` in a traceback."""
    from soft_inverse_ros.core.model.linear_solvers import ConvergenceError

    def no_equilibrium(self, *args, **kwargs):
        raise ConvergenceError("no equilibrium: load increments below 0.001 of the load still fail")

    monkeypatch.setattr(RobotModel, "equilibrate", no_equilibrium)
    assert cli.main(["bench", "fem", "--robot", "builtin_diamond", "--repeat", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("soft-inverse-ros bench: error: no equilibrium: load increments below") and "Traceback" not in err


def test_a_cavity_surface_in_the_wrong_unit_is_warned_about(sofa_data):
    """A cavity STL in metres in a millimetre description became a 20 µm cavity, silently."""
    import dataclasses

    from soft_inverse_ros.core.model.description import CavitySpec, load_robot_description

    desc = load_robot_description("springy")
    mesh = desc.load_mesh()
    assert not [w for w in desc.plausibility_warnings(mesh) if "cavity" in w]
    shrunk = tuple(dataclasses.replace(a, surface_unit_scale=a.surface_unit_scale * 1e-3)
                   if isinstance(a, CavitySpec) else a for a in desc.actuators)
    warnings = dataclasses.replace(desc, actuators=shrunk).plausibility_warnings(mesh)
    assert any(w.startswith("cavity ") and w.endswith("check its unit") for w in warnings), warnings
