"""``soft-inverse-ros reduce-contacts``: help, clean errors (exit 2, one line), a coarse build."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from soft_inverse_ros.cli import main

DIAMOND = Path(__file__).resolve().parents[2] / "config" / "robots" / "builtin_diamond.yaml"


def test_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["reduce-contacts", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "NAME=LO:HI[:STEP]UNIT" in out and "--out" in out and "reduced_basis" in out


def _robot_with_a_floor(tmp_path: Path) -> Path:
    data = yaml.safe_load(DIAMOND.read_text(encoding="utf-8"))
    data["collision"] = {"obstacles": [{"type": "plane", "point": [0, 0, 500], "normal": [0, 0, -1]}]}
    path = tmp_path / "floored.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("extra, needle", [
    (["--sweep", "north=0:5mm"], "unknown actuator 'north'"),
    (["--sweep", "cable_right=0:5"], "give the unit of the length"),
    (["--sweep", "cable_right=0:5 kPa"], "unit 'kPa' is a pressure, expected a length"),
    ([], "give at least one --sweep"),
    (["--sweep", "cable_right=0:5mm", "--k", "0"], "--k must be >= 1"),
    (["--sweep", "cable_right=0:5mm", "--k", "6", "--kmax", "4"], "--kmax (4) must be >= --k (6)"),
    (["--sweep", "cable_right=0:5mm", "--model-check", "3,-1"], "--model-check: update counts must be >= 1"),
    (["--sweep", "cable_right=0:5mm", "--model-check", "many"], "--model-check: expected comma-separated"),
    # 20 mm is the cable's max_stroke: metres for millimetres is refused, not swept
    (["--sweep", "cable_right=0:5m"], "cable_right is limited to [-0.02, 0.02] m in the robot description, "
                                      "the sweep asks [0, 5] m (a unit typo?)"),
    (["--simulator", "model", "--sweep", "cable_right=0:50N"], "cable_right is limited to [0, 5] N"),
    (["--simulator", "model", "--sweep", "cable_right=0:2N", "--dt", "0.005"],
     "--dt set the simulated robot; --simulator model sweeps the controller's quasi-static model"),
    (["--sweep", "cable_right=0:5mm", "--out", ""], "--out needs a file name"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, needle):
    robot = _robot_with_a_floor(tmp_path)
    code = main(["reduce-contacts", "--robot", str(robot), "--out", str(tmp_path / "b.npz"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "b.npz").exists()


def test_outputs_that_cannot_be_written_are_refused_before_the_sweep(tmp_path, capsys, monkeypatch):
    from soft_inverse_ros.core.contact import basis_builder

    def never(*args, **kwargs):
        raise AssertionError("the sweep ran")

    monkeypatch.setattr(basis_builder, "drive", never)
    (tmp_path / "afile").write_text("x")
    robot = str(_robot_with_a_floor(tmp_path))
    for out, figure in ((tmp_path / "afile" / "b.npz", None), (tmp_path / "b.npz", tmp_path / "afile" / "f.png")):
        extra = [] if figure is None else ["--figure", str(figure)]
        code = main(["reduce-contacts", "--robot", robot, "--sweep", "cable_right=0:2mm", "--out", str(out), *extra])
        err = capsys.readouterr().err
        assert code == 2 and "cannot write" in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "b.npz").exists()


def test_a_description_naming_the_basis_to_build_builds_it(tmp_path, capsys, monkeypatch):
    """The workflow of the help: the description already names the file (missing, or broken)."""
    from soft_inverse_ros.core.contact import basis_builder

    calls = []

    def stop(plant, *args, **kwargs):
        calls.append(plant.description.collision.reduced_basis)
        raise basis_builder.SweepError("stopped after the description was read")

    monkeypatch.setattr(basis_builder, "build_basis", stop)
    data = yaml.safe_load(_robot_with_a_floor(tmp_path).read_text(encoding="utf-8"))
    data["collision"]["reduced_basis"] = "floor_basis.npz"
    robot = tmp_path / "named.yaml"
    robot.write_text(yaml.safe_dump(data), encoding="utf-8")
    for content in (None, b"broken"):
        if content is not None:
            (tmp_path / "floor_basis.npz").write_bytes(content)
        code = main(["reduce-contacts", "--robot", str(robot), "--sweep", "cable_right=0:2mm", "--out",
                     str(tmp_path / "floor_basis.npz")])
        assert code == 2 and "stopped after the description was read" in capsys.readouterr().err
    assert calls == [None, None]


def test_a_robot_without_collision_and_one_that_never_touches(tmp_path, capsys):
    code = main(["reduce-contacts", "--robot", "builtin_diamond", "--sweep", "cable_right=0:5mm", "--out",
                 str(tmp_path / "b.npz")])
    assert code == 2 and "has no collision section" in capsys.readouterr().err
    code = main(["reduce-contacts", "--robot", str(_robot_with_a_floor(tmp_path)), "--sweep", "cable_right=0:2:1mm",
                 "--out", str(tmp_path / "b.npz")])
    err = capsys.readouterr().err
    assert code == 2 and "only 0 of 3 snapshots carry contact forces" in err.splitlines()[-1]


def test_a_coarse_finger_basis(tmp_path, capsys, sofa_data, monkeypatch):
    from soft_inverse_ros.core.contact.basis_file import load_basis

    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))
    out = tmp_path / "finger.npz"
    code = main(["reduce-contacts", "--robot", "finger", "--sweep", "cable=0:55:0.5mm", "--k", "3", "--kmax", "4",
                 "--nnmf-iterations", "200", "--model-check", "3", "--out", str(out), "--json"])
    captured = capsys.readouterr()
    assert code == 0
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["k"] == 3 and result["snapshots"] == 111 and result["snapshots_with_contact"] >= 3
    assert sorted(result["error_vs_k"]) == ["1", "2", "3", "4"] and Path(result["figure"]).is_file()
    assert "steps 111/111" in captured.err and "NNMF k 4/4" in captured.err
    assert "3  " in captured.out and "<- basis" in captured.out
    data = load_basis(out)
    assert data.k == 3 and data.robot == "finger" and data.sweep == ("cable=0:55:0.5mm",)
    assert (data.psi >= 0).all() and data.error_vs_k[3] == pytest.approx(result["error_vs_k"]["3"])
    np.testing.assert_allclose(np.linalg.norm(data.psi, axis=0), 1.0)
    check = result["model_check"]  # the basis in the controller's model, 3 updates from 3 sweep states
    assert check["states"] == 3 and list(check["tip_distance_mm"]) == ["3"]
    assert check["tip_distance_mm"]["3"] < 0.2 * check["contact_effect_mm"]
    assert "controller's model from 3 sweep states" in captured.out


def test_several_actuators_build_through_the_two_level_design(tmp_path, capsys):
    """Two cables of the built-in diamond, balls beside its top: 4 design runs (order-4
    Hadamard), each ramped from rest in 1 mm steps, every step a snapshot."""
    data = yaml.safe_load(DIAMOND.read_text(encoding="utf-8"))
    data["collision"] = {"alarm_distance": "1 mm", "obstacles": [
        {"type": "sphere", "centre": [0, -37, 128], "radius": 12},
        {"type": "sphere", "centre": [0, 37, 128], "radius": 12}]}  # clear of the rest shape
    robot = tmp_path / "balls.yaml"
    robot.write_text(yaml.safe_dump(data), encoding="utf-8")
    code = main(["reduce-contacts", "--robot", str(robot), "--sweep", "cable_left=0:4:1mm", "--sweep",
                 "cable_right=2:4:1mm", "--k", "2", "--kmax", "2", "--model-check", "0", "--out", str(tmp_path / "b.npz"),
                 "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out.strip().splitlines()[-1])
    # postures (4, 4), (4, 2), (0, 4), (0, 2) mm: 4 + 4 + 4 + 2 steps, plus each run's rest row
    assert result["snapshots"] == 5 + 5 + 5 + 3 and result["sweep"] == ["cable_left=0:4:1mm", "cable_right=2:4:1mm"]
    assert result["snapshots_with_contact"] >= 2 and result["k"] == 2 and result["model_check"] is None


def test_a_diverging_plant_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch):
    from soft_inverse_ros.core.contact import basis_builder
    from soft_inverse_ros.core.model.linear_solvers import ConvergenceError

    def diverge(*args, **kwargs):
        raise ConvergenceError("plant step: non-finite contact correction")

    monkeypatch.setattr(basis_builder, "drive", diverge)
    code = main(["reduce-contacts", "--robot", str(_robot_with_a_floor(tmp_path)), "--sweep", "cable_right=0:2mm",
                 "--out", str(tmp_path / "b.npz")])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0 and "did not converge (plant step: non-finite" in err
    assert not (tmp_path / "b.npz").exists()


def test_the_controllers_model_as_the_swept_simulator(tmp_path, capsys, sofa_data, monkeypatch):
    """--simulator model: the finger's quasi-static model ramped in cable tension, each
    posture held; the basis file says so."""
    from soft_inverse_ros.core.contact.basis_file import load_basis

    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))
    out = tmp_path / "model.npz"
    code = main(["reduce-contacts", "--robot", "finger", "--simulator", "model", "--sweep", "cable=0:5:0.05N",
                 "--hold", "60", "--k", "3", "--kmax", "3", "--model-check", "3", "--out", str(out), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["snapshots"] == 101 + 60 and result["simulator"] == "model" and result["hold"] == 60
    assert result["snapshots_with_contact"] >= 3
    check = result["model_check"]
    assert check["tip_distance_mm"]["3"] < 0.2 * check["contact_effect_mm"]
    data = load_basis(out)
    assert data.simulator == "model" and data.sweep == ("cable=0:5:0.05N",) and data.hold == 60
    code = main(["reduce-contacts", "--robot", "finger", "--simulator", "model", "--sweep", "cable=0:55mm",
                 "--out", str(out)])
    assert code == 2 and "unit 'mm' is a length, expected a force" in capsys.readouterr().err


def test_a_robot_with_a_mapped_collision_surface_is_refused_before_the_sweep(tmp_path, capsys, sofa_data):
    """Its basis would be over surface vertices, which a description cannot load with its
    surface: one line, exit 2, before the (long) sweep."""
    finger = Path(__file__).resolve().parents[2] / "config" / "robots" / "finger.yaml"
    data = yaml.safe_load(finger.read_text(encoding="utf-8"))
    data["mesh"]["file"] = str(sofa_data / "finger.vtk")
    data["collision"]["surface"] = str(sofa_data / "finger.stl")
    robot = tmp_path / "finger_surface.yaml"
    robot.write_text(yaml.safe_dump(data), encoding="utf-8")
    code = main(["reduce-contacts", "--robot", str(robot), "--sweep", "cable=0:55:0.5mm", "--out",
                 str(tmp_path / "b.npz")])
    err = capsys.readouterr().err
    assert code == 2 and "mapped collision surface" in err and "sweep [" not in err
    assert not (tmp_path / "b.npz").exists()


def test_a_diverging_finger_sweep_is_refused_and_nothing_written(tmp_path, capsys, sofa_data, monkeypatch):
    """1 mm steps are too fast for the finger's plant: its cable tension passes ten times the
    actuator's 10 N within 20 steps, then everything blows up (1e20 m). The sweep stops at
    the first step past the bound: one line, exit 1, no basis, no figure."""
    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))
    out = tmp_path / "b1.npz"
    code = main(["reduce-contacts", "--robot", "finger", "--sweep", "cable=0:55:1mm", "--k", "2", "--kmax", "3",
                 "--out", str(out), "--json"])
    captured = capsys.readouterr()
    last = captured.err.strip().splitlines()[-1]
    assert code == 1 and captured.out == "" and "Traceback" not in captured.err
    assert "did not converge (step " in last and "more than 10 times its bound" in last and "a smaller STEP" in last
    assert not out.exists() and not (tmp_path / "b1_error_vs_k.png").exists()


def test_a_plant_flying_off_is_refused(tmp_path):
    """A state far beyond the robot's size (a node 10 robot sizes from rest) is a diverged
    plant even where no effort tells (here: inputs of zero)."""
    from types import SimpleNamespace

    from soft_inverse_ros.core.contact.basis_builder import drive, sweep_plant
    from soft_inverse_ros.core.model.linear_solvers import ConvergenceError

    plant = sweep_plant(_robot_with_a_floor(tmp_path))
    size = np.linalg.norm(np.ptp(plant.fem.rest_points, axis=0))
    n = len(plant.actuator_kinds)
    flown = SimpleNamespace(efforts=np.zeros(n), positions=plant.fem.rest_points + [0.0, 0.0, 11 * size],
                            effector_position=np.zeros(3))
    plant.step = lambda **inputs: flown
    with pytest.raises(ConvergenceError, match=r"step 1: a node .* m from rest, more than 10 times the robot's size"):
        drive(plant, np.zeros((3, n)))


@pytest.mark.parametrize("figure, needle", [
    ("fig.xyz", "--figure {dir}/fig.xyz: matplotlib writes no '.xyz' images (it writes "),
    ("figdir/", "--figure {dir}/figdir/ is a directory"),
    ("afolder", "--figure {dir}/afolder is a directory"),
])
def test_a_bad_figure_is_refused_before_the_sweep(tmp_path, capsys, monkeypatch, figure, needle):
    from soft_inverse_ros.core.contact import basis_builder

    def never(*args, **kwargs):
        raise AssertionError("the sweep ran")

    monkeypatch.setattr(basis_builder, "drive", never)
    (tmp_path / "afolder").mkdir()
    code = main(["reduce-contacts", "--robot", str(_robot_with_a_floor(tmp_path)), "--sweep", "cable_right=0:2mm",
                 "--out", str(tmp_path / "b.npz"), "--figure", f"{tmp_path}/{figure}"])
    err = capsys.readouterr().err
    assert code == 2 and needle.format(dir=tmp_path) in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "b.npz").exists() and not (tmp_path / "figdir.png").exists()


def test_a_folder_as_out_is_refused(tmp_path, capsys):
    (tmp_path / "basis").mkdir()
    code = main(["reduce-contacts", "--robot", str(_robot_with_a_floor(tmp_path)), "--sweep", "cable_right=0:2mm",
                 "--out", str(tmp_path / "basis")])
    err = capsys.readouterr().err
    assert code == 2 and f"--out {tmp_path / 'basis'} is a directory" in err and err.count("\n") == 1
    assert not (tmp_path / "basis.npz").exists()


def test_a_figure_without_suffix_is_reported_as_written(tmp_path, capsys, sofa_data, monkeypatch):
    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))
    code = main(["reduce-contacts", "--robot", "finger", "--sweep", "cable=0:55:0.5mm", "--k", "2", "--kmax", "2",
                 "--model-check", "0", "--out", str(tmp_path / "b.npz"), "--figure", str(tmp_path / "noext"),
                 "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["figure"] == str(tmp_path / "noext.png") and Path(result["figure"]).is_file()
    assert not (tmp_path / "noext").exists() and f"and {tmp_path / 'noext.png'}" in captured.out
