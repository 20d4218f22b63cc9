"""The high-rate inverse problem: actuator efforts for an effector target (pure numpy).

Given the newest :class:`~soft_inverse_ros.core.model.snapshot.ComplianceSnapshot` and a target
``t`` (n_e,) [m] in the robot base frame, find efforts λ (n_a,) [N or Pa] solving
(Largilliere et al., ICRA 2015; Coevoet et al. 2017 for the energy term)

    minimize   ½ ‖W_ea λ + δ_e_free‖² + ½ ε w λᵀ W_aa λ
    subject to a_min ≤ λ ≤ a_max                          (effort bounds)
               l_min ≤ W_aa λ + δ_a_free ≤ l_max          (stroke bounds)
               |λ − λ_prev| ≤ max_effort_step              (per-tick, optional)
               |δ_a − δ_a_prev| ≤ max_stroke_step          (per-tick, optional)

with ``δ_e_free = x_e0 − W_ea λ0 − t`` and ``w = ‖W_eaᵀW_ea‖∞ / ‖W_aa‖∞`` (the weight of
SOFA's QPInverseProblemSolver, so ε is dimensionless). ``λ_prev`` is the last valid
command (the safe command before the first one), and ``δ_a_prev = W_aa λ_prev + δ_a_free``
is its stroke predicted with the current snapshot — i.e. the stroke step bounds how far
the solver moves the actuators in one tick, like SOFA's maxDispVariation which is relative
to the current actuator state.

Split of the work:

- :meth:`InverseSolver.set_snapshot` (low rate): validates the snapshot, builds the
  scaled Hessian and stroke constraint matrix and hands them to the persistent backend
  (factorizations happen there).
- :meth:`InverseSolver.solve` (high rate): only ``δ_e_free`` (hence the linear term) and
  the per-tick bounds change; the backend is warm-started. With daqp (the default) and
  numba, a contact-free tick is one compiled call into DAQP's C solver
  (:mod:`daqp_direct`, ``qp_call`` says which path runs). It never raises: any failure
  returns the previous valid command (or the safe command) clipped to the limits, with a
  status saying why. A snapshot with contacts solves the QP with complementarity
  (:mod:`contact_inverse`); a contact tick whose inputs (snapshot, target, the reference
  command of the per-tick limits, the contact warm state) are the previous contact tick's,
  bit for bit, reuses its complete result, which the deterministic search would compute
  again (a held target once the command has converged: the hybrid arm's live graph reused
  ~9 ticks in 10, and its controller went from 92 % to 60 % of a core; BENCHMARKS.md,
  twenty-second session); a search cut by the tick budget is not reused.

Every solution passes a post-solve check (finite, all bounds met to
``feasibility_tolerance``) before it is commanded; efforts are then clipped exactly to the
effort limits and strokes to the stroke limits. The solver is thread-safe
(``set_snapshot`` and ``solve`` may come from different threads).

Scaling: efforts are scaled per column so that ``μ_j = λ_j √H_jj / L`` (L =
``length_scale``, a typical effector motion) and the objective by ``1/L²``: the backend
sees a Hessian with unit diagonal and O(1) variables whether the actuator is a cable
(~1e-3 m/N) or a cavity (~1e-7 m/Pa). Stroke rows are scaled to unit ∞-norm.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Any, Generator, Mapping, NamedTuple

import numpy as np

from soft_inverse_ros.core.control import daqp_direct, tick_kernels
from soft_inverse_ros.core.control.actuator_limits import ActuatorLimits
from soft_inverse_ros.core.control.contact_inverse import ContactForceLimits, ContactTick, upper_loads
from soft_inverse_ros.core.control.qp_backends import (
    BACKENDS,
    BackendSettings,
    BackendStatus,
    DaqpBackend,
    QpBackend,
    make_backend,
)
from soft_inverse_ros.core.model.snapshot import ComplianceSnapshot

#: The default backend. daqp is exact (active-set) and the fastest here: see BENCHMARKS.md "QP".
DEFAULT_BACKEND = "daqp"


class InverseStatus(IntEnum):
    """Why a tick produced its command."""

    SOLVED = 0  #: optimal efforts within all limits
    INFEASIBLE = 1  #: the limits (with the per-tick limits) admit no efforts
    NOT_CONVERGED = 2  #: iteration/time limit or inaccurate stop
    NUMERICAL_ERROR = 3  #: NaN solution, violated limits after solve, or an exception
    INVALID_TARGET = 4  #: target not finite or of the wrong dimension
    NO_SNAPSHOT = 5  #: no valid compliance snapshot yet


#: ``InverseResult.backend_status`` of a contact tick that steps its efforts toward the safe
#: command (contact-force limits unreachable): status HELD, but a new command each tick, not
#: a failed QP holding the last one
BACKING_OFF = "contacts: backing off"


class CommandStatus(IntEnum):
    """Matches ``ActuatorCommand.STATUS_*`` of the message set."""

    OK = 0  #: the QP solution
    HELD = 1  #: QP failed: previous valid command held (clipped to limits)
    SAFE = 2  #: QP failed and no previous command: the safe command


class SnapshotStatus(IntEnum):
    ACCEPTED = 0
    REJECTED_NOT_FINITE = 1  #: NaN/inf in a matrix or vector
    REJECTED_SHAPE = 2  #: actuator count or names do not match the limits
    REJECTED_DEGENERATE = 3  #: W_ea is zero (no actuator moves the effector)
    REJECTED_BACKEND = 4  #: the backend refused the problem matrices
    REJECTED_INVALID = 5  #: not a snapshot at all


_BACKEND_TO_STATUS = {
    BackendStatus.INFEASIBLE: InverseStatus.INFEASIBLE,
    BackendStatus.MAX_ITERATIONS: InverseStatus.NOT_CONVERGED,
    BackendStatus.TIME_LIMIT: InverseStatus.NOT_CONVERGED,
    BackendStatus.INACCURATE: InverseStatus.NOT_CONVERGED,
    BackendStatus.NUMERICAL_ERROR: InverseStatus.NUMERICAL_ERROR,
}


@dataclass(frozen=True)
class InverseSolverConfig:
    """Settings of the inverse solver, validated at construction (ValueError names the key).

    Attributes:
        backend: ``"daqp"`` (default), ``"osqp"`` or ``"quadprog"``.
        epsilon: Energy regularization ε ≥ 0 (dimensionless, weighted by
            ‖W_eaᵀW_ea‖∞/‖W_aa‖∞ as in SOFA). Needed for a unique, low-effort solution
            with more actuators than effector rows; it biases reachable targets slightly.
        length_scale: Typical effector motion L [m] used to scale the problem.
        max_iterations: Iteration cap of the active-set backend (daqp).
        primal_tolerance: Constraint tolerance of daqp, in scaled units.
        feasibility_tolerance: Largest bound violation accepted in the post-solve check,
            in scaled units (efforts: λ_j √H_jj / L; strokes: rows of unit ∞-norm in those
            variables); beyond it the tick fails safe (NUMERICAL_ERROR, command held).
        active_tolerance: A bound is reported active within this distance (scaled units).
        time_limit: Per-solve time limit [s] for OSQP; 0 disables. (It is passed to daqp
            too, but the daqp wheel measured here ignores it: its iteration cap
            ``max_iterations`` is what bounds an active-set solve.)
        singular_ridge: If the scaled Hessian has ``eig_min < singular_ridge · eig_max``
            (redundant actuation with ε = 0), this fraction of eig_max is added to its
            diagonal so the backends see a strictly convex problem (the snapshot update
            reports ``regularized``).
        osqp_eps_abs, osqp_eps_rel, osqp_max_iterations, osqp_polish: OSQP settings
            (tight by default: at OSQP's own default 1e-3 most answers fail the
            feasibility check above; keep them ≤ 1e-7).
        contacts: What to do with a snapshot's contact block: ``complementarity`` (the
            QP with complementarity constraints of Coevoet eq. 13 over λ and the contact
            forces, core/control/contact_inverse.py; frictionless) or ``ignore`` (the
            contact-unaware QP: W_ea alone, as if the contacts did not react).
        contact_force_max: Bound on each contact force [N] (inf: none).
        contact_force_sum_max: Bound on the sum of the contact forces [N] (eq. 14; inf: none).
        contact_group_sources, contact_group_sum_max: Force-sum bounds per contact group:
            the obstacle index of each group in the description's ``collision.obstacles``
            (−1: self-collision) and its bound [N].
        contact_min_force_sum: The contacts must push at least this much in total when
            there are contacts [N] (0: none).
        contact_max_states: Contact-state QPs per tick at most (the tick's cost bound).
        contact_tick_budget: The tick's time bound on the contact-state search [s]: no
            further state QP is started this long after the tick began, once one state was
            feasible (0: none, only ``contact_max_states``). The command is then the best
            state found so far: it meets the complementarity and every limit, and the next
            tick searches on from it (``InverseSolverStatus``: the states solved).
        contact_force_weight: ε_f, the price of the contact force sum relative to the
            effector objective, as ``epsilon`` is the actuators' energy's: the QP adds
            ½ ε_f ‖W_ecᵀW_ec‖∞ (Σ normal forces)², ε_f times the squared effector motion the
            force sum makes through the contacts' own compliance (contact_inverse.py). Among
            commands that serve the effector alike it takes the one that presses least (0:
            none, Coevoet eq. 13 as written; there the energy term alone chose, and it could
            prefer a press at the force-sum limit for a 0.1 % lower energy: EXPERIMENTS.md,
            hybrid arm live).
        contact_limit_feedback: Lower each upper contact-force limit (sum, group sums, each
            contact) by the most the robot's load it bounds has come out above the load the
            last tick predicted for its command (measured on each new snapshot's contact
            forces; the largest excess seen since the solver was built, never relaxed): an
            online bound on the model's one-snapshot prediction error, so that a prediction
            at the lowered limit keeps the robot's next forces under the limit whenever
            the error stays within what has been seen (EXPERIMENTS.md, inverse-contact).
    """

    backend: str = DEFAULT_BACKEND
    epsilon: float = 1e-3
    length_scale: float = 0.01
    max_iterations: int = 1000
    primal_tolerance: float = 1e-9
    feasibility_tolerance: float = 1e-6
    active_tolerance: float = 1e-7
    time_limit: float = 0.0
    singular_ridge: float = 1e-9
    osqp_eps_abs: float = 1e-9
    osqp_eps_rel: float = 1e-9
    osqp_max_iterations: int = 20000
    osqp_polish: bool = True
    contacts: str = field(default="complementarity", metadata={"choices": ("complementarity", "ignore")})
    contact_force_max: float = field(default=math.inf, metadata={"allow_inf": True})
    contact_force_sum_max: float = field(default=math.inf, metadata={"allow_inf": True})
    contact_group_sources: tuple[int, ...] = ()
    contact_group_sum_max: tuple[float, ...] = ()
    contact_min_force_sum: float = 0.0
    contact_max_states: int = 16
    contact_tick_budget: float = 0.0
    contact_force_weight: float = 0.0
    contact_limit_feedback: bool = True

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(
                f"inverse solver: backend {self.backend!r} unknown; choose one of {', '.join(BACKENDS)}"
            )
        for name in ("max_iterations", "osqp_max_iterations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"inverse solver: {name} must be a positive integer, got {value!r}")
        positive = (
            "length_scale",
            "primal_tolerance",
            "feasibility_tolerance",
            "active_tolerance",
            "singular_ridge",
            "osqp_eps_abs",
            "osqp_eps_rel",
        )
        for name in positive + ("epsilon", "time_limit", "contact_force_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
                raise ValueError(f"inverse solver: {name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0 or (name in positive and value == 0):
                bound = "> 0" if name in positive else ">= 0"
                raise ValueError(f"inverse solver: {name} must be finite and {bound}, got {value!r}")
        for name in ("osqp_polish", "contact_limit_feedback"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"inverse solver: {name} must be a bool, got {getattr(self, name)!r}")
        if self.contacts not in ("complementarity", "ignore"):
            raise ValueError(f"inverse solver: contacts must be 'complementarity' or 'ignore', got {self.contacts!r}")
        object.__setattr__(self, "contact_group_sources", tuple(self.contact_group_sources))
        object.__setattr__(self, "contact_group_sum_max", tuple(float(v) for v in self.contact_group_sum_max))
        try:
            self.contact_limits()
        except ValueError as exc:
            raise ValueError(f"inverse solver: {exc}") from None
        limited = self.contact_limits_set()
        if self.contacts == "ignore" and limited:  # the QP leaves the contacts out: they would do nothing
            raise ValueError(f"inverse solver: contacts 'ignore' leaves the contact forces out of the QP; "
                             f"{', '.join(limited)} would do nothing")
        if any(g > self.contact_force_sum_max for g in self.contact_group_sum_max):
            raise ValueError(f"inverse solver: a contact_group_sum_max {list(self.contact_group_sum_max)} above "
                             f"contact_force_sum_max {self.contact_force_sum_max:g} N could never bind")

    def contact_limits_set(self) -> list[str]:
        """The names of the contact-force settings that limit something (a finite bound, a
        minimum sum above 0, group bounds): they need contacts in the QP and in the snapshots."""
        names = [name for name in ("contact_force_max", "contact_force_sum_max")
                 if math.isfinite(getattr(self, name))]
        names += ["contact_min_force_sum"] if self.contact_min_force_sum > 0 else []
        names += ["contact_group_sum_max"] if self.contact_group_sum_max else []
        return names

    def contact_limits(self) -> ContactForceLimits:
        """The contact-force limits of these settings (validated)."""
        return ContactForceLimits(
            force_max=self.contact_force_max, force_sum_max=self.contact_force_sum_max,
            group_sources=self.contact_group_sources, group_sum_max=self.contact_group_sum_max,
            min_force_sum=self.contact_min_force_sum, max_states=self.contact_max_states,
            tick_budget=self.contact_tick_budget)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "InverseSolverConfig":
        """From a dict (YAML, ROS parameters); unknown keys are an error naming them."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"inverse solver: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return cls(**dict(values))

    def backend_settings(self) -> BackendSettings:
        return BackendSettings(
            max_iterations=int(self.max_iterations),
            primal_tolerance=float(self.primal_tolerance),
            time_limit=float(self.time_limit),
            osqp_eps_abs=float(self.osqp_eps_abs),
            osqp_eps_rel=float(self.osqp_eps_rel),
            osqp_max_iterations=int(self.osqp_max_iterations),
            osqp_polish=self.osqp_polish,
        )


@dataclass(frozen=True)
class ComplianceVariation:
    """The QP-matrix variation indicator of Largilliere et al. 2015.

    ``norm`` is ‖W_eaᵀW_ea‖∞ (max absolute row sum) of the snapshot ``seq``; ``percent``
    its signed relative change from the previous accepted snapshot [%] and
    ``percent_per_second`` that change divided by the snapshots' stamp difference [%/s].
    Both are NaN for the first snapshot (and the rate when the stamps do not increase).
    """

    seq: int
    stamp: float
    norm: float
    percent: float
    percent_per_second: float


@dataclass(frozen=True)
class SnapshotUpdate:
    """Outcome of :meth:`InverseSolver.set_snapshot` (a rejected snapshot changes nothing)."""

    status: SnapshotStatus
    reason: str
    seq: int
    variation: ComplianceVariation | None = None
    regularized: bool = False  #: a ridge was added to a (numerically) singular Hessian

    @property
    def accepted(self) -> bool:
        return self.status is SnapshotStatus.ACCEPTED


class ActuatorCommand(NamedTuple):
    """Efforts λ [N or Pa] and the strokes δ_a predicted for them [m or m³], (n_a,) each
    (read-only arrays; a NamedTuple because one is made every tick)."""

    efforts: np.ndarray
    strokes: np.ndarray


@dataclass(frozen=True)
class ActiveBounds:
    """Which bounds hold with equality (bool arrays, one entry per actuator).

    ``effort_lower``/``effort_upper``/``stroke_lower``/``stroke_upper`` include the per-tick
    limits; ``effort_step``/``stroke_step`` tell that the active bound is the per-tick
    variation limit rather than the absolute one.
    """

    effort_lower: np.ndarray
    effort_upper: np.ndarray
    stroke_lower: np.ndarray
    stroke_upper: np.ndarray
    effort_step: np.ndarray
    stroke_step: np.ndarray

    @property
    def any(self) -> bool:
        return bool(
            self.effort_lower.any()
            or self.effort_upper.any()
            or self.stroke_lower.any()
            or self.stroke_upper.any()
        )


class ContactOutcome(NamedTuple):
    """The contact part of a tick solved with contacts (block order, m entries each).

    ``forces`` are the predicted contact forces [N] (a reduced block: basis coefficients,
    ``force_sum`` is then the normal force they carry); ``gaps`` the predicted gaps [m];
    ``active`` the contact state chosen (gap closed); ``states_solved``/``pivots`` the
    contact-state QPs and pivots the tick took; ``truncated``: the search stopped at
    ``contact_tick_budget``.
    """

    ids: np.ndarray
    active: np.ndarray
    forces: np.ndarray
    gaps: np.ndarray
    force_sum: float
    states_solved: int
    pivots: int
    truncated: bool = False


class InverseResult:
    """One tick of the inverse solver (treat as read-only).

    A slotted class rather than a frozen dataclass: it is built every tick, and the
    bounds report and the energy are only computed when read.

    Attributes:
        status: Why this command (SOLVED, or the failure that made it a fallback).
        command_status: OK, HELD (previous valid command) or SAFE (safe command).
        message: Human-readable reason when not SOLVED ("" otherwise).
        efforts: (n_a,) efforts to apply [N or Pa], always within the effort limits.
        strokes: (n_a,) predicted strokes W_aa λ + δ_a_free [m or m³], within the stroke
            limits (servos are commanded with these; valves with the efforts).
        effector_residual: (n_e,) predicted W_ea λ + δ_e_free = x_e(λ) − target [m]
            (NaN when there is no snapshot or no valid target).
        effector_error: ‖effector_residual‖ [m].
        objective: ½‖effector_residual‖² [m²].
        solve_time: Wall time of the whole :meth:`InverseSolver.solve` call [s].
        iterations: Backend iterations (0 when the backend was not called).
        snapshot_seq: Sequence number of the snapshot used (-1: none).
        stamp: The stamp passed to solve() (e.g. the target's), passed through.
        backend: Backend name; backend_status: the backend's own status text.
        active: (property) which bounds are active, see :class:`ActiveBounds`.
        energy: (property) ½ ε w λᵀW_aaλ, the regularization part of the objective [m²].
        contact: the contact part (:class:`ContactOutcome`) when the tick was solved with
            the snapshot's contacts, else None.
    """

    __slots__ = (
        "status",
        "command_status",
        "message",
        "efforts",
        "strokes",
        "effector_residual",
        "effector_error",
        "objective",
        "solve_time",
        "iterations",
        "snapshot_seq",
        "stamp",
        "backend",
        "backend_status",
        "_active",
        "_energy",
        "_lazy",
        "contact",
    )

    def __init__(
        self,
        status: InverseStatus,
        command_status: CommandStatus,
        message: str,
        efforts: np.ndarray,
        strokes: np.ndarray,
        effector_residual: np.ndarray,
        effector_error: float,
        objective: float,
        solve_time: float,
        iterations: int,
        snapshot_seq: int,
        stamp: float | None,
        backend: str,
        backend_status: str,
        active: ActiveBounds | None = None,
        energy: float | None = None,
        lazy: tuple | None = None,
        contact: ContactOutcome | None = None,
    ) -> None:
        self.status = status
        self.command_status = command_status
        self.message = message
        self.efforts = efforts
        self.strokes = strokes
        self.effector_residual = effector_residual
        self.effector_error = effector_error
        self.objective = objective
        self.solve_time = solve_time
        self.iterations = iterations
        self.snapshot_seq = snapshot_seq
        self.stamp = stamp
        self.backend = backend
        self.backend_status = backend_status
        self._active = active
        self._energy = energy
        self._lazy = lazy  # (prepared snapshot, scaled solution μ, lower, upper) or (p, direct tick's out)
        self.contact = contact

    def reissued(self, stamp: float | None, solve_time: float) -> "InverseResult":
        """This result for another tick with the same inputs (the contact ticks' reuse,
        :meth:`InverseSolver._solve_contact`): the same command and report, its own stamp
        and solve time."""
        return InverseResult(
            self.status, self.command_status, self.message, self.efforts, self.strokes,
            self.effector_residual, self.effector_error, self.objective, solve_time, self.iterations,
            self.snapshot_seq, stamp, self.backend, self.backend_status, self._active, self._energy,
            self._lazy, self.contact)

    @property
    def ok(self) -> bool:
        return self.status is InverseStatus.SOLVED

    @property
    def command(self) -> ActuatorCommand:
        return ActuatorCommand(self.efforts, self.strokes)

    @property
    def active(self) -> ActiveBounds:
        if self._active is None:
            if len(self._lazy) == 2:  # out = [efforts | strokes | residual | μ | lower | upper | δ_e]
                p, out = self._lazy
                n, base = p.d.shape[0], 3 * p.d.shape[0] + p.n_e
                mu, lower, upper = out[base - n:base], out[base:base + 2 * n], out[base + 2 * n:base + 4 * n]
            else:
                p, mu, lower, upper = self._lazy
            above, below = tick_kernels.slacks(mu, p.k_mat, lower, upper)
            n, tol = mu.shape[0], p.active_tolerance
            at_lo = above <= tol
            at_hi = below <= tol
            step_lo = at_lo & (lower > p.static_lower)
            step_hi = at_hi & (upper < p.static_upper)
            step = step_lo | step_hi
            self._active = ActiveBounds(
                at_lo[:n], at_hi[:n], at_lo[n:], at_hi[n:], step[:n], step[n:]
            )
        return self._active

    @property
    def energy(self) -> float:
        if self._energy is None:
            p = self._lazy[0]
            self._energy = 0.5 * p.energy_weight * float(self.efforts @ (p.w_aa_sym @ self.efforts))
        return self._energy

    def __repr__(self) -> str:
        return (
            f"InverseResult(status={self.status.name}, command_status={self.command_status.name}, "
            f"efforts={self.efforts}, strokes={self.strokes}, effector_error={self.effector_error:.3g}, "
            f"iterations={self.iterations}, solve_time={self.solve_time:.3g}, message={self.message!r})"
        )


class _Prepared:
    """One accepted snapshot: the scaled problem (never mutated after set_snapshot).

    Scaled variables μ = λ / d; the backend constraint matrix is K = [I; A_s] with
    A_s = diag(r) W_aa diag(d), so ``K μ`` holds μ and the scaled strokes r ⊙ (W_aa λ).
    """

    __slots__ = (
        "snapshot",
        "n_e",
        "w_ea",
        "w_aa",
        "w_aa_sym",
        "energy_weight",
        "e_free",
        "da_free",
        "d",
        "r",
        "g_map",
        "k_mat",
        "static_lower",
        "static_upper",
        "step",
        "active_tolerance",
        "regularized",
        "h_s",  # the scaled Hessian and stroke rows handed to the backend
        "a_s",
        "contact",  # ContactTick when the snapshot's contacts enter the problem, else None
        "contact_excess",  # the limit feedback's excess bound with this snapshot (None: unchanged)
        "direct",  # DirectTick: the contact-free tick in one compiled call (None: through the backend)
    )


def _inf_norm(m: np.ndarray) -> float:
    return float(np.abs(m).sum(axis=1).max()) if m.size else 0.0


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=float)
    a.setflags(write=False)
    return a


