"""hybrid_model_node: the low-rate loop of a hybrid robot (arm + soft part + soft block).

At ``rate_hz`` it settles the controller's quasi-static model of the hybrid robot
(:class:`~soft_inverse_ros.core.rigid.hybrid_live.HybridSnapshotModel`: Newton on the hybrid
statics, contacts with the soft block solved exactly, W summed over both bodies) at the
joint servos' angles (the setpoints the arm's position servos hold, ``servo/joint_states``
at the driver's 100 Hz rather than the 1 kHz commands: a tenth of the callbacks) and
publishes its compliance snapshot for
inverse_controller_node: the joints as actuator columns (effort k (q_cmd − home) [N m],
stroke q [rad]), the contacts of the probe with the block as the contact block, and the
alignment rows (the projection of the newest target on the probe axis, core/rigid/
hybrid_live.py). Nothing is published before a target has arrived (the alignment rows need
it); before the first servo state the model sits at the home posture. Servo angles are
converted to joint angles with the calibration of the servo driver's own config
(``servo_config``); a NaN angle (servo not answering) keeps that joint's last value.

A description with soft force actuators: their efforts [N] are taken from the controller's
commands (``actuator_command``, MODE_FORCE, by name; subscribed only then).

Subscribes: target (PointStamped), servo/joint_states (JointState, by joint name),
actuator_command (soft actuators only). Publishes: compliance (ComplianceSnapshot, reliable,
transient local), /diagnostics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from soft_inverse_ros_msgs.msg import ActuatorCommand, ComplianceSnapshot

from soft_inverse_ros import topics
from soft_inverse_ros.core.model.hybrid_description import load_hybrid_description
from soft_inverse_ros.core.rigid.hybrid_live import HybridSnapshotModel
from soft_inverse_ros.nodes import diagnostics as diag
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.periodic import create_periodic
from soft_inverse_ros.nodes.scheduling import apply_scheduling, check_scheduling, nice_field_metadata
from soft_inverse_ros.nodes.conversions import efforts_by_name, now_seconds, snapshot_to_msg
from soft_inverse_ros.nodes.node_runtime import (
    check_known_parameters,
    config_parameter_names,
    declare_config,
    main_for,
)


@dataclass(frozen=True)
class HybridModelConfig:
    robot: str = field(default="hybrid_arm", metadata={
        "description": "hybrid robot description (type: hybrid), a name in config/robots or a path"})
    rate_hz: float = field(default=10.0, metadata={
        "description": "snapshot rate [Hz]", "range": (0.1, 200.0)})
    newton_iterations: int = field(default=3, metadata={
        "description": "Newton steps (with the exact contact LCP) per snapshot", "range": (1, 20)})
    servo_config: str = field(default="", metadata={
        "description": "servo driver YAML for the angle calibration; empty: drivers/servo_hybrid_arm.yaml"})
    frame_id: str = field(default="", metadata={
        "description": "robot base frame; empty: the description's frame_id"})
    realtime_priority: int = field(default=0, metadata={
        "description": "SCHED_FIFO priority of this process's threads (1-99; 0: normal "
                       "scheduling; needs root or an rtprio limit, else a warning), as fem_node's",
        "range": (0, 99)})
    nice: int = field(default=0, metadata=nice_field_metadata("the hybrid model's loop"))

    def __post_init__(self) -> None:
        check_scheduling(self.realtime_priority, self.nice)


class HybridModelNode(Node):
    def __init__(self, node_name: str = "hybrid_model_node", **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, HybridModelConfig)
        check_known_parameters(self, config_parameter_names(HybridModelConfig))
        self.desc = load_hybrid_description(self.config.robot)
        self.frame_id = self.config.frame_id or self.desc.frame_id
        self.model = HybridSnapshotModel(self.desc, self.config.newton_iterations)
        self._scheduling = apply_scheduling(self, self.config.realtime_priority,
                                            "snapshots may come late on a busy machine",
                                            self.config.nice)
        self._q_cmd = self.desc.home.copy()
        self._target: np.ndarray | None = None
        self._seq = 0
        self._stats = {"snapshots": 0, "failed": 0, "servo_states": 0, "rejected_states": 0}
        from soft_inverse_ros.nodes.driver_lifecycle import load_servo_config_for

        servo = load_servo_config_for(node_name, self.config.servo_config, "drivers/servo_hybrid_arm.yaml",
                                      self.desc.joint_names, "joint(s)")
        self._calibration = servo.calibration
        self._servo_names = servo.names
        self._times: list[float] = []
        self._reason = ""
        self._pub = self.create_publisher(ComplianceSnapshot, topics.COMPLIANCE, qos.LATCHED)
        self.create_subscription(PointStamped, topics.TARGET, self._on_target, qos.HIGH_RATE)
        self.create_subscription(JointState, topics.SERVO_STATES, self._on_servo_states, qos.HIGH_RATE)
        self._soft_names = tuple(a.name for a in self.desc.soft_actuators)
        self._soft = np.zeros(len(self._soft_names))
        if self._soft_names:
            self.create_subscription(ActuatorCommand, topics.ACTUATOR_COMMAND, self._on_command, qos.HIGH_RATE)
        create_periodic(self, 1.0 / self.config.rate_hz, self._update)
        self._diag = diag.DiagnosticsPublisher(self, self._diagnostics)
        self.get_logger().info(
            f"hybrid robot '{self.desc.name}': joints {list(self.desc.joint_names)}, rod "
            f"{self.model.scene.rod.n_nodes} nodes, block {self.model.scene.block.n_nodes} nodes, "
            f"{len(self.model.scene.tip)} contact pairs, {self.config.rate_hz:g} Hz")

    def _on_command(self, msg: ActuatorCommand) -> None:
        try:
            self._soft = efforts_by_name(msg.names, msg.efforts, self._soft_names)
        except ValueError as exc:
            self._reason = f"ignored command: {exc}"

    def _on_target(self, msg: PointStamped) -> None:
        p = np.array([msg.point.x, msg.point.y, msg.point.z])
        if np.all(np.isfinite(p)):
            self._target = p

    def _on_servo_states(self, msg: JointState) -> None:
        names = list(msg.name)
        if len(msg.position) != len(names):
            self._stats["rejected_states"] += 1
            return
        angles = np.full(len(self._servo_names), np.nan)
        for k, name in enumerate(names):
            if name in self._servo_names:
                angles[self._servo_names.index(name)] = msg.position[k]
        joints = self._calibration.displacement_from_position(angles)
        q = np.array([joints[self._servo_names.index(n)] for n in self.desc.joint_names])
        self._q_cmd = np.where(np.isfinite(q), q, self._q_cmd)
        self._stats["servo_states"] += 1

    def _update(self) -> None:
        if self._target is None:
            self._reason = "no target yet"
            return
        t0 = time.perf_counter()
        try:
            snap = self.model.snapshot(self._q_cmd, self._target, self._seq + 1, now_seconds(self), self._soft)
        except (ValueError, ArithmeticError, RuntimeError) as exc:
            self._stats["failed"] += 1
            self._reason = f"snapshot failed: {exc}"
            self.get_logger().error(self._reason, throttle_duration_sec=1.0)
            self.model = HybridSnapshotModel(self.desc, self.config.newton_iterations)  # back to home
            return
        self._seq += 1
        self._stats["snapshots"] += 1
        self._times = (self._times + [time.perf_counter() - t0])[-100:]
        self._pub.publish(snapshot_to_msg(snap, frame_id=self.frame_id, state_seq=self._seq))

    def _diagnostics(self):
        times = np.asarray(self._times) if self._times else np.zeros(1)
        level = diag.OK if not self._reason else diag.WARN
        values = {**self._stats, "scheduling": self._scheduling,
                  "snapshot_time_p50_ms": 1e3 * float(np.median(times)),
                  "snapshot_time_max_ms": 1e3 * float(times.max()),
                  "contact_force_sum_n": float(self.model.scene.forces.sum())}
        message, self._reason = self._reason or "ok", ""
        return [diag.status(f"{self.get_name()}: hybrid model", level, message, values)]


def main(args=None) -> int:
    return main_for(HybridModelNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
