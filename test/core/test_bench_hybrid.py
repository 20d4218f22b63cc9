"""``soft-inverse-ros bench hybrid``: runs small, prints one JSON object, refuses bad sizes."""

from __future__ import annotations

import json

import pytest

from soft_inverse_ros.cli import main


def test_small_run_prints_the_figures(capsys):
    assert main(["bench", "hybrid", "--frames", "3", "--ticks", "5", "--plant-steps", "3", "--json"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["robot"] == "hybrid_arm" and res["contacts"] == 9
    assert sum(res["tick_status"].values()) == 15 and res["tick_status"]["SAFE"] == 0
    assert 0 < res["tick_p50_us"] <= res["tick_p99_us"] <= res["tick_max_us"]
    assert res["plant_step_median_ms"] > 0 and res["snapshot_median_ms"] > 0
    # the controller's settings are sim_hybrid.yaml's: its tick budget, the cut ticks counted
    assert res["contact_tick_budget_us"] == 500.0
    assert res["contact_ticks"] + res["contact_ticks_reused"] == 15
    assert 0 <= res["contact_ticks_cut_by_budget"] <= res["contact_ticks"]
    assert res["searched_tick_p50_us"] > 0


def test_bad_sizes_are_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "hybrid", "--frames", "0"])
    assert exit_.value.code == 2 and "--frames: must be at least 1, got 0" in capsys.readouterr().err
    assert main(["bench", "hybrid", "--dt", "1"]) == 2
    assert main(["bench", "hybrid", "--dt", "1e-300"]) == 2  # accepted: a CPU factor of 7.8e291
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bench hybrid: --dt must be in [1e-4, 0.05] s (hybrid_plant_node's range), got 1",
                   "bench hybrid: --dt must be in [1e-4, 0.05] s (hybrid_plant_node's range), got 1e-300"]


def test_a_description_that_holds_every_command_is_an_invalid_run(tmp_path, capsys):
    """A minimum contact force sum the probe cannot reach held every tick, exit 0, with tick
    figures of held commands."""
    from soft_inverse_ros.core.config_files import find_config

    text = find_config("robots/hybrid_arm.yaml").read_text()
    assert "min_force_sum: 0.05 N" in text
    (tmp_path / "arm.yaml").write_text(text.replace("min_force_sum: 0.05 N", "min_force_sum: 0.9 N").replace(
        "urdf: hybrid_arm.urdf", f"urdf: {find_config('robots/hybrid_arm.urdf')}"))
    assert main(["bench", "hybrid", "--robot", str(tmp_path / "arm.yaml"), "--frames", "2", "--ticks", "3",
                 "--plant-steps", "2", "--json"]) == 3
    captured = capsys.readouterr()
    assert "bench hybrid: INVALID RUN: under 95 % of the timed ticks gave an OK command" in captured.err
    assert '"valid": false' in captured.out.splitlines()[-1]
