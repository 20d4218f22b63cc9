"""fem_node: the low-rate FEM loop.

Holds the quasi-static co-rotational FEM of the robot, applies the newest actuator
efforts λ from the inverse controller (so the model stays mechanically coupled to the
commands), advances the state by Newton iterations at ``rate_hz`` and publishes it as
FemState for compliance_node. With ``fused_compliance`` it also computes and publishes
the compliance snapshot itself, from the same assembly and one block solve (one process
instead of fem_node + compliance_node).

Subscribes: actuator_command (ActuatorCommand; the launch graphs remap it onto the
controller's ``actuator_command_throttle``, ~100 Hz, see :mod:`soft_inverse_ros.graph`);
obstacles/poses (PoseArray, only when the
robot's collision section has moving obstacles: the model detects contacts against the
newest poses, the declared ones until the first arrives). Publishes: fem_state (FemState),
compliance (ComplianceSnapshot, only with fused_compliance), /diagnostics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from rclpy.node import Node
from soft_inverse_ros_msgs.msg import ActuatorCommand, ComplianceSnapshot, FemState

from soft_inverse_ros import topics
from soft_inverse_ros.core.control.actuator_limits import limits_from_description
from soft_inverse_ros.core.model.robot_model import ConvergenceError

#: consecutive failed updates after which the model restarts from its rest shape
RESET_AFTER_FAILURES = 3
from soft_inverse_ros.nodes import diagnostics as diag
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.conversions import (
    efforts_by_name,
    fem_state_msg,
    now_seconds,
    obstacle_offsets_from_msg,
    snapshot_to_msg,
    to_seconds,
)
from soft_inverse_ros.nodes.model_params import RobotModelParams, build_model
from soft_inverse_ros.nodes.periodic import create_periodic
from soft_inverse_ros.nodes.polled_subscription import PolledSubscription
from soft_inverse_ros.nodes.scheduling import apply_scheduling, check_scheduling, nice_field_metadata
from soft_inverse_ros.nodes.node_runtime import (
    check_known_parameters,
    config_parameter_names,
    declare_config,
    main_for,
)


@dataclass(frozen=True)
class FemNodeConfig:
    rate_hz: float = field(default=50.0, metadata={
        "description": "FEM update rate [Hz] (0: as fast as possible)", "range": (0.0, 1000.0)})
    newton_iterations: int = field(default=1, metadata={
        "description": "Newton iterations per update", "range": (1, 50)})
    frame_id: str = field(default=topics.BASE_FRAME, metadata={"description": "robot base frame"})
    fused_compliance: bool = field(default=False, metadata={
        "description": "also publish the compliance snapshot (no compliance_node needed)"})
    realtime_priority: int = field(default=0, metadata={
        "description": "SCHED_FIFO priority of this process's threads (1-99; 0: normal "
                       "scheduling): above the simulated sensors and the recorder, below the "
                       "controller and the simulated robot, so a busy CPU delays snapshots "
                       "less (needs root or an rtprio limit, else a warning; needs rate_hz > 0)",
        "range": (0, 99)})
    nice: int = field(default=0, metadata=nice_field_metadata("the low-rate FEM loop"))

    def __post_init__(self) -> None:
        check_scheduling(self.realtime_priority, self.nice)
        if self.realtime_priority > 0 and self.rate_hz <= 0:
            raise ValueError("realtime_priority > 0 needs rate_hz > 0 (a real-time loop without "
                             "a period would starve the machine)")
        if self.fused_compliance and self.newton_iterations != 1:
            raise ValueError("fused_compliance makes one Newton step per update (it shares "
                             "the step's assembly and solve with the compliance): "
                             f"newton_iterations must be 1, got {self.newton_iterations}")


class FemNode(Node):
    def __init__(self, node_name: str = "fem_node", **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, FemNodeConfig)
        self.model_params = declare_config(self, RobotModelParams)
        check_known_parameters(
            self, config_parameter_names(FemNodeConfig) + config_parameter_names(RobotModelParams)
        )
        self.model = build_model(self.model_params)
        self._scheduling = apply_scheduling(self, self.config.realtime_priority,
                                            "snapshots may come late on a busy machine",
                                            self.config.nice)
        if self.model.contact is not None and not self.config.fused_compliance:
            self.get_logger().warning(
                "the robot's collision section is modelled only with fused_compliance: true "
                "(this FEM loop and its snapshots ignore contact)")
        self._efforts = np.zeros(self.model.n_actuators)
        limits = limits_from_description(self.model.description)
        order = [list(limits.names).index(n) for n in self.model.actuator_names]
        # a command's efforts must lie in the description's effort bounds (with round-off)
        self._effort_bounds = (limits.effort_min[order], limits.effort_max[order])
        self._last_good: tuple[np.ndarray, np.ndarray] | None = None
        self._consecutive_failures = 0
        self._recoveries_to_rest = 0
        self._command_seq = 0
        self._seq = 0
        self._failures = 0
        self._bad_commands = 0
        self._last_error = ""
        self._step_times: list[float] = []
        self._contacts = 0  # contacts in the last snapshot
        self._pub = self.create_publisher(FemState, topics.FEM_STATE, qos.STATE)
        self._snapshot_pub = (
            self.create_publisher(ComplianceSnapshot, topics.COMPLIANCE, qos.LATCHED)
            if self.config.fused_compliance else None
        )
        # the commands arrive at ~1.2 kHz; each update takes the newest (polled_subscription.py)
        self._commands = PolledSubscription(self, ActuatorCommand, topics.ACTUATOR_COMMAND,
                                            qos.HIGH_RATE)
        self._obstacle_stamp: float | None = None  # stamp of the last obstacle poses applied [s]
        self._bad_obstacle_poses = 0
        if self.model.contact is not None and self.model.contact.moving:
            # the model does not know the obstacles' motion: it uses their measured poses
            from geometry_msgs.msg import PoseArray

            self.create_subscription(PoseArray, topics.OBSTACLE_POSES, self._on_obstacle_poses,
                                     qos.HIGH_RATE)
        period = 1.0 / self.config.rate_hz if self.config.rate_hz > 0 else 1e-4
        create_periodic(self, period, self._update)
        self._diag = diag.DiagnosticsPublisher(self, self._diagnostics)
        self.get_logger().info(
            f"robot '{self.model.description.name}': {self.model.mesh.n_points} nodes, "
            f"{self.model.mesh.n_tets} tets, actuators {list(self.model.actuator_names)}"
        )

    def _take_command(self) -> None:
        """The efforts of the newest command since the last update (a malformed one is
        counted and the previous efforts kept)."""
        msg = self._commands.take_newest()
        if msg is None:
            return
        try:
            efforts = efforts_by_name(msg.names, msg.efforts, self.model.actuator_names)
            lo, hi = self._effort_bounds
            slack = 1e-9 * np.maximum(1.0, np.maximum(np.abs(lo), np.abs(hi)))
            outside = (efforts < lo - slack) | (efforts > hi + slack)
            if outside.any():
                bad = [f"{n}={efforts[i]:g} not in [{lo[i]:g}, {hi[i]:g}]"
                       for i, n in enumerate(self.model.actuator_names) if outside[i]]
                raise ValueError(f"efforts beyond the description's limits: {', '.join(bad)}")
            self._efforts = efforts
            self._command_seq = msg.seq
        except ValueError as exc:
            self._bad_commands += 1
            self._last_error = f"ignored command {msg.seq}: {exc}"
            self.get_logger().warning(self._last_error, throttle_duration_sec=1.0)

    def _on_obstacle_poses(self, msg) -> None:
        contact = self.model.contact
        try:
            contact.set_obstacle_offsets(obstacle_offsets_from_msg(
                msg, len(contact.obstacles), self.config.frame_id))
        except ValueError as exc:
            self._bad_obstacle_poses += 1
            self._last_error = f"ignored obstacle poses: {exc}"
            self.get_logger().warning(self._last_error, throttle_duration_sec=5.0)
            return
        self._obstacle_stamp = to_seconds(msg.header.stamp)

    def _update(self) -> None:
        self._take_command()
        stamp = now_seconds(self)
        snapshot = None
        try:
            if self._snapshot_pub is not None:
                info, snapshot = self.model.update(self._efforts, self._seq + 1, stamp)
            else:
                info = self.model.step(self._efforts,
                                       newton_iterations=self.config.newton_iterations)
        except (ConvergenceError, ValueError, ArithmeticError) as exc:
            self._failures += 1
            self._consecutive_failures += 1
            self._last_error = f"FEM update failed: {exc}; {self._recover()}"
            self.get_logger().error(self._last_error, throttle_duration_sec=1.0)
            return
        self._consecutive_failures = 0
        self._last_good = (np.array(self.model.positions), np.array(self.model.efforts))
        self._seq += 1
        self._step_times = (self._step_times + [info.wall_time])[-200:]
        model = self.model
        self._pub.publish(fem_state_msg(
            stamp=stamp, frame_id=self.config.frame_id,
            seq=self._seq, command_seq=self._command_seq, positions=model.positions,
            efforts=model.efforts, strokes=model.actuator_stroke,
            effector_position=model.effector_position,
            newton_iterations=info.newton_iterations, residual_norm=info.residual_norm,
            step_time=info.wall_time,
        ))
        if snapshot is not None:
            self._contacts = 0 if snapshot.contacts is None else snapshot.contacts.size
            self._snapshot_pub.publish(snapshot_to_msg(
                snapshot, frame_id=self.config.frame_id, state_seq=self._seq))

    def _recover(self) -> str:
        """After a failed update: back to the last converged state, or to the rest shape
        when the failures repeat from there (retrying the same state would fail forever).
        Returns what was done."""
        if self._last_good is not None and self._consecutive_failures < RESET_AFTER_FAILURES:
            self.model.set_state(*self._last_good)
            return "state reset to the last converged one"
        self.model.reset()
        self._last_good = None
        self._recoveries_to_rest += 1
        return "model reset to its rest shape"

    def _diagnostics(self):
        times = np.asarray(self._step_times) if self._step_times else np.zeros(1)
        level = diag.OK if not self._last_error else diag.WARN
        values = {"scheduling": self._scheduling,
                  "states_published": self._seq, "failed_updates": self._failures,
                  "resets_to_rest": self._recoveries_to_rest,
                  "rejected_commands": self._bad_commands,
                  "step_time_p50_ms": 1e3 * float(np.median(times)),
                  "step_time_max_ms": 1e3 * float(times.max()),
                  "residual_norm_N": self.model.residual_norm}
        if self.model.contact is not None:
            values["contacts"] = self._contacts
            values["max_contacts"] = self.model.max_contacts
            # < 1: the last update's step was shortened so that no contact is passed unseen
            values["last_step_fraction"] = round(float(self.model.last_step_fraction), 4)
            if self.model.contact.moving:
                values["obstacle_pose_age_s"] = (
                    "none received (declared poses)" if self._obstacle_stamp is None
                    else round(now_seconds(self) - self._obstacle_stamp, 3))
                values["bad_obstacle_poses"] = self._bad_obstacle_poses
        message = self._last_error or "ok"
        self._last_error = ""
        return [diag.status(f"{self.get_name()}: FEM", level, message, values)]


def main(args=None) -> int:
    return main_for(FemNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
