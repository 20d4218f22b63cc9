"""The inverse problem in contact: a QP with complementarity constraints (Coevoet eq. 13–14).

With the snapshot's contact block (core/model/snapshot.py, ``ContactBlock``) the effector,
the strokes and the contact gaps are affine in the efforts λ_a and the contact forces λ_c::

    δ_e = W_ea λ_a + W_ec λ_c + e_free          (effector minus target) [m]
    δ_a = W_aa λ_a + W_ca^T λ_c + a_free         (strokes) [m or m³]
    δ_c = W_ca λ_a + W_cc λ_c + c_free           (contact gaps) [m]

and the controller solves

    minimize    ½ ‖δ_e‖² + ½ ε w λ_aᵀ W_aa λ_a + ½ w_f (sᵀ λ_c)²
    subject to  a_min ≤ λ_a ≤ a_max,  l_min ≤ δ_a ≤ l_max,
                0 ≤ δ_c ⊥ λ_c ≥ 0                              (Signorini)
                S λ_c ≤ L   (force sums: a row of S per limit),  λ_c ≤ λ_max   (Coevoet eq. 14)

The last term (``force_sum_weight`` w_f; 0 in Coevoet eq. 13) prices the contact force sum
sᵀλ_c (s: the normal force each variable carries, 1 for a plain contact): among commands
that serve the effector alike the QP takes the one that presses least, instead of the one
the energy term prefers by a hair (a press that relaxes the joints toward home can sit at
the force-sum limit for a 0.1 % lower energy, EXPERIMENTS.md).

A row of S is 1 on the contacts of one group (all contacts: eq. 14's 1ᵀλ_c ≤ l_max; the
contacts with one obstacle: "probe on tissue ≤ 2 N"); with a reduced contact basis
(λ = Ψβ) the variables are β and the row holds the column sums of Ψ (the normal force
each basis vector carries per unit).

**Contact states.** Fixing which contacts are active (A: δ_c = 0, λ_c ≥ 0) and which are
not (I: λ_c = 0, δ_c ≥ 0) turns it into a convex QP whose solution satisfies the
complementarity by construction. :func:`solve_contact_qp` searches the states: it solves
the QP of the current state (warm start: the previous tick's, or the contacts loaded under
the current efforts) with daqp (assembly and DAQP's C solve in one numba call,
:data:`state_solve_direct`, when numba and daqp's verified C structs are there; daqp's
Python ``solve`` otherwise), then pivots the contact whose state constraint holds the
objective back most (the largest multiplier of ``λ_c,i ≥ 0`` for an active contact, of
``δ_c,i ≥ 0`` for an inactive one), never revisiting a state (no cycling); when no
multiplier asks for more it pivots again from the two extreme states (all contacts
active, none) and then tries single-contact flips around the best state; at most
``max_states`` QPs per tick and, with a ``deadline``, none started after it (the tick's
time bound); it returns the best state visited (a heuristic for a
non-convex problem: measured against enumeration in test/core/test_contact_qp.py and by
``experiment inverse-contact``). :func:`enumerate_contact_qp` solves every state (the reference, for
m ≤ ~10). Friction is not modelled in the inverse problem (frictionless contacts).

Units SI; all matrices dense (m is bounded by the snapshot's ``max_contacts``).
"""

from __future__ import annotations

import itertools
import time
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
        force_sum_weight: w_f [m²/N²] of the ½ w_f (sᵀλ_c)² term (0: none).
        force_sum_row: (m,) s, the normal force per unit of each contact variable (None:
            ones).
        force_max: (m,) per-contact force bounds [N] (inf: none).
        sum_rows: (G, m) weights of the force-sum limits S λ_c ≤ L (a minimum force: a row
            of −1 with −min as its limit); sum_limits: (G,) [N].
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
    force_sum_weight: float = 0.0
    force_sum_row: np.ndarray | None = None
    sum_rows: np.ndarray | None = None
    sum_limits: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def n_a(self) -> int:
        return self.w_ea.shape[1]

    @property
    def m(self) -> int:
        return self.w_cc.shape[0]

    def force_sum(self, forces: np.ndarray) -> float:
        """sᵀλ_c [N]: the normal force sum the force-sum term prices."""
        return float(np.sum(forces) if self.force_sum_row is None else self.force_sum_row @ forces)


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
    #: the search stopped at its ``deadline`` with states it would still have tried
    truncated: bool = False


