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
    if argv[0] == "experiment":  # an experiment's refusal: one prefixed line, exit 2
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"experiment {argv[1]}: ") and "\n" not in err, err
        return
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert "snake" in str(exc.value.code)
