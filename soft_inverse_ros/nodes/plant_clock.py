"""The clock of a simulated-robot node (plant_sim_node, snake_plant_node, hybrid_plant_node).

Two modes, as Gazebo offers:

* wall: a wall timer every ``dt`` steps the plant as many times as the wall clock says it
  is due; a late tick is caught up with up to ``max_catch_up_steps`` steps, beyond that the
  simulated clock slips (the skipped steps are counted, the run reports them);
* sim: the node is the graph's clock: its own ROS clock is the simulated time (its stamps,
  diagnostics and timers follow it), ``/clock`` carries it to the graph in ticks of
  ``1 / clock_rate_hz`` [s], a steady-clock timer advances it one tick at a time (never
  faster than ``max_real_time_factor`` × real time) and every ``dt`` of ticks steps the
  plant; a slow step delays the next ticks: the graph's time slows down with the plant.
  a :class:`~soft_inverse_ros.core.sim.lockstep.Lockstep` holds the ticks while a node the
  plant drives lags behind.

The real-time factor is measured per diagnostics window: simulated seconds per wall second.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from soft_inverse_ros.core.sim.lockstep import Lockstep
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.node_runtime import NodeConfigError
from soft_inverse_ros.nodes.periodic import create_timer

#: the ``clock`` parameter of a simulated-robot node (module docstring)
CLOCK_MODES = ("wall", "sim")
#: sim mode: while the lockstep holds the clock, /clock is sent again every this many
#: held ticks (10 ms at the default 1 kHz tick timer)
HELD_REPUBLISH_EVERY = 10


@dataclass(frozen=True)
class LockstepConfig:
    """clock: sim: what the simulated robot's clock waits for (core/sim/lockstep.py); the
    lags are in seconds of simulated time, 0 turns a stream off.

    Only streams that a node sends once per period of its own, whatever else happens, can
    be waited for, with a lag longer than that period: at a held clock the node's due
    period has come, so it sends and the clock moves on. The controller's status (every
    ``status_every`` commands) is not such a stream: a controller that skipped ticks sends
    none in a window, and a clock waiting for it waited until the timeout (the hybrid
    graph: 17 two-second timeouts in a 20 s run). The controller is not waited for; its
    empty slots in simulated time are reported (analysis/validity.py). The motion capture
    sends a frame per period except the frames it drops (dropouts, bursts): its waits give
    up after the shorter ``mocap_wait_timeout``."""

    max_input_lag: float = field(default=0.0, metadata={
        "description": "clock: sim: lockstep with the drivers: the clock waits while the "
                       "newest accepted input (servo states, command or chamber states) is "
                       "older than this [s of simulated time], once one arrived (0: no wait)",
        "range": (0.0, 10.0)})
    max_snapshot_lag: float = field(default=0.0, metadata={
        "description": "clock: sim: lockstep with the low-rate loop: the clock waits while "
                       "the newest compliance snapshot is older than this [s of simulated "
                       "time] (a low-rate loop starved of CPU, fem_node or hybrid_model_node, "
                       "then slows the graph down instead of its snapshots going stale and "
                       "the controller SAFE; more than one period of that loop; 0: no wait)",
        "range": (0.0, 10.0)})
    max_mocap_lag: float = field(default=0.0, metadata={
        "description": "clock: sim: lockstep with the motion capture: the clock waits while "
                       "its newest marker frame (mocap/markers) is older than this [s of "
                       "simulated time] (a starved mocap would leave a closed loop running "
                       "open on stale measurements; more than its period plus latency; 0: no "
                       "wait)", "range": (0.0, 10.0)})
    mocap_wait_timeout: float = field(default=0.3, metadata={
        "description": "clock: sim: wall seconds the lockstep waits for a mocap frame: a "
                       "capture system drops whole frames (dropouts, bursts), so a frame may "
                       "never come; shorter than input_wait_timeout", "range": (0.01, 60.0)})
    input_wait_timeout: float = field(default=2.0, metadata={
        "description": "clock: sim: wall seconds the lockstep waits for one node before "
                       "stepping on without it (counted; a dead node does not stop the graph)",
        "range": (0.01, 60.0)})


def make_lockstep(node: Any, config: LockstepConfig, clock_mode: str,
                  input_stream: str) -> Lockstep:
    """The node's :class:`Lockstep` (empty unless ``clock_mode`` is "sim"): the stream
    ``input_stream``, stamped by the node itself when it accepts an input, and the
    compliance snapshots and motion-capture frames, polled only when late."""
    from sensor_msgs.msg import PointCloud2
    from soft_inverse_ros_msgs.msg import ComplianceSnapshot

    from soft_inverse_ros import topics
    from soft_inverse_ros.nodes.conversions import to_seconds
    from soft_inverse_ros.nodes.polled_subscription import PolledSubscription

    lockstep = Lockstep(config.input_wait_timeout)
    if clock_mode != "sim":
        return lockstep
    lockstep.watch(input_stream, config.max_input_lag)
    for name, lag, msg_type, topic, profile, timeout in (
            ("compliance snapshots", config.max_snapshot_lag, ComplianceSnapshot,
             topics.COMPLIANCE, qos.LATCHED, None),
            ("mocap frames", config.max_mocap_lag, PointCloud2, topics.MOCAP_MARKERS,
             qos.SENSOR_DATA, config.mocap_wait_timeout)):
        if lag > 0:
            subscription = PolledSubscription(node, msg_type, topic, profile)

            def newest_stamp(subscription=subscription) -> float | None:
                msg = subscription.take_newest()
                return None if msg is None else to_seconds(msg.header.stamp)

            lockstep.watch(name, lag, newest_stamp, timeout)
    return lockstep


class PlantClock:
    """Steps a plant on the wall clock or as the graph's /clock source.

    Args:
        node: the rclpy node (its timers, its clock, the /clock publisher).
        dt: the plant step [s].
        plant_time: the plant's simulated time [s].
        step: one plant step; returning False stops a wall tick's catch-up (a failed step).
        max_catch_up_steps: wall mode: most steps per timer tick.
        lockstep: sim mode: the nodes the clock waits for (default: none).
    """

    def __init__(self, node: Any, *, dt: float, plant_time: Callable[[], float],
                 step: Callable[[], bool | None], max_catch_up_steps: int,
                 lockstep: Lockstep | None = None) -> None:
        self.node = node
        self.dt = float(dt)
        self._plant_time = plant_time
        self._step = step
        self.max_catch_up_steps = int(max_catch_up_steps)
        self.lockstep = lockstep
        #: steps the wall clock was due but the plant could not catch up (the clock slipped)
        self.skipped = 0
        #: sim mode: /clock ticks published so far, and their period [s]
        self.sim_ticks = 0
        self.tick_period = math.nan
        self._t0 = time.monotonic()  # wall time of the plant time _sim0 (slips when behind)
        self._sim0 = plant_time()
        self._rtf_window = (self._t0, self._sim0)
        self.real_time_factor = math.nan

    # ------------------------------------------------------------------ wall
    def start_wall(self) -> None:
        create_timer(self.node, self.dt, self._wall_tick)

    def _wall_tick(self) -> None:
        due = int(math.floor((time.monotonic() - self._t0 - (self._plant_time() - self._sim0)) / self.dt
                             + 1e-9))
        if due <= 0:
            return
        n = min(due, self.max_catch_up_steps)
        if due > n:  # too far behind: the simulated clock slips
            self.skipped += due - n
            self._t0 += (due - n) * self.dt
        for _ in range(n):
            if self._step() is False:
                return

    # ------------------------------------------------------------------ sim
    def start_sim(self, clock_rate_hz: float, max_real_time_factor: float = 1.0) -> None:
        """Become the graph's clock (see the module doc).

        Raises:
            NodeConfigError: ``dt`` is not a whole number of /clock ticks.
        """
        from rclpy.clock import Clock, ClockType
        from rosgraph_msgs.msg import Clock as ClockMsg

        self.tick_period = 1.0 / clock_rate_hz
        self._ticks_per_step = max(1, int(round(self.dt / self.tick_period)))
        if abs(self._ticks_per_step * self.tick_period - self.dt) > 1e-9 * self.dt:
            raise NodeConfigError(
                f"{self.node.get_name()}: dt {self.dt} s is not a whole number of /clock ticks "
                f"({self.tick_period} s at clock_rate_hz {clock_rate_hz})")
        self.sim_ticks = 0
        self._held_ticks = 0
        self._clock_msg = ClockMsg()
        self._clock_pub = self.node.create_publisher(ClockMsg, "/clock", qos.CLOCK)
        self.node.get_clock()._set_ros_time_is_active(True)
        self._publish_clock()
        create_timer(self.node, self.tick_period / max_real_time_factor, self.clock_tick,
                     clock=Clock(clock_type=ClockType.STEADY_TIME))

    @property
    def sim_time(self) -> float:
        """Sim mode: the simulated time the ticks have reached [s]."""
        return self.sim_ticks * self.tick_period

    def _publish_clock(self) -> None:
        from rclpy.time import Time

        now = Time(nanoseconds=int(round(self.sim_ticks * self.tick_period * 1e9)))
        self.node.get_clock().set_ros_time_override(now)
        self._clock_msg.clock = now.to_msg()
        self._clock_pub.publish(self._clock_msg)

    def clock_tick(self) -> None:
        """One /clock tick (unless the lockstep holds it); every ``dt`` of ticks, one plant
        step to the new time (its state is published stamped with it just after the tick)."""
        if self.lockstep is not None and self.lockstep.hold(self.sim_time):
            self._held_ticks += 1
            if self._held_ticks % HELD_REPUBLISH_EVERY == 0:
                # the same time again: /clock is best effort for rclpy's subscribers, and a
                # node that lost the last tick would wait for it as long as the clock holds
                self._clock_pub.publish(self._clock_msg)
            return
        self._held_ticks = 0
        self.sim_ticks += 1
        self._publish_clock()
        if self.sim_ticks % self._ticks_per_step == 0:
            self._step()

    # ------------------------------------------------------------------ health
    def update_real_time_factor(self) -> float:
        """Simulated s per wall s since the previous call or the start (the diagnostics window)."""
        now, sim = time.monotonic(), self._plant_time()
        wall0, sim0 = self._rtf_window
        if now > wall0:
            self.real_time_factor = (sim - sim0) / (now - wall0)
        self._rtf_window = (now, sim)
        return self.real_time_factor
