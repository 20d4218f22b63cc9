"""Per-actuator limits of the inverse problem (validated once, at configuration time).

One entry per actuator column of the compliance snapshot, in the snapshot's order:

- effort bounds ``effort_min ≤ λ ≤ effort_max`` [N for cables/forces, Pa for pressures];
  cables are unilateral (``effort_min = 0``), pressures may be bounded both ways;
- stroke bounds ``stroke_min ≤ δ_a ≤ stroke_max`` on the predicted actuator
  displacement ``δ_a = W_aa λ + δ_a_free`` [m cable shortening / m³ cavity growth];
- per-tick variation limits ``|λ − λ_prev| ≤ max_effort_step`` and
  ``|δ_a − δ_a_prev| ≤ max_stroke_step`` (SOFA's maxPressureVariation /
  maxDispVariation); ``inf`` means unlimited;
- the safe command ``safe_effort``, sent when nothing better is known (default: the
  admissible effort of lowest magnitude, i.e. 0 N / 0 Pa clipped to the effort bounds).

Infinite bounds are allowed (``-inf``/``inf``); NaN never is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

_FIELDS = (
    "effort_min",
    "effort_max",
    "stroke_min",
    "stroke_max",
    "max_effort_step",
    "max_stroke_step",
    "safe_effort",
)


def _vector(name: str, value: object, n: int | None, default: float | None) -> np.ndarray:
    if value is None:
        if default is None or n is None:
            raise ValueError(f"actuator limits: {name} is required")
        out = np.full(n, default, dtype=float)
    else:
        try:
            out = np.array(value, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"actuator limits: {name} is not numeric ({exc})") from None
        if out.ndim == 0 and n is not None:
            out = np.full(n, float(out))
        if out.ndim != 1:
            raise ValueError(f"actuator limits: {name} must be a 1-D array, got shape {out.shape}")
        if n is not None and out.shape != (n,):
            raise ValueError(
                f"actuator limits: {name} has {out.shape[0]} entries, expected {n} (one per actuator)"
            )
    if np.isnan(out).any():
        raise ValueError(f"actuator limits: {name} contains NaN at index {int(np.argmax(np.isnan(out)))}")
    out.setflags(write=False)
    return out


def _first(mask: np.ndarray) -> int:
    return int(np.argmax(mask))


@dataclass(frozen=True, init=False)
class ActuatorLimits:
    """Validated limits for ``n`` actuators; every field is a read-only float array (n,).

    Construct directly from the arrays the robot model produces::

        ActuatorLimits(a_min, a_max, l_min, l_max, max_effort_step, max_stroke_step)

    Scalars are broadcast to all actuators (``effort_min`` must be an array, it fixes n);
    ``None`` means unbounded (``∓inf``) for strokes and steps. ``names``, when given, must
    match the snapshot's ``actuator_names`` (order included) or the snapshot is rejected.

    Raises:
        ValueError: naming the field on NaN, wrong length, no actuators, ``min > max``,
            ``effort_min = +inf`` / ``effort_max = -inf``, a non-positive step, or a
            ``safe_effort`` outside the effort bounds.
    """

    effort_min: np.ndarray
    effort_max: np.ndarray
    stroke_min: np.ndarray
    stroke_max: np.ndarray
    max_effort_step: np.ndarray
    max_stroke_step: np.ndarray
    safe_effort: np.ndarray
    names: tuple[str, ...] | None

    def __init__(
        self,
        effort_min: Sequence[float] | np.ndarray,
        effort_max: Sequence[float] | np.ndarray | float,
        stroke_min: Sequence[float] | np.ndarray | float | None = None,
        stroke_max: Sequence[float] | np.ndarray | float | None = None,
        max_effort_step: Sequence[float] | np.ndarray | float | None = None,
        max_stroke_step: Sequence[float] | np.ndarray | float | None = None,
        safe_effort: Sequence[float] | np.ndarray | float | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        a_min = _vector("effort_min", effort_min, None, None)
        n = a_min.shape[0]
        if n == 0:
            raise ValueError("actuator limits: no actuators (effort_min is empty)")
        a_max = _vector("effort_max", effort_max, n, None)
        l_min = _vector("stroke_min", stroke_min, n, -np.inf)
        l_max = _vector("stroke_max", stroke_max, n, np.inf)
        d_a = _vector("max_effort_step", max_effort_step, n, np.inf)
        d_l = _vector("max_stroke_step", max_stroke_step, n, np.inf)

        if (bad := a_min > a_max).any():
            i = _first(bad)
            raise ValueError(
                f"actuator limits: effort_min[{i}] = {a_min[i]} > effort_max[{i}] = {a_max[i]}"
            )
        if (bad := np.isposinf(a_min) | np.isneginf(a_max)).any():
            raise ValueError(f"actuator limits: effort bounds of actuator {_first(bad)} admit no effort")
        if (bad := l_min > l_max).any():
            i = _first(bad)
            raise ValueError(
                f"actuator limits: stroke_min[{i}] = {l_min[i]} > stroke_max[{i}] = {l_max[i]}"
            )
        if (bad := np.isposinf(l_min) | np.isneginf(l_max)).any():
            raise ValueError(f"actuator limits: stroke bounds of actuator {_first(bad)} admit no stroke")
        for name, step in (("max_effort_step", d_a), ("max_stroke_step", d_l)):
            if (bad := ~(step > 0)).any():
                i = _first(bad)
                raise ValueError(f"actuator limits: {name}[{i}] = {step[i]} must be > 0 (inf = unlimited)")

        if safe_effort is None:
            safe = np.clip(np.zeros(n), a_min, a_max)
            safe.setflags(write=False)
        else:
            safe = _vector("safe_effort", safe_effort, n, None)
            if (bad := ~np.isfinite(safe)).any():
                raise ValueError(f"actuator limits: safe_effort[{_first(bad)}] must be finite")
            if (bad := (safe < a_min) | (safe > a_max)).any():
                i = _first(bad)
                raise ValueError(
                    f"actuator limits: safe_effort[{i}] = {safe[i]} is outside "
                    f"[{a_min[i]}, {a_max[i]}]"
                )
        if names is not None:
            names = tuple(str(s) for s in names)
            if len(names) != n:
                raise ValueError(f"actuator limits: names has {len(names)} entries, expected {n}")
            if len(set(names)) != n:
                raise ValueError(f"actuator limits: duplicate actuator names {names}")

        for field, value in zip(_FIELDS, (a_min, a_max, l_min, l_max, d_a, d_l, safe)):
            object.__setattr__(self, field, value)
        object.__setattr__(self, "names", names)

    @property
    def n_actuators(self) -> int:
        return int(self.effort_min.shape[0])

    @property
    def has_effort_step(self) -> bool:
        """True when at least one actuator has a finite per-tick effort variation limit."""
        return bool(np.isfinite(self.max_effort_step).any())

    @property
    def has_stroke_step(self) -> bool:
        """True when at least one actuator has a finite per-tick stroke variation limit."""
        return bool(np.isfinite(self.max_stroke_step).any())

    def clip_effort(self, effort: np.ndarray) -> np.ndarray:
        """``effort`` clipped to the effort bounds (a new array) [N or Pa]."""
        return np.clip(effort, self.effort_min, self.effort_max)

    def clip_stroke(self, stroke: np.ndarray) -> np.ndarray:
        """``stroke`` clipped to the stroke bounds (a new array) [m or m³]."""
        return np.clip(stroke, self.stroke_min, self.stroke_max)

    def permuted(self, order: Sequence[int]) -> "ActuatorLimits":
        """The same limits with actuators reordered: new actuator i is old ``order[i]``."""
        idx = np.asarray(order, dtype=int)
        if sorted(idx.tolist()) != list(range(self.n_actuators)):
            raise ValueError(f"actuator limits: {list(order)} is not a permutation of the actuators")
        return ActuatorLimits(
            *(getattr(self, f)[idx] for f in _FIELDS),
            names=None if self.names is None else tuple(self.names[i] for i in idx),
        )


def limits_from_description(description) -> ActuatorLimits:
    """The limits of a :class:`~soft_inverse_ros.core.model.description.RobotDescription`'s
    actuators, in their order, named after them (SI: N or Pa, m or m³).

    Cables and linear forces use their force and stroke bounds; pressure cavities their
    pressure and volume-growth bounds (no per-tick stroke limit).
    """
    from soft_inverse_ros.core.model.description import CavitySpec

    rows = []
    for spec in description.actuators:
        if isinstance(spec, CavitySpec):
            rows.append((spec.min_pressure, spec.max_pressure, spec.min_volume_growth,
                         spec.max_volume_growth, spec.max_pressure_step, np.inf))
        else:
            rows.append((spec.min_force, spec.max_force, spec.min_stroke, spec.max_stroke,
                         spec.max_force_step, spec.max_stroke_step))
    if not rows:
        raise ValueError(f"robot {description.name!r} has no actuators")
    a = np.array(rows, dtype=float).T
    return ActuatorLimits(a[0], a[1], a[2], a[3], a[4], a[5],
                          names=[spec.name for spec in description.actuators])
