"""JSON output of the tools: NaN and infinities become ``null`` (JSON has neither; Python's
``json`` writes the bare tokens ``NaN``/``Infinity``, which strict readers refuse), numpy
scalars and arrays become numbers and lists."""

from __future__ import annotations

import json
import math
from typing import Any


def finite_or_none(value: Any) -> Any:
    """``value`` with every non-finite float (numpy's too) replaced by None, recursively
    through dicts, lists and tuples."""
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    value = _plain(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return finite_or_none(value)
    return value


def _plain(value: Any) -> Any:
    """A numpy scalar or array as the Python number or list (other values unchanged)."""
    tolist = getattr(value, "tolist", None)
    if tolist is not None and type(value).__module__ == "numpy":
        return tolist()
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite_or_none` ``(value)``, refusing any NaN left."""
    return json.dumps(finite_or_none(value), allow_nan=False, **kwargs)
