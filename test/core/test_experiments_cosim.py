"""The offline co-simulation (soft_inverse_ros.experiments): scheduling, sync vs async, control
effect, closed loop, metrics. A coarse built-in robot (cell 11 mm, 695 nodes) keeps it fast."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from soft_inverse_ros.core.model.description import load_robot_description
from soft_inverse_ros.core.control.feedback import FeedbackConfig
from soft_inverse_ros.core.control.inverse_qp import InverseStatus
from soft_inverse_ros.experiments.cosim import CosimConfig, CosimParts, CoSimulation, run_cosim
from soft_inverse_ros.experiments.run_metrics import (
    polyline_distance,
    run_metrics,
    smoothness,
    square_vertices,
)
from soft_inverse_ros.experiments.setups import (
    Controller,
    PlantRig,
    PlantSpec,
    approach_time,
    run_tracking,
    sim_servo_driver,
    square_target,
)

CELL = 0.011  # m: 695 nodes instead of 1691
FEM = dict(fem_compute_time=0.02, fem_period=1.0 / 30.0)


def small_description():
    desc = load_robot_description("builtin_diamond")
    params = {**dict(desc.mesh.builtin_params), "cell_size": CELL}
    return dataclasses.replace(desc, mesh=dataclasses.replace(desc.mesh, builtin_params=params))


@pytest.fixture(scope="module")
def controller():
    return Controller.build(small_description())


@pytest.fixture(scope="module")
def rig():
    # same mesh, 20 % softer: a static mismatch the open loop cannot see
    return PlantRig(PlantSpec(mesh_cell_size=CELL, young_modulus_scale=0.8), description=small_description())


def centre(controller) -> np.ndarray:
    return np.array([0.0, 0.0, controller.rest_effector[2] + 0.0016])


# ------------------------------------------------------------------ configuration
def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match="cosim.mode"):
        CosimConfig(duration=1.0, mode="both")
    with pytest.raises(ValueError, match="cosim.servo_period"):
        CosimConfig(duration=1.0, servo_period=0.0105)
    with pytest.raises(ValueError, match="cosim.duration"):
        CosimConfig(duration=0.0)
    with pytest.raises(ValueError, match="cosim.fem_compute_time"):
        CosimConfig(duration=1.0, fem_compute_time=-0.01)
    cfg = CosimConfig(duration=1.0, fem_period=1.0 / 30.0, fem_compute_time=0.0201)
    assert cfg.compute_ticks == 21  # rounded up to the next tick
    assert CosimConfig(duration=1.0, fem_compute_time=0.0).compute_ticks == 1


def test_servo_names_must_match_the_cables(controller):
    model = controller.restore()
    servo = sim_servo_driver(["a", "b", "c", "d"])
    target, _ = square_target(centre(controller), 0.02, 0.02, 0.1)
    parts = CosimParts(model=model, solver=controller.solver(), target=target, servo=servo)
    with pytest.raises(ValueError, match="do not match the model's cables"):
        CoSimulation(CosimConfig(duration=0.1), parts)


# ------------------------------------------------------------------ scheduling
def test_fem_timer_latency_and_async_solves_every_tick(controller):
    target, _ = square_target(centre(controller), 0.02, 0.05, 0.1)
    cfg = CosimConfig(duration=0.3, fem_period=1.0 / 30.0, fem_compute_time=0.045)
    parts = CosimParts(model=controller.restore(), solver=controller.solver(), target=target,
                       initial_snapshot=controller.initial_snapshot())
    res = run_cosim(cfg, parts)
    # compute (45 ms) longer than the period (33.3 ms): updates back to back, each
    # snapshot usable 45 ms after the state it describes
    np.testing.assert_allclose(res.snapshot_available - res.snapshot_stamps, 0.045, atol=1e-12)
    np.testing.assert_allclose(np.diff(res.snapshot_stamps), 0.045, atol=1e-12)
    assert res.snapshot_stamps[0] == pytest.approx(0.034)  # first timer firing after t = 0
    assert res.qp_solves == cfg.n_ticks
    assert res.status_counts == {"SOLVED": cfg.n_ticks}
    # shorter compute: on the 30 Hz grid (first tick at or after n/30 s)
    res = run_cosim(CosimConfig(duration=0.3, fem_period=1.0 / 30.0, fem_compute_time=0.01),
                    CosimParts(model=controller.restore(), solver=controller.solver(), target=target,
                               initial_snapshot=controller.initial_snapshot()))
    expected = [math.ceil(n * 1000.0 / 30.0 - 1e-9) / 1000.0 for n in range(1, 9)]  # t < 0.3 s
    np.testing.assert_allclose(res.snapshot_stamps, expected, atol=1e-12)


def test_sync_solves_only_when_a_snapshot_arrives(controller):
    target, _ = square_target(centre(controller), 0.02, 0.05, 0.05)
    cfg = CosimConfig(duration=0.5, mode="sync", **FEM)
    parts = CosimParts(model=controller.restore(), solver=controller.solver(), target=target,
                       initial_snapshot=controller.initial_snapshot())
    res = run_cosim(cfg, parts)
    delivered = res.snapshot_available[res.snapshot_available < cfg.duration - 1e-9]
    assert res.qp_solves == len(delivered)
    # the command changes only on ticks where a snapshot became usable
    changes = np.flatnonzero(np.any(np.diff(res.command_strokes, axis=0) != 0, axis=1)) + 1
    change_times = res.t[changes] - cfg.tick  # recorded one tick after the solve
    assert len(changes) > 5
    assert np.all(np.min(np.abs(change_times[:, None] - delivered[None, :]), axis=1) < 1e-9)


def test_no_snapshot_means_no_command(controller, rig):
    """Without any snapshot (compute longer than the run) the QP never commands and the
    servos hold: the plant stays where it started."""
    target, _ = square_target(centre(controller), 0.02, 0.05, 0.0)
    res = run_tracking(controller, rig, target, duration=0.2, mode="async",
                       fem_compute_time=1.0, fem_period=1.0 / 30.0, initial_snapshot=False)
    assert res.status_counts == {"NO_SNAPSHOT": 200}
    assert np.abs(res.delivered - res.delivered[0]).max() == 0.0
    np.testing.assert_allclose(res.effector[-1], rig.rest_effector, atol=1e-5)


# ------------------------------------------------------------------ control effect
@pytest.fixture(scope="module")
def lap(controller, rig):
    """One lap at 50 mm/s: async, sync and an uncontrolled run (no snapshot ever)."""
    target, traj = square_target(centre(controller), 0.02, 0.05, 0.3)
    start = 0.3 + approach_time(traj)
    end = start + traj.lap_time
    runs = {mode: run_tracking(controller, rig, target, duration=end, mode=mode, **FEM)
            for mode in ("async", "sync")}
    runs["uncontrolled"] = run_tracking(controller, rig, target, duration=end, mode="async",
                                        fem_compute_time=10.0, fem_period=1.0 / 30.0,
                                        initial_snapshot=False)
    return runs, start, end


def test_control_tracks_the_square_far_better_than_no_control(lap, controller):
    runs, start, end = lap
    path = square_vertices(centre(controller), 0.02)
    m = {k: run_metrics(r, start, end, path=path) for k, r in runs.items()}
    # errors only where the plant state is at t (10 ms steps against 1 ms ticks)
    assert runs["async"].effector_fresh.mean() == pytest.approx(0.1, abs=0.002)
    assert m["async"]["error_samples"] == pytest.approx((end - start) * 100, abs=2)
    assert m["uncontrolled"]["mean_error_mm"] > 5.0  # the target moves, the robot does not
    assert m["async"]["mean_error_mm"] < 0.4 * m["uncontrolled"]["mean_error_mm"]
    assert m["async"]["mean_path_error_mm"] < 0.25 * m["uncontrolled"]["mean_path_error_mm"]
    assert m["sync"]["mean_error_mm"] < 0.5 * m["uncontrolled"]["mean_error_mm"]


def test_async_command_is_smoother_and_tracks_better_than_sync(lap):
    runs, start, end = lap
    a = run_metrics(runs["async"], start, end)
    s = run_metrics(runs["sync"], start, end)
    assert a["qp_solves"] > 10 * s["qp_solves"]
    # staircase: one stair per snapshot; ramp: tiny 1 ms increments
    assert s["command_smoothness"]["max_step_mm"] > 5 * a["command_smoothness"]["max_step_mm"]
    assert s["command_smoothness"]["second_difference_mm"] > 5 * a["command_smoothness"]["second_difference_mm"]
    # the same travel either way (the actuators follow the same path)
    assert a["command_smoothness"]["total_variation_mm"] == pytest.approx(
        s["command_smoothness"]["total_variation_mm"], rel=0.25)
    assert a["mean_error_mm"] < s["mean_error_mm"]


def test_closed_loop_removes_the_static_mismatch(controller, rig):
    """Holding the centre: the open loop keeps the model-mismatch offset, the integral
    correction from noisy, delayed mocap removes most of it."""
    hold, _ = square_target(centre(controller), 0.02, 0.05, 100.0)
    common = dict(duration=1.5, mode="async", mocap_options={"noise_std": 0.0002, "latency": 0.005}, **FEM)
    opened = run_tracking(controller, rig, hold, **common)
    closed = run_tracking(controller, rig, hold, feedback_config=FeedbackConfig(ki=5.0), **common)
    w = opened.window(1.2)
    open_err = opened.error[w].mean()
    closed_err = closed.error[w].mean()
    assert open_err > 3e-4  # the 20 % softer plant sags: a visible offset
    assert closed_err < 0.3 * open_err
    # the open loop measured too (mocap on), with about the marker noise
    m = run_metrics(opened, 1.2)
    assert 0.1 < m["mean_measured_minus_true_mm"] < 0.6
    assert np.isfinite(closed.measured[-1]).all()
    assert not np.allclose(closed.qp_target[-1], closed.target[-1])  # corrected target


def test_model_only_loop_follows_the_target(controller):
    """Without a plant the model is the robot: a slow target is followed closely."""
    target, traj = square_target(centre(controller), 0.02, 0.01, 0.2)
    end = 0.2 + approach_time(traj) + 0.5
    res = run_tracking(controller, None, target, duration=end, mode="async", **FEM)
    assert res.effector_fresh.all()
    m = run_metrics(res, 0.2 + approach_time(traj), end)
    assert m["mean_error_mm"] < 0.5
    assert res.status_counts.get(InverseStatus.SOLVED.name) == res.qp_solves


# ------------------------------------------------------------------ metrics
def test_polyline_distance_and_square():
    square = square_vertices(np.zeros(3), 2.0)
    pts = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, 0.0], [2.0, 0.0, 0.0], [1.0, 1.0, 3.0]])
    np.testing.assert_allclose(polyline_distance(pts, square), [1.0, 0.0, 1.0, 3.0])


def test_smoothness_tells_a_staircase_from_a_ramp():
    t = np.arange(1000) * 1e-3
    ramp = (t * 0.01)[:, None]  # 10 mm/s
    stairs = (np.floor(t * 30.0) / 30.0 * 0.01)[:, None]
    r, s = smoothness(ramp, t), smoothness(stairs, t)
    assert r["total_variation_mm"] == pytest.approx(s["total_variation_mm"], rel=0.05)
    assert r["max_step_mm"] == pytest.approx(0.01, rel=1e-6)
    assert r["max_speed_mm_s"] == pytest.approx(10.0, rel=1e-6)
    assert s["max_step_mm"] == pytest.approx(10.0 / 30.0, rel=1e-6)
    assert r["second_difference_mm"] < 1e-9
    assert s["second_difference_mm"] == pytest.approx(2 * 29 * 10.0 / 30.0, rel=0.05)


def test_lag_fit_recovers_a_pure_delay():
    from soft_inverse_ros.experiments.cosim import CosimResult
    from soft_inverse_ros.experiments.run_metrics import lag_fit

    t = np.arange(2000) * 1e-3
    target = np.stack([0.02 * np.cos(3 * t), 0.02 * np.sin(3 * t), np.zeros_like(t)], axis=1)
    effector = np.roll(target, 37, axis=0) + [0.0, 0.0, 1e-4]  # 37 ms late, 0.1 mm off
    nan = np.full((len(t), 4), np.nan)
    res = CosimResult(CosimConfig(duration=2.0), ("a",) * 4, (), t, target, target, effector,
                      np.ones(len(t), bool), target * np.nan, nan, nan, nan, np.zeros(0), np.zeros(0),
                      (), np.zeros(0), (), np.zeros(0), 0, 0.0)
    delay, error = lag_fit(res, t > 0.5)
    assert delay == pytest.approx(0.037)
    assert error == pytest.approx(1e-4, rel=1e-6)


def test_measured_update_time_leaves_the_model_at_rest(controller):
    before = controller.restore().effector_position.copy()
    cpu, wall = controller.measure_update_time(updates=3)
    assert 0.0 < cpu < 5.0 and 0.0 < wall < 5.0
    np.testing.assert_array_equal(controller.model.effector_position, before)
    np.testing.assert_array_equal(controller.model.efforts, np.zeros(4))


def test_run_metrics_count_solves_and_snapshots_in_the_window_only():
    """qp_solves, qp_status_counts and snapshot_rate_hz covered the whole run (hold, approach
    and lap) where the docstring and EXPERIMENTS say "over the lap"."""
    from soft_inverse_ros.experiments.cosim import CosimResult
    from soft_inverse_ros.experiments.run_metrics import run_metrics

    t = np.arange(3000) * 1e-3
    target = np.zeros((len(t), 3))
    strokes = np.zeros((len(t), 1))
    solves = np.arange(0.0, 3.0, 0.002)  # 500 Hz solves, HELD before 1 s
    statuses = tuple("OK" if s >= 1.0 else "HELD" for s in solves)
    snapshots = np.concatenate([np.arange(0.0, 1.0, 0.1), np.arange(1.0, 3.0, 0.02)])  # 10 Hz, then 50 Hz
    from soft_inverse_ros.core.model.snapshot import ActuatorKind

    res = CosimResult(CosimConfig(duration=3.0), ("a",), (ActuatorKind.CABLE,), t, target, target, target,
                      np.ones(len(t), bool), target, strokes, strokes, strokes, snapshots, snapshots,
                      (), solves, statuses, np.zeros(0), 0, 0.0)
    m = run_metrics(res, 1.5, 2.5)
    assert m["qp_solves"] == 500 and m["qp_status_counts"] == {"OK": 500}
    assert m["snapshots"] == 50 and m["snapshot_rate_hz"] == pytest.approx(50.0)
