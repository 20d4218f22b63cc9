"""The inverse problem in contact: a QP with complementarity constraints (Coevoet eq. 13–14).

With the snapshot's contact block (core/model/snapshot.py, ``ContactBlock``) the effector,
the strokes and the contact gaps are affine in the efforts λ_a and the contact forces λ_c::

    δ_e = W_ea λ_a + W_ec λ_c + e_free          (effector minus target) [m]
    δ_a = W_aa λ_a + W_ca^T λ_c + a_free         (strokes) [m or m³]
    δ_c = W_ca λ_a + W_cc λ_c + c_free           (contact gaps) [m]

and the controller solves

    minimize    ½ ‖δ_e‖² + ½ ε w λ_aᵀ W_aa λ_a
    subject to  a_min ≤ λ_a ≤ a_max,  l_min ≤ δ_a ≤ l_max,
                0 ≤ δ_c ⊥ λ_c ≥ 0                              (Signorini)
                1ᵀ λ_c[g] ≤ L_g per contact group g,  λ_c ≤ λ_max    (Coevoet eq. 14)

**Contact states.** Fixing which contacts are active (A: δ_c = 0, λ_c ≥ 0) and which are
not (I: λ_c = 0, δ_c ≥ 0) turns it into a convex QP whose solution satisfies the
complementarity by construction. :func:`solve_contact_qp` searches the states: it solves
the QP of the current state (warm start: the previous tick's, or the contacts loaded under
the current efforts) with daqp, then pivots the contact whose state constraint holds the
objective back most (the largest multiplier of ``λ_c,i ≥ 0`` for an active contact, of
``δ_c,i ≥ 0`` for an inactive one), never revisiting a state (no cycling); when no
multiplier asks for more it tries single-contact flips around the best state; at most
``max_states`` QPs per tick; it returns the best state visited. :func:`enumerate_contact_qp` solves every state (the reference, for
m ≤ ~10). Friction is not modelled in the inverse problem (frictionless contacts).

Units SI; all matrices dense (m is bounded by the snapshot's ``max_contacts``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

_INF = 1e30  # daqp's infinity
#: ridge added to the unit-scaled Hessian of a state's QP (relative to its largest diagonal)
RIDGE = 1e-9


@dataclass(frozen=True)
class ContactProblem:
    """The data of one tick (see the module docstring for the symbols).

    Attributes:
        w_ea (n_e, n_a), w_ec (n_e, m), w_aa (n_a, n_a), w_ca (m, n_a), w_cc (m, m).
        e_free (n_e,), a_free (n_a,), c_free (m,).
        effort_min/max, stroke_min/max (n_a,).
        energy_weight: ε w (0: no energy term).
        force_max: (m,) per-contact force bounds [N] (inf: none).
        groups: (m,) group index of each contact (−1: none); group_limits: (G,) [N].
    """

    w_ea: np.ndarray
    w_ec: np.ndarray
    w_aa: np.ndarray
    w_ca: np.ndarray
    w_cc: np.ndarray
    e_free: np.ndarray
    a_free: np.ndarray
    c_free: np.ndarray
    effort_min: np.ndarray
    effort_max: np.ndarray
    stroke_min: np.ndarray
    stroke_max: np.ndarray
    energy_weight: float = 0.0
    force_max: np.ndarray | None = None
    groups: np.ndarray | None = None
    group_limits: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def n_a(self) -> int:
        return self.w_ea.shape[1]

    @property
    def m(self) -> int:
        return self.w_cc.shape[0]


@dataclass(frozen=True)
class ContactQPResult:
    efforts: np.ndarray  # (n_a,)
    forces: np.ndarray  # (m,) λ_c ≥ 0
    gaps: np.ndarray  # (m,) δ_c ≥ 0
    effector_residual: np.ndarray  # (n_e,) δ_e [m]
    objective: float
    active: np.ndarray  # (m,) bool: the contact state
    pivots: int
    states_solved: int
    feasible: bool


def _state_qp(p: ContactProblem, active: np.ndarray):
    """daqp data of the QP of one contact state: x = [λ_a, λ_c[A]]."""
    a_idx = np.flatnonzero(active)
    i_idx = np.flatnonzero(~active)
    n_a, k = p.n_a, a_idx.size
    g = np.hstack((p.w_ea, p.w_ec[:, a_idx]))  # δ_e = G x + e_free
    h = g.T @ g
    h[:n_a, :n_a] += p.energy_weight * 0.5 * (p.w_aa + p.w_aa.T)
    # unit-scaled, with a small relative ridge: with active contacts the objective sees the
    # forces only through the n_e effector rows, so H is singular (the gap equalities fix
    # them); daqp needs it positive definite
    scale = float(np.abs(np.diag(h)).max()) or 1.0
    h = 0.5 * (h + h.T) / scale + RIDGE * np.eye(h.shape[0])
    f = (g.T @ p.e_free) / scale
    rows, lo, up = [], [], []
    # strokes
    rows.append(np.hstack((p.w_aa, p.w_ca[a_idx].T)))
    lo.append(p.stroke_min - p.a_free)
    up.append(p.stroke_max - p.a_free)
    # active contacts: gap = 0
    rows.append(np.hstack((p.w_ca[a_idx], p.w_cc[np.ix_(a_idx, a_idx)])))
    lo.append(-p.c_free[a_idx])
    up.append(-p.c_free[a_idx])
    # inactive contacts: gap ≥ 0
    rows.append(np.hstack((p.w_ca[i_idx], p.w_cc[np.ix_(i_idx, a_idx)])))
    lo.append(-p.c_free[i_idx])
    up.append(np.full(i_idx.size, np.inf))
    # force-sum limits of the groups
    if p.groups is not None and p.group_limits.size:
        for grp, limit in enumerate(p.group_limits):
            sel = (p.groups[a_idx] == grp).astype(float)
            if sel.any():
                rows.append(np.hstack((np.zeros((1, n_a)), sel[None, :])))
                lo.append(np.array([-np.inf]))
                up.append(np.array([float(limit)]))
    a_mat = np.vstack(rows)
    c_lo, c_up = np.concatenate(lo), np.concatenate(up)
    fmax = np.full(k, np.inf) if p.force_max is None else p.force_max[a_idx]
    b_lo = np.concatenate((p.effort_min, np.zeros(k)))
    b_up = np.concatenate((p.effort_max, fmax))
    lower = np.clip(np.concatenate((b_lo, c_lo)), -_INF, _INF)
    upper = np.clip(np.concatenate((b_up, c_up)), -_INF, _INF)
    return h, f, a_mat, lower, upper, a_idx, i_idx


def _solve_state(p: ContactProblem, active: np.ndarray):
    """(x, objective, daqp multipliers, layout) of one state's QP, or None if infeasible."""
    import daqp

    h, f, a_mat, lower, upper, a_idx, i_idx = _state_qp(p, active)
    sense = np.zeros(lower.size, dtype=np.int32)
    sense[lower == upper] = 5  # equality
    x, _, flag, info = daqp.solve(np.ascontiguousarray(h), f, np.ascontiguousarray(a_mat), upper, lower, sense)
    if flag < 1:
        return None
    n_a = p.n_a
    lam_a, lam_c = x[:n_a], np.zeros(p.m)
    lam_c[a_idx] = x[n_a:]
    resid = p.w_ea @ lam_a + p.w_ec @ lam_c + p.e_free
    obj = 0.5 * float(resid @ resid) + 0.5 * p.energy_weight * float(lam_a @ (p.w_aa @ lam_a))
    return lam_a, lam_c, resid, obj, np.asarray(info["lam"]), a_idx, i_idx


