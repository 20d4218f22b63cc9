"""``soft-inverse-ros bench hybrid``: runs small, prints one JSON object, refuses bad sizes."""

from __future__ import annotations

import json

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
    assert main(["bench", "hybrid", "--frames", "0"]) == 2
    assert main(["bench", "hybrid", "--dt", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bench hybrid: --frames must be >= 1", "bench hybrid: --dt must be in (0, 0.05] s"]
