"""Missed deadlines of a periodic loop, counted as slots without a command.

A loop of period T owns one slot per period, centred on its nominal schedule. A slot is
**missed** when no command started in it, however the loss happened: a 5 T gap between
two commands misses 4 slots, not 1; two commands squeezed into one slot leave the next
slot empty. The same definition serves the controller's own counter (incremental, one
interval at a time), the pipeline benchmark and the analysis of a bag.
"""

from __future__ import annotations

import numpy as np


class SlotCounter:
    """Incremental missed-slot count for a loop's own diagnostics: slots of ``period`` [s]
    on the grid anchored at the first tick (a timer keeps that phase), so a late tick
    followed by an on-time one misses nothing and a 5-period gap misses 4 slots. A clock
    that goes back (a simulation reset) counts nothing."""

    def __init__(self, period: float) -> None:
        if not period > 0:
            raise ValueError(f"period must be > 0 s, got {period}")
        self.period = float(period)
        self._t0: float | None = None
        self._last = 0
        self.missed = 0

    def tick(self, now: float) -> int:
        """Record a tick at ``now`` [s]; returns the slots missed just before it."""
        if self._t0 is None:
            self._t0 = now
            return 0
        slot = int(round((now - self._t0) / self.period))
        missed = max(0, slot - self._last - 1)
        self._last = max(self._last, slot)
        self.missed += missed
        return missed


def slot_indices(t: np.ndarray, period: float) -> np.ndarray:
    """Slot index of each (sorted) command time ``t`` [s] on the grid of period [s]
    aligned with the commands' mean phase (circular mean of t mod T): each nominal tick
    sits in the middle of its slot, so timer jitter below T/2 moves no command out of it."""
    if not period > 0:
        raise ValueError(f"period must be > 0 s, got {period}")
    t = np.asarray(t, dtype=float)
    angle = 2 * np.pi * np.mod(t - t[0], period) / period
    phase = np.angle(np.mean(np.exp(1j * angle))) / (2 * np.pi) * period
    return np.floor((t - t[0] - phase) / period + 0.5).astype(np.int64)


def missed_slots(t: np.ndarray, period: float) -> tuple[int, int]:
    """(missed, total) slots of period [s] spanned by the command times ``t`` [s], on the
    phase-aligned grid of :func:`slot_indices`, from the first command's slot to the last's."""
    t = np.sort(np.asarray(t, dtype=float))
    if len(t) < 2:
        return 0, len(t)
    slot = slot_indices(t, period)
    total = int(slot[-1] - slot[0] + 1)
    return total - int(np.unique(slot).size), total


def missed_slot_fraction(t: np.ndarray, period: float) -> float:
    """Missed slots / all slots (NaN with fewer than two commands)."""
    missed, total = missed_slots(t, period)
    return missed / total if total > 1 else float("nan")


def missed_slots_seq(t: np.ndarray, seq: np.ndarray, period: float) -> tuple[int, int]:
    """(missed, total) slots from the commands a receiver got, with their sequence numbers.

    Commands the receiver lost (gaps in ``seq``) were still sent: each fills one of the
    empty slots between the received commands around it, so a receiver's own losses are
    not counted as missed deadlines.
    """
    order = np.argsort(np.asarray(t, dtype=float), kind="stable")
    t = np.asarray(t, dtype=float)[order]
    seq = np.asarray(seq, dtype=np.int64)[order]
    if len(t) < 2:
        return 0, len(t)
    slot = slot_indices(t, period)
    empty = np.maximum(np.diff(slot) - 1, 0)  # empty slots between consecutive receipts
    lost = np.maximum(np.diff(seq) - 1, 0)
    missed = int(np.maximum(empty - lost, 0).sum())
    return missed, int(slot[-1] - slot[0] + 1)
