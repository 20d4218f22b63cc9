"""Missed deadlines of a periodic loop, counted as slots without a command.

A loop of period T owns one slot per period, centred on its nominal schedule. A slot is
**missed** when no command started in it, however the loss happened: a 5 T gap between
two commands misses 4 slots, not 1; two commands squeezed into one slot leave the next
slot empty. The same definition serves the controller's own counter (incremental, one
interval at a time), the pipeline benchmark and the analysis of a bag.
"""

from __future__ import annotations

import numpy as np


def slots_missed_in_gap(gap: float, period: float) -> int:
    """Slots missed between two consecutive commands ``gap`` [s] apart (period [s])."""
    if not period > 0:
        raise ValueError(f"period must be > 0 s, got {period}")
    return max(0, int(round(gap / period)) - 1)


def missed_slots(t: np.ndarray, period: float) -> tuple[int, int]:
    """(missed, total) slots of period [s] spanned by the command times ``t`` [s].

    The slot grid is aligned with the commands' mean phase (circular mean of t mod T), so
    each nominal tick sits in the middle of its slot and timer jitter below T/2 costs
    nothing; the slots run from the first command's to the last one's.
    """
    if not period > 0:
        raise ValueError(f"period must be > 0 s, got {period}")
    t = np.sort(np.asarray(t, dtype=float))
    if len(t) < 2:
        return 0, len(t)
    angle = 2 * np.pi * np.mod(t - t[0], period) / period
    phase = np.angle(np.mean(np.exp(1j * angle))) / (2 * np.pi) * period
    slot = np.floor((t - t[0] - phase) / period + 0.5).astype(np.int64)
    total = int(slot[-1] - slot[0] + 1)
    return total - int(np.unique(slot).size), total


def missed_slot_fraction(t: np.ndarray, period: float) -> float:
    """Missed slots / all slots (NaN with fewer than two commands)."""
    missed, total = missed_slots(t, period)
    return missed / total if total > 1 else float("nan")


def missed_slots_seq(t: np.ndarray, seq: np.ndarray, period: float) -> tuple[int, int]:
    """(missed, total) slots from the commands a receiver got, with their sequence numbers.

    Commands the receiver lost (gaps in ``seq``) were still sent: each fills one of the
    slots of its gap, so a receiver's own losses are not counted as missed deadlines.
    """
    order = np.argsort(np.asarray(t, dtype=float))
    t = np.asarray(t, dtype=float)[order]
    seq = np.asarray(seq, dtype=np.int64)[order]
    if len(t) < 2:
        return 0, len(t)
    lost = np.maximum(np.diff(seq) - 1, 0)
    per_gap = np.maximum(np.round(np.diff(t) / period).astype(np.int64) - 1 - lost, 0)
    total = int(round((t[-1] - t[0]) / period)) + 1
    return int(per_gap.sum()), total
