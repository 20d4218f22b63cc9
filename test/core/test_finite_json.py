"""The tools' JSON output has no NaN or infinity (finite_json.py)."""

import json
import math

import numpy as np
import pytest

from soft_inverse_ros import finite_json


def test_non_finite_values_become_null_and_numpy_values_numbers():
    text = finite_json.dumps({"a": float("nan"), "b": [1.0, np.inf, np.float64(2.5)],
                              "c": np.array([1.0, np.nan]), "d": (np.int64(3), None), "e": "x"})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in {text}")) == {
        "a": None, "b": [1.0, None, 2.5], "c": [1.0, None], "d": [3, None], "e": "x"}


def test_a_value_json_cannot_hold_is_still_refused():
    with pytest.raises(TypeError):
        finite_json.dumps({"x": object()})
    assert finite_json.finite_or_none(-math.inf) is None
