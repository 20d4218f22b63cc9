"""Independent references for the inverse QP tests (no code shared with the solver).

- :func:`enumerate_qp`: exact solution of a small strictly convex QP by enumerating
  active sets and checking the KKT conditions (feasibility and multiplier signs).
- :func:`quadprog_qp`: the same QP through a direct quadprog call (a second library).
- :func:`inverse_problem`: the QP data of the inverse problem written from the issue's
  formulas (SOFA's energy weight ε‖W_eaᵀW_ea‖∞/‖W_aa‖∞).
"""

from __future__ import annotations

import itertools

import numpy as np


def inverse_problem(snapshot, limits, target, epsilon):
    """(H, g, C, lo, hi) of  min ½λᵀHλ + gᵀλ  s.t.  lo ≤ C λ ≤ hi  (no per-tick limits)."""
    w_ea, w_aa = snapshot.w_ea, snapshot.w_aa
    d_e = snapshot.effector_position - w_ea @ snapshot.lambda0 - np.asarray(target)
    d_a = snapshot.actuator_stroke - w_aa @ snapshot.lambda0
    q = w_ea.T @ w_ea
    w_sym = 0.5 * (w_aa + w_aa.T)
    weight = np.abs(q).sum(axis=1).max() / np.abs(w_sym).sum(axis=1).max()
    h = q + epsilon * weight * w_sym
    g = w_ea.T @ d_e
    n = h.shape[0]
    c = np.vstack((np.eye(n), w_aa))
    lo = np.concatenate((limits.effort_min, limits.stroke_min - d_a))
    hi = np.concatenate((limits.effort_max, limits.stroke_max - d_a))
    return h, g, c, lo, hi


def _equilibrate(h, g, c, lo, hi):
    s = 1.0 / np.sqrt(np.diag(h))
    hs = s[:, None] * h * s[None, :]
    cs = c * s[None, :]
    rn = np.abs(cs).max(axis=1)
    rn[rn == 0] = 1.0
    return s, hs, s * g, cs / rn[:, None], lo / rn, hi / rn


def enumerate_qp(h, g, c, lo, hi, tol=1e-9):
    """Exact minimizer of ½xᵀhx + gᵀx s.t. lo ≤ c x ≤ hi (h SPD, a few constraints).

    Enumerates every assignment of constraints to {inactive, at lower, at upper}, solves
    the equality-constrained KKT system and keeps the KKT point (primal feasible, lower
    multipliers ≤ 0, upper ≥ 0 in the convention h x + Aᵀν = −g). Raises if none.
    """
    s, hs, gs, cs, los, his = _equilibrate(h, g, c, lo, hi)
    n, m = hs.shape[0], cs.shape[0]
    choices = []
    for i in range(m):
        opts = [0]
        if np.isfinite(los[i]):
            opts.append(-1)
        if np.isfinite(his[i]) and his[i] != los[i]:
            opts.append(1)
        choices.append(opts)
    gscale = max(1.0, float(np.abs(gs).max()))
    best, best_obj = None, np.inf
    for states in itertools.product(*choices):
        act = [i for i, st in enumerate(states) if st]
        if len(act) > n:
            continue
        a = cs[act]
        b = np.array([los[i] if states[i] < 0 else his[i] for i in act])
        k = len(act)
        kkt = np.zeros((n + k, n + k))
        kkt[:n, :n] = hs
        kkt[:n, n:] = a.T
        kkt[n:, :n] = a
        rhs = np.concatenate((-gs, b))
        try:
            if k and np.linalg.matrix_rank(a) < k:
                continue
            sol = np.linalg.solve(kkt, rhs)
        except np.linalg.LinAlgError:
            continue
        x, nu = sol[:n], sol[n:]
        cx = cs @ x
        if np.any(cx < los - tol * np.maximum(1, np.abs(los))) or np.any(
            cx > his + tol * np.maximum(1, np.abs(his))
        ):
            continue
        signs = np.array([states[i] for i in act])
        if np.any(nu[signs < 0] > tol * gscale) or np.any(nu[signs > 0] < -tol * gscale):
            continue
        obj = 0.5 * x @ hs @ x + gs @ x
        if obj < best_obj:
            best, best_obj = x, obj
    if best is None:
        raise ValueError("no KKT point: infeasible problem")
    return s * best