@dataclass(eq=False)
class _ContactReuse:
    """A contact tick's inputs and its complete result (SOLVED, the search not cut by the
    tick budget). The contact search is deterministic, so a tick whose inputs are the same
    (the prepared snapshot, the target, the reference command of the per-tick limits, the
    contact tick's warm state and force estimate, whether it is the snapshot's first tick)
    would compute the same result: :meth:`InverseSolver._solve_contact` reuses it."""

    prep: object
    first: bool
    target: np.ndarray
    reference: np.ndarray
    active: np.ndarray | None  # None: no warm state yet
    forces: np.ndarray
    qp_result: object  # the ContactQPResult, which the search leaves as the tick's warm state
    result: "InverseResult"

    def matches(self, prep: object, first: bool, target: np.ndarray, reference: np.ndarray,
                active: np.ndarray | None, forces: np.ndarray) -> bool:
        """Whether these are the inputs of the stored tick (bit for bit)."""
        same_active = (active is None and self.active is None) or (
            active is not None and self.active is not None and np.array_equal(active, self.active))
        return (prep is self.prep and first == self.first and same_active
                and np.array_equal(target, self.target) and np.array_equal(reference, self.reference)
                and np.array_equal(forces, self.forces))


class InverseSolver:
    """Inverse QP solver with a persistent backend (see module docstring).

    Thread-safe: :meth:`set_snapshot` may run in another thread than :meth:`solve`; the
    numerical preparation of a snapshot runs outside the lock, only the backend setup
    (a refactorization, ~0.1 ms) and the switch hold it.

    Args:
        config: Validated settings (``InverseSolverConfig()`` for the defaults).
        limits: Limits of the actuators, in the snapshots' actuator order.

    Raises:
        ValueError: if the backend is not installed, or arguments have the wrong type.
    """

    def __init__(self, config: InverseSolverConfig, limits: ActuatorLimits) -> None:
        if not isinstance(config, InverseSolverConfig):
            raise ValueError(f"inverse solver: config must be an InverseSolverConfig, got {type(config)}")
        if not isinstance(limits, ActuatorLimits):
            raise ValueError(f"inverse solver: limits must be ActuatorLimits, got {type(limits)}")
        self._config = config
        self._limits = limits
        self._backend: QpBackend = make_backend(config.backend, config.backend_settings())
        self._n = limits.n_actuators
        self._prep: _Prepared | None = None
        # the snapshot before _prep, kept until the next one is installed: the last tick's
        # result refers to it, and without this reference the first tick on a new snapshot
        # freed it (its DirectTick, ctypes structs and ~20 arrays: ~6 µs of that tick, `bench qp`)
        self._retired: _Prepared | None = None
        self._last: ActuatorCommand | None = None
        self._ref_mu: np.ndarray | None = None  # scaled reference command of the per-tick limits
        self._reset_reference: np.ndarray | None = None  # efforts reset() restarts from (held actuators)
        self._variation: ComplianceVariation | None = None
        self._has_steps = limits.has_effort_step or limits.has_stroke_step
        self._has_stroke_step = limits.has_stroke_step
        self._safe_strokes_no_snapshot = _readonly(limits.clip_stroke(np.zeros(self._n)))
        # set_snapshot (low-rate thread) and solve (high-rate thread) may run concurrently
        self._lock = threading.Lock()
        self._kernels_ready = False  # the tick kernels ran once on a snapshot's arrays
        self._contact_kernels_ready = False  # the contact-state kernel likewise
        self._force_excess: np.ndarray | None = None  # contact_limit_feedback's margins [N] (None: none yet)
        self._last_target: np.ndarray | None = None  # the last valid target (a contact snapshot's search)
        self._contact_ticks = 0  # ticks solved with contacts, and those cut by contact_tick_budget
        self._contact_ticks_cut = 0
        self._contact_ticks_reused = 0  # contact ticks that reused the previous one's result
        self._contact_reuse: _ContactReuse | None = None
        # contact-free ticks with daqp: one compiled call into DAQP's C solver (daqp_direct.py)
        self._direct_reason = (
            daqp_direct.unavailable_reason() if config.backend == "daqp" else f"backend {config.backend}"
        )

    # ------------------------------------------------------------------ properties
    @property
    def config(self) -> InverseSolverConfig:
        return self._config

    @property
    def limits(self) -> ActuatorLimits:
        return self._limits

    @property
    def n_actuators(self) -> int:
        return self._n

    @property
    def contact_ticks(self) -> tuple[int, int]:
        """(ticks that ran the contact search, those of them cut by ``contact_tick_budget``)."""
        return self._contact_ticks, self._contact_ticks_cut

    @property
    def contact_ticks_reused(self) -> int:
        """Contact ticks whose inputs were the previous contact tick's: its result reused
        instead of searching again (:meth:`_solve_contact`; not in :attr:`contact_ticks`)."""
        return self._contact_ticks_reused

    @property
    def qp_call(self) -> str:
        """How a contact-free tick reaches the QP solver: "daqp C (compiled tick)" or
        "<backend> Python interface (<why not compiled>)"."""
        if self._direct_reason is None:
            return "daqp C (compiled tick)"
        return f"{self._backend.name} Python interface ({self._direct_reason})"

    @property
    def backend_name(self) -> str:
        return self._backend.name

    @property
    def snapshot(self) -> ComplianceSnapshot | None:
        """The snapshot in use (the newest accepted one)."""
        return None if self._prep is None else self._prep.snapshot

    @property
    def contact_tick(self) -> ContactTick | None:
        """The contact part of the snapshot in use (None: solved without contacts)."""
        return None if self._prep is None else self._prep.contact

    @property
    def last_command(self) -> ActuatorCommand | None:
        """The last valid (SOLVED) command, None before the first one (or after reset)."""
        return self._last

    @property
    def variation(self) -> ComplianceVariation | None:
        """QP-matrix variation indicator of the newest accepted snapshot."""
        return self._variation

    @property
    def regularized(self) -> bool:
        """True when the current snapshot's Hessian needed the singular ridge."""
        return bool(self._prep is not None and self._prep.regularized)

    def reset(self, hold: np.ndarray | None = None) -> None:
        """Forget the previous command: the per-tick limits restart from the safe command,
        except for the actuators ``hold`` (bool, n_a) marks, which the drivers hold where
        they were on a safe command (a hybrid robot's joint servos): theirs restart from
        the previous command's efforts (from their safe effort, the home pose, the contact
        QP found no state within one step of the pose the arm held)."""
        with self._lock:
            self._reset_reference = None
            if hold is not None and self._last is not None and np.any(hold):
                self._reset_reference = np.where(np.asarray(hold, dtype=bool), self._last.efforts,
                                                 self._limits.safe_effort)
            self._last = None
            self._update_reference()
            self._safe_reset_warm_start()

    def safe_command(self) -> ActuatorCommand:
        """The safe efforts and their predicted strokes (clipped to the stroke limits)."""
        safe = self._limits.safe_effort
        if self._prep is None:
            strokes = self._safe_strokes_no_snapshot
        else:
            strokes = _readonly(self._limits.clip_stroke(self._prep.w_aa @ safe + self._prep.da_free))
        return ActuatorCommand(safe, strokes)

    def _update_reference(self) -> None:
        p = self._prep
        if p is None:
            self._ref_mu = None
            return
        self._ref_mu = self._reference_efforts() / p.d
        if p.direct is not None:
            p.direct.set_reference(self._ref_mu)

    # ------------------------------------------------------------------ low rate
    def set_snapshot(self, snapshot: ComplianceSnapshot) -> SnapshotUpdate:
        """Use a new compliance snapshot from the next tick on.

        Never raises: a bad snapshot is rejected (status and reason returned) and the
        previous one stays in use.
        """
        steps = self.set_snapshot_steps(snapshot)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value

    def set_snapshot_steps(self, snapshot: ComplianceSnapshot) -> Generator[None, None, SnapshotUpdate]:
        """:meth:`set_snapshot` in steps of a few hundred µs: a caller that shares the
        interpreter with the ticks runs one step between two ticks and resumes it after the
        next (the generator's value is the update; nothing is installed before the last
        step, and ticks in between use the previous snapshot). Never raises."""
        try:
            rejected = self._check_snapshot(snapshot)
            if rejected is not None:
                return rejected
            yield
            prepared = self._prepare(snapshot)
            if isinstance(prepared, SnapshotUpdate):
                return prepared
            yield
            p, norm_q = prepared
            self._compile_kernels(p)
            if p.contact is None and self._direct_reason is None:
                lim = self._limits
                consts = daqp_direct.pack(
                    p.e_free, p.g_map, p.k_mat, p.static_lower, p.static_upper, p.step, p.d,
                    lim.effort_min, lim.effort_max, lim.stroke_min, lim.stroke_max, p.da_free,
                    p.w_aa, p.w_ea, p.active_tolerance, self._config.feasibility_tolerance,
                )
                p.direct = daqp_direct.DirectTick(consts, p.h_s, p.a_s, p.n_e, self._has_steps,
                                                  self._config.backend_settings())
                yield
                p.direct.warm(p.n_e)  # here, on the low-rate path: the first tick on it is not a cold one
            return self._install(p, norm_q)
        except Exception as exc:  # noqa: BLE001 - a bad snapshot must not kill the caller
            seq = getattr(snapshot, "seq", -1)
            return SnapshotUpdate(SnapshotStatus.REJECTED_INVALID, f"{type(exc).__name__}: {exc}", seq)

    def _compile_kernels(self, p: "_Prepared") -> None:
        """Compile the tick kernels for the prepared problem's array types, once."""
        if not self._kernels_ready:  # the arrays' types never change: compile once, here
            lim = self._limits
            ref_mu = self._reference_efforts() / p.d
            tick_kernels.dry_run(
                p.e_free, p.g_map, p.k_mat, ref_mu, p.static_lower, p.static_upper, p.step, self._has_steps,
                p.active_tolerance, p.d, lim.effort_min, lim.effort_max, p.w_aa, p.da_free, lim.stroke_min,
                lim.stroke_max, p.w_ea,
            )
            self._kernels_ready = True
        if p.contact is not None and not self._contact_kernels_ready:
            p.contact.warm_up()
            self._warm_contact_tick_kernels(p)
            self._contact_kernels_ready = True

    def _check_snapshot(self, snapshot: ComplianceSnapshot) -> SnapshotUpdate | None:
        """A rejection when the snapshot does not fit these limits or is not finite."""
        if not isinstance(snapshot, ComplianceSnapshot):
            return SnapshotUpdate(
                SnapshotStatus.REJECTED_INVALID, f"not a ComplianceSnapshot: {type(snapshot)}", -1
            )
        seq = snapshot.seq
        lim = self._limits
        if snapshot.n_actuators != self._n:
            return SnapshotUpdate(
                SnapshotStatus.REJECTED_SHAPE,
                f"snapshot has {snapshot.n_actuators} actuators, the limits {self._n}",
                seq,
            )
        if lim.names is not None and tuple(snapshot.actuator_names) != lim.names:
            return SnapshotUpdate(
                SnapshotStatus.REJECTED_SHAPE,
                f"snapshot actuators {snapshot.actuator_names} do not match the limits' {lim.names}",
                seq,
            )
        if not snapshot.is_finite():
            return SnapshotUpdate(SnapshotStatus.REJECTED_NOT_FINITE, "snapshot contains NaN or inf", seq)
        return None

    def _prepare(self, snapshot: ComplianceSnapshot) -> "tuple[_Prepared, float] | SnapshotUpdate":
        """The scaled problem of a snapshot (see :class:`_Prepared`) and ‖W_eaᵀW_ea‖∞, or a
        rejection when no actuator moves the effector."""
        cfg = self._config
        n = self._n
        lim = self._limits
        w_ea = _readonly(snapshot.w_ea)
        w_aa = _readonly(snapshot.w_aa)
        q = w_ea.T @ w_ea
        norm_q = _inf_norm(q)
        if not norm_q > 0.0:
            return SnapshotUpdate(
                SnapshotStatus.REJECTED_DEGENERATE, "W_ea is zero: no actuator moves the effector", snapshot.seq
            )
        w_aa_sym = _readonly(0.5 * (w_aa + w_aa.T))
        norm_w = _inf_norm(w_aa_sym)
        energy_weight = cfg.epsilon * norm_q / norm_w if norm_w > 0.0 else 0.0
        h = q + energy_weight * w_aa_sym

        # column scaling: unit diagonal of the scaled Hessian, μ in units of length_scale
        diag = np.diag(h).copy()
        diag[~(diag > 1e-14 * diag.max())] = diag.max()  # actuators that move nothing
        length = cfg.length_scale
        d = length / np.sqrt(diag)
        inv_l2 = 1.0 / (length * length)
        h_s = (d[:, None] * h * d[None, :]) * inv_l2
        h_s = 0.5 * (h_s + h_s.T)
        eig = np.linalg.eigvalsh(h_s)
        regularized = not eig[0] > cfg.singular_ridge * eig[-1]
        if regularized:
            h_s[np.diag_indices(n)] += cfg.singular_ridge * eig[-1]

        # stroke rows scaled to unit ∞-norm
        a_s = w_aa * d[None, :]
        row_norm = np.abs(a_s).max(axis=1)
        row_norm[~(row_norm > 0.0)] = 1.0
        r = 1.0 / row_norm
        a_s *= r[:, None]

        p = _Prepared()
        p.snapshot = snapshot
        p.n_e = snapshot.n_effector_rows
        p.w_ea, p.w_aa, p.w_aa_sym = w_ea, w_aa, w_aa_sym
        p.energy_weight = energy_weight
        p.e_free = _readonly(snapshot.effector_free)
        p.da_free = _readonly(snapshot.delta_a_free)
        p.d, p.r = _readonly(d), _readonly(r)
        p.g_map = _readonly((d[:, None] * w_ea.T) * inv_l2)
        p.k_mat = _readonly(np.vstack((np.eye(n), a_s)))
        # writable because daqp's Cython interface wants writable buffers; never mutated
        p.static_lower = np.concatenate((lim.effort_min / d, r * (lim.stroke_min - p.da_free)))
        p.static_upper = np.concatenate((lim.effort_max / d, r * (lim.stroke_max - p.da_free)))
        p.step = _readonly(np.concatenate((lim.max_effort_step / d, r * lim.max_stroke_step)))
        p.active_tolerance = cfg.active_tolerance
        p.regularized = regularized
        p.h_s, p.a_s = h_s, a_s
        p.contact = None
        p.contact_excess = None
        p.direct = None
        c = snapshot.contacts
        if c is not None and c.size and cfg.contacts == "complementarity":
            p.contact_excess = self._limit_excess(c)
            tick = ContactTick(snapshot, energy_weight, cfg.contact_limits(), p.contact_excess,
                               force_sum_epsilon=cfg.contact_force_weight)
            p.contact = tick if tick.size else None
            target = self._last_target
            if p.contact is not None and target is not None and target.shape == (snapshot.n_effector_rows,):
                # the full contact-state search here, at the low rate, for the last target:
                # the ticks on this snapshot start from its state (one state QP when it holds)
                e_lo, e_hi, s_lo, s_hi, ref, empty = self._contact_bounds(tick)
                if not empty:
                    tick.search(target, e_lo, e_hi, s_lo, s_hi, np.clip(ref, e_lo, e_hi))
        return p, norm_q

    def _limit_excess(self, c) -> np.ndarray | None:
        """The contact-force limits' margins (``contact_limit_feedback``) with a new snapshot's
        contact block ``c``: per bounded load (:func:`upper_loads`), the largest excess of
        the robot's load (the block's forces, under the last command: the snapshot's λ0)
        over the load the last tick predicted for that command, this one included; made
        the solver's in :meth:`_install` (a rejected snapshot leaves them)."""
        cfg = self._config
        limited = (math.isfinite(cfg.contact_force_max) or math.isfinite(cfg.contact_force_sum_max)
                   or bool(cfg.contact_group_sum_max))
        if not (cfg.contact_limit_feedback and limited):
            return None
        limits = cfg.contact_limits()
        excess = np.zeros(2 + len(limits.group_sources)) if self._force_excess is None else self._force_excess
        prev = None if self._prep is None else self._prep.contact
        predicted = None if prev is None else prev.predicted_loads()
        if predicted is not None:
            robot = upper_loads(c.force * c.force_weight, c.source, limits)
            excess = np.maximum(excess, robot - predicted)
        return excess

    def _install(self, p: _Prepared, norm_q: float) -> SnapshotUpdate:
        """Hand the prepared problem to the backend and make it the current one (under the
        lock: a tick never sees the backend and the problem of different snapshots)."""
        snapshot, seq = p.snapshot, p.snapshot.seq
        with self._lock:
            try:
                self._backend.setup(p.h_s, p.a_s)  # on failure the backend keeps the previous problem
            except Exception as exc:  # noqa: BLE001
                return SnapshotUpdate(SnapshotStatus.REJECTED_BACKEND, f"{self._backend.name}: {exc}", seq)
            previous = self._variation
            percent = rate = math.nan
            if previous is not None and previous.norm > 0.0:
                percent = 100.0 * (norm_q - previous.norm) / previous.norm
                dt = float(snapshot.stamp) - previous.stamp
                if dt > 0.0:
                    rate = percent / dt
            variation = ComplianceVariation(seq, float(snapshot.stamp), norm_q, percent, rate)
            self._variation = variation
            if p.direct is not None and self._prep is not None and self._prep.direct is not None:
                p.direct.take_warm_start(self._prep.direct)
            retired, self._retired, self._prep = self._retired, self._prep, p
            if p.contact_excess is not None:
                self._force_excess = p.contact_excess
            self._update_reference()
        del retired  # the one before: released here, on the low-rate path, outside the lock
        reason = "accepted" + (" (singular Hessian: ridge added; set epsilon > 0)" if p.regularized else "")
        return SnapshotUpdate(SnapshotStatus.ACCEPTED, reason, seq, variation, p.regularized)

    # ------------------------------------------------------------------ high rate
    def solve(self, target: np.ndarray, *, stamp: float | None = None) -> InverseResult:
        """Efforts and strokes for the effector ``target`` (n_e,) [m]. Never raises."""
        t0 = time.perf_counter()
        with self._lock:
            try:
                return self._solve(target, stamp, t0)
            except Exception as exc:  # noqa: BLE001 - never let an exception escape a tick
                self._safe_reset_warm_start()
                try:
                    return self._fallback(
                        InverseStatus.NUMERICAL_ERROR, f"{type(exc).__name__}: {exc}", t0, stamp, None
                    )
                except Exception:  # noqa: BLE001 - last resort: the safe efforts, nothing else
                    return self._last_resort(t0, stamp, f"{type(exc).__name__}: {exc}")

    def _solve(self, target: np.ndarray, stamp: float | None, t0: float) -> InverseResult:
        p = self._prep
        if p is None:
            return self._fallback(InverseStatus.NO_SNAPSHOT, "no compliance snapshot yet", t0, stamp, None)
        try:
            tgt = np.array(target, dtype=float)  # contiguous and writable: one kernel signature
        except (TypeError, ValueError) as exc:
            return self._fallback(InverseStatus.INVALID_TARGET, f"target: {exc}", t0, stamp, None)
        if tgt.shape != (p.n_e,):
            return self._fallback(
                InverseStatus.INVALID_TARGET,
                f"target has shape {tgt.shape}, expected ({p.n_e},)",
                t0,
                stamp,
                None,
            )
        if p.contact is not None:
            return self._solve_contact(p, tgt, stamp, t0)
        if p.direct is not None:
            return self._solve_direct(p, tgt, stamp, t0)
        delta_e, g, lower, upper, code = tick_kernels.prepare(
            p.e_free, tgt, p.g_map, p.k_mat, self._ref_mu, p.static_lower, p.static_upper, p.step, self._has_steps
        )
        if code:
            if code == 1:
                return self._fallback(InverseStatus.INVALID_TARGET, "target is not finite", t0, stamp, None)
            return self._fallback(
                InverseStatus.INFEASIBLE,
                "stroke bounds and the per-tick stroke limit do not intersect",
                t0,
                stamp,
                delta_e,
            )
        sol = self._backend.solve(g, lower, upper)
        if sol.status is not BackendStatus.SOLVED:
            self._safe_reset_warm_start()
            return self._fallback(
                _BACKEND_TO_STATUS[sol.status],
                f"{self._backend.name}: {sol.detail}",
                t0,
                stamp,
                delta_e,
                sol.iterations,
                sol.detail,
            )
        lim = self._limits
        efforts, strokes, residual, error, margin = tick_kernels.finish(
            sol.x, p.k_mat, lower, upper, p.active_tolerance, p.d, lim.effort_min, lim.effort_max,
            p.w_aa, p.da_free, lim.stroke_min, lim.stroke_max, p.w_ea, delta_e,
        )
        if not margin >= -self._config.feasibility_tolerance:  # also catches NaN
            self._safe_reset_warm_start()
            return self._fallback(
                InverseStatus.NUMERICAL_ERROR,
                f"solution violates the bounds by {-margin:.3g} (scaled)",
                t0,
                stamp,
                delta_e,
                sol.iterations,
                sol.detail,
            )
        efforts.setflags(write=False)
        strokes.setflags(write=False)
        self._last = ActuatorCommand(efforts, strokes)
        if self._has_steps:
            self._ref_mu = efforts / p.d
        return InverseResult(
            InverseStatus.SOLVED,
            CommandStatus.OK,
            "",
            efforts,
            strokes,
            residual,
            error,
            0.5 * error * error,
            time.perf_counter() - t0,
            sol.iterations,
            p.snapshot.seq,
            stamp,
            self._backend.name,
            sol.detail,
            lazy=(p, sol.x, lower, upper),
        )

    def _solve_direct(self, p: _Prepared, tgt: np.ndarray, stamp: float | None, t0: float) -> InverseResult:
        """A contact-free tick in one compiled call (daqp_direct.py): the same arithmetic,
        checks and fallbacks as the backend path of :meth:`_solve`; the per-tick limits'
        reference command is kept in the call's buffers (:meth:`_update_reference`)."""
        out, code, flag, iterations, error, margin = p.direct.run(tgt)
        if code:
            delta_e = out[7 * self._n + p.n_e:]
            if code == 1:
                return self._fallback(InverseStatus.INVALID_TARGET, "target is not finite", t0, stamp, None)
            if code == 2:
                return self._fallback(InverseStatus.INFEASIBLE, "stroke bounds and the per-tick stroke limit do "
                                      "not intersect", t0, stamp, delta_e)
            status, detail = DaqpBackend.exit_status(flag)
            if code == 3:
                return self._fallback(_BACKEND_TO_STATUS[status], f"daqp: {detail}", t0, stamp, delta_e,
                                      iterations, detail)
            return self._fallback(InverseStatus.NUMERICAL_ERROR, f"solution violates the bounds by {-margin:.3g} "
                                  "(scaled)", t0, stamp, delta_e, iterations, detail)
        out.setflags(write=False)
        n, n_e = self._n, p.n_e
        efforts, strokes = out[:n], out[n:2 * n]
        self._last = ActuatorCommand(efforts, strokes)
        return InverseResult(  # out = [efforts | strokes | residual | μ | lower | upper | δ_e]
            InverseStatus.SOLVED, CommandStatus.OK, "", efforts, strokes, out[2 * n:2 * n + n_e], error,
            0.5 * error * error, time.perf_counter() - t0, iterations, p.snapshot.seq, stamp, "daqp",
            "optimal" if flag == 1 else DaqpBackend.exit_status(flag)[1],
            lazy=(p, out),
        )

    def _solve_contact(self, p: _Prepared, tgt: np.ndarray, stamp: float | None, t0: float) -> InverseResult:
        """A tick with the snapshot's contacts: the QP with complementarity (contact_inverse.py)
        within the effort and stroke bounds intersected with the per-tick limits around
        the last command (its strokes predicted with the last tick's contact forces)."""
        lim, tick = self._limits, p.contact
        if not np.isfinite(tgt).all():
            return self._fallback(InverseStatus.INVALID_TARGET, "target is not finite", t0, stamp, None)
        self._last_target = tgt
        ref = self._reference_efforts()
        first = tick.last_result is None
        reuse = self._contact_reuse
        if reuse is not None and reuse.matches(p, first, tgt, ref, tick.warm_active, tick.last_forces):
            # the same inputs as the tick that computed it: the same command (a held target
            # on a converged command: most ticks between two snapshots)
            tick.reuse(reuse.qp_result)
            self._commit(p, reuse.result.efforts, reuse.result.strokes)
            self._contact_ticks_reused += 1
            return reuse.result.reissued(stamp, time.perf_counter() - t0)
        self._contact_reuse = None
        warm = tick.warm_active
        inputs = (first, tgt.copy(), np.array(ref), None if warm is None else warm.copy(),
                  np.array(tick.last_forces))
        e_lo, e_hi, s_lo, s_hi, ref, empty = self._contact_bounds(tick)

        def held_residual() -> np.ndarray:  # the fallbacks' effector residual: the forces held
            return tick.e_free + tick.w_ec @ tick.last_forces - tgt

        if empty:
            return self._fallback(InverseStatus.INFEASIBLE, "the bounds and the per-tick limits do not intersect",
                                  t0, stamp, held_residual())
        r = tick.solve(tgt, e_lo, e_hi, s_lo, s_hi, np.minimum(np.maximum(ref, e_lo), e_hi), started=t0)
        self._contact_ticks += 1
        self._contact_ticks_cut += r.truncated
        if not r.feasible and tick.has_upper_limits:
            return self._back_off(p, tgt, stamp, t0, (e_lo, e_hi, s_lo, s_hi), r.states_solved)
        if not r.feasible:
            return self._fallback(InverseStatus.INFEASIBLE, f"no contact state admits efforts within the limits "
                                  f"({r.states_solved} states)", t0, stamp, held_residual(), r.states_solved)
        # the predicted strokes, the post-solve check in the scaled units of the contact-free
        # path, the command clipped to the limits and its active bounds, in one kernel call
        efforts, strokes, margin, flags = tick_kernels.contact_finish(
            r.efforts, r.forces, e_lo, e_hi, s_lo, s_hi, p.d, p.r, tick.w_aa, tick.w_ca, tick.a_free,
            lim.effort_min, lim.effort_max, lim.stroke_min, lim.stroke_max, self._config.active_tolerance)
        if not margin >= -self._config.feasibility_tolerance:  # also catches NaN
            return self._fallback(InverseStatus.NUMERICAL_ERROR,
                                  f"contact solution violates the bounds by {-margin:.3g} (scaled)",
                                  t0, stamp, held_residual(), r.states_solved)
        self._commit(p, efforts, strokes)
        active = ActiveBounds(*flags)
        c = p.snapshot.contacts
        forces = tick.full_forces(r.forces)
        gaps = c.gap.copy()
        gaps[tick.keep] = r.gaps
        outcome = ContactOutcome(c.ids, tick.full_forces(r.active).astype(bool), forces, gaps,
                                 float(forces @ c.force_weight), r.states_solved, r.pivots, r.truncated)
        error = float(np.linalg.norm(r.effector_residual))
        result = InverseResult(
            InverseStatus.SOLVED, CommandStatus.OK, "", efforts, strokes, r.effector_residual, error,
            0.5 * error * error, time.perf_counter() - t0, r.states_solved, p.snapshot.seq, stamp,
            self._backend.name, f"contacts: {r.states_solved} states, {r.pivots} pivots"
            + (", search cut by the tick budget" if r.truncated else ""), active=active,
            energy=0.5 * p.energy_weight * float(efforts @ (p.w_aa_sym @ efforts)), contact=outcome)
        if not r.truncated:  # a cut search is not what the inputs give: search again next time
            self._contact_reuse = _ContactReuse(p, *inputs, r, result)
        return result

    def _commit(self, p: _Prepared, efforts: np.ndarray, strokes: np.ndarray) -> None:
        """A contact tick's command (efforts and strokes already clipped to the limits by
        tick_kernels.contact_finish) made read-only and the last command, the reference of
        the per-tick limits."""
        efforts.setflags(write=False)
        strokes.setflags(write=False)
        self._last = ActuatorCommand(efforts, strokes)
        if self._has_steps:
            self._ref_mu = efforts / p.d

    def _warm_contact_tick_kernels(self, p: _Prepared) -> None:
        """Call the contact tick's kernels (tick_kernels.contact_bounds, contact_finish) once
        with arguments of the types a tick passes (numba compiles one version per argument
        type, read-only arrays included): here, at the low rate, not in the first tick."""
        lim, tick = self._limits, p.contact
        e_lo, e_hi, s_lo, s_hi, _, _ = self._contact_bounds(tick)
        tick_kernels.contact_finish(
            np.zeros(self._n), np.zeros(tick.size), e_lo, e_hi, s_lo, s_hi, p.d, p.r, tick.w_aa, tick.w_ca,
            tick.a_free, lim.effort_min, lim.effort_max, lim.stroke_min, lim.stroke_max, self._config.active_tolerance)

    def _reference_efforts(self) -> np.ndarray:
        """The per-tick limits' reference: the last command's efforts (before the first, or
        after :meth:`reset`: the safe efforts, the held actuators' last efforts)."""
        if self._last is not None:
            return self._last.efforts
        if self._reset_reference is not None:
            return self._reset_reference
        return self._limits.safe_effort

    def _contact_bounds(self, tick: ContactTick) -> tuple:
        """(e_lo, e_hi, s_lo, s_hi, reference efforts, empty) of a contact tick: the effort
        and stroke bounds intersected with the per-tick limits around the last command (its
        strokes predicted with the tick's last contact forces); ``empty`` when they do not
        intersect (tick_kernels.contact_bounds)."""
        lim = self._limits
        ref = self._reference_efforts()
        e_lo, e_hi, s_lo, s_hi, empty = tick_kernels.contact_bounds(
            ref, tick.last_forces, tick.w_aa, tick.w_ca, tick.a_free, lim.effort_min, lim.effort_max,
            lim.stroke_min, lim.stroke_max, lim.max_effort_step, lim.max_stroke_step, self._has_steps)
        return e_lo, e_hi, s_lo, s_hi, ref, empty

    def _back_off(self, p: _Prepared, tgt: np.ndarray, stamp: float | None, t0: float, bounds: tuple,
                  states: int) -> InverseResult:
        """No contact state meets the contact-force limits within this tick's bounds (the
        robot already presses harder than allowed and the per-tick limits cannot undo it
        in one tick): move the efforts one per-tick step toward the safe command (never
        adding effort) instead of holding the pressing one."""
        lim, tick = self._limits, p.contact
        e_lo, e_hi, s_lo, s_hi = bounds
        # the strokes under the tick's last forces, their slack to the tick's bounds (the
        # efforts are inside theirs: margin < 0 is a stroke outside), the clipped command
        # and its active bounds, as a solved contact tick has them
        efforts, strokes, margin, flags = tick_kernels.contact_finish(
            np.minimum(np.maximum(lim.safe_effort, e_lo), e_hi), tick.last_forces, e_lo, e_hi, s_lo, s_hi, p.d,
            p.r, tick.w_aa, tick.w_ca, tick.a_free, lim.effort_min, lim.effort_max, lim.stroke_min,
            lim.stroke_max, self._config.active_tolerance)
        if not margin >= 0.0:  # also a NaN margin (non-finite forces): never commit it
            return self._fallback(InverseStatus.INFEASIBLE, "contact-force limits unreachable and backing off "
                                  "leaves the stroke bounds", t0, stamp, tick.e_free - tgt, states)
        self._commit(p, efforts, strokes)
        residual = p.w_ea @ efforts + tick.e_free + tick.w_ec @ tick.last_forces - tgt
        error = float(np.linalg.norm(residual))
        return InverseResult(
            InverseStatus.INFEASIBLE, CommandStatus.HELD,
            "contact-force limits unreachable within the per-tick limits: stepping toward the safe command",
            efforts, strokes, residual, error, 0.5 * error * error, time.perf_counter() - t0, states,
            p.snapshot.seq, stamp, self._backend.name, BACKING_OFF, active=ActiveBounds(*flags),
            energy=0.5 * p.energy_weight * float(efforts @ (p.w_aa_sym @ efforts)))

    # ------------------------------------------------------------------ failures
    def _last_resort(self, t0: float, stamp: float | None, message: str) -> InverseResult:
        safe = self._limits.safe_effort
        none = np.zeros(self._n, dtype=bool)
        return InverseResult(
            InverseStatus.NUMERICAL_ERROR,
            CommandStatus.SAFE,
            message,
            safe,
            self._safe_strokes_no_snapshot,
            np.zeros(0),
            math.nan,
            math.nan,
            time.perf_counter() - t0,
            0,
            -1,
            stamp,
            self._backend.name,
            "",
            active=ActiveBounds(none, none, none, none, none, none),
            energy=math.nan,
        )

    def _safe_reset_warm_start(self) -> None:
        try:
            self._backend.reset_warm_start()
            if self._prep is not None and self._prep.direct is not None:
                self._prep.direct.reset_warm_start()
        except Exception:  # noqa: BLE001 - best effort; the next setup starts clean anyway
            pass

    def _fallback(
        self,
        status: InverseStatus,
        message: str,
        t0: float,
        stamp: float | None,
        delta_e: np.ndarray | None,
        iterations: int = 0,
        backend_status: str = "",
    ) -> InverseResult:
        """The previous valid command (or the safe command) clipped to the limits."""
        lim, p = self._limits, self._prep
        if self._last is not None:
            efforts = _readonly(lim.clip_effort(self._last.efforts))
            strokes = _readonly(lim.clip_stroke(self._last.strokes))
            command_status = CommandStatus.HELD
        else:
            safe = self.safe_command()
            efforts, strokes = safe.efforts, safe.strokes
            command_status = CommandStatus.SAFE
        n_e = 0 if p is None else p.n_e
        if p is not None and delta_e is not None:
            residual = p.w_ea @ efforts + delta_e
            energy = 0.5 * p.energy_weight * float(efforts @ (p.w_aa_sym @ efforts))
            error = math.hypot(*residual.tolist())
        else:
            residual = np.full(n_e, np.nan)
            energy = error = math.nan
        none = np.zeros(self._n, dtype=bool)
        active = ActiveBounds(
            efforts <= lim.effort_min,
            efforts >= lim.effort_max,
            strokes <= lim.stroke_min,
            strokes >= lim.stroke_max,
            none,
            none,
        )
        return InverseResult(
            status,
            command_status,
            message,
            efforts,
            strokes,
            residual,
            error,
            0.5 * error * error,
            time.perf_counter() - t0,
            iterations,
            -1 if p is None else p.snapshot.seq,
            stamp,
            self._backend.name,
            backend_status,
            active=active,
            energy=energy,
        )
