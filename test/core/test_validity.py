"""analysis.validity: when does a simulated-robot run measure the controller?"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from soft_inverse_ros.analysis.run_data import CommandSeries, PointSeries, RunData, SnapshotSeries
from soft_inverse_ros.analysis.validity import (
    STATUS_OK,
    STATUS_SAFE,
    PlantClockSeries,
    assess_run,
    headline,
    summary,
)


def run_data(status: np.ndarray, *, offset_m: float = 0.001, plant_from: float = 0.0,
             snapshot_hz: float = 30.0) -> RunData:
    """A 20 s run at 1 kHz with the given command statuses; the plant effector sits
    ``offset_m`` from a target moving along x, published from ``plant_from`` s."""
    t = np.arange(len(status)) * 1e-3
    commands = CommandSeries(
        topic="/actuator_command", t=t, t_receive=t, target_t=t, seq=np.arange(len(t)),
        names=("a",), modes=np.zeros(1), values=np.zeros((len(t), 1)),
        efforts=np.zeros((len(t), 1)), strokes=np.zeros((len(t), 1)), status=status,
        time_source="header")
    tt = np.arange(0.0, t[-1], 0.01)
    target = PointSeries("/target", tt, np.column_stack((0.01 * tt, 0 * tt, 0 * tt)), tt,
                         "header", "base_link")
    tp = tt[tt >= plant_from]
    plant = PointSeries("/plant/effector_true", tp,
                        np.column_stack((0.01 * tp, 0 * tp + offset_m, 0 * tp)), tp, "header",
                        "base_link")
    ts = np.arange(0.0, t[-1], 1.0 / snapshot_hz)
    snapshots = SnapshotSeries("/compliance", ts, ts, np.arange(len(ts)), 0 * ts, 0 * ts,
                               "header")
    return RunData(bag=Path("x"), topic_counts={}, origin_ns=0, target=target,
                   effectors={"plant": plant}, commands=commands, snapshots=snapshots)


def clock(rtf: np.ndarray, mode: str = "wall") -> PlantClockSeries:
    stamps = (np.arange(len(rtf)) + 1) * 1_000_000_000
    return PlantClockSeries(stamps, np.asarray(rtf, float), np.cumsum(rtf), 0 * rtf, mode)


def statuses(startup: int = 2000, n: int = 20000, safe_after: int = 0) -> np.ndarray:
    s = np.full(n, STATUS_OK)
    s[:startup] = STATUS_SAFE
    s[startup + 5000: startup + 5000 + safe_after] = STATUS_SAFE
    return s


def test_a_run_that_kept_real_time_is_valid_and_counts_startup_apart():
    v = assess_run(run_data(statuses()), clock(np.full(19, 0.99)))
    assert v.valid and not v.invalid_reasons
    assert v.safe_commands_startup == 2000 and v.safe_command_fraction == 0.0
    assert np.isclose(v.startup_s, 2.0)
    assert 28.0 < v.compliance_rate_hz < 32.0
    assert headline(v)[0].startswith("VALID RUN")


def test_a_plant_behind_real_time_makes_a_wall_clock_run_invalid():
    rtf = np.full(19, 0.99)
    rtf[5:8] = 0.3
    v = assess_run(run_data(statuses()), clock(rtf))
    assert not v.valid
    assert v.plant_real_time_factor_p5 < 0.95
    assert "fell behind real time" in v.invalid_reasons[0]
    assert headline(v)[0].startswith("INVALID RUN")


def test_a_slow_plant_is_fine_in_sim_time():
    v = assess_run(run_data(statuses()), clock(np.full(19, 0.3), mode="sim"))
    assert v.valid and v.clock == "sim"


def test_start_up_windows_of_the_plant_clock_are_ignored():
    rtf = np.full(19, 0.99)
    rtf[0] = 0.1  # the window ending at 1 s lies in the start-up (until 2 s)
    assert assess_run(run_data(statuses()), clock(rtf)).valid


def test_safe_commands_after_start_up_make_a_run_invalid():
    v = assess_run(run_data(statuses(safe_after=200)), clock(np.full(19, 1.0)))
    assert not v.valid
    assert np.isclose(v.safe_command_fraction, 200 / 18000)
    assert "SAFE" in v.invalid_reasons[0]


def test_a_controller_that_never_commanded_is_invalid():
    v = assess_run(run_data(np.full(5000, STATUS_SAFE)), None)
    assert not v.valid and "never commanded" in v.invalid_reasons[0]


def test_summary_tracks_the_plant_from_the_tracking_window_on():
    run = run_data(statuses(), offset_m=0.001, plant_from=5.0)
    v = assess_run(run, clock(np.full(19, 1.0)))
    assert np.isclose(v.tracking_start_s, 6.0)  # plant from 5 s, + 1 s settling
    s = summary(run, v)
    assert np.isclose(s["plant_mean_error_mm"], 1.0) and np.isclose(s["plant_max_error_mm"], 1.0)
    assert s["valid"] and s["clock"] == "wall"
    assert 990 < s["command_rate_hz"] < 1010