def quadprog_qp(h, g, c, lo, hi):
    """The same QP solved by quadprog directly (after a Jacobi equilibration)."""
    import quadprog

    s, hs, gs, cs, los, his = _equilibrate(h, g, c, lo, hi)
    fl, fh = np.isfinite(los), np.isfinite(his)
    cmat = np.vstack((cs[fl], -cs[fh])).T
    b = np.concatenate((los[fl], -his[fh]))
    x = quadprog.solve_qp(0.5 * (hs + hs.T), -gs, cmat, b, 0)[0]
    return s * x


def random_problem(rng, n_a, n_e):
    """A random well-posed problem with O(1) data: (snapshot, limits), feasible by construction.

    Efforts bounded both ways or one way, strokes bounded around the strokes of a random
    admissible effort vector (so the stroke and effort bounds do intersect).
    """
    from soft_inverse_ros.core.control.actuator_limits import ActuatorLimits
    from soft_inverse_ros.core.model.snapshot import ActuatorKind, ComplianceSnapshot

    w_ea = rng.standard_normal((n_e, n_a))
    b = rng.standard_normal((n_a, n_a))
    w_aa = b @ b.T / n_a + 0.3 * np.eye(n_a)
    a_min = np.where(rng.random(n_a) < 0.5, 0.0, -rng.uniform(0.5, 2.0, n_a))
    a_max = rng.uniform(0.5, 2.0, n_a)
    lam0 = rng.uniform(a_min, a_max)
    d_a = rng.standard_normal(n_a)
    feasible = rng.uniform(a_min, a_max)
    s_feas = w_aa @ feasible + d_a
    l_min = np.where(rng.random(n_a) < 0.5, -np.inf, s_feas - rng.uniform(0.05, 1.0, n_a))
    l_max = np.where(rng.random(n_a) < 0.3, np.inf, s_feas + rng.uniform(0.05, 1.0, n_a))
    snap = ComplianceSnapshot(
        seq=0,
        stamp=0.0,
        actuator_names=tuple(f"a{i}" for i in range(n_a)),
        actuator_kinds=(ActuatorKind.FORCE,) * n_a,
        effector_names=tuple(f"e{i}" for i in range(n_e)),
        w_ea=w_ea,
        w_aa=w_aa,
        w_ee=np.eye(n_e),
        effector_position=rng.standard_normal(n_e) + w_ea @ lam0,
        actuator_stroke=d_a + w_aa @ lam0,
        lambda0=lam0,
    )
    return snap, ActuatorLimits(a_min, a_max, l_min, l_max)


def assert_within_limits(result, snapshot, limits, rtol=1e-8):
    """Efforts inside the effort bounds (exactly); predicted strokes W_aa λ + δ_a_free inside
    the stroke bounds to ``rtol`` of the row's scale; reported strokes consistent."""
    lam = result.efforts
    assert np.all(lam >= limits.effort_min) and np.all(lam <= limits.effort_max), lam
    strokes = snapshot.w_aa @ lam + snapshot.delta_a_free
    scale = np.abs(snapshot.w_aa) @ np.abs(lam) + np.abs(snapshot.delta_a_free)
    finite_lo = np.isfinite(limits.stroke_min)
    finite_hi = np.isfinite(limits.stroke_max)
    tol = rtol * np.maximum(scale, np.where(finite_lo, np.abs(limits.stroke_min), 0.0))
    assert np.all(strokes[finite_lo] >= limits.stroke_min[finite_lo] - tol[finite_lo])
    tol = rtol * np.maximum(scale, np.where(finite_hi, np.abs(limits.stroke_max), 0.0))
    assert np.all(strokes[finite_hi] <= limits.stroke_max[finite_hi] + tol[finite_hi])
    assert np.all(result.strokes >= limits.stroke_min) and np.all(result.strokes <= limits.stroke_max)
    np.testing.assert_allclose(result.strokes, limits.clip_stroke(strokes), rtol=1e-12, atol=1e-12 * scale.max())


def relative_error(lam, ref, floor):
    return float(np.linalg.norm(lam - ref) / max(float(np.linalg.norm(ref)), floor))
