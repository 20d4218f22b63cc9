"""Missed deadlines counted as slots without a command."""

import numpy as np
import pytest

from soft_inverse_ros.core.control.deadlines import (
    SlotCounter,
    missed_slot_fraction,
    missed_slots,
    missed_slots_seq,
)


T = 1e-3


def _count(times, **kwargs) -> int:
    counter = SlotCounter(T, **kwargs)
    for x in times:
        counter.tick(x)
    return counter.flush()


def test_a_gap_of_five_periods_misses_four_slots():
    assert _count([0.0, 5 * T]) == 4
    assert _count([0.0, T]) == 0
    assert _count([0.0, 1.4 * T]) == 0 and _count([0.0, 1.6 * T]) == 1
    t = np.concatenate((np.arange(100) * T, 104 * T + np.arange(100) * T))
    assert missed_slots(t, T) == (4, 204)


def test_jitter_below_half_a_period_costs_nothing():
    rng = np.random.default_rng(0)
    t = 0.25 * T + np.arange(5000) * T + rng.uniform(-0.45, 0.45, 5000) * T
    assert missed_slots(t, T) == (0, 5000)


def test_two_commands_in_one_slot_leave_the_next_one_empty():
    t = np.arange(20) * T
    t[10] = 9.3 * T  # late-then-early is fine, but 9 and 9.3 share a slot, 10 stays empty
    missed, total = missed_slots(t, T)
    assert missed == 1 and total == 20


def test_rate_and_fraction():
    t = np.arange(0, 1.0, 2 * T)  # a 500 Hz loop judged at 1 kHz misses every other slot
    assert missed_slot_fraction(t, T) == pytest.approx(0.5, abs=1e-3)
    assert np.isnan(missed_slot_fraction(np.array([0.0]), T))
    with pytest.raises(ValueError):
        missed_slots(t, 0.0)


def test_commands_the_receiver_lost_are_not_missed_deadlines():
    t = np.arange(100) * T
    seq = np.arange(100)
    keep = np.ones(100, bool)
    keep[[10, 11, 50]] = False  # lost by the receiver, sent on time
    assert missed_slots_seq(t[keep], seq[keep], T) == (0, 100)
    # a real 3-period hole (no command sent) with consecutive sequence numbers
    t2 = np.concatenate((t[:50], t[50:] + 3 * T))
    assert missed_slots_seq(t2, seq, T) == (3, 103)


def test_a_late_tick_followed_by_an_on_time_one_misses_nothing():
    t = np.arange(50) * T
    t[20] += 0.45 * T  # late, the next one on schedule: no slot is empty
    assert missed_slots(t, T) == (0, 50)
    assert missed_slots_seq(t, np.arange(50), T) == (0, 50)
    assert _count(t) == 0
    assert _count([0.0, T, 0.5 * T, 2 * T]) == 0  # a clock going back counts nothing


def test_the_counter_agrees_with_the_bag_analysis():
    rng = np.random.default_rng(3)
    t = 1.7e9 + np.arange(6000) * T + rng.uniform(0.0, 0.45, 6000) * T  # system-clock times
    t = np.delete(t, [5, 6, 7, 2500, 4000, 4001])  # holes, one inside the warm-up
    t[3000] = t[2999] + 0.05 * T  # early into the previous slot: its own slot stays empty
    assert _count(t) == missed_slots(t - t[0], T)[0] == 7
    assert _count(t[:10]) == missed_slots(t[:10] - t[0], T)[0] == 3  # flushed before warm-up


def test_a_late_first_tick_does_not_shift_the_grid():
    """Anchored at a first tick 0.6 periods late, every on-time tick's jitter crossed the
    slot boundary: misses and doubles all run long. The phase-aligned grid sees none."""
    rng = np.random.default_rng(1)
    t = np.concatenate(([0.6 * T], np.arange(1, 5000) * T + rng.uniform(0.0, 0.3, 4999) * T))
    assert _count(t) == 0


def test_the_grid_follows_a_change_of_phase_within_two_windows():
    """A loop whose ticks move by half a period (a restarted timer) splits every later
    tick's jitter on the old grid; the grid follows after at most two windows."""
    rng = np.random.default_rng(2)
    before = np.arange(3000) * T
    after = before[-1] + 1.5 * T + np.arange(5000) * T  # from here half a period later
    t = np.concatenate((before, after)) + rng.uniform(-0.2, 0.2, 8000) * T
    during = _count(t[:3000 + 2000], window=1.0)
    assert during > 10  # the old grid splits the jitter until it follows
    assert _count(t, window=1.0) == during
    with pytest.raises(ValueError):
        SlotCounter(T, window=T)


def test_a_clock_that_goes_back_starts_over():
    t = np.concatenate((np.arange(2000) * T, 0.5 + np.arange(2000) * T))  # a sim reset
    assert _count(t) == 0
    t[3000] = t[2999] + 0.3 * T  # after the reset the count goes on: a double, a hole
    assert _count(t) == 1
