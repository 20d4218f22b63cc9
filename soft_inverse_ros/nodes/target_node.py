"""target_node: the effector target trajectory generator.

Publishes the target (geometry_msgs/PointStamped, robot base frame, m) at
``publish_rate_hz`` along a trajectory of :mod:`soft_inverse_ros.core.control.trajectory`: hold,
line, square (the ICRA 2015 experiment), circle, or CSV waypoints, at ``speed`` [m/s].
An interactive goal on ``target_goal`` (e.g. RViz "Publish Point") switches to a straight
move to that goal at the same speed, then holds it.

The trajectory holds its start point for ``start_delay`` seconds first, counted from the
node's start (``start_on: now``) or from the first OK command the inverse controller
reports on ``inverse_status`` (``start_on: commanding``): then the robot is under control,
at rest at the start point, before the path moves on, however long the other nodes took
to start (the trajectory's phase no longer depends on start-up time; a start-up of 10 s
used to put the first command 13 mm away, on the square, while the graph was still warming
up). ``inverse_status`` is read at the publish rate only until that command is seen
(a polled subscription: no wake-up per message); a goal on ``target_goal`` starts at once.

Publishes: target. Subscribes: target_goal, inverse_status (``start_on: commanding``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.node import Node
from soft_inverse_ros_msgs.msg import ActuatorCommand, InverseSolverStatus

from soft_inverse_ros import topics
from soft_inverse_ros.core.config_files import ConfigNotFoundError, find_config
from soft_inverse_ros.core.control.trajectory import (
    MAX_WAYPOINT_M,
    SHAPES,
    LineTo,
    Trajectory,
    TrajectoryConfig,
)
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.periodic import create_periodic
from soft_inverse_ros.nodes.polled_subscription import PolledSubscription
from soft_inverse_ros.nodes.scheduling import apply_scheduling, check_scheduling, nice_field_metadata
from soft_inverse_ros.nodes.conversions import now_seconds
from soft_inverse_ros.nodes.node_runtime import (
    check_known_parameters,
    config_parameter_names,
    declare_config,
    main_for,
)


@dataclass(frozen=True)
class TargetNodeConfig:
    trajectory: str = field(default="square", metadata={
        "description": "trajectory shape", "choices": SHAPES})
    center: tuple[float, ...] = field(default=(0.0, 0.0, 0.1), metadata={
        "description": "start point and centre of the shape [m], base frame"})
    size: float = field(default=0.02, metadata={
        "description": "square side / circle diameter / line length [m]", "range": (0.0, 10.0)})
    speed: float = field(default=0.005, metadata={
        "description": "target speed along the path [m/s]", "range": (1e-6, 10.0)})
    plane_normal: tuple[float, ...] = field(default=(0.0, 0.0, 1.0), metadata={
        "description": "normal of the plane of the square/circle"})
    loop: bool = field(default=True, metadata={"description": "repeat the closed shapes"})
    csv_file: str = field(default="", metadata={
        "description": "waypoint CSV (trajectory csv): a path, or one relative to the package's "
                       "config folders (e.g. trajectories/hybrid_four_targets.csv)"})
    csv_unit_scale: float = field(default=1.0, metadata={
        "description": "metres per CSV unit (0.001 for mm)", "range": (1e-9, 1e3)})
    publish_rate_hz: float = field(default=1000.0, metadata={
        "description": "target publish rate [Hz]", "range": (0.1, 5000.0)})
    start_delay: float = field(default=0.0, metadata={
        "description": "hold the start point this long before moving [s]", "range": (0.0, 3600.0)})
    start_on: str = field(default="now", metadata={
        "description": "when start_delay starts counting: at this node's start (now), or at "
                       "the first OK command reported on inverse_status (commanding: the start "
                       "point is held until the controller commands)",
        "choices": ("now", "commanding")})
    realtime_priority: int = field(default=0, metadata={
        "description": "SCHED_FIFO priority of this process's threads (1-99; 0: normal "
                       "scheduling): a stamp taken and then preempted before the publish "
                       "counts as latency (needs root or an rtprio limit, else a warning)",
        "range": (0, 99)})
    nice: int = field(default=0, metadata=nice_field_metadata("the target publisher"))
    frame_id: str = field(default=topics.BASE_FRAME, metadata={"description": "target frame"})

    def __post_init__(self) -> None:
        check_scheduling(self.realtime_priority, self.nice)

    def csv_path(self) -> str:
        """``csv_file`` if it names an existing file, else the package's config file of that
        relative name (ConfigNotFoundError lists the folders searched; ValueError for a
        missing absolute path)."""
        if self.trajectory != "csv" or not self.csv_file or Path(self.csv_file).expanduser().is_file():
            return str(Path(self.csv_file).expanduser()) if self.csv_file else ""
        if Path(self.csv_file).is_absolute():
            raise ValueError(f"trajectory csv file {self.csv_file} not found")
        return str(find_config(self.csv_file))

    def trajectory_config(self) -> TrajectoryConfig:
        return TrajectoryConfig(
            shape=self.trajectory, center=tuple(self.center), size=self.size, speed=self.speed,
            plane_normal=tuple(self.plane_normal), loop=self.loop, csv_file=self.csv_path(),
            csv_unit_scale=self.csv_unit_scale,
        )


class TargetNode(Node):
    def __init__(self, node_name: str = "target_node", **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, TargetNodeConfig)
        check_known_parameters(self, config_parameter_names(TargetNodeConfig))
        try:
            self.trajectory = Trajectory(self.config.trajectory_config())
        except (ValueError, ConfigNotFoundError) as exc:
            raise ValueError(f"{node_name}: {exc}") from None
        #: time [s, node clock] the trajectory starts from; None: waiting for the controller
        self._start: float | None = self._now() + self.config.start_delay
        self._status = None
        if self.config.start_on == "commanding":
            self._start = None
            self._status = PolledSubscription(self, InverseSolverStatus, topics.INVERSE_STATUS,
                                              qos.HIGH_RATE)
            self.get_logger().info(f"holding the start point until the controller reports an OK command on "
                                   f"{topics.INVERSE_STATUS} (start_on: commanding)")
        self._last = self.trajectory.position(0.0)
        self._pub = self.create_publisher(PointStamped, topics.TARGET, qos.HIGH_RATE)
        self._scheduling = apply_scheduling(self, self.config.realtime_priority,
                                            "targets may be published late on a busy machine",
                                            self.config.nice)
        self.create_subscription(PointStamped, topics.TARGET_GOAL, self._on_goal, 10)
        create_periodic(self, 1.0 / self.config.publish_rate_hz, self._publish)
        if self.config.trajectory != "csv" and self.config.csv_file:  # (a shared file's, for csv)
            self.get_logger().warning(f"csv_file {self.config.csv_file} is not read: the trajectory is "
                                      f"'{self.config.trajectory}', not 'csv'")
        if self.config.trajectory == "csv":  # its own waypoints: no centre, its own times
            self.get_logger().info(f"csv {self.config.csv_file}: lap {self.trajectory.lap_time:.1f} s, "
                                   f"from {np.round(self.trajectory.position(0.0), 6).tolist()} m")
        else:
            self.get_logger().info(
                f"{self.config.trajectory} at {1e3 * self.config.speed:g} mm/s, lap "
                f"{self.trajectory.lap_time:.1f} s, centre {list(self.config.center)} m")

    def _now(self) -> float:
        return now_seconds(self)

    def _on_goal(self, msg: PointStamped) -> None:
        goal = np.array([msg.point.x, msg.point.y, msg.point.z])
        problem = ""
        if not np.all(np.isfinite(goal)):
            problem = "not finite"
        elif msg.header.frame_id not in ("", self.config.frame_id):  # it is republished in frame_id
            problem = f"in frame '{msg.header.frame_id}', expected '{self.config.frame_id}' (no transform is applied)"
        elif float(np.abs(goal).max()) > MAX_WAYPOINT_M:
            problem = f"{np.abs(goal).max():g} m from the origin: a unit mistake?"
        if problem:
            self.get_logger().warning(f"ignored the goal {goal.tolist()}: {problem}")
            return
        self.trajectory = LineTo(self._last, goal, self.config.speed)
        self._start = self._now()
        self._stop_waiting()
        self.get_logger().info(f"new goal {goal.tolist()} m")

    def _stop_waiting(self) -> None:
        """Drop the inverse_status subscription (only the first OK command matters)."""
        if self._status is not None:
            self._status.destroy()
            self._status = None

    def _check_commanding(self, now: float) -> None:
        """``start_on: commanding``: start the delay at the newest status if it reports an
        OK command (statuses in between are not needed: the controller keeps commanding)."""
        status = self._status.take_newest()
        if status is not None and status.command_status == ActuatorCommand.STATUS_OK:
            self._start = now + self.config.start_delay
            self._stop_waiting()
            self.get_logger().info(f"controller commanding: the {self.config.trajectory} "
                                   f"starts in {self.config.start_delay:g} s")

    def _publish(self) -> None:
        now = self._now()
        if self._start is None:
            self._check_commanding(now)
        self._last = self.trajectory.position(0.0 if self._start is None else now - self._start)
        msg = PointStamped()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.config.frame_id
        msg.point.x, msg.point.y, msg.point.z = (float(v) for v in self._last)
        self._pub.publish(msg)


def main(args=None) -> int:
    return main_for(TargetNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
