"""The simulated clock's lockstep with the nodes it drives (Gazebo's lockstep mode).

Free of ROS: the simulated-robot nodes (nodes/plant_clock.py) ask :meth:`Lockstep.hold`
before each /clock tick.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class _Stream:
    """One watched output of another node (:class:`Lockstep`)."""

    max_lag: float  # [s of simulated time]
    poll: Callable[[], float | None] | None  # newest stamp received since the last poll [s]
    wait_timeout: float  # wall s before a wait is given up
    stamp: float = -math.inf  # newest stamp seen [s]; -inf: none yet, or given up on
    waiting_since: float | None = None  # wall time (time.monotonic) the current wait began
    waits: int = 0  # clock ticks held back for this stream
    timeouts: int = 0  # waits given up after the wall-clock timeout


class Lockstep:
    """The sim clock's lockstep with the nodes it drives, as Gazebo's lockstep mode.

    A node running on ``use_sim_time`` that gets less CPU than the graph needs (a FEM loop
    preempted by the real-time nodes, a starved driver) would otherwise see the simulated
    clock run away from it: its outputs come late in simulated time, and what depends on
    them goes stale (the controller's snapshot timeout, a valve board's watchdog). With a
    lockstep the clock waits for it instead, so the graph slows down and its figures stay
    those of a graph that keeps up.

    Each watched stream is an output of another node stamped with the simulated time. The
    clock holds (:meth:`hold`) while a stream's newest stamp lags the simulated time by
    more than its ``max_lag``, once the stream has produced one (before that the clock runs:
    the nodes need it to start). A wait longer than ``wait_timeout`` wall seconds gives up
    on that stream until it produces again (counted in ``timeouts``, with ``last_error``):
    a dead node does not stop the graph.

    Stamps come in by :meth:`stamp` (from a subscription callback) or by a stream's
    ``poll`` (a :class:`~soft_inverse_ros.nodes.polled_subscription.PolledSubscription`
    read only when the stream looks late, so a fast stream costs no wake-up per message).
    """

    def __init__(self, wait_timeout: float) -> None:
        if not wait_timeout > 0:
            raise ValueError(f"wait_timeout must be > 0 s, got {wait_timeout}")
        self.wait_timeout = float(wait_timeout)
        self.streams: dict[str, _Stream] = {}
        #: why the newest wait was given up ("" when none since the last read)
        self.last_error = ""

    def watch(self, name: str, max_lag: float,
              poll: Callable[[], float | None] | None = None,
              wait_timeout: float | None = None) -> None:
        """Hold the clock while ``name``'s newest stamp lags by more than ``max_lag`` [s]
        (``max_lag`` <= 0: not watched), giving up after ``wait_timeout`` wall seconds
        (default: the lockstep's; shorter for a stream with gaps of its own, such as a
        capture system's dropped frames)."""
        if wait_timeout is not None and not wait_timeout > 0:
            raise ValueError(f"wait_timeout must be > 0 s, got {wait_timeout}")
        if max_lag > 0:
            self.streams[name] = _Stream(float(max_lag), poll,
                                         float(wait_timeout or self.wait_timeout))

    @property
    def active(self) -> bool:
        return bool(self.streams)

    def stamp(self, name: str, t: float) -> None:
        """A message of stream ``name`` stamped ``t`` [s] arrived (ignored if not watched)."""
        stream = self.streams.get(name)
        if stream is not None and t > stream.stamp:
            stream.stamp = t

    def _late(self, stream: _Stream, sim_time: float) -> bool:
        if sim_time - stream.stamp <= stream.max_lag + 1e-9:
            return False
        if stream.poll is not None:  # read what arrived since the last look
            newest = stream.poll()
            if newest is not None and newest > stream.stamp:
                stream.stamp = newest
        return stream.stamp != -math.inf and sim_time - stream.stamp > stream.max_lag + 1e-9

    def hold(self, sim_time: float) -> bool:
        """True while a stream lags ``sim_time`` [s] by more than its ``max_lag``."""
        held = False
        now = None
        for name, stream in self.streams.items():
            if not self._late(stream, sim_time):
                stream.waiting_since = None
                continue
            now = time.monotonic() if now is None else now
            if stream.waiting_since is None:
                stream.waiting_since = now
            if now - stream.waiting_since > stream.wait_timeout:
                stream.timeouts += 1
                stream.waiting_since = None
                stream.stamp = -math.inf  # until it produces again
                self.last_error = (f"lockstep: no {name} for {stream.wait_timeout:g} s of wall "
                                   "time: the clock steps on without it")
                continue
            stream.waits += 1
            held = True
        return held

    def counters(self) -> dict[str, int]:
        """Diagnostics values: ``lockstep_waits`` and ``lockstep_timeouts`` (all streams)
        and per stream ``lockstep_waits.<name>``."""
        values = {"lockstep_waits": sum(s.waits for s in self.streams.values()),
                  "lockstep_timeouts": sum(s.timeouts for s in self.streams.values())}
        if len(self.streams) > 1:
            for name, s in self.streams.items():
                values[f"lockstep_waits.{name}"] = s.waits
        return values
