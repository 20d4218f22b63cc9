"""Contact laws in compliance space: Signorini (frictionless) and Coulomb friction.

With m contacts the gaps are affine in the contact forces (Goury et al. 2021, eq. 12)::

    δ = W λ + δ_free,      W = H A⁻¹ Hᵀ  (symmetric positive semi-definite) [m/N]

Signorini's law 0 ≤ δ ⊥ λ ≥ 0 (eq. 9) makes this a linear complementarity problem (LCP).

- :func:`solve_signorini_gs`: projected Gauss–Seidel (eq. 13): contact after contact,
  ``λ_i ← max(0, λ_i − δ_i / W_ii)`` with the others fixed, until the complementarity
  residual ‖min(δ, λ)‖∞ (gap in metres, force scaled by W_ii to metres) is below the
  tolerance.
- :func:`solve_signorini_exact`: the LCP as the convex QP ``min ½ λᵀWλ + δ_freeᵀλ,
  λ ≥ 0`` (its KKT conditions are exactly the LCP), solved by daqp's active-set method
  (a tiny ridge makes a singular W acceptable), then polished: the active set found
  gives the exact solution of ``W_AA λ_A = −δ_free_A`` by a direct solve.
- :func:`solve_coulomb_gs`: Signorini plus Coulomb friction, per contact a 3×3 block
  (normal, tangent 1, tangent 2) solved on the friction cone by block Gauss–Seidel;
  anisotropic friction with two coefficients per contact (elliptic cone
  ``(λ_t1/μ1)² + (λ_t2/μ2)² ≤ λ_n²``), as the snake's wheels need.

Units: gaps [m], forces [N], W [m/N].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ContactSolution:
    """Forces and gaps of one contact solve.

    Attributes:
        forces: (m,) normal forces λ ≥ 0 [N] (frictionless) or (m, 3) [normal, t1, t2] [N].
        gaps: (m,) gaps δ = Wλ + δ_free [m] (normal) or (m, 3) [normal gap, tangential
            displacements] [m].
        iterations: Gauss–Seidel sweeps (0 for the exact method).
        residual: complementarity residual ‖min(δ_n, λ_n W_nn)‖∞ [m] (see module docstring).
        converged: whether the residual met the tolerance.
    """

    forces: np.ndarray
    gaps: np.ndarray
    iterations: int
    residual: float
    converged: bool


def _check(w: np.ndarray, delta_free: np.ndarray, block: int = 1) -> tuple[np.ndarray, np.ndarray]:
    w = np.asarray(w, dtype=float)
    d = np.asarray(delta_free, dtype=float).reshape(-1)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] != d.shape[0] or d.shape[0] % block:
        raise ValueError(f"contact: W {w.shape} and δ_free {d.shape} do not match")
    if not (np.isfinite(w).all() and np.isfinite(d).all()):
        raise ValueError("contact: W or δ_free is not finite")
    if d.shape[0] and not (np.diag(w) > 0).all():
        raise ValueError("contact: W has a non-positive diagonal (a contact no force can open)")
    return w, d


def complementarity_residual(w: np.ndarray, delta_free: np.ndarray, forces: np.ndarray) -> float:
    """‖min(δ, λ W_ii)‖∞ [m] for the frictionless LCP (0 when λ solves it exactly)."""
    w, d = _check(w, delta_free)
    if not d.shape[0]:
        return 0.0
    gaps = w @ forces + d
    return float(np.abs(np.minimum(gaps, forces * np.diag(w))).max())


def solve_signorini_gs(
    w: np.ndarray,
    delta_free: np.ndarray,
    *,
    tolerance: float = 1e-9,
    max_sweeps: int = 1000,
    initial: np.ndarray | None = None,
) -> ContactSolution:
    """Projected Gauss–Seidel on 0 ≤ Wλ + δ_free ⊥ λ ≥ 0 (Goury 2021 eq. 13).

    Args:
        w: (m, m) contact compliance [m/N].
        delta_free: (m,) gaps of the free motion [m] (< 0: interpenetration).
        tolerance: stop when the complementarity residual ≤ this [m].
        max_sweeps: at most this many sweeps over the contacts.
        initial: warm start (m,) [N] (e.g. the previous step's forces).
    """
    w, d = _check(w, delta_free)
    m = d.shape[0]
    lam = np.zeros(m) if initial is None else np.maximum(np.asarray(initial, dtype=float).reshape(m), 0.0)
    if m == 0:
        return ContactSolution(lam, d.copy(), 0, 0.0, True)
    diag = np.diag(w).copy()
    gaps = w @ lam + d
    residual = float(np.abs(np.minimum(gaps, lam * diag)).max())
    sweeps = 0
    while residual > tolerance and sweeps < max_sweeps:
        for i in range(m):
            new = max(0.0, lam[i] - gaps[i] / diag[i])
            change = new - lam[i]
            if change != 0.0:
                lam[i] = new
                gaps += change * w[:, i]
        sweeps += 1
        gaps = w @ lam + d  # no drift from the incremental updates
        residual = float(np.abs(np.minimum(gaps, lam * diag)).max())
    return ContactSolution(lam, gaps, sweeps, residual, residual <= tolerance)


def solve_signorini_exact(w: np.ndarray, delta_free: np.ndarray) -> ContactSolution:
    """The LCP as the QP min ½λᵀWλ + δ_freeᵀλ s.t. λ ≥ 0, by daqp, then polished on the
    active set by a direct solve (reference for :func:`solve_signorini_gs`). When daqp
    stops without a solution (a nearly singular W), projected Gauss–Seidel's answer is
    returned if it converges (its ``iterations`` > 0 tell).

    Raises:
        ValueError: bad inputs, or both solvers failed (status in the message).
    """
    import daqp

    w, d = _check(w, delta_free)
    m = d.shape[0]
    if m == 0:
        return ContactSolution(np.zeros(0), d.copy(), 0, 0.0, True)
    ws = 0.5 * (w + w.T)
    scale = float(np.diag(ws).max())
    h = ws / scale + 1e-12 * np.eye(m)  # unit-scaled; the ridge only guards a singular W
    upper = np.full(m, 1e30)
    lower = np.zeros(m)
    x, _, flag, _ = daqp.solve(np.ascontiguousarray(h), d / scale, np.zeros((0, m)), upper, lower,
                               np.zeros(m, dtype=np.int32))
    if flag < 1:
        # daqp can stop on a nearly singular W (close contacts, the finger's closed notches):
        # projected Gauss–Seidel converges on any positive semi-definite W with a positive
        # diagonal; its answer stands when it meets the complementarity tolerance
        gs = solve_signorini_gs(w, d, tolerance=1e-10 * max(1.0, float(np.abs(d).max())), max_sweeps=5000)
        if not gs.converged:
            raise ValueError(f"contact: daqp failed on the Signorini QP (exit flag {flag}) and "
                             f"Gauss-Seidel did not converge (residual {gs.residual:.3g} m)")
        return gs
    lam = np.maximum(np.asarray(x, dtype=float), 0.0)
    active = lam > 0.0
    if active.any():  # polish: δ_A = 0 exactly on the contacts that carry force
        sub = w[np.ix_(active, active)]
        try:
            polished = np.linalg.solve(sub, -d[active])
        except np.linalg.LinAlgError:
            polished = None
        if polished is not None and (polished >= 0.0).all():
            trial = np.zeros(m)
            trial[active] = polished
            if complementarity_residual(w, d, trial) <= complementarity_residual(w, d, lam):
                lam = trial
    gaps = w @ lam + d
    residual = float(np.abs(np.minimum(gaps, lam * np.diag(w))).max())
    return ContactSolution(lam, gaps, 0, residual, True)


def _project_cone(lam: np.ndarray, mu1: float, mu2: float) -> np.ndarray:
    """Project [λ_n, λ_t1, λ_t2] onto the (elliptic) friction cone, normal first:
    λ_n ≥ 0 and the tangential part scaled back onto the ellipse of radii μ1 λ_n, μ2 λ_n."""
    n = max(lam[0], 0.0)
    t1, t2 = lam[1], lam[2]
    if n == 0.0:
        return np.zeros(3)
    q = (t1 / (mu1 * n)) ** 2 + (t2 / (mu2 * n)) ** 2 if mu1 > 0 and mu2 > 0 else np.inf
    if q <= 1.0:
        return np.array([n, t1, t2])
    if not (mu1 > 0 and mu2 > 0):
        return np.array([n, 0.0, 0.0])
    s = 1.0 / np.sqrt(q)
    return np.array([n, t1 * s, t2 * s])


def _local_coulomb(wi: np.ndarray, wi_inv: np.ndarray, b: np.ndarray, mu1: float, mu2: float) -> np.ndarray:
    """One contact's force [n, t1, t2] with the others fixed: gaps wi λ + b.

    Separating (λ = 0) when the free normal gap is open; sticking (zero gap and slip)
    when that force lies in the cone; else sliding: zero normal gap, the tangential force
    on the cone opposing the slip, found by a fixed-point iteration on the slip direction.
    """
    if b[0] >= 0.0:
        return np.zeros(3)
    stick = -wi_inv @ b
    if stick[0] <= 0.0:
        return np.zeros(3)
    cone = _project_cone(stick, mu1, mu2)
    if cone[1] == stick[1] and cone[2] == stick[2]:
        return stick
    radii = np.array([mu1, mu2])
    lam = cone
    for _ in range(50):
        slip = wi[1:, :] @ lam + b[1:]
        norm = float(np.hypot(*(slip * radii)))
        if norm == 0.0:
            break
        direction = -(radii * radii) * slip / norm  # maximum dissipation on the ellipse
        # zero normal gap with this tangential force per unit normal force
        denom = wi[0, 0] + wi[0, 1:] @ direction
        n = -b[0] / denom if denom > 0 else 0.0
        new = np.array([max(n, 0.0), *(max(n, 0.0) * direction)])
        if np.abs(new - lam).max() <= 1e-14 * max(1.0, np.abs(new).max()):
            lam = new
            break
        lam = 0.5 * (lam + new)  # damped: the slip direction depends on λ
    return lam


def solve_coulomb_gs(
    w: np.ndarray,
    delta_free: np.ndarray,
    mu: np.ndarray,
    *,
    tolerance: float = 1e-9,
    max_sweeps: int = 2000,
    initial: np.ndarray | None = None,
) -> ContactSolution:
    """Signorini + Coulomb friction by block Gauss–Seidel on the friction cone.

    Args:
        w: (3m, 3m) compliance of the rows [n_1, t1_1, t2_1, n_2, ...] [m/N].
        delta_free: (3m,) free normal gaps and free tangential displacements [m].
        mu: (m,) isotropic or (m, 2) anisotropic friction coefficients (along t1, t2).
        tolerance: stop when no force changes by more than ``tolerance`` [m] × W_ii⁻¹
            in a sweep and the normal complementarity residual ≤ ``tolerance`` [m].
        max_sweeps: sweep cap.

    Per contact: the unconstrained 3×3 block solve gives the sticking force; if it lies
    outside the cone it is projected back onto it (sliding) — the non-smooth
    Gauss–Seidel of SOFA's GenericConstraintSolver. On an anisotropic (elliptic) cone the
    projection is the radial return (the tangential force scaled onto the ellipse), not
    the maximum-dissipation projection: exact for isotropic friction and for sliding
    along t1 or t2, an approximation for oblique sliding on an anisotropic contact.
    """
    w, d = _check(w, delta_free, block=3)
    m = d.shape[0] // 3
    mu = np.asarray(mu, dtype=float)
    mu2 = np.column_stack((mu, mu)) if mu.ndim == 1 else mu
    if mu2.shape != (m, 2) or not (np.isfinite(mu2).all() and (mu2 >= 0).all()):
        raise ValueError(f"contact: friction coefficients must be (m,) or (m, 2) ≥ 0, got {mu.shape}")
    lam = np.zeros(3 * m) if initial is None else np.asarray(initial, dtype=float).reshape(3 * m).copy()
    if m == 0:
        return ContactSolution(lam.reshape(0, 3), d.reshape(0, 3), 0, 0.0, True)
    blocks = [np.linalg.inv(w[3 * i:3 * i + 3, 3 * i:3 * i + 3]) for i in range(m)]
    diag = np.diag(w)
    gaps = w @ lam + d
    sweeps = 0
    converged = False
    while sweeps < max_sweeps:
        largest = 0.0
        for i in range(m):
            sl = slice(3 * i, 3 * i + 3)
            old = lam[sl].copy()
            b = gaps[sl] - w[sl, sl] @ old  # this contact's gaps without its own forces
            new = _local_coulomb(w[sl, sl], blocks[i], b, mu2[i, 0], mu2[i, 1])
            change = new - old
            if change.any():
                lam[sl] = new
                gaps += w[:, sl] @ change
                largest = max(largest, float(np.abs(change * diag[sl]).max()))
        sweeps += 1
        gaps = w @ lam + d
        normal_res = float(np.abs(np.minimum(gaps[0::3], lam[0::3] * diag[0::3])).max())
        if largest <= tolerance and normal_res <= tolerance:
            converged = True
            break
    normal_res = float(np.abs(np.minimum(gaps[0::3], lam[0::3] * diag[0::3])).max())
    return ContactSolution(lam.reshape(m, 3), gaps.reshape(m, 3), sweeps, normal_res, converged)
