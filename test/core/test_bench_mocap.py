"""``soft-inverse-ros bench mocap``: the shipped graphs' simulated capture, one JSON object."""

from __future__ import annotations

import json

import pytest

from soft_inverse_ros.cli import main

pytest.importorskip("geometry_msgs.msg")


def test_the_snake_setup_solves_every_plate_of_every_frame(capsys):
    assert main(["bench", "mocap", "--frames", "60", "--warmup", "5", "--json"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["source_config"] == "mocap_snake.yaml" and res["rate_hz"] == 100.0
    assert res["markers"] == 20 and res["rigid_bodies"] == 5
    # mocap_snake.yaml drops 2 % of frames and bursts: most are delivered, each with 5 plates
    assert 0.8 * 60 <= res["frames_delivered"] <= 60 and res["bodies_per_frame"] == 5.0
    assert 0 < res["frame_median_us"] <= res["frame_p99_us"]
    assert res["cpu_fraction_at_rate"] == pytest.approx(res["frame_mean_us"] * 1e-6 * 100.0)


def test_the_sim_setup_has_markers_and_the_effector(capsys):
    assert main(["bench", "mocap", "--graph", "sim", "--frames", "30", "--json"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["markers"] == 4 and res["rigid_bodies"] == 0 and res["bodies_per_frame"] == 0.0


def test_bad_sizes_are_one_line(capsys):
    assert main(["bench", "mocap", "--frames", "0"]) == 2
    assert capsys.readouterr().err.strip() == "bench mocap: --frames must be >= 1 and --warmup >= 0"
