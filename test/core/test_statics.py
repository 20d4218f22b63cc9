"""Quasi-static equilibrium: Newton with line search and load stepping."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.model.constraints import CableActuator, ConstraintSet
from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.model.linear_solvers import ConvergenceError, FactorReuseSolver, make_solver
from soft_inverse_ros.core.model.mapping import map_points
from soft_inverse_ros.core.model.mesh_generation import box_mesh
from soft_inverse_ros.core.model.statics import QuasiStaticSolver


def _beam(solver="scipy", divisions=(10, 2, 2), **kwargs):
    mesh = box_mesh((0.1, 0.02, 0.02), divisions)
    points, tets = np.array(mesh.points), np.array(mesh.tets)
    fem = CorotationalFEM(points, tets, 1e5, 0.45, np.flatnonzero(points[:, 0] < 1e-9), density=1000)
    cable_pts = np.array([[x, 0.01, 0.018] for x in (0.03, 0.06, 0.098)])
    cable = CableActuator("top", map_points(points, tets, cable_pts), cable_pts,
                          pull_point=np.array([0.0, 0.01, 0.018]))
    acts = ConstraintSet([cable], fem.free_dofs)
    gravity = fem.gravity_forces([0, 0, -9.81])
    return fem, QuasiStaticSolver(fem, acts, gravity, make_solver(solver), **kwargs)


def test_strong_cable_pull_converges_with_large_rotation():
    fem, statics = _beam()
    tip = np.flatnonzero(fem.rest_points[:, 0] > 0.1 - 1e-9)
    result = statics.solve(fem.rest_points, np.array([5.0]), start_efforts=np.zeros(1),
                           start_external_scale=0.0)
    x = result.positions
    assert np.all(np.isfinite(x))
    assert result.residual_norm <= result.tolerance
    # the beam curls up strongly: tip rises by more than a quarter of the length
    rise = x[tip, 2].mean() - fem.rest_points[tip, 2].mean()
    assert rise > 0.025
    assert x[tip, 0].mean() < 0.1 - 0.015  # and swings back: a large rotation
    assert result.evaluation.strokes[0] > 0.015  # the cable shortened
    # the equilibrium satisfies f_int + f_ext + J^T λ = 0 when re-evaluated
    ev = statics.evaluate(x, np.array([5.0]))
    assert ev.residual_norm <= result.tolerance * 1.0001


def test_factor_reuse_solver_reaches_the_same_equilibrium():
    fem, direct = _beam()
    _, reuse = _beam()
    reuse.linear_solver = FactorReuseSolver(make_solver("scipy"), rtol=1e-10)
    a = direct.solve(fem.rest_points, np.array([0.5]), start_efforts=np.zeros(1))
    b = reuse.solve(fem.rest_points, np.array([0.5]), start_efforts=np.zeros(1))
    assert np.abs(a.positions - b.positions).max() < 1e-9


def test_newton_step_decreases_residual_and_failure_is_an_error():
    fem, statics = _beam()
    ev = statics.evaluate(fem.rest_points, np.array([0.2]))
    step = statics.newton_step(ev, np.array([0.2]))
    assert step.evaluation.potential < ev.potential  # the line search decreases Π
    for _ in range(15):  # the co-rotational tangent converges (linearly) to equilibrium
        step = statics.newton_step(step.evaluation, np.array([0.2]))
    assert step.residual_after < 1e-6 * ev.residual_norm
    _, hopeless = _beam(max_iterations=1)
    with pytest.raises(ConvergenceError, match="no equilibrium"):
        hopeless.solve(fem.rest_points, np.array([5.0]), start_efforts=np.zeros(1),
                       min_load_step=0.2)
    with pytest.raises(ValueError, match="efforts"):
        statics.evaluate(fem.rest_points, np.array([1.0, 2.0]))


def test_full_solves_reuse_an_earlier_iterations_factor_and_reach_the_same_equilibrium():
    """The full solve's Newton directions come from PCG on each iteration's exact tangent,
    preconditioned by an earlier iteration's factor, when that costs less than
    refactorizing: fewer factorizations than Newton iterations, and the equilibrium of a
    factorization per iteration (a plain direct solver in its place) to the tolerance."""
    pytest.importorskip("numba")
    results = []
    for reuse in (True, False):
        fem, statics = _beam("auto", divisions=(30, 6, 6))
        if not reuse:
            statics._full_solver = _DirectEveryTime(statics._full_solver.direct)
        results.append(statics.solve(fem.rest_points, np.array([2.0]), start_efforts=np.zeros(1),
                                     start_external_scale=0.0))
        if reuse:
            stats = statics._full_solver.stats
            assert stats.total_iterations > 0  # PCG solved some directions
            assert stats.factorizations < results[0].iterations
    a, b = results
    assert a.residual_norm <= a.tolerance and b.residual_norm <= b.tolerance
    scale = np.abs(b.positions - fem.rest_points).max()
    np.testing.assert_allclose(a.positions, b.positions, rtol=0, atol=1e-6 * scale)


class _DirectEveryTime:
    """A full solver that factorizes every tangent (what the full solves did before)."""

    def __init__(self, direct) -> None:
        self.direct = direct

    def solve(self, matrix, rhs):
        self.direct.factorize(matrix)
        return self.direct.solve(rhs)

    def factorize(self, matrix) -> None:
        self.direct.factorize(matrix)
