"""snake_plant_node: the simulated pneumatic soft snake (issue 16), stepped live.

Steps :class:`~soft_inverse_ros.core.snake.snake.Snake` (n two-chamber links on wheeled
rigid plates, anisotropic wheel friction, gravity, implicit dynamics) at its time step
``dt`` under the chamber pressures the (simulated) valve driver reports, in one of two
clock modes, as ``plant_sim_node`` does:

* ``clock: wall``: on a wall-clock timer (a late tick is caught up with up to
  ``max_catch_up_steps`` steps; beyond that the simulated clock slips and the skipped
  steps are counted);
* ``clock: sim``: the node is the graph's clock: it publishes ``/clock`` in
  ``clock_rate_hz`` ticks, one plant step every ``dt``, never faster than
  ``max_real_time_factor`` × real time; the other nodes run with ``use_sim_time``. The
  snake's step keeps real time on one free core (2.6 ms CPU per 10 ms step, BENCHMARKS.md),
  but not when a loaded machine leaves it no core, so this is the mode in which a live snake
  run is valid whatever the load. With ``max_input_lag`` > 0 the clock is
  in lockstep with the valve driver: it waits while the newest chamber state lags by more
  than that (a starved driver process would otherwise see the clock jump, and its
  simulated board's watchdog vent the chambers).

Input: sensor_msgs/JointState on ``valves/chamber_states`` (the valve driver's chamber
pressures, ``effort`` [Pa gauge], by name); the newest value is held. ``chambers`` names
the (left, right) chamber of each link, link 0 first (default ``link<i>_left``,
``link<i>_right``). A non-finite pressure or one beyond ±2 MPa is refused (the previous
value held, counted).

Publishes (frame ``frame_id``, stamps = node clock = simulated time in both modes' sense
of "the state at that time"):

* ``plant/plate_poses`` (geometry_msgs/PoseArray): the true pose of each plate, link 0's
  first (:meth:`Snake.plate_poses`);
* ``plant/markers_true`` (sensor_msgs/PointCloud2): the true positions of four markers
  per plate (its corners), plate by plate: what the simulated motion capture sees;
* ``plant/com_true`` (geometry_msgs/PointStamped): the true centre of mass [m];
* /diagnostics (``<node>: plant``): real-time factor (simulated s per wall s per
  diagnostics window; the run validity reads it), step times, skipped steps, the clock
  mode, inputs received / refused, CoM.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from geometry_msgs.msg import Pose, PoseArray, PointStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState, PointCloud2

from soft_inverse_ros import topics
from soft_inverse_ros.core.sim.lockstep import Lockstep
from soft_inverse_ros.core.snake.link_mesh import LinkGeometry
from soft_inverse_ros.core.snake.snake import Snake, SnakeParams
from soft_inverse_ros.nodes import diagnostics as diag
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.conversions import to_seconds
from soft_inverse_ros.nodes.plant_clock import CLOCK_MODES, PlantClock
from soft_inverse_ros.nodes.scheduling import apply_scheduling
from soft_inverse_ros.nodes.node_runtime import (
    NodeConfigError,
    check_known_parameters,
    config_parameter_names,
    declare_config,
    given_parameters,
    main_for,
)

SOLVERS = ("direct", "minres")
#: chamber pressures beyond this are refused as absurd [Pa]
MAX_ABS_PRESSURE = 2e6
#: markers per plate (the paper's rigid bodies)
MARKERS_PER_PLATE = 4


@dataclass(frozen=True)
class SnakePlantNodeConfig:
    n_links: int = field(default=4, metadata={"description": "links of the snake", "range": (1, 20)})
    sections: int = field(default=7, metadata={
        "description": "cross-sections per link (mesh resolution; the paper's link has 13)",
        "range": (4, 25)})
    dt: float = field(default=0.01, metadata={"description": "time step [s]", "range": (1e-4, 0.05)})
    newton_iterations: int = field(default=2, metadata={
        "description": "Newton iterations per step", "range": (1, 20)})
    linear_solver: str = field(default="minres", metadata={
        "description": "direct (sparse LU) or minres (fixed-cost Jacobi-preconditioned "
                       "conjugate-residual iterations, the paper's solver)", "choices": SOLVERS})
    krylov_iterations: int = field(default=20, metadata={
        "description": "minres iterations per Newton iteration", "range": (1, 1000)})
    mu_along: float = field(default=0.01, metadata={
        "description": "wheel friction along the body (the rolling wheel's resistance)", "range": (0.0, 10.0)})
    mu_across: float = field(default=1.0, metadata={
        "description": "wheel friction across the body", "range": (0.0, 10.0)})
    plate_mass: float = field(default=0.030, metadata={
        "description": "mass of a plate with axle and wheels [kg]", "range": (0.0, 10.0)})
    ground_stiffness: float = field(default=2000.0, metadata={
        "description": "wheel-ground penalty per contact point [N/m]", "range": (1.0, 1e7)})
    settle_time: float = field(default=0.2, metadata={
        "description": "simulated time stepped at 0 Pa before the node starts (the snake "
                       "drops onto its wheels) [s]", "range": (0.0, 10.0)})
    chambers: tuple[str, ...] = field(default=(), metadata={
        "description": "(left, right) chamber names per link, link 0 first; empty: "
                       "link<i>_left, link<i>_right"})
    frame_id: str = field(default=topics.BASE_FRAME, metadata={
        "description": "frame of the published poses (the ground plane z = 0)"})
    publish_every: int = field(default=1, metadata={
        "description": "publish the truth every this many steps", "range": (1, 1000)})
    max_catch_up_steps: int = field(default=4, metadata={
        "description": "clock: wall: most steps per timer tick when behind (more are "
                       "skipped: the simulated clock slips)", "range": (1, 100)})
    clock: str = field(default="wall", metadata={
        "description": "wall: steps on the wall clock; sim: this node publishes /clock "
                       "and the graph follows it (use_sim_time)", "choices": CLOCK_MODES})
    clock_rate_hz: float = field(default=200.0, metadata={
        "description": "clock: sim: /clock ticks per simulated second (ROS-time timers "
                       "fire at most once per tick)", "range": (10.0, 10000.0)})
    max_real_time_factor: float = field(default=1.0, metadata={
        "description": "clock: sim: simulated seconds per wall second at most",
        "range": (0.01, 100.0)})
    max_input_lag: float = field(default=0.0, metadata={
        "description": "clock: sim: lockstep with the valve driver: the simulated clock "
                       "waits while the newest chamber state is older than this [s of "
                       "simulated time] (once one arrived; a wall-clock wait over "
                       "input_wait_timeout gives up and steps on, counted). A starved driver "
                       "process then slows the graph down instead of seeing the clock jump "
                       "(its board's watchdog would vent). 0: no lockstep", "range": (0.0, 10.0)})
    input_wait_timeout: float = field(default=2.0, metadata={
        "description": "clock: sim: wall seconds the lockstep waits for the valve driver "
                       "before stepping on without it", "range": (0.01, 60.0)})
    realtime_priority: int = field(default=0, metadata={
        "description": "SCHED_FIFO priority of this process's threads (1-99; 0: normal "
                       "scheduling): the simulated robot stands in for physics, which does "
                       "not wait for a busy CPU (needs root or an rtprio limit, else a warning)",
        "range": (0, 99)})

    def __post_init__(self) -> None:
        if self.chambers and len(self.chambers) != 2 * self.n_links:
            raise ValueError(f"chambers must name 2 per link ({2 * self.n_links}), got "
                             f"{len(self.chambers)}")
        repeated = sorted({n for n in self.chambers if self.chambers.count(n) > 1})
        if repeated:  # one chamber would never get a pressure
            raise ValueError(f"chambers {repeated} named more than once in {list(self.chambers)}")

    def chamber_names(self) -> tuple[str, ...]:
        return self.chambers or tuple(f"link{i}_{s}" for i in range(self.n_links)
                                      for s in ("left", "right"))

    def snake_params(self) -> SnakeParams:
        return SnakeParams(n_links=self.n_links, geometry=LinkGeometry(sections=self.sections),
                           dt=self.dt, newton_iterations=self.newton_iterations,
                           linear_solver=self.linear_solver,
                           krylov_iterations=self.krylov_iterations, mu_along=self.mu_along,
                           mu_across=self.mu_across, plate_mass=self.plate_mass,
                           ground_stiffness=self.ground_stiffness)


class SnakePlantNode(Node):
    def __init__(self, node_name: str = "snake_plant_node", **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.config = cfg = declare_config(self, SnakePlantNodeConfig)
        check_known_parameters(self, config_parameter_names(SnakePlantNodeConfig))
        if cfg.linear_solver == "direct" and "krylov_iterations" in given_parameters(self):
            self.get_logger().warning(
                f"krylov_iterations ({cfg.krylov_iterations}) is not used: linear_solver is direct "
                "(a sparse LU per Newton iteration); it sets minres's iterations")
        if cfg.clock == "sim" and self.get_parameter("use_sim_time").value:
            raise NodeConfigError(f"{node_name}: clock: sim makes this node the clock source: "
                                  "it cannot also use_sim_time")
        try:
            self.snake = Snake(cfg.snake_params())
        except ValueError as exc:
            raise NodeConfigError(f"{node_name}: {exc}") from None
        self.names = cfg.chamber_names()
        self._index = {n: i for i, n in enumerate(self.names)}
        self.pressures = np.zeros(len(self.names))
        zero = np.zeros((cfg.n_links, 2))
        while self.snake.time < cfg.settle_time - 1e-9:
            self.snake.step(zero)
        self._corner_ids = self.snake.plate_corner_ids()
        self._init_counters()
        self._scheduling = apply_scheduling(self, cfg.realtime_priority,
                                            "the snake may fall behind real time on a busy machine")
        self._pose_pub = self.create_publisher(PoseArray, topics.PLANT_PLATE_POSES, qos.HIGH_RATE)
        self._markers_pub = self.create_publisher(PointCloud2, topics.PLANT_MARKERS_TRUE,
                                                  qos.HIGH_RATE)
        self._com_pub = self.create_publisher(PointStamped, topics.PLANT_COM_TRUE, qos.HIGH_RATE)
        self.create_subscription(JointState, topics.CHAMBER_PRESSURES, self._on_pressures,
                                 qos.HIGH_RATE)
        if cfg.clock == "sim":
            self.plant_clock.start_sim(cfg.clock_rate_hz, cfg.max_real_time_factor)
        else:
            self.plant_clock.start_wall()
        self._diag = diag.DiagnosticsPublisher(self, self._diagnostics)
        self.get_logger().info(
            f"snake: {cfg.n_links} links, {len(self.snake.x)} nodes, dt {cfg.dt * 1e3:.1f} ms, "
            f"{cfg.linear_solver} solver, clock {cfg.clock}; chambers {list(self.names)}")

    def _init_counters(self) -> None:
        self._inputs = 0
        self._rejected = 0
        self._last_error = ""
        self._last_input = -math.inf
        # the clock waits for the valve driver's chamber states (clock: sim, max_input_lag > 0)
        self.lockstep = Lockstep(self.config.input_wait_timeout)
        self.lockstep.watch("chamber states", self.config.max_input_lag)
        self._steps = 0
        self._failures = 0
        self._step_times: deque[float] = deque(maxlen=1000)
        self.plant_clock = PlantClock(self, dt=self.config.dt, plant_time=lambda: self.snake.time,
                                      step=self._step_once, max_catch_up_steps=self.config.max_catch_up_steps,
                                      lockstep=self.lockstep)

    # ------------------------------------------------------------------ input
    def _on_pressures(self, msg: JointState) -> None:
        if len(msg.effort) != len(msg.name):
            self._reject(f"chamber states: {len(msg.name)} names but {len(msg.effort)} efforts")
            return
        new = self.pressures.copy()
        used = 0
        for name, p in zip(msg.name, msg.effort):
            i = self._index.get(name)
            if i is None:
                continue
            if not (math.isfinite(p) and abs(p) <= MAX_ABS_PRESSURE):
                self._reject(f"chamber {name}: pressure {p} Pa refused")
                return
            new[i] = p
            used += 1
        if used:
            self.pressures = new
            self._inputs += 1
            self._last_input = time.monotonic()
            self.lockstep.stamp("chamber states", to_seconds(msg.header.stamp))

    def _reject(self, reason: str) -> None:
        self._rejected += 1
        self._last_error = reason
        self.get_logger().warning(reason, throttle_duration_sec=1.0)

    # ------------------------------------------------------------------ step and publish
    def _step_once(self) -> None:
        t = time.perf_counter()
        try:
            self.snake.step(self.pressures.reshape(-1, 2))
            if not np.all(np.isfinite(self.snake.x)):
                raise ArithmeticError("the state is no longer finite")
        except (ArithmeticError, ValueError, RuntimeError) as exc:
            self._recover(exc)
            return
        self._step_times.append(time.perf_counter() - t)
        self._steps += 1
        if self._steps % self.config.publish_every == 0:
            self._publish_truth()

    def _recover(self, exc: Exception) -> None:
        """A failed step: the snake restarts at rest where it is, straight (counted)."""
        self._failures += 1
        self._last_error = f"snake step failed ({exc}): restarted at rest"
        self.get_logger().error(self._last_error, throttle_duration_sec=1.0)
        t = self.snake.time
        self.snake = Snake(self.snake.params)
        self.snake.time = t

    def _publish_truth(self) -> None:
        from soft_inverse_ros.nodes.point_cloud import cloud_from_points

        stamp = self.get_clock().now().to_msg()
        frame = self.config.frame_id
        pos, quat = self.snake.plate_poses()
        poses = PoseArray()
        poses.header.stamp = stamp
        poses.header.frame_id = frame
        for p, q in zip(pos, quat):
            pose = Pose()
            pose.position.x, pose.position.y, pose.position.z = (float(v) for v in p)
            (pose.orientation.x, pose.orientation.y, pose.orientation.z,
             pose.orientation.w) = (float(v) for v in q)
            poses.poses.append(pose)
        self._pose_pub.publish(poses)
        self._markers_pub.publish(cloud_from_points(self.snake.x[self._corner_ids.ravel()],
                                                    frame, stamp))
        com = self.snake.com()
        msg = PointStamped()
        msg.header.stamp = stamp
        msg.header.frame_id = frame
        msg.point.x, msg.point.y, msg.point.z = (float(v) for v in com)
        self._com_pub.publish(msg)

    # ------------------------------------------------------------------ health
    def _diagnostics(self):
        now = time.monotonic()
        rtf = self.plant_clock.update_real_time_factor()
        times = np.asarray(self._step_times) if self._step_times else np.zeros(1)
        level, message = diag.OK, "ok"
        self._last_error = self._last_error or self.lockstep.last_error
        self.lockstep.last_error = ""
        if self._last_error:
            level, message = diag.WARN, self._last_error
        elif self.config.clock == "wall" and rtf < 0.9:
            level, message = diag.WARN, f"behind real time (factor {rtf:.2f})"
        self._last_error = ""
        com = self.snake.com()
        values = {
            "sim_time_s": self.snake.time,
            "real_time_factor": rtf,
            "steps": self._steps,
            "skipped_steps": self.plant_clock.skipped,
            "failed_steps": self._failures,
            "dt_ms": 1e3 * self.config.dt,
            "step_time_p50_ms": 1e3 * float(np.median(times)),
            "step_time_p99_ms": 1e3 * float(np.percentile(times, 99)),
            "step_time_max_ms": 1e3 * float(times.max()),
            "clock": self.config.clock,
            "scheduling": self._scheduling,
            "model": "snake",
            "linear_solver": self.config.linear_solver,
            "inputs_received": self._inputs,
            "inputs_rejected": self._rejected,
            **self.lockstep.counters(),
            "input": "chamber_states",  # what last_input_age_s is the age of (the verdict reads it)
            "last_input_age_s": now - self._last_input,
            "com_x_m": float(com[0]),
            "com_y_m": float(com[1]),
        }
        for name, p in zip(self.names, self.pressures):
            values[f"pressure.{name}"] = float(p)
        return [diag.status(f"{self.get_name()}: plant", level, message, values)]


def main(args=None) -> int:
    return main_for(SnakePlantNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
