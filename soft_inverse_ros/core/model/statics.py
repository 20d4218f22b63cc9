"""Quasi-static equilibrium of the co-rotational FEM under actuator efforts.

Equilibrium (free DOFs): ``r(x) = f_int(x) + f_ext + J_a(x)ᵀ λ = 0`` where f_ext are the
gravity (and other fixed) forces and λ the actuator efforts. It is the stationarity
condition of the potential ``Π(x) = E(x) − f_ext·(x − X) − λ·δ_a(x)`` (E: corotated strain
energy, δ_a: actuator strokes), which the line search decreases.

Newton iterations solve ``K(x) Δx = r(x)``. Full equilibrium solves use the exact tangent
of the corotated energy (:meth:`CorotationalFEM.consistent_stiffness`, quadratic
convergence at large rotations) and fall back to the co-rotational approximation
``K = Σ R K0 Rᵀ`` (always SPD, so Δx is a descent direction of Π) when the exact one is
not positive definite; single low-rate steps (:meth:`QuasiStaticSolver.newton_step`) use the
approximation, like SOFA. A backtracking (Armijo) line search keeps large steps safe, and
when an equilibrium cannot be reached directly the load (λ and the external forces) is
applied in adaptive increments. The Hessian of the actuator term −λ·δ_a (e.g. the
cable's geometric stiffness) is added to the exact tangent (cables and point-to-point
forces; not cavities). Failures raise
:class:`ConvergenceError`; NaN is never returned.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from soft_inverse_ros.core.model.constraints import ConstraintSet
from soft_inverse_ros.core.model.fem import CorotationalFEM, ElementState
from soft_inverse_ros.core.model.linear_solvers import (
    ConvergenceError,
    DirectSolver,
    FactorReuseSolver,
    solve_linear,
)

__all__ = ["ConvergenceError", "Evaluation", "NewtonStep", "StaticsResult", "QuasiStaticSolver"]

#: relative residual of a full solve's Newton direction (an inexact Newton step; 10k-node
#: box from rest: 10 Newton iterations with 1e-4, 1e-6 or 1e-8, 19.1 / 21.5 / 23.1 s)
FULL_NEWTON_RTOL = 1e-6


@dataclass(frozen=True)
class Evaluation:
    """Everything computed at one configuration x under one load."""

    positions: np.ndarray  #: (N, 3) [m]
    state: ElementState
    strokes: np.ndarray  #: (n_a,) δ_a(x)
    jacobian_t: np.ndarray  #: (n_free, n_a) J_aᵀ over free DOFs
    residual: np.ndarray  #: (n_free,) r(x) [N]
    potential: float  #: Π(x) [J]
    residual_norm: float  #: |r|₂ [N]


@dataclass(frozen=True)
class NewtonStep:
    """Outcome of one Newton iteration."""

    positions: np.ndarray  #: (N, 3) new positions [m]
    evaluation: Evaluation  #: evaluation at the new positions
    step_length: float  #: line-search factor α
    residual_before: float  #: |r| before the step [N]
    residual_after: float  #: |r| after the step [N]
    solve_iterations: int  #: PCG iterations (0: direct solve)


@dataclass(frozen=True)
class StaticsResult:
    """Outcome of a full equilibrium solve."""

    positions: np.ndarray  #: (N, 3) equilibrium [m]
    evaluation: Evaluation
    iterations: int  #: total Newton iterations
    load_steps: int  #: load increments used (1: the full load at once)
    residual_norm: float  #: final |r|₂ [N]
    tolerance: float  #: the tolerance it met [N]
    wall_time: float  #: [s]


class QuasiStaticSolver:
    """Newton solver for the quasi-static equilibrium of one FEM body.

    Args:
        fem: the finite-element body.
        actuators: actuator constraints (one row each); may be empty.
        external_forces: (N, 3) constant forces [N] (gravity), or None.
        linear_solver: a direct solver (refactorized every iteration) or a
            :class:`FactorReuseSolver`.
        rtol: converged when ``|r| ≤ rtol · (|f_ext| + |J_aᵀ λ| + |f_int|) + atol``.
        atol: absolute residual floor [N]; default the round-off level of the internal
            forces, 1e-12 · E · (mean edge length)².
        max_iterations: Newton iterations per load increment.
        consistent_tangent: full solves use the exact corotated tangent when it is SPD.
    """

    def __init__(
        self,
        fem: CorotationalFEM,
        actuators: ConstraintSet,
        external_forces: np.ndarray | None,
        linear_solver: DirectSolver | FactorReuseSolver,
        *,
        rtol: float = 1e-9,
        atol: float | None = None,
        max_iterations: int = 60,
        consistent_tangent: bool = True,
    ) -> None:
        self.fem = fem
        self.actuators = actuators
        f_ext = np.zeros((fem.n_nodes, 3)) if external_forces is None else external_forces
        self.external_forces = np.asarray(f_ext, float).reshape(fem.n_nodes, 3)
        self._f_ext_free = fem.reduce(self.external_forces)
        self.linear_solver = linear_solver
        self.rtol = float(rtol)
        if atol is None:
            x = fem.rest_points[fem.tets]
            edge = float(np.linalg.norm(x[:, 1:] - x[:, :1], axis=-1).mean())
            atol = 1e-12 * fem.young_modulus * edge**2
        self.atol = float(atol)
        self.max_iterations = int(max_iterations)
        self.consistent_tangent = bool(consistent_tangent)
        direct = linear_solver.direct if isinstance(linear_solver, FactorReuseSolver) else linear_solver
        #: the full solves' own solver (keeps the low-rate factor untouched): PCG on each
        #: Newton iteration's tangent, preconditioned by an earlier iteration's factor, or a
        #: refactorization, whichever its measured costs say is cheaper
        self._full_solver = FactorReuseSolver(type(direct)(), rtol=FULL_NEWTON_RTOL)

    # ------------------------------------------------------------------ evaluation
    def evaluate(
        self,
        positions: np.ndarray,
        efforts: np.ndarray,
        external_scale: float = 1.0,
        *,
        reuse: Evaluation | None = None,
    ) -> Evaluation:
        """Residual, potential and actuator rows at x (N, 3) under efforts λ (n_a,).

        ``reuse``: an evaluation at the same positions (under other efforts) whose
        geometry (element state, strokes, J_a) is reused: only the load terms are redone.
        """
        fem = self.fem
        lam = np.asarray(efforts, float).reshape(-1)
        if reuse is not None:
            x, state, strokes, jt = reuse.positions, reuse.state, reuse.strokes, reuse.jacobian_t
        else:
            x = np.asarray(positions, float).reshape(fem.n_nodes, 3)
            state = fem.element_state(x)
            strokes, jt = self.actuators.values_and_jacobian_t(x)
        if len(lam) != len(strokes):
            raise ValueError(f"expected {len(strokes)} efforts, got {len(lam)}")
        f_ext = external_scale * self._f_ext_free
        r = fem.reduce(state.forces) + f_ext + jt @ lam
        u = fem.reduce(x - fem.rest_points)
        potential = state.energy - float(f_ext @ u) - float(lam @ strokes)
        return Evaluation(x, state, strokes, jt, r, potential, float(np.linalg.norm(r)))

    def tolerance(self, ev: Evaluation, efforts: np.ndarray, external_scale: float = 1.0) -> float:
        """Residual tolerance [N] for an evaluation under a load."""
        scale = (
            external_scale * np.linalg.norm(self._f_ext_free)
            + np.linalg.norm(ev.jacobian_t @ np.asarray(efforts, float))
            + np.linalg.norm(self.fem.reduce(ev.state.forces))
        )
        return self.rtol * scale + self.atol

    def _solve_linear(self, k: sp.csr_matrix, rhs: np.ndarray, x0: np.ndarray | None) -> tuple[np.ndarray, int]:
        return solve_linear(self.linear_solver, k, rhs, x0)

    # ------------------------------------------------------------------ Newton
    def newton_step(
        self,
        ev: Evaluation,
        efforts: np.ndarray,
        *,
        external_scale: float = 1.0,
        stiffness: sp.csr_matrix | None = None,
        direction: np.ndarray | None = None,
        line_search: bool = True,
        max_backtracks: int = 12,
    ) -> NewtonStep:
        """One Newton iteration from the evaluation ``ev`` under efforts λ.

        Args:
            stiffness: K at ``ev`` if already assembled (else assembled here).
            direction: Δx = K⁻¹ r if already solved (else solved here).
            line_search: backtrack until Π decreases (Armijo); otherwise take the full step.

        Raises:
            ConvergenceError: no step length decreases Π, or non-finite values.
        """
        fem = self.fem
        iterations = 0
        if direction is None:
            k = fem.stiffness(ev.state) if stiffness is None else stiffness
            direction, iterations = self._solve_linear(k, ev.residual, None)
        if not np.all(np.isfinite(direction)):
            raise ConvergenceError("Newton direction is not finite")
        slope = -float(ev.residual @ direction)  # dΠ/dα at α = 0 (< 0: descent)
        alpha = 1.0
        full = fem.expand(direction)
        for _ in range(max_backtracks + 1):
            trial = ev.positions + alpha * full
            new = self.evaluate(trial, efforts, external_scale)
            finite = np.isfinite(new.potential) and np.isfinite(new.residual_norm)
            if finite and (not line_search or ev.residual_norm <= self.tolerance(ev, efforts, external_scale)):
                break  # no line search, or already at equilibrium (Π and |r| at round-off)
            # Armijo on Π; near convergence Π stalls at round-off, then a smaller residual
            # is the criterion.
            if finite and (
                new.potential <= ev.potential + 1e-4 * alpha * slope
                or new.residual_norm < ev.residual_norm
            ):
                break
            alpha *= 0.5
        else:
            raise ConvergenceError(
                f"line search failed: no step length decreases the potential "
                f"(|r| = {ev.residual_norm:.3e} N)"
            )
        return NewtonStep(trial, new, alpha, ev.residual_norm, new.residual_norm, iterations)

    def solve(
        self,
        positions: np.ndarray,
        efforts: np.ndarray,
        *,
        start_efforts: np.ndarray | None = None,
        start_external_scale: float = 1.0,
        min_load_step: float = 1e-3,
    ) -> StaticsResult:
        """Equilibrium under efforts λ, starting from x (N, 3) [m].

        The load goes from (``start_efforts``, ``start_external_scale``) — by default the
        target itself — to (λ, 1). When Newton fails on an increment it is halved (and
        grown again after successes) down to ``min_load_step``.

        Raises:
            ConvergenceError: the equilibrium could not be reached.
        """
        t0 = time.perf_counter()
        lam = np.asarray(efforts, float).reshape(-1)
        lam0 = lam.copy() if start_efforts is None else np.asarray(start_efforts, float).reshape(-1)
        s_ext0 = float(start_external_scale)
        x = np.asarray(positions, float).reshape(self.fem.n_nodes, 3).copy()
        done, step = 0.0, 1.0
        total_iterations = 0
        load_steps = 0
        last_error: Exception | None = None
        ev = None
        while True:
            target = min(1.0, done + step)
            lam_t = lam0 + target * (lam - lam0)
            ext_t = s_ext0 + target * (1.0 - s_ext0)
            try:
                x_new, ev, its = self._newton(x, lam_t, ext_t)
            except ConvergenceError as exc:
                last_error = exc
                step *= 0.5
                if step < min_load_step:
                    raise ConvergenceError(
                        f"no equilibrium: load increments below {min_load_step} of the load "
                        f"still fail at {done:.3f} of it ({last_error})"
                    ) from exc
                continue
            total_iterations += its
            load_steps += 1
            x = x_new
            done = target
            if done >= 1.0:
                break
            step = min(2.0 * step, 1.0 - done)
        tol = self.tolerance(ev, lam)
        return StaticsResult(
            x, ev, total_iterations, load_steps, ev.residual_norm, tol, time.perf_counter() - t0
        )

    def _full_direction(self, ev: Evaluation, ev_efforts: np.ndarray) -> np.ndarray:
        """Newton direction of a full solve: the exact tangent's if it is a descent
        direction, else R K0 Rᵀ's (solved directly).

        The exact tangent's system is solved to a relative residual of
        :data:`FULL_NEWTON_RTOL` (an inexact Newton step: the line search and the
        equilibrium test use the true residual), by PCG preconditioned with the factor of
        an earlier iteration while that costs less than refactorizing: on large meshes a
        factorization costs seconds and the tangent changes little from one iteration to
        the next (a 10k-node box from rest, 10 Newton iterations: 31 s with a
        factorization per iteration, 21.5 s so; BENCHMARKS.md, twenty-seventh session)."""
        solver = self._full_solver
        if self.consistent_tangent:
            try:
                k = self.fem.consistent_stiffness(ev.positions)
                k_load = self.actuators.load_stiffness(ev.positions, ev_efforts)
                if k_load is not None:
                    k = (k + k_load).tocsr()
                dx = np.asarray(solver.solve(k, ev.residual))
                if np.all(np.isfinite(dx)) and float(ev.residual @ dx) > 0.0:
                    return dx
            except Exception:  # not positive definite (CHOLMOD), singular, or PCG broke down: fall back
                pass
        k = self.fem.stiffness(ev.state)
        solver.factorize(k)
        return np.asarray(solver.direct.solve(ev.residual))

    def _newton(
        self, positions: np.ndarray, efforts: np.ndarray, external_scale: float
    ) -> tuple[np.ndarray, Evaluation, int]:
        ev = self.evaluate(positions, efforts, external_scale)
        if not np.isfinite(ev.residual_norm):
            raise ConvergenceError("non-finite residual at the start of Newton")
        for it in range(self.max_iterations + 1):
            tol = self.tolerance(ev, efforts, external_scale)
            if ev.residual_norm <= tol:
                return ev.positions, ev, it
            if it == self.max_iterations:
                break
            step = self.newton_step(
                ev, efforts, external_scale=external_scale, direction=self._full_direction(ev, efforts)
            )
            ev = step.evaluation
        raise ConvergenceError(
            f"Newton did not converge in {self.max_iterations} iterations "
            f"(|r| = {ev.residual_norm:.3e} N, tolerance {tol:.3e} N)"
        )
