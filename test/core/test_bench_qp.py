"""``soft-inverse-ros bench qp``: a small run prints every case and the default case's
split between the first tick on each snapshot and the others."""

from __future__ import annotations

import json

import pytest

from soft_inverse_ros.cli import main


def test_small_run_prints_the_figures_and_the_first_tick_split(capsys):
    pytest.importorskip("daqp")
    assert main(["bench", "qp", "--backends", "daqp", "--ticks", "200", "--ticks-per-snapshot", "20", "--json"]) == 0
    out = capsys.readouterr().out
    res = json.loads(out.strip().splitlines()[-1])
    assert len(res["cases"]) == 9 and all(c["statuses"] == {"SOLVED": 200} for c in res["cases"])
    default = next(c for c in res["cases"] if (c["n_a"], c["n_e"]) == (4, 3))
    assert default["p99_us"] == res["default_4x3_p99_us"]
    # 10 of the 200 ticks follow a snapshot: their own median and p99, and the others' p99
    assert 0 < default["first_tick_median_us"] <= default["first_tick_p99_us"] <= default["max_us"]
    assert 0 < default["other_ticks_p99_us"] <= default["max_us"]
    assert "the first tick on each snapshot: median" in out
    assert res["default_4x3_p99_over_bare"] > 0
    # the same ticks replayed, each followed by the bare solve of its own QP
    assert 0 < res["default_4x3_alternating_median_us"] <= res["default_4x3_alternating_p99_us"]
    assert 0 < res["bare_daqp_4x3_alternating_median_us"] <= res["bare_daqp_4x3_alternating_p99_us"]
    assert res["default_4x3_p99_over_alternating_bare"] == pytest.approx(
        res["default_4x3_alternating_p99_us"] / res["bare_daqp_4x3_alternating_p99_us"])
    assert "each followed by its bare solve" in out
