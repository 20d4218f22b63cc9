"""The simulated clock's lockstep (core/sim/lockstep.py), without ROS."""

from __future__ import annotations

import math
import time

import pytest

from soft_inverse_ros.core.sim.lockstep import Lockstep


def test_the_clock_runs_until_a_stream_has_produced_then_waits_for_it():
    lock = Lockstep(wait_timeout=5.0)
    lock.watch("snapshots", 0.05)
    # nothing received yet: the producer may need the clock to start
    assert not lock.hold(10.0)
    lock.stamp("snapshots", 1.0)
    assert not lock.hold(1.05)  # lag exactly the allowance
    assert lock.hold(1.051)
    assert lock.counters()["lockstep_waits"] == 1
    lock.stamp("snapshots", 1.03)
    assert not lock.hold(1.06)
    lock.stamp("snapshots", 0.5)  # an older stamp arriving late changes nothing
    assert not lock.hold(1.07)


def test_a_polled_stream_is_read_only_when_it_looks_late():
    polls = []
    pending = [None]

    def poll():
        polls.append(1)
        value, pending[0] = pending[0], None
        return value

    lock = Lockstep(wait_timeout=5.0)
    lock.watch("status", 0.02, poll)
    assert not lock.hold(0.5)  # nothing received yet: read, nothing there, the clock runs
    assert len(polls) == 1
    pending[0] = 0.49
    assert not lock.hold(0.5)  # read: 0.49 is within the allowance
    assert len(polls) == 2
    for t in (0.501, 0.505, 0.51):  # within the allowance: no read at all
        assert not lock.hold(t)
    assert len(polls) == 2
    assert lock.hold(0.52)  # late and nothing new: held, read once
    assert len(polls) == 3
    pending[0] = 0.515
    assert not lock.hold(0.52)


def test_a_silent_stream_is_given_up_after_the_wall_timeout_until_it_produces_again():
    lock = Lockstep(wait_timeout=0.05)
    lock.watch("inputs", 0.01)
    lock.stamp("inputs", 1.0)
    assert lock.hold(1.1)
    time.sleep(0.08)
    assert not lock.hold(1.1)  # given up: the clock steps on
    assert lock.counters()["lockstep_timeouts"] == 1
    assert "no inputs" in lock.last_error
    assert not lock.hold(2.0)  # and keeps running while the stream is silent
    lock.stamp("inputs", 2.0)  # it answers again: lockstep again
    assert lock.hold(2.5)


def test_a_stream_with_gaps_of_its_own_gives_up_sooner():
    lock = Lockstep(wait_timeout=5.0)
    lock.watch("mocap frames", 0.05, wait_timeout=0.05)
    lock.watch("snapshots", 0.05)
    lock.stamp("mocap frames", 1.0)
    lock.stamp("snapshots", 1.1)
    assert lock.hold(1.1)
    time.sleep(0.08)
    assert not lock.hold(1.1)  # the mocap's wait given up, the snapshots do not lag
    assert lock.streams["mocap frames"].timeouts == 1
    assert lock.streams["snapshots"].timeouts == 0
    with pytest.raises(ValueError, match="wait_timeout"):
        lock.watch("x", 0.1, wait_timeout=-1.0)


def test_every_stream_is_waited_for_and_counted_apart():
    lock = Lockstep(wait_timeout=5.0)
    lock.watch("a", 0.01)
    lock.watch("b", 0.1)
    lock.watch("off", 0.0)  # 0: not watched
    assert set(lock.streams) == {"a", "b"}
    lock.stamp("a", 1.0)
    lock.stamp("b", 1.0)
    lock.stamp("off", -math.inf)  # ignored
    assert lock.hold(1.05)  # a lags, b does not
    lock.stamp("a", 1.05)
    assert not lock.hold(1.05)
    assert lock.hold(1.2)  # both lag
    counts = lock.counters()
    assert counts["lockstep_waits.a"] == 2 and counts["lockstep_waits.b"] == 1
    assert counts["lockstep_waits"] == 3


def test_no_stream_means_no_lockstep():
    lock = Lockstep(wait_timeout=1.0)
    lock.watch("a", 0.0)
    assert not lock.active and not lock.hold(1e9)
    with pytest.raises(ValueError, match="wait_timeout"):
        Lockstep(wait_timeout=0.0)