def _pivot_scores(p: ContactProblem, duals: np.ndarray, a_idx: np.ndarray, i_idx: np.ndarray) -> np.ndarray:
    """Per contact, how much its state constraint holds the objective back (0: not at all):
    an active contact's λ_c ≥ 0 bound, an inactive contact's δ_c ≥ 0 row, at their lower
    side (daqp: negative multiplier on a lower bound)."""
    n_a, k = p.n_a, a_idx.size
    scores = np.zeros(p.m)
    scores[a_idx] = np.maximum(-duals[n_a:n_a + k], 0.0)
    start = n_a + k + n_a + k  # bounds, then the stroke rows and the active-gap rows
    scores[i_idx] = np.maximum(-duals[start:start + i_idx.size], 0.0)
    return scores


def _result(p, sol, active, pivots, states, feasible=True) -> ContactQPResult:
    lam_a, lam_c, resid, obj, *_ = sol
    gaps = p.w_ca @ lam_a + p.w_cc @ lam_c + p.c_free
    return ContactQPResult(lam_a, lam_c, gaps, resid, obj, active.copy(), pivots, states, feasible)


def initial_state(p: ContactProblem, efforts: np.ndarray | None = None) -> np.ndarray:
    """The contacts that carry force under the efforts ``efforts`` (default 0): Signorini's
    LCP on the gaps with those efforts fixed (a state the robot can be in)."""
    from soft_inverse_ros.core.contact.signorini import solve_signorini_exact

    if p.m == 0:
        return np.zeros(0, dtype=bool)
    lam_a = np.zeros(p.n_a) if efforts is None else np.clip(efforts, p.effort_min, p.effort_max)
    try:
        sol = solve_signorini_exact(p.w_cc, p.c_free + p.w_ca @ lam_a)
    except ValueError:
        return p.c_free <= 0.0
    # round-off forces (1e-18 N next to 1e-2 N) do not make a contact active
    return sol.forces > 1e-9 * max(float(sol.forces.max(initial=0.0)), 1e-300)