class Stacked:
    """The matrices of a problem over all its variables x = [λ_a, λ_c] (n_a + m), built once
    per problem (or once per snapshot: they do not depend on the target); a state's QP
    selects the columns of its active contacts.

    Rows of ``rows``: the strokes (n_a), the gaps of all m contacts, the force sums (G)."""

    __slots__ = ("n_a", "m", "g", "h", "rows", "n_sum", "effort_min", "effort_max", "force_max", "stroke_lo",
                 "stroke_up", "c_free", "sum_limits", "direct")

    def __init__(self, p: ContactProblem) -> None:
        n_a, m = p.n_a, p.m
        self.n_a, self.m = n_a, m
        self.g = np.hstack((p.w_ea, p.w_ec))  # δ_e = G x + e_free
        h = self.g.T @ self.g
        h[:n_a, :n_a] += p.energy_weight * 0.5 * (p.w_aa + p.w_aa.T)
        if p.force_sum_weight > 0.0:
            row = np.ones(m) if p.force_sum_row is None else np.asarray(p.force_sum_row, dtype=float)
            h[n_a:, n_a:] += p.force_sum_weight * np.outer(row, row)
        self.h = 0.5 * (h + h.T)
        sums = np.zeros((0, m)) if p.sum_rows is None else np.asarray(p.sum_rows, dtype=float).reshape(-1, m)
        self.n_sum = sums.shape[0]
        self.rows = np.vstack((np.hstack((p.w_aa, p.w_ca.T)), np.hstack((p.w_ca, p.w_cc)),
                               np.hstack((np.zeros((self.n_sum, n_a)), sums))))
        #: DAQP's C structs for the compiled state QPs (None: daqp's Python solve)
        self.direct = _state_structs()
        self.bounds(p)

    def bounds(self, p: ContactProblem) -> "Stacked":
        """Take the bounds and free terms of ``p`` (a tick of the same snapshot: its
        matrices are the ones this was built from). Returns self."""
        f64 = lambda v: np.array(v, dtype=float)  # noqa: E731  (own writable copies: one kernel signature)
        self.effort_min, self.effort_max = f64(p.effort_min), f64(p.effort_max)
        self.force_max = f64(np.full(p.m, np.inf) if p.force_max is None else p.force_max)
        self.stroke_lo, self.stroke_up = f64(p.stroke_min - p.a_free), f64(p.stroke_max - p.a_free)
        self.c_free = f64(p.c_free)
        self.sum_limits = f64(p.sum_limits if self.n_sum else np.zeros(0))
        return self


def state_qp_py(h_all, rows, f_all, active, n_a, effort_min, effort_max, force_max, stroke_lo, stroke_up,
                c_free, sum_limits, ridge, big):
    """daqp data of the QP of one contact state, x = [λ_a, λ_c[A]], from the
    :class:`Stacked` matrices: (H, f, A, upper, lower, sense, active indices).

    ``stroke_lo``/``stroke_up`` are the stroke bounds less a_free. H is unit-scaled with a
    small relative ridge: with active contacts the objective sees the forces only through
    the n_e effector rows, so H is singular (the gap equalities fix them) and daqp needs
    it positive definite. Written so numba compiles it (one call instead of ~25 numpy
    operations); :data:`state_qp` is the compiled version when numba is installed."""
    m = active.shape[0]
    a_idx = np.flatnonzero(active)
    k = a_idx.shape[0]
    nx = n_a + k
    idx = np.empty(nx, dtype=np.int64)
    idx[:n_a] = np.arange(n_a)
    idx[n_a:] = n_a + a_idx
    h = np.empty((nx, nx))
    scale = 0.0
    for i in range(nx):
        for j in range(nx):
            h[i, j] = h_all[idx[i], idx[j]]
        scale = max(scale, abs(h[i, i]))
    if scale == 0.0:
        scale = 1.0
    inv = 1.0 / scale
    f = np.empty(nx)
    for i in range(nx):
        f[i] = f_all[idx[i]] * inv
        for j in range(nx):
            h[i, j] *= inv
        h[i, i] += ridge
    n_rows = rows.shape[0]
    a_mat = np.empty((n_rows, nx))
    for r in range(n_rows):
        for j in range(nx):
            a_mat[r, j] = rows[r, idx[j]]
    n_sum = n_rows - n_a - m
    total = nx + n_rows
    lower = np.empty(total)
    upper = np.empty(total)
    lower[:n_a] = effort_min
    upper[:n_a] = effort_max
    for j in range(k):
        lower[n_a + j] = 0.0
        upper[n_a + j] = force_max[a_idx[j]]
    lower[nx:nx + n_a] = stroke_lo
    upper[nx:nx + n_a] = stroke_up
    for i in range(m):
        lower[nx + n_a + i] = -c_free[i]
        upper[nx + n_a + i] = -c_free[i] if active[i] else np.inf
    for g in range(n_sum):
        lower[nx + n_a + m + g] = -np.inf
        upper[nx + n_a + m + g] = sum_limits[g]
    sense = np.zeros(total, dtype=np.int32)
    for i in range(total):
        lower[i] = min(max(lower[i], -big), big)
        upper[i] = min(max(upper[i], -big), big)
        if lower[i] == upper[i]:
            sense[i] = 5  # equality
    return h, f, a_mat, upper, lower, sense, a_idx


