"""Sweep specs for building a reduced contact basis (core/contact/basis_builder.py): which
actuator postures the simulated robot is driven through.

A spec is ``NAME=LO:HI[:STEP]UNIT`` (e.g. ``cable=0:55:0.05mm``): the actuator's low and high
levels and the increment per plant step, with a unit of the actuator's input (cables: a
length, the servo stroke; pressure cavities: a pressure; forces: a force). Without STEP a
ramp from rest to HI takes ``default_steps`` steps; ``hold`` more steps stay at each posture.
The plant is driven by cable strokes, the controller's model (``efforts``) by cable tensions.

One actuator: a ramp from LO to HI (the steps from rest to LO, if LO ≠ 0, are taken but not
recorded; LO < 0 < HI, e.g. a bilateral force: a ramp to each). Several actuators: a
two-level Plackett–Burman-style design (the columns of a Hadamard matrix,
:func:`scipy.linalg.hadamard`, of the smallest power-of-two order > n: 4 runs for up to 3
actuators, 8 for up to 7, …) with every actuator at LO or HI in each run; each run ramps all
actuators together from rest (0) to its posture, every step recorded.

Values SI (m, Pa, N).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from soft_inverse_ros.core.model import units
from soft_inverse_ros.core.model.snapshot import ActuatorKind

#: the input dimension of each actuator kind: what the plant is driven with (a cable: its
#: servo stroke) and what the controller's model is driven with (a cable: its tension)
_INPUT_DIM = {ActuatorKind.CABLE: units.LENGTH, ActuatorKind.PRESSURE: units.PRESSURE,
              ActuatorKind.FORCE: units.FORCE}
_EFFORT_DIM = {ActuatorKind.CABLE: units.FORCE, ActuatorKind.PRESSURE: units.PRESSURE,
               ActuatorKind.FORCE: units.FORCE}
#: the SI unit of a swept quantity, for messages
_SI_SYMBOL = {units.LENGTH: "m", units.PRESSURE: "Pa", units.FORCE: "N"}
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_SPEC_RE = re.compile(rf"^\s*([^=\s]+)\s*=\s*({_NUMBER}):({_NUMBER})(?::({_NUMBER}))?\s*([A-Za-zµ][A-Za-zµ0-9/^*]*)?\s*$")
#: most plant steps a sweep may take (a typo like 0:55m with a 0.05 mm step)
MAX_STEPS = 200_000

class SweepError(ValueError):
    """A bad sweep spec (one line naming it)."""


@dataclass(frozen=True)
class ActuatorRange:
    """One swept actuator: ``low``/``high`` levels and ``step`` per plant step (SI: m, Pa
    or N; ``step`` None: ``default_steps`` per ramp from rest to ``high``)."""

    name: str
    low: float
    high: float
    step: float | None
    spec: str


@dataclass(frozen=True)
class Sweep:
    """The actuators swept (the others stay at 0) and the ramps from rest."""

    ranges: tuple[ActuatorRange, ...]
    default_steps: int = 100
    hold: int = 0  # steps held (and recorded) at each posture after its ramp

    @property
    def specs(self) -> tuple[str, ...]:
        return tuple(r.spec for r in self.ranges)

    def postures(self) -> np.ndarray:
        """(runs, n) target levels. One actuator: HI (and LO too when LO < 0 < HI, e.g. a
        bilateral force: both signs are ramped to). Several: the two-level Hadamard design
        (LO where the matrix has −1, HI where +1; its first column, all +1, is skipped)."""
        from scipy.linalg import hadamard

        n = len(self.ranges)
        low = np.array([r.low for r in self.ranges])
        high = np.array([r.high for r in self.ranges])
        if n == 1:
            lo, hi = low[0], high[0]
            if lo < 0.0 < hi:
                return np.array([[hi], [lo]])
            return np.array([[hi if hi > 0 else lo]])
        order = 1 << math.ceil(math.log2(n + 1))
        signs = hadamard(order)[:, 1:n + 1]
        return np.where(signs > 0, high[None, :], low[None, :])

    def ramps(self) -> list[tuple[np.ndarray, int]]:
        """Per run: (inputs (steps + 1, n) from rest to the posture, the first recorded
        row). One actuator: the steps outside [LO, HI] (from rest to the nearer level when
        rest is outside the range) are not recorded; several: every step is."""
        out = []
        for target in self.postures():
            steps = self._ramp_steps(target)
            inputs = np.linspace(0.0, 1.0, steps + 1)[:, None] * target[None, :]
            inputs = np.vstack((inputs, np.repeat(target[None, :], self.hold, axis=0)))
            first = 0
            if len(self.ranges) == 1:
                r, u = self.ranges[0], inputs[:, 0]
                inside = (u >= r.low - 1e-12 * abs(r.high - r.low)) & (u <= r.high + 1e-12 * abs(r.high - r.low))
                first = int(np.argmax(inside))
            out.append((inputs, first))
        return out

    def total_steps(self) -> int:
        """The plant steps of all runs (each ramp's rows and the held ones), counted without
        building the ramps (a huge count is refused before its arrays exist)."""
        return sum(self._ramp_steps(target) + 1 + self.hold for target in self.postures())

    def _ramp_steps(self, target: np.ndarray) -> int:
        """Steps of the ramp from rest to the posture ``target`` (n,) (SI), at least 1."""
        return max(max(self._steps(r, abs(float(t))) for r, t in zip(self.ranges, target)), 1)

    def _steps(self, r: ActuatorRange, span: float) -> int:
        if r.step is None:
            return self.default_steps if span > 0 else 0
        count = span / r.step - 1e-9
        if not math.isfinite(count):  # a STEP so small the count overflows a float
            raise SweepError(f"--sweep {r.spec!r}: STEP {r.step:g} gives more than {MAX_STEPS} plant steps "
                             "(the limit): check the units and STEP")
        return int(math.ceil(count))


def parse_sweep_spec(text: str, kinds: Mapping[str, ActuatorKind], *, efforts: bool = False) -> ActuatorRange:
    """One ``NAME=LO:HI[:STEP]UNIT`` spec for an actuator of ``kinds`` (name → kind), in the
    plant's inputs (cable stroke) or, with ``efforts``, the model's (cable tension).

    Raises:
        SweepError: bad syntax, unknown actuator, missing/wrong unit, LO ≥ HI, a step ≤ 0.
    """
    m = _SPEC_RE.match(text)
    if not m:
        raise SweepError(f"--sweep {text!r}: expected NAME=LO:HI[:STEP]UNIT, e.g. cable=0:55:0.05mm")
    name, lo, hi, step, unit = m.groups()
    if name not in kinds:
        raise SweepError(f"--sweep {text!r}: unknown actuator {name!r} (the robot has {sorted(kinds)})")
    dim = (_EFFORT_DIM if efforts else _INPUT_DIM)[ActuatorKind(kinds[name])]
    if not unit:
        raise SweepError(f"--sweep {text!r}: give the unit of the {units.dimension_name(dim)} "
                         f"(e.g. {name}={lo}:{hi}{'mm' if dim == units.LENGTH else 'kPa' if dim == units.PRESSURE else 'N'})")
    try:
        factor = units.quantity(f"1 {unit}", dim, key=f"--sweep {text!r}")
    except units.UnitError as exc:
        raise SweepError(str(exc)) from None
    low, high = float(lo) * factor, float(hi) * factor
    if not low < high:
        raise SweepError(f"--sweep {text!r}: LO must be < HI")
    step_si = None if step is None else float(step) * factor
    if step_si is not None and not step_si > 0:
        raise SweepError(f"--sweep {text!r}: STEP must be > 0")
    if ActuatorKind(kinds[name]) == ActuatorKind.CABLE and low < 0:
        raise SweepError(f"--sweep {text!r}: a cable stroke cannot be negative (cables only pull)")
    return ActuatorRange(name, low, high, step_si, text.strip())


def input_bounds(names: Sequence[str], kinds: Sequence[ActuatorKind], limits, *,
                 efforts: bool = False) -> dict[str, tuple[float, float]]:
    """Each actuator's (lo, hi) limits of the input a sweep drives it with (SI), from its
    ActuatorLimits ``limits``: the stroke limits where that input is a length (a cable on the
    plant), the effort limits otherwise (tensions, pressures, forces): the controller never
    drives an actuator beyond them. For :func:`parse_sweep`'s ``bounds``."""
    bounds = {}
    for i, (name, kind) in enumerate(zip(names, kinds)):
        by_stroke = (_EFFORT_DIM if efforts else _INPUT_DIM)[ActuatorKind(kind)] == units.LENGTH
        lo, hi = ((limits.stroke_min[i], limits.stroke_max[i]) if by_stroke
                  else (limits.effort_min[i], limits.effort_max[i]))
        bounds[name] = (float(lo), float(hi))
    return bounds


def parse_sweep(specs: Sequence[str], kinds: Mapping[str, ActuatorKind], *, default_steps: int = 100,
                hold: int = 0, efforts: bool = False,
                bounds: Mapping[str, tuple[float, float]] | None = None) -> Sweep:
    """A sweep from the ``--sweep`` specs (one per actuator, see :func:`parse_sweep_spec`);
    ``bounds``: each actuator's (lo, hi) limits of the swept input (SI), which a spec must
    stay within (a unit typo, 0:55 m for 0:55 mm, is refused rather than swept).

    Raises:
        SweepError: no spec, a bad spec, an actuator twice, a range beyond ``bounds``, too
            many plant steps.
    """
    if not specs:
        raise SweepError("give at least one --sweep NAME=LO:HI[:STEP]UNIT")
    if not (isinstance(default_steps, int) and default_steps >= 1):
        raise SweepError(f"--steps must be an integer >= 1, got {default_steps!r}")
    if not (isinstance(hold, int) and hold >= 0):
        raise SweepError(f"--hold must be an integer >= 0, got {hold!r}")
    ranges = tuple(parse_sweep_spec(s, kinds, efforts=efforts) for s in specs)
    names = [r.name for r in ranges]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SweepError(f"--sweep: actuator(s) {twice} given more than once")
    for r in ranges:
        lo, hi = (bounds or {}).get(r.name, (-math.inf, math.inf))
        slack = 1e-9 * max(abs(lo) if math.isfinite(lo) else 0.0, abs(hi) if math.isfinite(hi) else 0.0)
        if r.low < lo - slack or r.high > hi + slack:
            dim = (_EFFORT_DIM if efforts else _INPUT_DIM)[ActuatorKind(kinds[r.name])]
            unit = _SI_SYMBOL[dim]
            raise SweepError(f"--sweep {r.spec!r}: {r.name} is limited to [{lo:g}, {hi:g}] {unit} in the robot "
                             f"description, the sweep asks [{r.low:g}, {r.high:g}] {unit} (a unit typo?)")
    sweep = Sweep(ranges, default_steps, hold)
    total = sweep.total_steps()
    if total > MAX_STEPS:
        raise SweepError(f"--sweep: {total} plant steps, more than {MAX_STEPS} (the limit): check the units, "
                         "STEP, --steps and --hold")
    return sweep
