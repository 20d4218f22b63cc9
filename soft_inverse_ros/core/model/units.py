"""Physical quantities with units, as written in YAML robot descriptions.

A value is either a bare number or a string ``"<number> <unit>"``:

* bare numbers are SI (m, kg, s, N, Pa, m^3, rad for ``angle``), except pure lengths
  (dimension m^n, e.g. points, strokes, volumes) which are in the caller's
  ``length_scale`` (metres per bare length unit, from a description's ``length_unit``);
* strings carry their unit: ``"180 kPa"``, ``"20 mm"``, ``"0.5 kg"``, ``"9810 mm/s^2"``,
  ``"3 deg"``, ``"1070 kg/m^3"``, ``"2 mm^3"``; the unit must have the expected dimension.

Vectors are lists of such values, or one string ``"[0, 0, -9810] mm/s^2"``.

Every function returns SI floats / float64 arrays and raises :class:`UnitError` naming
the key for an unknown unit or a unit of the wrong dimension.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

#: Dimension exponents (length, mass, time, angle).
Dim = tuple[int, int, int, int]

LENGTH: Dim = (1, 0, 0, 0)
AREA: Dim = (2, 0, 0, 0)
VOLUME: Dim = (3, 0, 0, 0)
MASS: Dim = (0, 1, 0, 0)
TIME: Dim = (0, 0, 1, 0)
ANGLE: Dim = (0, 0, 0, 1)
FORCE: Dim = (1, 1, -2, 0)
PRESSURE: Dim = (-1, 1, -2, 0)
ACCELERATION: Dim = (1, 0, -2, 0)
DENSITY: Dim = (-3, 1, 0, 0)
FREQUENCY: Dim = (0, 0, -1, 0)
DIMENSIONLESS: Dim = (0, 0, 0, 0)

_DIM_NAMES: dict[Dim, str] = {
    LENGTH: "length",
    AREA: "area",
    VOLUME: "volume",
    MASS: "mass",
    TIME: "time",
    ANGLE: "angle",
    FORCE: "force",
    PRESSURE: "pressure",
    ACCELERATION: "acceleration",
    DENSITY: "density",
    FREQUENCY: "frequency (1/s)",
    DIMENSIONLESS: "dimensionless",
}

_EXAMPLES: dict[Dim, str] = {
    LENGTH: "m, cm, mm, um",
    VOLUME: "m^3, cm^3, mm^3, L, mL",
    MASS: "kg, g",
    TIME: "s, ms",
    ANGLE: "deg, rad",
    FORCE: "N, mN, kN",
    PRESSURE: "Pa, kPa, MPa, bar, mbar, psi",
    ACCELERATION: "m/s^2, mm/s^2, cm/s^2, g0",
    DENSITY: "kg/m^3, g/cm^3",
    FREQUENCY: "1/s, Hz",
}

_PREFIXES = {"G": 1e9, "M": 1e6, "k": 1e3, "c": 1e-2, "m": 1e-3, "u": 1e-6, "µ": 1e-6, "n": 1e-9}

# symbol -> (SI factor, dimension, accepts SI prefixes)
_BASE_UNITS: dict[str, tuple[float, Dim, bool]] = {
    "m": (1.0, LENGTH, True),
    "g": (1e-3, MASS, True),
    "s": (1.0, TIME, True),
    "N": (1.0, FORCE, True),
    "Pa": (1.0, PRESSURE, True),
    "Hz": (1.0, FREQUENCY, True),
    "bar": (1e5, PRESSURE, True),
    "L": (1e-3, VOLUME, True),
    "l": (1e-3, VOLUME, True),
    "psi": (6894.757293168361, PRESSURE, False),
    "deg": (math.pi / 180.0, ANGLE, False),
    "rad": (1.0, ANGLE, False),
    "g0": (9.80665, ACCELERATION, False),
}

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_SCALAR_RE = re.compile(rf"^\s*({_NUMBER})\s*(.*?)\s*$")
_VECTOR_RE = re.compile(r"^\s*[\[(](.*)[\])]\s*(.*?)\s*$")
_TERM_RE = re.compile(r"^([A-Za-zµ]+[0-9]?)(?:\^([-+]?\d+))?$")


class UnitError(ValueError):
    """A value that is not a valid quantity of the expected dimension."""


def dimension_name(dim: Dim) -> str:
    """Human name of a dimension, e.g. ``"pressure"``."""
    return _DIM_NAMES.get(dim, f"m^{dim[0]} kg^{dim[1]} s^{dim[2]} rad^{dim[3]}")


def _symbol(sym: str) -> tuple[float, Dim]:
    if sym in _BASE_UNITS:
        factor, dim, _ = _BASE_UNITS[sym]
        return factor, dim
    for prefix, pf in _PREFIXES.items():
        if sym.startswith(prefix) and sym[len(prefix):] in _BASE_UNITS:
            factor, dim, prefixable = _BASE_UNITS[sym[len(prefix):]]
            if prefixable:
                return pf * factor, dim
    raise KeyError(sym)


def parse_unit(unit: str) -> tuple[float, Dim]:
    """SI factor and dimension of a unit string such as ``"mm/s^2"`` or ``"kg/m^3"``.

    Raises:
        KeyError: the unit (or one of its symbols) is unknown.
    """
    text = unit.replace("²", "^2").replace("³", "^3").replace("·", "*").strip()
    if not text:
        raise KeyError(unit)
    parts = text.split("/")
    if len(parts) > 2:
        raise KeyError(unit)
    factor = 1.0
    dim = [0, 0, 0, 0]
    for side, sign in zip(parts, (1, -1)):
        terms = [t for t in re.split(r"[*\s]+", side.strip()) if t]
        if not terms:
            raise KeyError(unit)
        for term in terms:
            if term == "1" and len(terms) == 1:
                continue
            m = _TERM_RE.match(term)
            if not m:
                raise KeyError(unit)
            f, d = _symbol(m.group(1))
            power = sign * int(m.group(2) or 1)
            factor *= f**power
            for i in range(4):
                dim[i] += d[i] * power
    return factor, (dim[0], dim[1], dim[2], dim[3])


def _bare_scale(dim: Dim, length_scale: float) -> float:
    """Scale of a bare number: ``length_scale**n`` for pure lengths m^n, else 1 (SI)."""
    if dim[1:] == (0, 0, 0) and dim[0] > 0:
        return length_scale ** dim[0]
    return 1.0


def _unit_factor(unit: str, dim: Dim, key: str) -> float:
    try:
        factor, got = parse_unit(unit)
    except KeyError:
        hint = f" (expected a {dimension_name(dim)} unit such as {_EXAMPLES[dim]})" if dim in _EXAMPLES else ""
        raise UnitError(f"{key}: unknown unit {unit!r}{hint}") from None
    if got != dim:
        if dim == DIMENSIONLESS:  # e.g. rotation_deg: the unit is in the key's name
            raise UnitError(f"{key}: takes bare numbers, not {unit!r}"
                            + (" (degrees, as its name says)" if key.rsplit(".", 1)[-1].endswith("_deg") else ""))
        raise UnitError(
            f"{key}: unit {unit!r} is {_article(dimension_name(got))}, expected {_article(dimension_name(dim))}"
            + (f" ({_EXAMPLES[dim]})" if dim in _EXAMPLES else "")
        )
    return factor


def _article(name: str) -> str:
    """``name`` with its indefinite article ("an angle", "a length")."""
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


def _vector_example(dim: Dim) -> str:
    """An example vector of dimension ``dim``: '[0, 0, 1] m'."""
    unit = _EXAMPLES[dim].split(",")[0].strip() if dim in _EXAMPLES else ""
    return f"'[0, 0, 1] {unit}'" if unit else "[0, 0, 1]"


def quantity(value: Any, dim: Dim, *, key: str, length_scale: float = 1.0) -> float:
    """One SI float from a bare number or a ``"<number> <unit>"`` string.

    Args:
        value: YAML value (int, float, or string; ``"inf"``/``"-inf"`` allowed).
        dim: Expected dimension, e.g. :data:`PRESSURE`.
        key: Dotted key path, used in error messages.
        length_scale: Metres per bare length unit (applies to dimensions m^n only).
    """
    if isinstance(value, bool) or value is None:
        raise UnitError(f"{key}: expected a {dimension_name(dim)}, got {value!r}")
    if isinstance(value, (int, float)):
        out = float(value) * _bare_scale(dim, length_scale)
    elif isinstance(value, str):
        text = value.strip()
        low = text.lower()
        if low in ("inf", "+inf", ".inf", "infinity"):
            return math.inf
        if low in ("-inf", "-.inf", "-infinity"):
            return -math.inf
        m = _SCALAR_RE.match(text)
        if not m:
            units_of = [u.strip() for u in _EXAMPLES.get(dim, "").split(",") if u.strip()]
            example = f"'1.5 {units_of[min(1, len(units_of) - 1)]}'" if units_of else "'1.5 <unit>'"
            raise UnitError(f"{key}: cannot read {value!r} as a {dimension_name(dim)} "
                            f"(write a number and a unit, e.g. {example})")
        number = float(m.group(1))
        unit = m.group(2)
        if unit:
            out = number * _unit_factor(unit, dim, key)
        else:
            out = number * _bare_scale(dim, length_scale)
    else:
        raise UnitError(f"{key}: expected a {dimension_name(dim)}, got {type(value).__name__} {value!r}")
    if math.isnan(out):
        raise UnitError(f"{key}: value is NaN")
    return out


def vector(
    value: Any, dim: Dim, *, key: str, length_scale: float = 1.0, size: int | None = 3
) -> np.ndarray:
    """A float64 vector of SI values.

    Accepts a list of numbers / quantity strings (``[0, "10 mm", 3]``) or one string
    ``"[0, 10, 30] mm"`` whose unit applies to every component.
    """
    if isinstance(value, str):
        m = _VECTOR_RE.match(value)
        if not m:
            raise UnitError(f"{key}: cannot read {value!r} as a vector (write e.g. {_vector_example(dim)})")
        items = [s for s in re.split(r"[,\s]+", m.group(1).strip()) if s]
        unit = m.group(2)
        try:
            numbers = [float(s) for s in items]
        except ValueError:
            raise UnitError(f"{key}: cannot read {value!r} as a vector of numbers") from None
        if unit:
            factor = _unit_factor(unit, dim, key)
        else:
            factor = _bare_scale(dim, length_scale)
        out = np.asarray(numbers, dtype=np.float64) * factor
    elif isinstance(value, (list, tuple)):
        out = np.array(
            [quantity(v, dim, key=f"{key}[{i}]", length_scale=length_scale) for i, v in enumerate(value)],
            dtype=np.float64,
        )
    else:
        raise UnitError(f"{key}: expected a list of {size or 'N'} values, got {value!r}")
    if size is not None and out.shape != (size,):
        raise UnitError(f"{key}: expected {size} values, got {out.size}")
    if not np.all(np.isfinite(out)):
        raise UnitError(f"{key}: values must be finite, got {out.tolist()}")
    return out


def points(value: Any, *, key: str, length_scale: float = 1.0) -> np.ndarray:
    """(k, 3) float64 points [m]: a list of 3-vectors, or one 3-vector (k = 1)."""

    def is_vector(v: Any) -> bool:
        return isinstance(v, (list, tuple)) or (isinstance(v, str) and v.lstrip().startswith(("[", "(")))

    if isinstance(value, (list, tuple)) and value and all(is_vector(v) for v in value):
        return np.stack(
            [vector(v, LENGTH, key=f"{key}[{i}]", length_scale=length_scale) for i, v in enumerate(value)]
        )
    return vector(value, LENGTH, key=key, length_scale=length_scale)[None, :]


def length_unit_scale(value: Any, *, key: str) -> float:
    """Metres per unit for a unit name such as ``"mm"`` (or a number of metres)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        scale = float(value)
    elif isinstance(value, str):
        text = value.strip()
        scale = quantity(text if _SCALAR_RE.match(text) else f"1 {text}", LENGTH, key=key)
    else:
        raise UnitError(f"{key}: expected a length unit such as 'mm', got {value!r}")
    if not (math.isfinite(scale) and scale > 0):
        raise UnitError(f"{key}: length unit must be positive and finite, got {value!r}")
    return scale
