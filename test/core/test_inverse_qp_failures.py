"""Bad inputs: clear errors at configuration time, a safe command (never an exception) per tick."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from inverse_qp_reference import assert_within_limits
from soft_inverse_ros.core.control.actuator_limits import ActuatorLimits
from soft_inverse_ros.core.control.inverse_qp import (
    CommandStatus,
    InverseSolver,
    InverseSolverConfig,
    InverseStatus,
    SnapshotStatus,
)
from soft_inverse_ros.core.control.qp_backends import BackendSolution, BackendStatus
from soft_inverse_ros.testing.synthetic_compliance import make_synthetic_robot


@pytest.fixture
def robot():
    return make_synthetic_robot(4, 3, kinds=[0, 0, 2, 2], rng=21)


def _ready(robot, backend="daqp", **limits_kw):
    solver = InverseSolver(InverseSolverConfig(backend=backend), robot.limits(**limits_kw))
    assert solver.set_snapshot(robot.snapshot(seq=1)).accepted
    return solver


# ---------------------------------------------------------------- configuration time
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(effort_min=[0.0, 2.0], effort_max=[1.0, 1.0]), r"effort_min\[1\] = 2.0 > effort_max\[1\]"),
        (dict(effort_min=[], effort_max=[]), "no actuators"),
        (dict(effort_min=[0.0, np.nan], effort_max=[1.0, 1.0]), "effort_min contains NaN"),
        (dict(effort_min=[0.0, 0.0], effort_max=[1.0, 1.0, 1.0]), "effort_max has 3 entries, expected 2"),
        (dict(effort_min=[0.0], effort_max=[1.0], stroke_min=[0.2], stroke_max=[0.1]), "stroke_min"),
        (dict(effort_min=[0.0], effort_max=[1.0], max_effort_step=[0.0]), "max_effort_step"),
        (dict(effort_min=[0.0], effort_max=[1.0], safe_effort=[2.0]), "safe_effort"),
        (dict(effort_min=[np.inf], effort_max=[np.inf]), "admit no effort"),
        (dict(effort_min=[0.0], effort_max=["a"]), "effort_max is not numeric"),
        (dict(effort_min=[0.0, 0.0], effort_max=[1.0, 1.0], names=["a", "a"]), "duplicate"),
    ],
)
def test_actuator_limits_reject_bad_values_naming_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ActuatorLimits(**kwargs)


def test_actuator_limits_from_model_arrays_and_safe_default():
    a_min = np.array([0.0, 1e3, -5.0])
    a_max = np.array([20.0, 1e5, 5.0])
    limits = ActuatorLimits(a_min, a_max, [-np.inf, 0.0, -1.0], [0.02, 5e-6, 1.0], [1.0, 1e3, np.inf], None)
    np.testing.assert_array_equal(limits.safe_effort, [0.0, 1e3, 0.0])  # 0 clipped to bounds
    np.testing.assert_array_equal(limits.max_stroke_step, [np.inf] * 3)
    assert limits.has_effort_step and not limits.has_stroke_step
    with pytest.raises(ValueError):
        limits.effort_min[0] = 1.0  # read-only


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(backend="cvxopt"), "backend 'cvxopt' unknown"),
        (dict(epsilon=-1.0), "epsilon must be finite and >= 0"),
        (dict(epsilon=float("nan")), "epsilon"),
        (dict(length_scale=0.0), "length_scale must be finite and > 0"),
        (dict(max_iterations=0), "max_iterations must be a positive integer"),
        (dict(time_limit=-1.0), "time_limit"),
        (dict(contact_force_weight=-1e-3), "contact_force_weight must be finite and >= 0"),
        (dict(contact_force_weight=float("inf")), "contact_force_weight must be finite"),
        (dict(osqp_polish="yes"), "osqp_polish"),
    ],
)
def test_config_rejects_bad_values_naming_the_key(kwargs, match):
    with pytest.raises(ValueError, match=match):
        InverseSolverConfig(**kwargs)


def test_config_from_mapping():
    cfg = InverseSolverConfig.from_mapping({"backend": "osqp", "epsilon": 1e-4})
    assert cfg.backend == "osqp" and cfg.epsilon == 1e-4
    with pytest.raises(ValueError, match="unknown key.*epsilonn"):
        InverseSolverConfig.from_mapping({"epsilonn": 1e-3})


# ---------------------------------------------------------------- snapshots
def test_nan_snapshot_is_rejected_and_the_previous_one_kept(robot):
    solver = _ready(robot)
    good = robot.snapshot(seq=2)
    target = good.effector_position + 1e-3
    before = solver.solve(target)
    bad = dataclasses.replace(good, seq=3, w_aa=np.where(np.eye(4) > 0, np.nan, good.w_aa))
    update = solver.set_snapshot(bad)
    assert update.status is SnapshotStatus.REJECTED_NOT_FINITE and not update.accepted
    assert solver.snapshot.seq == 1
    after = solver.solve(target)
    assert after.ok and after.snapshot_seq == 1
    np.testing.assert_allclose(after.efforts, before.efforts)


def test_first_snapshot_bad_gives_safe_command(robot):
    limits = robot.limits()
    solver = InverseSolver(InverseSolverConfig(), limits)
    good = robot.snapshot()
    bad = dataclasses.replace(good, effector_position=np.array([np.nan, 0.0, 0.0]))
    assert solver.set_snapshot(bad).status is SnapshotStatus.REJECTED_NOT_FINITE
    result = solver.solve(good.effector_position)
    assert result.status is InverseStatus.NO_SNAPSHOT
    assert result.command_status is CommandStatus.SAFE
    np.testing.assert_array_equal(result.efforts, limits.safe_effort)
    assert np.all(result.strokes >= limits.stroke_min) and np.all(result.strokes <= limits.stroke_max)


def test_snapshot_with_other_actuators_is_rejected(robot):
    solver = _ready(robot)
    other = make_synthetic_robot(3, 3, rng=1).snapshot()
    assert solver.set_snapshot(other).status is SnapshotStatus.REJECTED_SHAPE
    renamed = dataclasses.replace(robot.snapshot(), actuator_names=("a", "b", "c", "d"))
    update = solver.set_snapshot(renamed)
    assert update.status is SnapshotStatus.REJECTED_SHAPE and "do not match" in update.reason
    zero = dataclasses.replace(robot.snapshot(), w_ea=np.zeros((3, 4)))
    assert solver.set_snapshot(zero).status is SnapshotStatus.REJECTED_DEGENERATE
    assert solver.set_snapshot("not a snapshot").status is SnapshotStatus.REJECTED_INVALID
    assert solver.snapshot.seq == 1


# ---------------------------------------------------------------- ticks
@pytest.mark.parametrize(
    "target",
    [
        np.array([np.nan, 0.0, 0.0]),
        np.array([0.0, np.inf, 0.0]),
        np.zeros(2),
        np.zeros((1, 3)),
        "abc",
        None,
        [0.0, 0.0, object()],
    ],
)
def test_bad_target_holds_the_previous_command(robot, target):
    solver = _ready(robot)
    good = solver.solve(robot.snapshot().effector_position + np.array([2e-3, 0.0, 1e-3]))
    assert good.ok
    result = solver.solve(target)
    assert result.status is InverseStatus.INVALID_TARGET
    assert result.command_status is CommandStatus.HELD
    np.testing.assert_array_equal(result.efforts, good.efforts)
    np.testing.assert_array_equal(result.strokes, good.strokes)
    assert result.message
    assert solver.solve(robot.snapshot().effector_position).ok  # recovers


def test_bad_target_without_previous_command_gives_safe_command(robot):
    solver = _ready(robot)
    result = solver.solve([np.nan] * 3)
    assert result.status is InverseStatus.INVALID_TARGET and result.command_status is CommandStatus.SAFE
    np.testing.assert_array_equal(result.efforts, solver.limits.safe_effort)


@pytest.mark.parametrize("backend", ("daqp", "osqp", "quadprog"))
def test_infeasible_limits_hold_the_command(robot, backend):
    """The first cable must shorten more than its maximum tension can pull it."""
    base = robot.limits()
    snapshot = robot.snapshot()
    stroke_min = np.full(4, -np.inf)
    stroke_min[0] = 2.0 * snapshot.w_aa[0, 0] * base.effort_max[0] * 4
    limits = ActuatorLimits(base.effort_min, base.effort_max, stroke_min, None)
    solver = InverseSolver(InverseSolverConfig(backend=backend), limits)
    assert solver.set_snapshot(snapshot).accepted
    result = solver.solve(snapshot.effector_position)
    assert result.status is InverseStatus.INFEASIBLE, (result.status, result.message)
    assert result.command_status is CommandStatus.SAFE
    assert np.all(result.efforts >= limits.effort_min) and np.all(result.efforts <= limits.effort_max)
    assert np.all(result.strokes >= limits.stroke_min) and np.all(result.strokes <= limits.stroke_max)


def test_stroke_step_incompatible_with_new_snapshot_is_infeasible_not_an_exception(robot):
    base = robot.limits()
    snapshot = robot.snapshot()
    limits = robot.limits(max_stroke_step=1e-3 * np.diag(snapshot.w_aa) * base.effort_max)
    solver = InverseSolver(InverseSolverConfig(), limits)
    solver.set_snapshot(snapshot)
    # move the free strokes far past stroke_max: the previous command is no longer admissible
    shifted = dataclasses.replace(snapshot, seq=5, actuator_stroke=snapshot.actuator_stroke + 2 * base.stroke_max)
    assert solver.set_snapshot(shifted).accepted
    result = solver.solve(snapshot.effector_position)
    assert result.status is InverseStatus.INFEASIBLE
    assert np.all(result.strokes <= limits.stroke_max)


@pytest.mark.parametrize(
    "fake, status",
    [
        (BackendSolution(np.full(4, np.nan), BackendStatus.SOLVED, 3, "optimal"), InverseStatus.NUMERICAL_ERROR),
        (BackendSolution(np.full(4, 1e9), BackendStatus.SOLVED, 3, "optimal"), InverseStatus.NUMERICAL_ERROR),
        (BackendSolution(np.zeros(4), BackendStatus.MAX_ITERATIONS, 1000, "iteration limit"), InverseStatus.NOT_CONVERGED),
        (BackendSolution(np.zeros(4), BackendStatus.INACCURATE, 50, "solved inaccurate"), InverseStatus.NOT_CONVERGED),
        (RuntimeError("solver crashed"), InverseStatus.NUMERICAL_ERROR),
    ],
)
def test_backend_failures_fall_back_to_the_previous_command(robot, monkeypatch, fake, status):
    # the Python-interface path (the compiled direct path's failures: test_daqp_direct.py)
    monkeypatch.setenv("SOFT_INVERSE_ROS_DAQP_DIRECT", "off")
    solver = _ready(robot)
    good = solver.solve(robot.snapshot().effector_position + np.array([1e-3, 1e-3, 0.0]))
    assert good.ok

    def broken(g, lower, upper):
        if isinstance(fake, Exception):
            raise fake
        return fake

    monkeypatch.setattr(solver._backend, "solve", broken)
    result = solver.solve(robot.snapshot().effector_position)
    assert result.status is status, result.message
    assert result.command_status is CommandStatus.HELD
    np.testing.assert_array_equal(result.efforts, good.efforts)
    assert solver.last_command.efforts is good.efforts


@pytest.mark.parametrize("backend, option", [("daqp", "max_iterations"), ("osqp", "osqp_max_iterations")])
def test_real_iteration_limit_reports_not_converged(robot, backend, option):
    snapshot = robot.snapshot()
    solver = InverseSolver(InverseSolverConfig(backend=backend, **{option: 1}), robot.limits())
    solver.set_snapshot(snapshot)
    far = snapshot.effector_position + 10 * snapshot.w_ea @ robot.limits().effort_max
    result = solver.solve(far)
    assert result.status is InverseStatus.NOT_CONVERGED, (result.status, result.message)
    assert result.command_status is CommandStatus.SAFE


@pytest.mark.filterwarnings("error")  # not even a RuntimeWarning per tick
def test_random_garbage_never_raises_and_stays_within_limits(robot):
    rng = np.random.default_rng(0)
    solver = _ready(robot, max_effort_step=2.0)
    snapshot = robot.snapshot()
    limits = solver.limits
    garbage = [np.nan, np.inf, -np.inf, 1e300, -1e300, 0.0]
    for i in range(300):
        kind = rng.integers(4)
        if kind == 0:
            target = snapshot.effector_position + rng.normal(0, 5e-3, 3)
        elif kind == 1:
            target = rng.choice(garbage, 3)
        elif kind == 2:
            target = rng.normal(0, 1, rng.integers(0, 6))
        else:
            target = snapshot.effector_position + rng.normal(0, 1.0, 3) * 10.0 ** rng.integers(0, 200)
        if i % 50 == 25:
            bad = dataclasses.replace(snapshot, w_ea=rng.choice(garbage, (3, 4)))
            solver.set_snapshot(bad)
        result = solver.solve(target)
        assert np.all(result.efforts >= limits.effort_min) and np.all(result.efforts <= limits.effort_max)
        assert np.all(result.strokes >= limits.stroke_min) and np.all(result.strokes <= limits.stroke_max)
        if result.ok:
            assert_within_limits(result, snapshot, limits)


@pytest.mark.parametrize("backend", ("daqp", "osqp", "quadprog"))
def test_backend_refusing_a_problem_keeps_solving_the_previous_one(backend):
    from soft_inverse_ros.core.control.qp_backends import BackendSettings, make_backend

    qp = make_backend(backend, BackendSettings())
    h, a = np.array([[2.0, 0.3], [0.3, 1.0]]), np.array([[1.0, 1.0]])
    lower, upper = np.array([-1.0, -1.0, -0.5]), np.array([1.0, 1.0, 0.5])
    qp.setup(h, a)
    before = qp.solve(np.array([1.0, -2.0]), lower, upper)
    assert before.status is BackendStatus.SOLVED
    for bad_h, bad_a in ((np.array([[1.0, 0.0], [0.0, -1.0]]), a), (-np.eye(3), np.ones((1, 3)))):
        with pytest.raises(ValueError):
            qp.setup(bad_h, bad_a)
        after = qp.solve(np.array([1.0, -2.0]), lower, upper)
        assert after.status is BackendStatus.SOLVED
        np.testing.assert_allclose(after.x, before.x, atol=1e-8)


def test_snapshot_refused_by_the_backend_is_rejected(robot, monkeypatch):
    solver = _ready(robot)
    target = robot.snapshot().effector_position + 1e-3

    def refuse(h, a):
        raise ValueError("not positive definite")

    monkeypatch.setattr(solver._backend, "setup", refuse)
    update = solver.set_snapshot(robot.stiffened(1.1).snapshot(seq=9))
    assert update.status is SnapshotStatus.REJECTED_BACKEND and "not positive definite" in update.reason
    assert solver.snapshot.seq == 1
    assert solver.solve(target).ok


def test_snapshots_from_another_thread_while_ticking(robot):
    import threading

    solver = _ready(robot, max_effort_step=1.0)
    snapshots = [robot.stiffened(1.0 + 0.01 * k).snapshot(seq=k + 10) for k in range(40)]
    done = threading.Event()

    def feeder():
        for snap in snapshots:
            assert solver.set_snapshot(snap).accepted
        done.set()

    thread = threading.Thread(target=feeder)
    rng = np.random.default_rng(1)
    thread.start()
    results = []
    while not done.is_set() or len(results) < 200:
        results.append(solver.solve(robot.snapshot().effector_position + rng.normal(0, 2e-3, 3)))
    thread.join()
    assert all(r.ok for r in results), {r.status for r in results}
    assert solver.snapshot.seq == 49