def solve_contact_qp(
    p: ContactProblem, *, initial_active: np.ndarray | None = None, efforts: np.ndarray | None = None,
    max_states: int = 64, pivot_tolerance: float = 1e-12,
) -> ContactQPResult:
    """The QP with complementarity by pivoting over contact states (module docstring).

    Args:
        initial_active: (m,) warm-start state (e.g. the previous tick's); default
            :func:`initial_state` under ``efforts``.
        efforts: (n_a,) the current efforts, for the default initial state.
        max_states: bound on the state QPs solved in one call (the tick's cost bound).
        pivot_tolerance: multipliers below this do not pivot.

    The search: multiplier-guided pivots from the initial state (each to a state never
    visited: no cycling), then, once no multiplier asks for a pivot, single-contact flips
    around the best state while they improve it; both within ``max_states``. Returns the
    best state visited; ``feasible`` False when none had a feasible QP (efforts and forces
    zero: the caller holds its last command).
    """
    m = p.m
    active = initial_state(p, efforts) if initial_active is None else np.asarray(initial_active, bool).copy()
    visited: dict[bytes, tuple | None] = {}

    def solve(state: np.ndarray):
        key = state.tobytes()
        if key not in visited:
            visited[key] = _solve_state(p, state)
        return visited[key]

    best, best_state = None, active.copy()
    pivots = 0
    # 1. multiplier-guided pivots
    while len(visited) < max_states:
        sol = solve(active)
        if sol is not None and (best is None or sol[3] < best[3] - 1e-15):
            best, best_state = sol, active.copy()
        if sol is None:
            break
        scores = _pivot_scores(p, sol[4], sol[5], sol[6])
        nxt = None
        for i in np.argsort(-scores, kind="stable"):
            if scores[i] <= pivot_tolerance:
                break
            trial = active.copy()
            trial[i] = ~trial[i]
            if trial.tobytes() not in visited:
                nxt = trial
                break
        if nxt is None:
            break
        active = nxt
        pivots += 1
    # 2. single flips around the best state (or the start, if nothing was feasible); a
    # warm start that needed no pivot is taken as it is (one QP per steady tick)
    centre = best_state.copy()
    improved = best is None or pivots > 0 or initial_active is None
    while improved and len(visited) < max_states and m:
        improved = False
        for i in range(m):
            if len(visited) >= max_states:
                break
            trial = centre.copy()
            trial[i] = ~trial[i]
            if trial.tobytes() in visited:
                continue
            sol = solve(trial)
            if sol is not None and (best is None or sol[3] < best[3] - 1e-15):
                best, best_state, centre, improved = sol, trial.copy(), trial.copy(), True
                pivots += 1
                break
    if best is None:
        z = np.zeros
        return ContactQPResult(z(p.n_a), z(m), p.c_free.copy(), p.e_free.copy(), float("inf"),
                               best_state, pivots, len(visited), False)
    return _result(p, best, best_state, pivots, len(visited))


def enumerate_contact_qp(p: ContactProblem) -> ContactQPResult:
    """Every contact state's QP (2^m of them), the best one: the reference (small m)."""
    if p.m > 16:
        raise ValueError(f"enumerate_contact_qp: 2^{p.m} states is too many")
    best, best_state, states = None, None, 0
    for bits in itertools.product((False, True), repeat=p.m):
        active = np.array(bits, dtype=bool)
        sol = _solve_state(p, active)
        states += 1
        if sol is not None and (best is None or sol[3] < best[3] - 1e-15):
            best, best_state = sol, active
    if best is None:
        raise ValueError("enumerate_contact_qp: no contact state is feasible")
    return _result(p, best, best_state, 0, states)