def _state_kernel():
    """(state_qp, path): numba-compiled unless numba is absent or
    ``SOFT_INVERSE_ROS_QP_KERNELS=numpy`` (as core/control/tick_kernels.py)."""
    import os

    if os.environ.get("SOFT_INVERSE_ROS_QP_KERNELS", "auto") == "numpy":
        return state_qp_py, "numpy"
    try:
        from numba import njit
    except ImportError:
        return state_qp_py, "numpy"
    return njit(cache=True)(state_qp_py), "numba"


#: The state-QP assembly the solver calls, and which path it is ("numba" or "numpy").
state_qp, STATE_QP_PATH = _state_kernel()


def _quadprog_for_states():
    """DAQP's C ``daqp_quadprog`` as numba sees it (tick_kernels), when the state QPs can be
    compiled with it; None otherwise (then daqp's Python ``solve``)."""
    if STATE_QP_PATH != "numba":
        return None
    from soft_inverse_ros.core.control import tick_kernels

    return tick_kernels._quadprog  # noqa: SLF001 - the one declaration of the C function


_quadprog = _quadprog_for_states()
if _quadprog is not None:
    from numba import njit

    @njit(cache=True)
    def state_solve_direct(h_all, rows, f_all, active, n_a, effort_min, effort_max, force_max, stroke_lo,
                           stroke_up, c_free, sum_limits, ridge, big, ints, layout, settings_address):
        """:func:`state_qp_py` and DAQP's C ``daqp_quadprog`` on its arrays in one call (the
        same problem ``daqp.solve`` gets, with DAQP's default settings, cold-started):
        (x, multipliers, exit flag, active indices). ``ints``/``layout``/``settings_address``:
        :class:`daqp_direct.StateQPStructs`."""
        h, f, a_mat, upper, lower, sense, a_idx = state_qp(
            h_all, rows, f_all, active, n_a, effort_min, effort_max, force_max, stroke_lo, stroke_up, c_free,
            sum_limits, ridge, big)
        nx = h.shape[0]
        total = upper.shape[0]
        x = np.zeros(nx)
        lam = np.zeros(total)
        words = ints.view(np.int32)
        ints[layout[0]] = h.ctypes.data
        ints[layout[1]] = f.ctypes.data
        ints[layout[2]] = a_mat.ctypes.data
        ints[layout[3]] = upper.ctypes.data
        ints[layout[4]] = lower.ctypes.data
        ints[layout[5]] = sense.ctypes.data
        ints[layout[6]] = x.ctypes.data
        ints[layout[7]] = lam.ctypes.data
        words[layout[8]] = nx
        words[layout[9]] = total
        words[layout[10]] = nx
        base = ints.ctypes.data
        _quadprog(base + layout[13], base + layout[12], settings_address)
        flag = words[layout[11]]
        return x, lam, flag, a_idx
else:
    state_solve_direct = None


def _state_structs():
    """:class:`daqp_direct.StateQPStructs` when the compiled state QPs can be used here
    (numba, and DAQP's C structs verified: daqp_direct.unavailable_reason), else None."""
    if state_solve_direct is None:
        return None
    from soft_inverse_ros.core.control import daqp_direct

    if daqp_direct.unavailable_reason() is not None:
        return None
    return daqp_direct.StateQPStructs()


