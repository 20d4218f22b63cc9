"""argparse value types for the commands' numeric options: a bad value is refused by
argparse in one line (exit 2) before any work starts, instead of a traceback or a silent
run minutes later (``--rate 0``, ``--duration nan``, ``--ticks 0``)."""

from __future__ import annotations

import argparse
import math
from typing import Callable


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive(text: str) -> float:
    """A finite number > 0."""
    value = _number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def non_negative(text: str) -> float:
    """A finite number >= 0."""
    value = _number(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def finite(text: str) -> float:
    """A finite number."""
    value = _number(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def positive_at_most(limit: float, why: str) -> Callable[[str], float]:
    """A type: a finite number in (0, ``limit``]; ``why`` (the bound's reason) ends the refusal."""
    def check(text: str) -> float:
        value = positive(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"must be at most {limit:g} ({why}), got {text}")
        return value

    return check


def number_list(text: str, what: str = "numbers") -> list[float]:
    """The comma-separated numbers of ``text`` (empty items skipped; ``what`` names them in
    the refusal of one that is not a number)."""
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got {text!r}") from None


def finite_list(text: str) -> list[float]:
    """Comma-separated finite numbers (at least one)."""
    values = number_list(text)
    if not values or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"must be comma-separated finite numbers, got {text!r}")
    return values


def _whole(text: str, low: int, high: int | None, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
    return value


def count(text: str) -> int:
    """A whole number >= 1."""
    return _whole(text, 1, None, "at least 1")


def non_negative_count(text: str) -> int:
    """A whole number >= 0."""
    return _whole(text, 0, None, ">= 0")


def priority(text: str) -> int:
    """A SCHED_FIFO priority, 1..99."""
    return _whole(text, 1, 99, "a SCHED_FIFO priority in 1..99")


def priority_or_normal(text: str) -> int:
    """A SCHED_FIFO priority 1..99, or 0: normal scheduling."""
    return _whole(text, 0, 99, "0 (normal scheduling) or a SCHED_FIFO priority in 1..99")
