"""The compiled tick that calls DAQP's C solver directly (core/control/daqp_direct.py):
the same commands and fallbacks as the tick through daqp's Python interface."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.control import daqp_direct, tick_kernels
from soft_inverse_ros.core.control.inverse_qp import (
    CommandStatus,
    InverseSolver,
    InverseSolverConfig,
    InverseStatus,
)
from soft_inverse_ros.core.control.qp_backends import BackendSettings
from soft_inverse_ros.testing.synthetic_compliance import make_synthetic_robot

pytestmark = pytest.mark.skipif(
    daqp_direct.unavailable_reason() is not None, reason=f"direct path unavailable: {daqp_direct.unavailable_reason()}"
)


def _robot_and_targets(n_a=4, n_e=3, n=400, seed=3):
    rng = np.random.default_rng(seed)
    robot = make_synthetic_robot(n_a, n_e, rng=rng)
    base = robot.limits()
    limits = robot.limits(max_effort_step=0.05 * base.effort_max, max_stroke_step=0.05 * base.stroke_max)
    snap = robot.snapshot()
    reach = float(np.abs(snap.w_ea @ (0.5 * base.effort_max)).max())
    phase = np.linspace(0, 4 * np.pi, n)
    dirs = rng.standard_normal((2, n_e))
    targets = snap.effector_position + 1.5 * reach * (np.outer(np.cos(phase), dirs[0]) + np.outer(np.sin(phase), dirs[1]))
    targets[100] = np.nan  # a bad target mid-run: the same fallback on both paths
    return robot, limits, targets


def _run(robot, limits, targets, direct: bool, monkeypatch):
    monkeypatch.setenv("SOFT_INVERSE_ROS_DAQP_DIRECT", "auto" if direct else "off")
    solver = InverseSolver(InverseSolverConfig(), limits)
    assert solver.qp_call.startswith("daqp C") == direct, solver.qp_call
    rows, qp_calls = [], 0
    for k, target in enumerate(targets):
        if k % 25 == 0:
            if solver.snapshot is not None and solver._prep.direct is not None:  # noqa: SLF001
                qp_calls += solver._prep.direct.qp_calls  # noqa: SLF001
            assert solver.set_snapshot(robot.stiffened(1.0 + 0.01 * k / len(targets)).snapshot(
                seq=k, stamp=0.001 * k)).accepted
        res = solver.solve(target)
        a = res.active
        rows.append((res.status, res.command_status, res.efforts.copy(), res.strokes.copy(),
                     res.effector_residual.copy(), res.effector_error,
                     np.concatenate([a.effort_lower, a.effort_upper, a.stroke_lower, a.stroke_upper])))
    if solver._prep.direct is not None:  # noqa: SLF001
        qp_calls += solver._prep.direct.qp_calls  # noqa: SLF001
    return rows, qp_calls


@pytest.mark.parametrize("n_a, n_e", [(4, 3), (8, 6)])
def test_direct_and_python_interface_ticks_agree(monkeypatch, n_a, n_e):
    robot, limits, targets = _robot_and_targets(n_a, n_e)
    direct, calls = _run(robot, limits, targets, True, monkeypatch)
    python, no_calls = _run(robot, limits, targets, False, monkeypatch)
    assert calls == len(targets) - 1 and no_calls == 0  # every finite target reached DAQP's C call
    statuses = [r[0] for r in direct]
    assert statuses[100] is InverseStatus.INVALID_TARGET
    assert statuses.count(InverseStatus.SOLVED) > 0.9 * len(targets)
    assert any(r[6].any() for r in direct)  # the circle leaves the workspace: bounds were active
    scale = limits.effort_max
    for a, b in zip(direct, python):
        assert a[0] is b[0] and a[1] is b[1]
        # one strictly convex QP, two solver runs (cold vs warm-started): equal within tolerance
        np.testing.assert_allclose(a[2], b[2], rtol=0, atol=1e-7 * scale.max())
        np.testing.assert_allclose(a[3], b[3], rtol=1e-6, atol=1e-12)
        np.testing.assert_allclose(a[4], b[4], rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize(
    "code, flag, status",
    [
        (3, -4, InverseStatus.NOT_CONVERGED),  # iteration limit
        (3, -1, InverseStatus.INFEASIBLE),
        (3, -2, InverseStatus.NUMERICAL_ERROR),  # cycling
        (4, 1, InverseStatus.NUMERICAL_ERROR),  # solution outside the bounds
        (2, 0, InverseStatus.INFEASIBLE),  # per-tick stroke limit and bounds disjoint
    ],
)
def test_direct_tick_failures_hold_the_previous_command(monkeypatch, code, flag, status):
    robot, limits, targets = _robot_and_targets()
    solver = InverseSolver(InverseSolverConfig(), limits)
    assert solver.set_snapshot(robot.snapshot(seq=1)).accepted
    good = solver.solve(targets[0])
    assert good.ok and good.backend_status == "optimal"
    real = tick_kernels.direct_tick

    def failing(consts, ints, target, io):
        out = real(consts, ints, target, io)[0]
        return out, code, flag, 7, np.nan, -1.0

    monkeypatch.setattr(tick_kernels, "direct_tick", failing)
    result = solver.solve(targets[1])
    assert result.status is status, result.message
    assert result.command_status is CommandStatus.HELD
    np.testing.assert_array_equal(result.efforts, good.efforts)
    assert solver.last_command.efforts is good.efforts
    assert np.isfinite(result.effector_residual).all()  # δ_e of this tick: the held command's residual


def test_an_exception_in_the_direct_tick_holds_the_command(monkeypatch):
    robot, limits, targets = _robot_and_targets()
    solver = InverseSolver(InverseSolverConfig(), limits)
    assert solver.set_snapshot(robot.snapshot(seq=1)).accepted
    good = solver.solve(targets[0])

    def crash(*args):
        raise RuntimeError("kernel crashed")

    monkeypatch.setattr(tick_kernels, "direct_tick", crash)
    result = solver.solve(targets[1])
    assert result.status is InverseStatus.NUMERICAL_ERROR and "kernel crashed" in result.message
    assert result.command_status is CommandStatus.HELD
    np.testing.assert_array_equal(result.efforts, good.efforts)


def test_the_per_tick_reference_follows_reset_and_new_snapshots():
    """The direct tick keeps the per-tick limits' reference in its buffers: after reset()
    the limits restart from the safe command, after a new snapshot from the last command."""
    robot, limits, targets = _robot_and_targets()
    solver = InverseSolver(InverseSolverConfig(), limits)
    assert solver.set_snapshot(robot.snapshot(seq=1)).accepted
    far = targets[50]
    first = solver.solve(far)
    np.testing.assert_array_less(np.abs(first.efforts - limits.safe_effort), limits.max_effort_step * (1 + 1e-9))
    second = solver.solve(far)
    np.testing.assert_array_less(np.abs(second.efforts - first.efforts), limits.max_effort_step * (1 + 1e-9))
    assert np.abs(second.efforts - limits.safe_effort).max() > limits.max_effort_step.max()  # it moved on
    assert solver.set_snapshot(robot.stiffened(1.01).snapshot(seq=2)).accepted
    third = solver.solve(far)
    np.testing.assert_array_less(np.abs(third.efforts - second.efforts), limits.max_effort_step * (1 + 1e-9))
    direct, n = solver._prep.direct, limits.n_actuators  # noqa: SLF001
    multipliers = slice(6 * n, 8 * n)  # io = [f | bupper | blower | x | multipliers | reference]
    assert direct.io[multipliers].any()  # the last tick's working set: the per-tick limits held
    solver.reset()
    assert not direct.io[multipliers].any()  # reset() dropped the warm start
    fourth = solver.solve(far)
    np.testing.assert_array_less(np.abs(fourth.efforts - limits.safe_effort), limits.max_effort_step * (1 + 1e-9))


def test_warming_a_snapshot_s_tick_leaves_no_trace():
    """set_snapshot runs one tick on the new kernel (warm()) so that the first real tick is
    not a cold one; it restores every buffer: the tick counter, the warm start and the
    per-tick reference are those the solver set, and the first tick's command is the one
    an unwarmed kernel gives."""
    robot, limits, targets = _robot_and_targets()
    solver = InverseSolver(InverseSolverConfig(), limits)
    assert solver.set_snapshot(robot.snapshot(seq=1)).accepted
    solver.solve(targets[10])
    direct = solver._prep.direct  # noqa: SLF001
    io, ints = direct.io.copy(), direct.ints.copy()
    direct.warm(3)
    assert np.array_equal(direct.io, io, equal_nan=True) and np.array_equal(direct.ints, ints)
    assert direct.qp_calls == 1
    first = solver.solve(targets[11]).efforts.copy()
    solver._prep.direct.io[:], solver._prep.direct.ints[:] = io, ints  # noqa: SLF001
    again = solver.solve(targets[11]).efforts
    assert np.array_equal(first, again)


def test_settings_reach_the_c_struct():
    c = daqp_direct._settings(BackendSettings(max_iterations=7, primal_tolerance=1e-7))  # noqa: SLF001
    assert (c.iter_limit, c.primal_tol, c.eps_prox) == (7, 1e-7, 0.0)


def test_an_unverified_daqp_version_uses_the_python_interface(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "99.0.0")
    reason = daqp_direct._checked.__wrapped__()  # noqa: SLF001 - the cached checks, run again
    assert reason is not None and "99.0.0" in reason
    monkeypatch.setenv("SOFT_INVERSE_ROS_DAQP_DIRECT", "off")
    solver = InverseSolver(InverseSolverConfig(), make_synthetic_robot(2, 2, rng=1).limits())
    assert solver.qp_call == "daqp Python interface (SOFT_INVERSE_ROS_DAQP_DIRECT=off)"
