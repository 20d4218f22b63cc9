"""``soft-inverse-ros reduce-model``, ``bench fem --reduced`` and the nodes' ``reduction``
parameter: what they print, and one clear line for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from soft_inverse_ros.cli import main


def _json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def box_reduction(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reduction") / "box.npz"
    assert main(["reduce-model", "--nodes", "300", "--samples", "8", "--out", str(out),
                 "--check", "0"]) == 0
    return out


def test_reduce_model_trains_saves_and_checks(tmp_path: Path, capsys) -> None:
    out = tmp_path / "box"
    assert main(["reduce-model", "--nodes", "300", "--samples", "8", "--out", str(out),
                 "--check", "2", "--json"]) == 0
    captured = capsys.readouterr()
    result = _json(captured.out)
    assert result["out"] == str(out) + ".npz" and Path(result["out"]).is_file()
    assert result["training_samples_used"] == 8 and result["size"] >= 2
    assert result["check_samples"] == 2 and result["check_reduced_failures"] == 0
    assert result["check_w_rel_error_max"] < 1e-4
    assert result["check_effector_vs_full_mm_max"] < 0.05
    assert "sample 8/8" in captured.err and "check 2/2" in captured.err


def test_bench_fem_times_a_loaded_reduction(box_reduction: Path, capsys) -> None:
    assert main(["bench", "fem", "--nodes", "300", "--reduced", "--reduction", str(box_reduction),
                 "--repeat", "10", "--json"]) == 0
    result = _json(capsys.readouterr().out)
    assert result["reduction"]["loaded"] and result["reduction"]["size"] >= 2
    assert result["refactorizations"] is None and result["update_hz"] > 0
    assert result["w_rel_error_max"] < 1e-4 and result["effector_vs_full_mm_max"] < 0.05
    assert "reduced_tangent" in result and "factorization" not in result


@pytest.mark.parametrize(("argv", "needle"), [
    (["bench", "fem", "--nodes", "300", "--reduced", "--reduction", "/no/such.npz", "--repeat", "5"],
     "cannot read the model reduction"),
    (["reduce-model", "--nodes", "300", "--out", "/tmp/x.npz", "--samples", "0"], "samples must be"),
    (["bench", "fem", "--nodes", "300", "--reduction", "/no/such.npz"], "--reduction need --reduced"),
    (["bench", "fem", "--nodes", "300", "--reduced", "--reduction", "x.npz", "--samples", "3"],
     "--reduction loads one"),
    (["reduce-model", "--nodes", "300", "--out", "/tmp/x.npz", "--check", "-1"], "--check must be"),
    (["reduce-model", "--nodes", "300", "--out", "/tmp/x.npz", "--mode-tolerance", "0"],
     "--mode-tolerance must be in (0, 1)"),
    (["reduce-model", "--nodes", "300", "--out", "/tmp/x.npz", "--hyper-tolerance", "nan"],
     "--hyper-tolerance must be"),
    (["reduce-model", "--nodes", "5", "--out", "/tmp/x.npz"], "reduce-model: cannot load the robot"),
    (["reduce-model", "--nodes", "300", "--out", ""], "--out needs a file name"),
    (["reduce-model", "--nodes", "300", "--mesh", "m.vtk", "--out", "/tmp/x.npz"],
     "reduce-model: --mesh replaces"),
    (["bench", "fem", "--nodes", "300", "--mesh", "m.vtk"], "bench fem: --mesh replaces"),
    (["bench", "fem", "--nodes", "300", "--repeat", "0"], "--repeat must be at least 1"),
    (["bench", "fem", "--nodes", "300", "--reduced", "--samples", "0"], "--samples must be at least 1"),
    (["bench", "fem", "--nodes", "300", "--reduced", "--mode-tolerance", "0"], "--mode-tolerance must be"),
    (["bench", "fem", "--nodes", "300", "--reduced", "--no-reuse", "--w-rtol", "0.5"],
     "--no-reuse, --w-rtol set the full model's solver"),
])
def test_bad_input_is_one_line(argv, needle, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_an_unwritable_out_is_refused_before_training(tmp_path: Path, capsys) -> None:
    (tmp_path / "afile").write_text("x")
    assert main(["reduce-model", "--nodes", "300", "--out", str(tmp_path / "afile" / "x.npz")]) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "training on" not in err and "Traceback" not in err


def test_a_reduction_of_another_robot_is_refused(box_reduction: Path, capsys) -> None:
    assert main(["bench", "fem", "--nodes", "400", "--reduced", "--reduction", str(box_reduction),
                 "--repeat", "5"]) == 2
    assert "trained on robot 'box_" in capsys.readouterr().err


def test_the_nodes_build_the_reduced_model(tmp_path: Path) -> None:
    from soft_inverse_ros.core.model.description import load_robot_description
    from soft_inverse_ros.core.model.reduced_model import (
        ReducedRobotModel,
        ReductionError,
        build_model_reduction,
    )
    from soft_inverse_ros.core.model.robot_model import RobotModel
    from soft_inverse_ros.nodes.model_params import RobotModelParams, build_model

    full = RobotModel.from_description(load_robot_description("builtin_diamond"))
    path = build_model_reduction(full, samples=4, mode_tolerance=1e-4).save(tmp_path / "diamond.npz")
    model = build_model(RobotModelParams(robot="builtin_diamond", reduction=str(path)))
    assert isinstance(model, ReducedRobotModel)
    assert model.residual_norm <= 1e-6 * np.linalg.norm(model._gravity_r) + 1e-12  # at equilibrium
    _, snap = model.update(np.zeros(model.n_actuators), seq=1, stamp=0.0)
    assert snap.w_aa.shape == (4, 4)
    # another material: another model
    with pytest.raises(ReductionError, match="another mesh, material"):
        build_model(RobotModelParams(robot="builtin_diamond", reduction=str(path), young_modulus_scale=2.0))


def test_a_robot_with_contact_needs_contact_off(tmp_path: Path) -> None:
    pytest.importorskip("ipctk")
    from soft_inverse_ros.core.model.description import load_robot_description
    from soft_inverse_ros.core.model.reduced_model import ReductionError
    from soft_inverse_ros.nodes.model_params import RobotModelParams, build_model

    try:
        load_robot_description("finger")
    except (OSError, ValueError):
        pytest.skip("SOFA's finger mesh (../shared) is not here")
    with pytest.raises(ReductionError, match="contact: false"):
        build_model(RobotModelParams(robot="finger", reduction=str(tmp_path / "any.npz")))


def test_a_reduction_without_a_rest_equilibrium_is_not_written(tmp_path: Path, capsys, sofa_data,
                                                              monkeypatch) -> None:
    """The finger's hyper-reduction at 0.5 keeps 5 of 389 elements: the reduced model finds no
    equilibrium under gravity, which the FEM node needs to load it. Whatever --check, the
    file is not written and the message names the hyper-reduction, not the robot's units."""
    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))
    out = tmp_path / "rm4.npz"
    for check in ("0", "1"):
        assert main(["reduce-model", "--robot", "finger", "--samples", "2", "--hyper-tolerance", "0.5",
                     "--check", check, "--out", str(out)]) == 1
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert "the reduced model found no equilibrium under gravity" in last
        assert "the hyper-reduction is too coarse: a smaller --hyper-tolerance or more --samples" in last
        assert "units" not in last and not out.exists()


def test_a_folder_as_out_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "box").mkdir()
    assert main(["reduce-model", "--nodes", "300", "--out", str(tmp_path / "box")]) == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'box'} is a directory" in err and "training on" not in err
    assert not (tmp_path / "box.npz").exists()
