"""The inverse-QP tick arithmetic gives the same commands compiled (numba) and interpreted (numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.control import tick_kernels
from soft_inverse_ros.core.control.inverse_qp import InverseSolver, InverseSolverConfig, InverseStatus
from soft_inverse_ros.testing.synthetic_compliance import make_synthetic_robot


def _run(robot, limits, targets, kernels, monkeypatch):
    prepare, finish = kernels
    # ticks through daqp's Python interface, which call these two (the compiled direct
    # tick has its own copies compiled in: test_daqp_direct.py compares it with this path)
    monkeypatch.setenv("SOFT_INVERSE_ROS_DAQP_DIRECT", "off")
    monkeypatch.setattr(tick_kernels, "prepare", prepare)
    monkeypatch.setattr(tick_kernels, "finish", finish)
    solver = InverseSolver(InverseSolverConfig(), limits)
    assert solver.set_snapshot(robot.snapshot()).accepted
    rows = []
    for k, target in enumerate(targets):
        if k % 25 == 0:
            solver.set_snapshot(robot.stiffened(1.0 + 0.01 * k / len(targets)).snapshot(seq=k, stamp=0.001 * k))
        res = solver.solve(target)
        active = res.active
        rows.append(
            (res.status, res.command_status, res.efforts.copy(), res.strokes.copy(), res.effector_residual.copy(),
             res.effector_error, np.concatenate([active.effort_lower, active.effort_upper, active.stroke_lower,
                                                 active.stroke_upper, active.effort_step, active.stroke_step]))
        )
    return rows


def test_compiled_and_interpreted_ticks_agree(monkeypatch):
    if tick_kernels.KERNELS != "numba":
        pytest.skip("numba not installed: only the interpreted path exists")
    rng = np.random.default_rng(3)
    robot = make_synthetic_robot(4, 3, rng=rng)
    base = robot.limits()
    limits = robot.limits(max_effort_step=0.05 * base.effort_max, max_stroke_step=0.05 * base.stroke_max)
    snap = robot.snapshot()
    reach = float(np.abs(snap.w_ea @ (0.5 * base.effort_max)).max())
    phase = np.linspace(0, 4 * np.pi, 400)
    targets = snap.effector_position + 1.5 * reach * np.column_stack([np.cos(phase), np.sin(phase), 0 * phase])
    targets[100] = np.nan  # a bad target mid-run: the same fallback on both paths
    compiled = _run(robot, limits, targets, (tick_kernels.prepare, tick_kernels.finish), monkeypatch)
    interpreted = _run(robot, limits, targets, (tick_kernels.prepare_py, tick_kernels.finish_py), monkeypatch)
    statuses = [r[0] for r in compiled]
    assert statuses[100] is InverseStatus.INVALID_TARGET
    assert statuses.count(InverseStatus.SOLVED) > 350
    # bounds did become active (the circle leaves the workspace), so snapping was exercised
    assert any(r[6][:8].any() for r in compiled)
    for a, b in zip(compiled, interpreted):
        assert a[0] is b[0] and a[1] is b[1]
        for x, y in zip(a[2:5], b[2:5]):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-15)
        assert a[5] == pytest.approx(b[5], rel=1e-12, abs=1e-15) or (np.isnan(a[5]) and np.isnan(b[5]))
        np.testing.assert_array_equal(a[6], b[6])


def test_finish_flags_a_nan_solution_and_a_violated_bound():
    k = np.vstack((np.eye(2), np.eye(2)))
    lower, upper = np.zeros(4), np.ones(4)
    args = (1e-9, np.ones(2), np.zeros(2), np.ones(2), np.eye(2), np.zeros(2), -np.ones(2), np.ones(2),
            np.eye(2), np.zeros(2))
    for finish in (tick_kernels.finish, tick_kernels.finish_py):
        assert np.isnan(finish(np.array([np.nan, 0.5]), k, lower, upper, *args)[4])
        margin = finish(np.array([1.5, 0.5]), k, lower, upper, *args)[4]
        assert margin == pytest.approx(-0.5)
        efforts, _, _, error, margin = finish(np.array([1e-12, 0.5]), k, lower, upper, *args)
        assert efforts[0] == 0.0 and margin >= -1e-12  # snapped onto the bound
        _, _, residual, error, _ = finish(np.array([0.2, 0.5]), k, lower, upper, 1e-9, np.ones(2), np.zeros(2),
                                           np.ones(2), np.eye(2), np.zeros(2), -np.ones(2), np.ones(2), np.eye(2),
                                           np.array([1e300, 1e300]))
        assert np.isfinite(error) and error == pytest.approx(np.sqrt(2) * 1e300)


def test_compiled_and_interpreted_contact_ticks_agree(monkeypatch):
    """The contact tick's bounds and finish (tick_kernels.contact_bounds / contact_finish):
    the same commands, strokes and active bounds compiled and interpreted, on the hybrid
    arm's snapshots (joints + 9 contacts) with a target the per-tick limits hold back."""
    if tick_kernels.KERNELS != "numba":
        pytest.skip("numba not installed: only the interpreted path exists")
    from soft_inverse_ros.core.control.actuator_limits import limits_from_description
    from soft_inverse_ros.core.model.hybrid_description import load_hybrid_description
    from soft_inverse_ros.core.rigid.hybrid_live import HybridSnapshotModel

    desc = load_hybrid_description("hybrid_arm")
    target = np.array([0.2622, 0.01, 0.037])
    config = InverseSolverConfig(epsilon=1e-3, contact_force_sum_max=desc.force_sum_max,
                                 contact_min_force_sum=desc.min_force_sum)

    def run(bounds, finish):
        monkeypatch.setattr(tick_kernels, "contact_bounds", bounds)
        monkeypatch.setattr(tick_kernels, "contact_finish", finish)
        model = HybridSnapshotModel(desc, newton_iterations=2)  # settled at each run's own commands
        solver = InverseSolver(config, limits_from_description(desc))
        rows, q = [], desc.home.copy()
        for frame in range(3):
            snap = model.snapshot(q, target, frame + 1, float(frame))
            assert solver.set_snapshot(snap).accepted
            for k in range(30):
                res = solver.solve(target + 1e-4 * np.sin(k), stamp=snap.stamp + 1e-3 * k)
                a = res.active
                rows.append((res.command_status, res.efforts.copy(), res.strokes.copy(), np.concatenate(
                    [a.effort_lower, a.effort_upper, a.stroke_lower, a.stroke_upper, a.effort_step, a.stroke_step])))
            q = desc.joint_positions(res.efforts)
        return rows

    compiled = run(tick_kernels.contact_bounds, tick_kernels.contact_finish)
    interpreted = run(tick_kernels.contact_bounds_py, tick_kernels.contact_finish_py)
    assert sum(r[0].name == "OK" for r in compiled) >= 80
    assert sum(r[3][-10:].any() for r in compiled) > 0  # some per-tick limits held
    for c, i in zip(compiled, interpreted):
        assert c[0] == i[0]
        np.testing.assert_allclose(c[1], i[1], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(c[2], i[2], rtol=1e-12, atol=1e-15)
        assert np.array_equal(c[3], i[3])
