"""``soft-inverse-ros experiment ...`` end to end on a coarse built-in robot (cell 11 mm)."""

from __future__ import annotations

import json
import pathlib

import pytest

from soft_inverse_ros import cli

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_robot(tmp_path_factory) -> pathlib.Path:
    text = (REPO / "config" / "robots" / "builtin_diamond.yaml").read_text()
    assert "cell_size: 7 " in text
    path = tmp_path_factory.mktemp("robots") / "tiny_diamond.yaml"
    path.write_text(text.replace("cell_size: 7 ", "cell_size: 11 ").replace("name: builtin_diamond", "name: tiny_diamond"))
    return path


def last_json(capsys) -> dict:
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    return json.loads(lines[-1])


def test_qp_variation_grows_with_speed(tiny_robot, capsys, tmp_path):
    code = cli.main(["experiment", "qp-variation", "--json", "--robot", str(tiny_robot),
                     "--speeds", "25,100", "--fem-compute-time", "0.02", "--out", str(tmp_path)])
    assert code == 0
    out = last_json(capsys)
    rows = out["robots"][str(tiny_robot)]["rows"]
    assert [r["speed_mm_s"] for r in rows] == [25.0, 100.0]
    slow, fast = rows
    assert slow["snapshots_in_lap"] > 3 * fast["snapshots_in_lap"] > 0
    # the same path 4x faster: about 4x the change per snapshot
    assert fast["max_variation_percent"] > 2.0 * slow["max_variation_percent"] > 0.0
    assert fast["max_variation_percent_per_s"] > 2.0 * slow["max_variation_percent_per_s"]
    assert json.loads((tmp_path / "qp-variation.json").read_text())["robots"]
    assert (tmp_path / "qp-variation.png").stat().st_size > 1000


def test_qp_variation_skips_a_missing_mesh_with_a_message(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(tmp_path / "absent"))
    code = cli.main(["experiment", "qp-variation", "--json", "--robot", "diamond", "--quick"])
    assert code == 2  # nothing could run
    out = last_json(capsys)
    assert "SOFA_SOFTROBOTS_DATA" in out["robots"]["diamond"]["skipped"]


def test_async_vs_sync_cli(tiny_robot, capsys):
    code = cli.main(["experiment", "async-vs-sync", "--json", "--quick", "--robot", str(tiny_robot),
                     "--plant-cell-size", "0.011", "--speeds", "100", "--fem-compute-time", "0.02"])
    assert code == 0
    out = last_json(capsys)
    assert out["reference_speed_mm_s"] == 100.0
    assert out["async_mean_error_mm"] < out["sync_mean_error_mm"]
    assert out["sync_command_max_step_mm"] > 3 * out["async_command_max_step_mm"]
    assert out["rows"][0]["async"]["qp_solves"] > 10 * out["rows"][0]["sync"]["qp_solves"]
    assert out["setup"]["fem_compute_time_s"] == 0.02 and not out["setup"]["fem_compute_time_measured"]


def test_closed_loop_cli(tiny_robot, capsys):
    code = cli.main(["experiment", "closed-loop", "--json", "--quick", "--robot", str(tiny_robot),
                     "--plant-cell-size", "0.011", "--plant-young-scale", "0.8", "--speed", "50",
                     "--fem-compute-time", "0.02"])
    assert code == 0
    out = last_json(capsys)
    assert set(out["runs"]) == {"open_loop", "closed_loop"}
    # the feedback must remove a clear part of the open-loop error, not just any part
    assert out["closed_loop_mean_error_mm"] < 0.9 * out["open_loop_mean_error_mm"]
    # 50 mm/s, --quick: not the goal's conditions (25 mm/s, 0.2 mm noise, the full robot)
    assert out["goal_met"] is None and out["goal_mean_error_mm"] == 0.5
