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


def _direct(n_a, n_e, seed, has_steps, feasibility_tolerance=1e-9):
    """A DirectTick on a random scaled problem (daqp_direct.pack's arguments kept too)."""
    from soft_inverse_ros.core.control import daqp_direct
    from soft_inverse_ros.core.control.qp_backends import BackendSettings

    rng = np.random.default_rng(seed)
    n = n_a
    w_ea = rng.standard_normal((n_e, n))
    h = w_ea.T @ w_ea + 0.1 * np.eye(n)
    a_s = np.eye(n) + 0.2 * rng.standard_normal((n, n))
    args = dict(
        e_free=rng.standard_normal(n_e), g_map=w_ea.T.copy(), k_mat=np.vstack((np.eye(n), a_s)),
        static_lower=np.concatenate([np.zeros(n), np.full(n, -np.inf if seed % 2 else -2.0)]),
        static_upper=np.concatenate([np.ones(n), np.full(n, 2.0)]), step=np.full(2 * n, 0.05),
        d=rng.uniform(0.5, 2.0, n), effort_min=np.zeros(n), effort_max=rng.uniform(1.0, 3.0, n),
        stroke_min=np.full(n, -0.5), stroke_max=np.full(n, 0.5), da_free=0.01 * rng.standard_normal(n),
        w_aa=0.1 * (a_s @ a_s.T), w_ea=w_ea, active_tolerance=1e-9, feasibility_tolerance=feasibility_tolerance)
    consts = daqp_direct.pack(**args)
    return daqp_direct.DirectTick(consts, h, a_s, n_e, has_steps, BackendSettings()), args


@pytest.mark.skipif(tick_kernels.direct_tick is None, reason="the direct tick is not compiled here")
@pytest.mark.parametrize("has_steps", [True, False])
def test_direct_tick_loops_match_the_vectorized_arithmetic(has_steps):
    """direct_tick's loops against prepare_py and finish_py on the μ DAQP returned to it:
    bounds, δ_e, command, residual, error, margin and the next reference, for every
    outcome (solved, non-finite target, empty per-tick bounds, violated bounds)."""
    n_a, n_e = 4, 3
    codes = set()
    for seed in range(40):
        tick, a = _direct(n_a, n_e, seed, has_steps, feasibility_tolerance=-1.0 if seed == 7 else 1e-9)
        rng = np.random.default_rng(100 + seed)
        tick.set_reference(rng.uniform(0.0, 1.0, n_a) if seed != 5 else np.full(n_a, 10.0))
        for k in range(6):
            target = a["e_free"] + rng.standard_normal(n_e)
            if seed == 3 and k == 2:
                target[1] = np.nan
            ref_mu = tick.io[-n_a:].copy()
            out, code, flag, iterations, error, margin = tick.run(target)
            codes.add(code)
            delta_e, g, lower, upper, expected_code = tick_kernels.prepare_py(
                a["e_free"], target, a["g_map"], a["k_mat"], ref_mu, a["static_lower"], a["static_upper"],
                a["step"], has_steps)
            base = 3 * n_a + n_e
            np.testing.assert_array_equal(out[base + 4 * n_a:], delta_e)
            if code in (1, 2):
                assert code == expected_code
                assert np.isnan(out[:base]).all() and np.isnan(error) and np.isnan(margin)
                np.testing.assert_array_equal(tick.io[-n_a:], ref_mu)  # the reference is kept
                continue
            assert expected_code == 0 and flag == 1 and iterations >= 1
            np.testing.assert_allclose(tick.io[:n_a], g, rtol=1e-13, atol=1e-15)
            # sums in another order than numpy's matrix products: equal to rounding
            np.testing.assert_allclose(out[base:base + 2 * n_a], lower, rtol=1e-13, atol=1e-16)
            np.testing.assert_allclose(out[base + 2 * n_a:base + 4 * n_a], upper, rtol=1e-13, atol=1e-16)
            mu = out[2 * n_a + n_e:base]
            efforts, strokes, residual, exp_error, exp_margin = tick_kernels.finish_py(
                mu, a["k_mat"], lower, upper, a["active_tolerance"], a["d"], a["effort_min"], a["effort_max"],
                a["w_aa"], a["da_free"], a["stroke_min"], a["stroke_max"], a["w_ea"], delta_e)
            assert error == pytest.approx(exp_error, rel=1e-13) and margin == pytest.approx(exp_margin, rel=1e-9, abs=1e-15)
            if code == 4:
                assert seed == 7 and np.isnan(out[:2 * n_a + n_e]).all()
                np.testing.assert_array_equal(tick.io[-n_a:], ref_mu)
                continue
            assert code == 0
            np.testing.assert_allclose(out[:n_a], efforts, rtol=1e-13, atol=0)  # the same snapping and clipping
            np.testing.assert_allclose(out[n_a:2 * n_a], strokes, rtol=1e-13, atol=1e-16)
            np.testing.assert_allclose(out[2 * n_a:2 * n_a + n_e], residual, rtol=1e-12, atol=1e-15)
            if has_steps:
                np.testing.assert_allclose(tick.io[-n_a:], efforts / a["d"], rtol=1e-13, atol=0)
    assert codes == ({0, 1, 2, 4} if has_steps else {0, 1, 4})
