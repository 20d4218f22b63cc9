"""The inverse QP agrees with independent solvers (active-set enumeration, raw quadprog)."""

from __future__ import annotations

import numpy as np
import pytest

from inverse_qp_reference import (
    assert_within_limits,
    enumerate_qp,
    inverse_problem,
    quadprog_qp,
    random_problem,
    relative_error,
)
from soft_inverse_ros.core.control.inverse_qp import InverseSolver, InverseSolverConfig, InverseStatus
from soft_inverse_ros.core.model.snapshot import ActuatorKind
from soft_inverse_ros.testing.synthetic_compliance import make_synthetic_robot

BACKENDS = ("daqp", "quadprog", "osqp")
RTOL = 1e-6  # ‖λ − λ_ref‖ / ‖λ_ref‖


def _solve(backend, epsilon, snapshot, limits, target):
    solver = InverseSolver(InverseSolverConfig(backend=backend, epsilon=epsilon), limits)
    update = solver.set_snapshot(snapshot)
    assert update.accepted, update.reason
    result = solver.solve(target)
    assert result.status is InverseStatus.SOLVED, result.message
    return result


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_well_posed_problems_match_active_set_enumeration(backend):
    rng = np.random.default_rng(11)
    for n_a, n_e in [(2, 2), (2, 3), (3, 3), (3, 5), (4, 5), (3, 2), (4, 2), (4, 3)]:
        for _ in range(2):
            snapshot, limits = random_problem(rng, n_a, n_e)
            epsilon = 0.0 if n_a <= n_e else 1e-2
            target = snapshot.effector_position + rng.standard_normal(n_e)
            ref = enumerate_qp(*inverse_problem(snapshot, limits, target, epsilon))
            result = _solve(backend, epsilon, snapshot, limits, target)
            assert relative_error(result.efforts, ref, 1e-9) <= RTOL, (n_a, n_e, result.efforts, ref)
            assert_within_limits(result, snapshot, limits)
            np.testing.assert_allclose(
                result.effector_residual, snapshot.w_ea @ result.efforts + snapshot.delta_e_free(target)
            )


@pytest.mark.parametrize("backend", BACKENDS)
def test_realistic_compliance_matches_active_set_enumeration(backend):
    """Cables (~1e-4 m/N) and cavities (~1e-8 m/Pa) mixed: the internal scaling must cope."""
    rng = np.random.default_rng(5)
    cases = [(3, 3), (4, 3), (4, 6), (3, 2)]
    for n_a, n_e in cases:
        kinds = [ActuatorKind.CABLE, ActuatorKind.PRESSURE, ActuatorKind.FORCE, ActuatorKind.PRESSURE][:n_a]
        robot = make_synthetic_robot(n_a, n_e, kinds=kinds, rng=rng)
        limits = robot.limits()
        lam0 = 0.3 * rng.uniform(0.0, 1.0, n_a) * limits.effort_max
        snapshot = robot.snapshot(lam0)
        epsilon = 1e-3 if n_a > n_e else 0.0
        reach = float(np.abs(snapshot.w_ea @ limits.effort_max).max())
        for spread in (0.1, 0.5, 2.0):  # inside, near the edge, outside the workspace
            target = snapshot.effector_position + rng.normal(0.0, spread * reach, n_e)
            ref = enumerate_qp(*inverse_problem(snapshot, limits, target, epsilon))
            result = _solve(backend, epsilon, snapshot, limits, target)
            floor = 1e-9 * float(np.linalg.norm(limits.effort_max))
            assert relative_error(result.efforts, ref, floor) <= RTOL, (n_a, n_e, spread)
            assert_within_limits(result, snapshot, limits)


@pytest.mark.parametrize("backend", ("daqp", "osqp"))
def test_larger_realistic_problems_match_quadprog(backend):
    rng = np.random.default_rng(8)
    for n_a, n_e in [(8, 3), (8, 9), (16, 6)]:
        kinds = [ActuatorKind.CABLE if i % 3 else ActuatorKind.PRESSURE for i in range(n_a)]
        robot = make_synthetic_robot(n_a, n_e, kinds=kinds, rng=rng)
        limits = robot.limits()
        snapshot = robot.snapshot()
        reach = float(np.abs(snapshot.w_ea @ limits.effort_max).max())
        for _ in range(3):
            target = snapshot.effector_position + rng.normal(0.0, 0.5 * reach, n_e)
            ref = quadprog_qp(*inverse_problem(snapshot, limits, target, 1e-3))
            result = _solve(backend, 1e-3, snapshot, limits, target)
            floor = 1e-9 * float(np.linalg.norm(limits.effort_max))
            assert relative_error(result.efforts, ref, floor) <= RTOL, (n_a, n_e)
            assert_within_limits(result, snapshot, limits)


def test_ill_conditioned_redundant_problem_active_set_exact_osqp_only_in_effector_space():
    """ε = 1e-6 with 4 cables for 2 effector rows: cond(H) ~ 1e6–1e7.

    The active-set backends stay exact. OSQP (even at eps 1e-9 with polishing) reaches the
    same effector error but its efforts may be off along the nearly flat directions: this
    is why daqp is the default (see BENCHMARKS.md, "QP").
    """
    rng = np.random.default_rng(3)
    for _ in range(4):
        robot = make_synthetic_robot(4, 2, rng=rng)
        limits = robot.limits()
        snapshot = robot.snapshot()
        reach = float(np.abs(snapshot.w_ea @ limits.effort_max).max())
        h, *_ = inverse_problem(snapshot, limits, snapshot.effector_position, 1e-6)
        s = 1.0 / np.sqrt(np.diag(h))
        assert np.linalg.cond(s[:, None] * h * s[None, :]) > 1e5
        for _ in range(3):
            target = snapshot.effector_position + snapshot.w_ea @ (0.3 * limits.effort_max)
            target = target + rng.normal(0.0, 0.5 * reach, 2)
            ref = enumerate_qp(*inverse_problem(snapshot, limits, target, 1e-6))
            ref_error = float(np.linalg.norm(snapshot.w_ea @ ref + snapshot.delta_e_free(target)))
            floor = 1e-9 * float(np.linalg.norm(limits.effort_max))
            for backend in ("daqp", "quadprog"):
                result = _solve(backend, 1e-6, snapshot, limits, target)
                assert relative_error(result.efforts, ref, floor) <= RTOL, backend
            result = _solve("osqp", 1e-6, snapshot, limits, target)
            assert_within_limits(result, snapshot, limits)
            assert abs(result.effector_error - ref_error) <= 1e-9 + 1e-6 * ref_error
