"""Closed-loop correction of the effector target from measured effector positions.

The inverse QP drives the *model* effector to the target t. Model errors (stiffness,
geometry, friction, registration) leave a steady offset between the target and the real
effector. :class:`TargetFeedback` measures it (mocap, robot frame) and shifts the target
the QP sees between compliance snapshots:

    e(t_m)    = t(t_m) − y(t_m)                  (target at the measurement time − measured)
    I        += K_i e dt                         (integral of the error) [m]
    c         = I + K_p e,   |c| ≤ max_correction
    t_QP      = t + c      →  δ_e_free = snapshot.delta_e_free(t_QP)

Anti-windup when the QP could not realize its target (``saturated=True``, see
:func:`qp_saturated`: the predicted effector misses t_QP by more than
:data:`SATURATION_RESIDUAL`; an active bound alone, e.g. a slack cable at zero tension
while the others do the work, does not saturate anything):

* ``"freeze"`` (conditional integration): the integrator may only shrink;
* ``"back_calculation"``: the integrator also tracks what the actuators can deliver,
  ``I += K_t r dt`` with the QP residual r = W_ea λ + δ_e_free (the predicted effector
  minus t_QP); without a residual it behaves as ``"freeze"``;
* ``"none"``: plain integration (for comparison only).

The integrator is always kept within ``max_correction``. Measurements older than
``stale_after`` (or missing, or non-finite) switch to open loop (``t_QP = t``), reported
as :attr:`FeedbackMode.STALE`; the integrator is held, not reset. Enabling resets the
integrator. Units: metres and seconds; every method takes the time explicitly, so the law
is deterministic and testable without a clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np

ANTI_WINDUP_MODES = ("freeze", "back_calculation", "none")
#: predicted effector residual ‖W_ea λ + δ_e_free‖ [m] above which the QP counts as
#: saturated (it could not reach t_QP within its bounds); the ε-energy term alone leaves
#: residuals of micrometres
SATURATION_RESIDUAL = 2e-5


def qp_saturated(ok: bool, effector_error: float) -> bool:
    """Whether a QP solution saturates the feedback: it was solved (``ok``) and its
    predicted effector error [m] exceeds :data:`SATURATION_RESIDUAL`."""
    return bool(ok and effector_error > SATURATION_RESIDUAL)


class FeedbackMode(str, Enum):
    """What the correction did on one update."""

    DISABLED = "disabled"  #: open loop by choice
    CLOSED_LOOP = "closed_loop"  #: correction applied from a fresh measurement
    STALE = "open_loop_stale"  #: enabled, but no fresh finite measurement → open loop


@dataclass(frozen=True)
class FeedbackConfig:
    """Gains and limits of the target correction.

    Attributes:
        ki: Integral gain [1/s].
        kp: Proportional gain [-] (0 disables the proportional term).
        max_correction: Largest norm of the correction c [m].
        stale_after: Oldest usable measurement age [s]; a measurement stamped more than this
            in the future (clock skew between machines) is not used either.
        anti_windup: ``"freeze"``, ``"back_calculation"`` or ``"none"``.
        back_calculation_gain: K_t of back-calculation [1/s].
        max_dt: Longest integration step [s] (longer gaps, e.g. a paused loop, are clipped).
        align_target: Compare the measurement with the target in force at its stamp
            (compensates the mocap latency for moving targets) instead of the current one.
        target_history_size: Targets remembered for that alignment.
        enabled: Initial state.
    """

    ki: float = 2.0
    kp: float = 0.0
    max_correction: float = 0.01
    stale_after: float = 0.1
    anti_windup: str = "freeze"
    back_calculation_gain: float = 5.0
    max_dt: float = 0.05
    align_target: bool = True
    target_history_size: int = 256
    enabled: bool = False

    def __post_init__(self) -> None:
        for key in ("ki", "kp", "back_calculation_gain"):
            value = getattr(self, key)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"feedback.{key} must be a finite number ≥ 0, got {value!r}")
        for key in ("max_correction", "stale_after", "max_dt"):
            value = getattr(self, key)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"feedback.{key} must be a finite number > 0, got {value!r}")
        if self.anti_windup not in ANTI_WINDUP_MODES:
            raise ValueError(
                f"feedback.anti_windup must be one of {ANTI_WINDUP_MODES}, got {self.anti_windup!r}"
            )
        if int(self.target_history_size) != self.target_history_size or self.target_history_size < 1:
            raise ValueError(
                f"feedback.target_history_size must be an integer ≥ 1, "
                f"got {self.target_history_size!r}"
            )


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class FeedbackOutput:
    """Result of one :meth:`TargetFeedback.update`.

    Attributes:
        target: (n,) corrected target t_QP to hand to the QP [m].
        correction: (n,) c = t_QP − t [m].
        error: (n,) error e used this step [m] (zeros in open loop).
        mode: Closed loop, disabled or stale fallback.
        integrating: The integrator grew this step (False when frozen or open loop).
        saturated: The QP bound flag passed in.
        clipped: c or the integrator was limited to ``max_correction`` this step.
        measurement_age: now − measurement stamp [s] (inf when none).
    """

    target: np.ndarray
    correction: np.ndarray
    error: np.ndarray
    mode: FeedbackMode
    integrating: bool
    saturated: bool
    clipped: bool
    measurement_age: float

    @property
    def closed_loop(self) -> bool:
        return self.mode is FeedbackMode.CLOSED_LOOP


def _clip_norm(v: np.ndarray, limit: float) -> tuple[np.ndarray, bool]:
    norm = float(np.linalg.norm(v))
    if norm > limit:
        return v * (limit / norm), True
    return v, False


class TargetFeedback:
    """Integral (+ proportional) correction of the effector target (module docstring).

    Args:
        config: Gains and limits.
        n_rows: Number of effector rows (3 per effector point), matching the snapshot.
    """

    def __init__(self, config: FeedbackConfig, n_rows: int) -> None:
        if n_rows < 1:
            raise ValueError(f"n_rows must be ≥ 1, got {n_rows}")
        self.config = config
        self.n_rows = int(n_rows)
        self._enabled = bool(config.enabled)
        self._integrator = np.zeros(self.n_rows)
        self._zeros = np.zeros(self.n_rows)  # the open loop's correction and error (read-only)
        self._zeros.setflags(write=False)
        self._last_now: float | None = None
        size = int(config.target_history_size)
        self._hist_t = np.full(size, -np.inf)
        self._hist_x = np.zeros((size, self.n_rows))
        self._hist_next = 0

    # ----------------------------------------------------------------- state

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def integrator(self) -> np.ndarray:
        """Current integral term I [m] (a copy)."""
        return self._integrator.copy()

    def set_enabled(self, enabled: bool) -> None:
        """Switch the correction on or off at run time; switching on resets the integrator."""
        enabled = bool(enabled)
        if enabled and not self._enabled:
            self.reset()
        self._enabled = enabled

    def reset(self) -> None:
        """Zero the integrator (the target history is kept)."""
        self._integrator[:] = 0.0

    # ----------------------------------------------------------------- update

    def _remember(self, now: float, target: np.ndarray) -> None:
        i = self._hist_next
        self._hist_t[i] = now
        self._hist_x[i] = target
        self._hist_next = (i + 1) % len(self._hist_t)

    def target_at(self, stamp: float) -> np.ndarray:
        """The target in force at ``stamp`` [s]: the latest remembered one not after it
        (the oldest remembered one when ``stamp`` precedes the history)."""
        known = np.isfinite(self._hist_t)
        if not np.any(known):
            raise ValueError("no target remembered yet")
        candidates = np.where(self._hist_t <= stamp, self._hist_t, -np.inf)
        if np.isfinite(candidates.max()):
            return self._hist_x[int(np.argmax(candidates))].copy()
        oldest = np.where(known, self._hist_t, np.inf)
        return self._hist_x[int(np.argmin(oldest))].copy()

    def update(
        self,
        now: float,
        target: np.ndarray,
        measured: np.ndarray | None = None,
        measured_stamp: float | None = None,
        *,
        saturated: bool = False,
        qp_residual: np.ndarray | None = None,
    ) -> FeedbackOutput:
        """Advance the correction to time ``now`` and return the target for the QP.

        Args:
            now: Current time [s] (monotonic between calls).
            target: (n,) desired effector rows [m], robot frame.
            measured: (n,) latest measured effector rows [m] (None when none).
            measured_stamp: Capture time of ``measured`` [s].
            saturated: The last QP solution had active actuator (effort or stroke) bounds.
            qp_residual: (n,) W_ea λ + δ_e_free of the last solution [m] (for
                back-calculation).
        """
        cfg = self.config
        target = np.asarray(target, dtype=float).reshape(-1)
        if target.shape != (self.n_rows,):
            raise ValueError(f"target has {target.shape[0]} rows, expected {self.n_rows}")
        # math on a list, min/max, a shared zero vector: this runs at every 1 kHz tick, closed
        # loop or not, where numpy's isfinite/clip/zeros on a few numbers cost ~10 µs a tick
        if not all(map(math.isfinite, target.tolist())):
            raise ValueError("target contains NaN or infinite values")
        dt = 0.0 if self._last_now is None else min(max(float(now - self._last_now), 0.0), cfg.max_dt)
        self._last_now = now
        self._remember(now, target)

        zeros = self._zeros
        age = float("inf") if measured_stamp is None else float(now - measured_stamp)
        if not self._enabled:
            return FeedbackOutput(target, zeros, zeros, FeedbackMode.DISABLED, False,
                                  bool(saturated), False, age)
        usable = (
            measured is not None
            and measured_stamp is not None
            and np.isfinite(measured_stamp)
            and -cfg.stale_after <= age <= cfg.stale_after  # from the future: clock skew
        )
        if usable:
            y = np.asarray(measured, dtype=float).reshape(-1)
            if y.shape != (self.n_rows,):
                raise ValueError(f"measured has {y.shape[0]} rows, expected {self.n_rows}")
            usable = bool(np.all(np.isfinite(y)))
        if not usable:
            return FeedbackOutput(target, zeros, zeros, FeedbackMode.STALE, False,
                                  bool(saturated), False, age)

        reference = self.target_at(measured_stamp) if cfg.align_target else target
        error = reference - y
        old = self._integrator
        new = old + cfg.ki * dt * error
        if cfg.anti_windup == "back_calculation" and qp_residual is not None:
            r = np.asarray(qp_residual, dtype=float).reshape(-1)
            if r.shape != (self.n_rows,) or not np.all(np.isfinite(r)):
                raise ValueError(f"qp_residual must be {self.n_rows} finite rows")
            new = new + cfg.back_calculation_gain * dt * r
        elif saturated and cfg.anti_windup != "none":
            if np.linalg.norm(new) > np.linalg.norm(old):
                new = old  # conditional integration: only unwinding is allowed
        new, integrator_clipped = _clip_norm(new, cfg.max_correction)
        integrating = bool(np.linalg.norm(new) > np.linalg.norm(old))
        self._integrator = new
        correction, clipped = _clip_norm(new + cfg.kp * error, cfg.max_correction)
        return FeedbackOutput(target + correction, correction, error, FeedbackMode.CLOSED_LOOP,
                              integrating, bool(saturated), clipped or integrator_clipped, age)
