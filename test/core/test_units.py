"""Quantities with units from YAML values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from soft_inverse_ros.core.model import units
from soft_inverse_ros.core.model.units import UnitError


@pytest.mark.parametrize(
    ("text", "dim", "si"),
    [
        ("180 kPa", units.PRESSURE, 180e3),
        ("20 mm", units.LENGTH, 0.02),
        ("0.5 kg", units.MASS, 0.5),
        ("75 g", units.MASS, 0.075),
        ("9810 mm/s^2", units.ACCELERATION, 9.81),
        ("-981 cm/s^2", units.ACCELERATION, -9.81),
        ("8 kPa", units.PRESSURE, 8000.0),
        ("1.5 bar", units.PRESSURE, 1.5e5),
        ("3 deg", units.ANGLE, math.radians(3)),
        ("1070 kg/m^3", units.DENSITY, 1070.0),
        ("2000 mm^3", units.VOLUME, 2e-6),
        ("5 N", units.FORCE, 5.0),
        ("250 mN", units.FORCE, 0.25),
        ("0.1 1/s", units.FREQUENCY, 0.1),
        ("1e-3 s", units.TIME, 1e-3),
    ],
)
def test_quantity_strings_convert_to_si(text: str, dim: units.Dim, si: float) -> None:
    assert units.quantity(text, dim, key="k") == pytest.approx(si, rel=1e-12)


def test_bare_numbers_are_si_except_lengths_which_use_length_scale() -> None:
    assert units.quantity(180000, units.PRESSURE, key="k", length_scale=1e-3) == 180000.0
    assert units.quantity(20, units.LENGTH, key="k", length_scale=1e-3) == pytest.approx(0.02)
    assert units.quantity(2000, units.VOLUME, key="k", length_scale=1e-3) == pytest.approx(2e-6)
    # an explicit unit wins over length_unit
    assert units.quantity("2 cm", units.LENGTH, key="k", length_scale=1e-3) == pytest.approx(0.02)
    assert units.quantity("inf", units.FORCE, key="k") == math.inf
    assert units.quantity("-inf", units.LENGTH, key="k") == -math.inf


def test_vectors_and_points() -> None:
    g = units.vector("[0, 0, -9810] mm/s^2", units.ACCELERATION, key="gravity")
    np.testing.assert_allclose(g, [0, 0, -9.81])
    np.testing.assert_allclose(units.vector([0, "10 mm", 30], units.LENGTH, key="p", length_scale=1e-3), [0, 0.01, 0.03])
    pts = units.points([[0, 97, 45], "[1, 2, 3] cm"], key="points", length_scale=1e-3)
    np.testing.assert_allclose(pts, [[0, 0.097, 0.045], [0.01, 0.02, 0.03]])
    assert units.points([1, 2, 3], key="p").shape == (1, 3)


@pytest.mark.parametrize(
    ("value", "dim", "needle"),
    [
        ("20 mm", units.PRESSURE, "unit 'mm' is a length, expected a pressure"),
        ("3 furlong", units.LENGTH, "unknown unit 'furlong'"),
        ("fast", units.LENGTH, "cannot read 'fast'"),
        ("5 kPa", units.FORCE, "expected a force"),
        (True, units.MASS, "expected a mass"),
        ("nan", units.MASS, "cannot read"),
    ],
)
def test_bad_quantities_name_the_key(value: object, dim: units.Dim, needle: str) -> None:
    with pytest.raises(UnitError) as err:
        units.quantity(value, dim, key="material.young_modulus")
    assert "material.young_modulus" in str(err.value)
    assert needle in str(err.value)


def test_bad_vectors() -> None:
    with pytest.raises(UnitError, match="expected 3 values"):
        units.vector([1, 2], units.LENGTH, key="gravity")
    with pytest.raises(UnitError, match="gravity"):
        units.vector("[0, 0, -9.81] mm", units.ACCELERATION, key="gravity")


def test_length_unit_scale() -> None:
    assert units.length_unit_scale("mm", key="length_unit") == pytest.approx(1e-3)
    assert units.length_unit_scale("cm", key="length_unit") == pytest.approx(1e-2)
    with pytest.raises(UnitError, match="length_unit"):
        units.length_unit_scale("kPa", key="length_unit")


def test_an_unreadable_value_is_answered_with_an_example_of_its_own_quantity():
    with pytest.raises(units.UnitError, match=r"pressure .*e\.g\. '1\.5 kPa'"):
        units.quantity("soft", units.PRESSURE, key="material.young_modulus")
    with pytest.raises(units.UnitError, match=r"length .*e\.g\. '1\.5 cm'"):
        units.quantity("long", units.LENGTH, key="max_stroke")


def test_unit_messages_name_what_fits():
    """"90 deg" for rotation_deg got the hint "write e.g. '[0, 0, -9810] mm/s^2'", and an
    angle unit where none fits read "is a angle"."""
    with pytest.raises(units.UnitError, match=r"mesh.rotation_deg: takes bare numbers, not 'deg' \(degrees"):
        units.vector("[0, 0, 90] deg", units.DIMENSIONLESS, key="mesh.rotation_deg")
    with pytest.raises(units.UnitError, match=r"cannot read '90 deg' as a vector \(write e.g. \[0, 0, 1\]\)"):
        units.vector("90 deg", units.DIMENSIONLESS, key="mesh.rotation_deg")
    with pytest.raises(units.UnitError, match=r"unit 'rad' is an angle, expected a length"):
        units.quantity("1 rad", units.LENGTH, key="x")