def _solve_state(p: ContactProblem, st: Stacked, f_all: np.ndarray, active: np.ndarray):
    """(λ_a, λ_c, δ_e, objective, daqp multipliers, active indices) of one state's QP, or
    None if infeasible."""
    if st.direct is not None:  # the assembly and DAQP's C solve in one compiled call
        d = st.direct
        x, duals, flag, a_idx = state_solve_direct(
            st.h, st.rows, f_all, active, p.n_a, st.effort_min, st.effort_max, st.force_max, st.stroke_lo,
            st.stroke_up, st.c_free, st.sum_limits, RIDGE, _INF, d.ints, d.layout, d.settings_address)
        info = {"lam": duals}
    else:
        import daqp

        h, f, a_mat, upper, lower, sense, a_idx = state_qp(
            st.h, st.rows, f_all, active, p.n_a, st.effort_min, st.effort_max, st.force_max, st.stroke_lo,
            st.stroke_up, st.c_free, st.sum_limits, RIDGE, _INF)
        x, _, flag, info = daqp.solve(h, f, a_mat, upper, lower, sense)
    if flag < 1:
        return None
    n_a = p.n_a
    lam_a, lam_c = x[:n_a], np.zeros(p.m)
    lam_c[a_idx] = x[n_a:]
    resid = p.w_ea @ lam_a + p.w_ec @ lam_c + p.e_free
    obj = 0.5 * float(resid @ resid) + 0.5 * p.energy_weight * float(lam_a @ (p.w_aa @ lam_a))
    if p.force_sum_weight > 0.0:
        obj += 0.5 * p.force_sum_weight * p.force_sum(lam_c) ** 2
    return lam_a, lam_c, resid, obj, np.asarray(info["lam"]), a_idx


