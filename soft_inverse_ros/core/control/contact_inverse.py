"""The high-rate inverse problem of a snapshot that carries contacts (Coevoet eq. 13–14).

A snapshot's :class:`~soft_inverse_ros.core.model.snapshot.ContactBlock` linearizes the
gaps and the effector in the contact forces λ_c next to the efforts λ (around λ0 and the
state's forces λ_c0)::

    δ_e = W_ea λ + W_ec λ_c + (x_e0 − W_ea λ0 − W_ec λ_c0) − t
    δ_a = W_aa λ + W_caᵀ λ_c + (δ_a0 − W_aa λ0 − W_caᵀ λ_c0)
    δ_c = W_ca λ + W_cc λ_c + (gap − W_ca λ0 − W_cc λ_c0)

:class:`ContactTick` holds those free terms of one snapshot (built once, at the low
rate) and, per tick, solves the QP with complementarity constraints
(:func:`~soft_inverse_ros.core.control.contact_qp.solve_contact_qp`: pivoting over
contact states, warm-started from the previous tick's states, at most ``max_states``
QPs) for a target and the tick's effort and stroke bounds (the per-tick variation limits
already intersected by the caller), with the force limits of :class:`ContactForceLimits`.
Friction is not modelled in the inverse problem (frictionless contacts; state it where
friction matters).

A contact whose W_cc diagonal is zero (a reduced basis vector with no detected contact,
a contact between clamped nodes) can neither move nor be moved: it is left out of the
problem with zero force.

Units SI: efforts N or Pa, forces N, gaps and effector rows m.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.control.contact_qp import (
    RIDGE,
    ContactProblem,
    ContactQPResult,
    Stacked,
    solve_contact_qp,
    state_qp,
    state_solve_direct,
)
from soft_inverse_ros.core.model.snapshot import ComplianceSnapshot

#: ContactBlock.source of a self-collision contact (obstacle contacts: the obstacle index)
SELF_COLLISION = -1


@dataclass(frozen=True)
class ContactForceLimits:
    """Contact-force limits of the inverse problem (Coevoet eq. 14) and its cost bound.

    Attributes:
        force_max: Bound on each contact's normal force [N] (inf: none).
        force_sum_max: Bound on the sum of all contact forces [N] (eq. 14's l_max; inf: none).
        group_sources: Contact groups with their own force-sum bound: the contact source
            of each group (the obstacle index in the description's ``collision.obstacles``,
            or −1 for self-collision).
        group_sum_max: (len(group_sources),) the groups' bounds [N].
        min_force_sum: The contacts must push at least this much in total [N] (stay in
            contact, e.g. a probe on tissue; 0: none). Only enforced when the snapshot has
            contacts: with none there is nothing to push on.
        max_states: Bound on the contact-state QPs solved per tick (the tick's cost bound).
        tick_budget: The tick's time bound [s]: no state QP is started this long after the
            tick began once one state was feasible (0: none); the answer is then the best
            state found, which meets the complementarity and the limits. Not applied to
            :meth:`ContactTick.search`, which runs at the low rate.
    """

    force_max: float = math.inf
    force_sum_max: float = math.inf
    group_sources: tuple[int, ...] = ()
    group_sum_max: tuple[float, ...] = ()
    min_force_sum: float = 0.0
    max_states: int = 16
    tick_budget: float = 0.0

    def __post_init__(self) -> None:
        for name in ("force_max", "force_sum_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value <= 0:
                raise ValueError(f"contact limits: {name} must be a number > 0 N (inf: none), got {value!r}")
        if len(self.group_sources) != len(self.group_sum_max):
            raise ValueError(f"contact limits: group_sources ({len(self.group_sources)}) and group_sum_max "
                             f"({len(self.group_sum_max)}) must have the same length")
        if any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < -1 for s in self.group_sources):
            raise ValueError(f"contact limits: group_sources must be obstacle indices >= 0 or -1 (self-collision), "
                             f"got {list(self.group_sources)}")
        if any(not (isinstance(v, (int, float)) and v > 0) for v in self.group_sum_max):
            raise ValueError(f"contact limits: group_sum_max must be > 0 N, got {list(self.group_sum_max)}")
        if not (isinstance(self.min_force_sum, (int, float)) and 0 <= self.min_force_sum < math.inf):
            raise ValueError(f"contact limits: min_force_sum must be >= 0 N and finite, got {self.min_force_sum!r}")
        if self.min_force_sum > 0 and self.min_force_sum > self.force_sum_max:
            raise ValueError(f"contact limits: min_force_sum {self.min_force_sum} N is above force_sum_max "
                             f"{self.force_sum_max} N")
        if isinstance(self.max_states, bool) or not isinstance(self.max_states, int) or self.max_states < 1:
            raise ValueError(f"contact limits: max_states must be an integer >= 1, got {self.max_states!r}")
        if (isinstance(self.tick_budget, bool) or not isinstance(self.tick_budget, (int, float))
                or not 0 <= self.tick_budget < 1.0):
            raise ValueError(f"contact limits: tick_budget must be >= 0 s and below 1 s (0: none), "
                             f"got {self.tick_budget!r}")


def upper_loads(weighted_forces: np.ndarray, source: np.ndarray, limits: ContactForceLimits) -> np.ndarray:
    """The loads the upper force limits bound, for normal forces ``weighted_forces`` (m,) [N]
    (each contact variable's force times its force weight) from contacts of ``source``
    (m,): (2 + groups,) [N] = (the sum, each group's sum, the largest single force)."""
    f = np.asarray(weighted_forces, dtype=float)
    src = np.asarray(source)
    groups = [float(f[src == g].sum()) for g in limits.group_sources]
    return np.array([float(f.sum()), *groups, float(f.max(initial=0.0))])


class ContactTick:
    """The contact part of one snapshot: free terms and force-limit rows (built once).

    Args:
        snapshot: A snapshot whose ``contacts`` block has m ≥ 1 contacts.
        energy_weight: ε w of the inverse solver for this snapshot (see inverse_qp.py).
        limits: the force limits.
        limit_margins: (2 + groups,) ≥ 0 [N], in :func:`upper_loads`' order (sum, groups,
            each): subtracted from the upper force limits (not below 0) — the solver's
            bound on how far the robot's forces have come out above the prediction.
        force_sum_epsilon: ε_f of the QP's ½ w_f (sᵀλ_c)² term on the normal force sum
            (contact_qp.py; 0: none), w_f = ε_f ‖W_ecᵀW_ec‖∞ / max(s)² [m²/N²]: the squared
            effector motion a unit force sum makes through the contacts' own compliance, in
            any actuator units (a contact that does not move the effector is not priced).
    """

    __slots__ = ("snapshot", "keep", "m_all", "w_ea", "w_ec", "w_aa", "w_ca", "w_cc", "e_free", "a_free",
                 "c_free", "energy_weight", "force_sum_weight", "force_max", "sum_rows", "sum_limits", "limits",
                 "_active", "_forces", "last_problem", "last_result", "_stacked", "weights", "sources")

    def __init__(self, snapshot: ComplianceSnapshot, energy_weight: float, limits: ContactForceLimits,
                 limit_margins: np.ndarray | None = None, force_sum_epsilon: float = 0.0) -> None:
        c = snapshot.contacts
        if c is None or c.size == 0:
            raise ValueError("ContactTick: the snapshot has no contacts")
        self.snapshot, self.limits, self.m_all = snapshot, limits, c.size
        keep = np.flatnonzero(np.diag(c.w_cc) > 0.0)
        self.keep = keep
        w_cc, w_ca, w_ec, f0 = c.w_cc[np.ix_(keep, keep)], c.w_ca[keep], c.w_ec[:, keep], c.force[keep]
        lam0 = snapshot.lambda0
        self.w_ea, self.w_aa = snapshot.w_ea, snapshot.w_aa
        self.w_cc, self.w_ca, self.w_ec = 0.5 * (w_cc + w_cc.T), w_ca, w_ec
        self.e_free = snapshot.effector_position - snapshot.w_ea @ lam0 - w_ec @ f0
        self.a_free = snapshot.actuator_stroke - snapshot.w_aa @ lam0 - w_ca.T @ f0
        self.c_free = c.gap[keep] - w_ca @ lam0 - w_cc @ f0
        self.energy_weight = float(energy_weight)
        if not (math.isfinite(force_sum_epsilon) and force_sum_epsilon >= 0.0):
            raise ValueError(f"ContactTick: force_sum_epsilon must be finite and >= 0, got {force_sum_epsilon!r}")
        weights = c.force_weight[keep]  # normal force per unit of each variable [N/N]
        self.weights = weights
        norm_c = float(np.abs(w_ec.T @ w_ec).sum(axis=1).max()) if keep.size else 0.0
        s_max = float(weights.max()) if keep.size else 0.0
        self.force_sum_weight = force_sum_epsilon * norm_c / (s_max * s_max) if norm_c > 0 and s_max > 0 else 0.0
        n_groups = len(limits.group_sources)
        margin = np.zeros(2 + n_groups) if limit_margins is None else np.maximum(np.asarray(limit_margins, float), 0.0)
        if margin.shape != (2 + n_groups,):
            raise ValueError(f"ContactTick: limit_margins must have {2 + n_groups} entries, got {margin.shape}")
        each = max(0.0, limits.force_max - margin[-1])
        self.force_max = np.where(weights > 0, each / np.maximum(weights, 1e-300), np.inf)
        rows, bounds = [], []
        if math.isfinite(limits.force_sum_max):
            rows.append(weights)
            bounds.append(max(0.0, limits.force_sum_max - margin[0]))
        source = c.source[keep]
        self.sources = source
        for i, (src, bound) in enumerate(zip(limits.group_sources, limits.group_sum_max)):
            rows.append(np.where(source == src, weights, 0.0))
            bounds.append(max(0.0, float(bound) - margin[1 + i]))
        if limits.min_force_sum > 0:  # −(weights)ᵀλ_c ≤ −min as one more force-sum row
            rows.append(-weights)
            bounds.append(-limits.min_force_sum)
        self.sum_rows = np.array(rows).reshape(len(rows), keep.size) if rows else None
        self.sum_limits = np.array(bounds, dtype=float)
        # warm start of the first tick: the contacts that carry force under the last command
        # (the linearized LCP, solve_contact_qp's default); later ticks: the previous state
        self._active: np.ndarray | None = None
        self._forces = np.array(f0)  # the forces at the linearization state until a tick solves
        #: the last tick's problem and solution (for checks against enumeration)
        # the target-independent matrices, built here at the low rate (the ticks reuse them)
        self._stacked = Stacked(self.problem(self.e_free, snapshot.lambda0, snapshot.lambda0,
                                             self.a_free, self.a_free))
        self.last_problem: ContactProblem | None = None
        self.last_result: ContactQPResult | None = None

    @property
    def size(self) -> int:
        """Contacts in the problem (the block's, less those that cannot act)."""
        return int(self.keep.size)

    def problem(self, target: np.ndarray, effort_min: np.ndarray, effort_max: np.ndarray,
                stroke_min: np.ndarray, stroke_max: np.ndarray) -> ContactProblem:
        """The tick's problem for ``target`` (n_e,) [m] and these bounds."""
        return ContactProblem(
            w_ea=self.w_ea, w_ec=self.w_ec, w_aa=self.w_aa, w_ca=self.w_ca, w_cc=self.w_cc,
            e_free=self.e_free - target, a_free=self.a_free, c_free=self.c_free,
            effort_min=effort_min, effort_max=effort_max, stroke_min=stroke_min, stroke_max=stroke_max,
            energy_weight=self.energy_weight, force_max=self.force_max,
            force_sum_weight=self.force_sum_weight, force_sum_row=self.weights,
            sum_rows=self.sum_rows, sum_limits=self.sum_limits)

    def solve(self, target: np.ndarray, effort_min: np.ndarray, effort_max: np.ndarray,
              stroke_min: np.ndarray, stroke_max: np.ndarray, efforts: np.ndarray,
              started: float | None = None) -> ContactQPResult:
        """The QP with complementarity for this tick, warm-started from the last tick's
        contact states (the first tick of a snapshot, or when that state's QP is
        infeasible: the contacts loaded under ``efforts``, the last command). Without a
        :meth:`search` at the snapshot's arrival the first tick searches fully (pivots,
        the extreme states, single flips); the ticks after it, whose target moved by one
        tick, take the warm state when no multiplier asks for a pivot (one state QP) and
        search fully when one does. ``started``: the tick's :func:`time.perf_counter` start,
        from which ``limits.tick_budget`` counts (default: now)."""
        # the full search (extreme starts, single flips) on the snapshot's first tick; the
        # ticks after it start from its state and search further only when they pivot
        budget = self.limits.tick_budget
        deadline = (time.perf_counter() if started is None else started) + budget if budget > 0 else None
        return self._run(self.problem(target, effort_min, effort_max, stroke_min, stroke_max), efforts,
                         self.limits.max_states, local_search=self.last_result is None, deadline=deadline)

    def search(self, target: np.ndarray, effort_min: np.ndarray, effort_max: np.ndarray,
               stroke_min: np.ndarray, stroke_max: np.ndarray, efforts: np.ndarray) -> ContactQPResult:
        """The full contact-state search (pivots, the extreme states, single flips) for
        ``target``, run at the low rate when the snapshot arrives (with the last target):
        its state warm-starts this snapshot's ticks, which then search fully only when a
        multiplier asks for a pivot."""
        return self._run(self.problem(target, effort_min, effort_max, stroke_min, stroke_max), efforts,
                         4 * self.limits.max_states, local_search=True)

    def _run(self, p: ContactProblem, efforts: np.ndarray, max_states: int, *, local_search: bool,
             deadline: float | None = None) -> ContactQPResult:
        """:func:`solve_contact_qp` on ``p`` from the current warm state; a feasible answer
        becomes the next warm state and force estimate."""
        result = solve_contact_qp(p, initial_active=self._active, efforts=efforts, max_states=max_states,
                                  stacked=self._stacked, local_search=local_search, deadline=deadline)
        self.last_problem, self.last_result = p, result
        if result.feasible:
            self._active, self._forces = result.active.copy(), result.forces
        return result

    def warm_up(self) -> None:
        """Run the state-QP assembly, and the compiled state QP with DAQP's C solve when it is
        in use, once (numba compiles them on the first call: do that at the low rate, not in
        a tick); the tick's warm start is left as it is."""
        st = self._stacked
        args = (st.h, st.rows, np.zeros(st.h.shape[0]), np.zeros(self.size, dtype=bool), self.w_aa.shape[0],
                st.effort_min, st.effort_max, st.force_max, st.stroke_lo, st.stroke_up, st.c_free, st.sum_limits,
                RIDGE, 1e30)
        state_qp(*args)
        if st.direct is not None:
            state_solve_direct(*args, st.direct.ints, st.direct.layout, st.direct.settings_address)

    @property
    def has_upper_limits(self) -> bool:
        """Whether an upper contact-force limit (each, sum or group) is in the problem."""
        return bool(np.isfinite(self.force_max).any() or (self.sum_limits.size and (self.sum_limits >= 0).any()))

    def predicted_force_sum(self) -> float | None:
        """The normal force the last feasible tick predicted in total [N] (None: no tick yet)."""
        return None if self.last_result is None or not self.last_result.feasible else float(self._forces @ self.weights)

    def predicted_loads(self) -> np.ndarray | None:
        """:func:`upper_loads` of the last feasible tick's predicted forces [N] (None: no tick yet)."""
        if self.last_result is None or not self.last_result.feasible:
            return None
        return upper_loads(self._forces * self.weights, self.sources, self.limits)

    @property
    def last_forces(self) -> np.ndarray:
        """The last feasible tick's contact forces (problem order; before one: the state's) [N or basis units]."""
        return self._forces

    @property
    def warm_active(self) -> np.ndarray | None:
        """The contact states the next tick starts from (None before a feasible tick)."""
        return self._active

    def reuse(self, result: ContactQPResult) -> None:
        """Leave the tick's state as a :meth:`solve` returning ``result`` would (a tick that
        reuses the result of a tick with the same inputs: inverse_qp.py)."""
        self.last_result = result
        if result.feasible:
            self._active, self._forces = result.active.copy(), result.forces

    def full_forces(self, forces: np.ndarray) -> np.ndarray:
        """(m_all,) forces in the block's order (zero for the contacts left out)."""
        out = np.zeros(self.m_all)
        out[self.keep] = forces
        return out
