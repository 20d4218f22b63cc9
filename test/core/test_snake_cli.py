"""The snake commands: JSON output and clear errors on bad input."""

import json

import pytest

from soft_inverse_ros import cli


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_snake_link_quick_meets_its_linearity_target(capsys, tmp_path):
    assert cli.main(["experiment", "snake-link", "--quick", "--json", "--out", str(tmp_path)]) == 0
    result = _last_json(capsys)
    assert result["curvature_r2"] >= 0.99
    assert result["left_right_asymmetry"] <= 0.02
    assert result["curvature_slope_per_psi"] < 0
    assert (tmp_path / "snake-link.png").exists()


def test_bench_snake_reports_each_count(capsys):
    assert cli.main(["bench", "snake", "--snakes", "1,2", "--frames", "2", "--dt", "0.01", "--newton", "2",
                     "--json"]) == 0
    result = _last_json(capsys)
    assert result["dt_s"] == 0.01 and result["newton_iterations"] == 2
    assert [r["snakes"] for r in result["rows"]] == [1, 2]
    assert result["real_time_factor_one_snake"] > 0
    assert result["cpu_real_time_factor_one_snake"] > 0 and result["cpu_per_snake_spread"] >= 1.0


@pytest.mark.parametrize("argv", [
    ["bench", "snake", "--snakes", "0,2"],
    ["bench", "snake", "--snakes", "a"],
    ["bench", "snake", "--dt", "0"],
    ["experiment", "snake-link", "--max-psi", "-1"],
    ["experiment", "snake-gait", "--frequency", "0"],
    ["experiment", "snake-gait", "--slip-regularization", "0"],
])
def test_bad_input_is_one_clear_line(argv, capsys):
    if argv[0] == "experiment":  # one line naming the experiment (argparse's or its own), exit 2
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code
        assert code == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]  # (argparse's usage lines above)
        assert last.startswith((f"experiment {argv[1]}: ", f"soft-inverse-ros experiment {argv[1]}: error: ")), last
        return
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert "snake" in str(exc.value.code)


@pytest.mark.parametrize(("argv", "needle"), [
    (["--mu-along", "inf"], "--mu-along: must be a finite number >= 0"),  # a factorization traceback
    (["--slip-regularization", "inf"], "--slip-regularization: must be a finite number > 0"),  # friction off
    (["--pwm-hz", "1000"], "--pwm-hz 1000: commands go out once per step at most (1/--dt = 200 Hz)"),
    (["--frequency", "1e6"], "a gait period of 1e-06 s is under 10 steps of --dt 0.005 s"),  # nan speeds
    (["--amplitude-psi", "55158"], "exceeds the 68948 Pa the valves can supply"),  # Pa given as psi
    (["--phase", "90"], "phase 90 rad outside [-2π, 2π]"),  # degrees
])
def test_snake_gait_refuses_what_gait_node_or_the_simulation_cannot_run(argv, needle, capsys):
    """Each ran with exit 0 (nonsense figures) or ended in a traceback."""
    try:
        code = cli.main(["experiment", "snake-gait", "--quick", "--only-anisotropic", *argv])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert needle in capsys.readouterr().err


def test_quick_sizes_only_what_is_not_given(monkeypatch, capsys):
    """--quick replaced --duration 10 and --settle-periods 3 (snake-gait) and --step-psi 0.5
    (snake-link) without a word."""
    from soft_inverse_ros.experiments import snake_gait, snake_link

    seen = {}
    monkeypatch.setattr(snake_gait, "measure", lambda args: seen.update(
        gait=(args.duration, args.settle_periods)) or {"_runs": {}})
    monkeypatch.setattr(snake_link, "measure", lambda args: seen.update(link=args.step_psi) or {})
    monkeypatch.setattr("soft_inverse_ros.experiments.emit", lambda *a, **k: None)
    cli.main(["experiment", "snake-gait", "--quick", "--only-anisotropic", "--duration", "10",
              "--settle-periods", "3", "--json"])
    cli.main(["experiment", "snake-link", "--quick", "--step-psi", "0.5", "--json"])
    assert seen == {"gait": (10.0, 3), "link": 0.5}