def _pivot_scores(p: ContactProblem, duals: np.ndarray, a_idx: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Per contact, how much its state constraint holds the objective back (0: not at all):
    an active contact's λ_c ≥ 0 bound, an inactive contact's δ_c ≥ 0 row, at their lower
    side (daqp: negative multiplier on a lower bound)."""
    n_a, k = p.n_a, a_idx.size
    scores = np.zeros(p.m)
    scores[a_idx] = np.maximum(-duals[n_a:n_a + k], 0.0)
    start = n_a + k + n_a  # the bounds, then the stroke rows, then every contact's gap row
    gap_duals = np.maximum(-duals[start:start + p.m], 0.0)
    scores[~active] = gap_duals[~active]
    return scores


def _result(p, sol, active, pivots, states, feasible=True, truncated=False) -> ContactQPResult:
    lam_a, lam_c, resid, obj, *_ = sol
    gaps = p.w_ca @ lam_a + p.w_cc @ lam_c + p.c_free
    return ContactQPResult(lam_a, lam_c, gaps, resid, obj, active.copy(), pivots, states, feasible, truncated)


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
    max_states: int = 64, pivot_tolerance: float = 1e-12, local_search: bool = True,
    stacked: Stacked | None = None, deadline: float | None = None,
) -> ContactQPResult:
    """The QP with complementarity by pivoting over contact states (module docstring).

    Args:
        initial_active: (m,) warm-start state (e.g. the previous tick's); default
            :func:`initial_state` under ``efforts``.
        efforts: (n_a,) the current efforts: the default initial state, and the restart
            when the warm start's QP is infeasible (the contacts that carry force under
            these efforts: a state whose QP is feasible when the efforts are).
        max_states: bound on the state QPs solved in one call (the tick's cost bound).
        pivot_tolerance: multipliers below this do not pivot.
        local_search: after the pivots, try the single-contact flips around the best
            state (m more QPs; the QPCC is not convex, a state no multiplier wants to leave
            is a local optimum). Off: a warm start that needs no pivot costs one QP.
        stacked: the problem's :class:`Stacked` matrices when the caller keeps them across
            ticks (they do not depend on the target or the bounds).
        deadline: a :func:`time.perf_counter` instant [s] after which no further state QP
            is started once one state had a feasible QP: the tick's time bound. The answer is
            then the best state visited so far, ``truncated`` says so; every state's QP
            meets the complementarity and the limits, so a cut search gives a valid
            command, not always the best state.

    The search: multiplier-guided pivots from the initial state (each to a state never
    visited: no cycling); with ``local_search`` the same from the two extreme states (all
    contacts active, none), then single-contact flips around the best state while they
    improve it; all within ``max_states``. Returns the
    best state visited; ``feasible`` False when none had a feasible QP (efforts and forces
    zero: the caller holds its last command).
    """
    m = p.m
    active = initial_state(p, efforts) if initial_active is None else np.asarray(initial_active, bool).copy()
    visited: dict[bytes, tuple | None] = {}
    st = Stacked(p) if stacked is None else stacked.bounds(p)
    f_all = st.g.T @ p.e_free

    out_of_time = [False]

    def room() -> bool:
        """Whether another new state QP may be solved (the count and the deadline)."""
        if len(visited) >= max_states:
            return False
        if deadline is not None and best is not None and time.perf_counter() >= deadline:
            out_of_time[0] = True
            return False
        return True

    def solve(state: np.ndarray):
        key = state.tobytes()
        if key not in visited:
            visited[key] = _solve_state(p, st, f_all, state)
        return visited[key]

    best, best_state = None, active.copy()
    pivots = 0
    if initial_active is not None and efforts is not None and solve(active) is None:
        restart = initial_state(p, efforts)
        if restart.tobytes() not in visited:
            active, best_state = restart, restart.copy()

    def descend(state: np.ndarray) -> None:
        """1. multiplier-guided pivots from ``state`` (never to a visited state)."""
        nonlocal best, best_state, pivots
        while room():
            sol = solve(state)
            if sol is not None and (best is None or sol[3] < best[3] - 1e-15):
                best, best_state = sol, state.copy()
            if sol is None:
                return
            scores = _pivot_scores(p, sol[4], sol[5], state)
            nxt = None
            for i in np.argsort(-scores, kind="stable"):
                if scores[i] <= pivot_tolerance:
                    break
                trial = state.copy()
                trial[i] = ~trial[i]
                if trial.tobytes() not in visited:
                    nxt = trial
                    break
            if nxt is None:
                return
            state = nxt
            pivots += 1

    descend(active)
    pivots_from_start = pivots
    # the QPCC is not convex: a state no multiplier wants to leave can be a local optimum
    # whose better neighbours differ in several contacts at once; the two extreme states
    # (every contact pressed, none) are further starts
    if local_search and m:
        for extreme in (np.ones(m, dtype=bool), np.zeros(m, dtype=bool)):
            if extreme.tobytes() not in visited and room():
                descend(extreme)
    # 2. single flips around the best state (or the start, if nothing was feasible);
    # without local_search a warm start that needed no pivot is taken as it is
    centre = best_state.copy()
    improved = local_search or best is None or pivots_from_start > 0 or initial_active is None
    while improved and m and room():
        improved = False
        for i in range(m):
            trial = centre.copy()
            trial[i] = ~trial[i]
            if trial.tobytes() in visited:
                continue
            if not room():
                break
            sol = solve(trial)
            if sol is not None and (best is None or sol[3] < best[3] - 1e-15):
                best, best_state, centre, improved = sol, trial.copy(), trial.copy(), True
                pivots += 1
                break
    if best is None:
        z = np.zeros
        return ContactQPResult(z(p.n_a), z(m), p.c_free.copy(), p.e_free.copy(), float("inf"),
                               best_state, pivots, len(visited), False, out_of_time[0])
    return _result(p, best, best_state, pivots, len(visited), truncated=out_of_time[0])


def enumerate_contact_qp(p: ContactProblem) -> ContactQPResult:
    """Every contact state's QP (2^m of them), the best one: the reference (small m)."""
    if p.m > 16:
        raise ValueError(f"enumerate_contact_qp: 2^{p.m} states is too many")
    best, best_state, states = None, None, 0
    st = Stacked(p)
    f_all = st.g.T @ p.e_free
    for bits in itertools.product((False, True), repeat=p.m):
        active = np.array(bits, dtype=bool)
        sol = _solve_state(p, st, f_all, active)
        states += 1
        if sol is not None and (best is None or sol[3] < best[3] - 1e-15):
            best, best_state = sol, active
    if best is None:
        raise ValueError("enumerate_contact_qp: no contact state is feasible")
    return _result(p, best, best_state, 0, states)
