"""A probe node for the controller's integration tests: it records the commands and
publishes targets, snapshots and servo states over DDS."""

from __future__ import annotations

import time

import numpy as np
import rclpy
from geometry_msgs.msg import PointStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from soft_inverse_ros_msgs.msg import ActuatorCommand, ComplianceSnapshot

from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.conversions import snapshot_to_msg, to_time


class Probe:
    def __init__(self) -> None:
        self.node = Node("hostile_probe")
        self.commands: list[tuple[float, ActuatorCommand]] = []
        self.effector: list[np.ndarray] = []
        n = self.node
        n.create_subscription(ActuatorCommand, "actuator_command",
                              lambda m: self.commands.append((time.monotonic(), m)), qos.HIGH_RATE)
        n.create_subscription(PointStamped, "plant/effector_true", lambda m: self.effector.append(
            np.array([m.point.x, m.point.y, m.point.z])), qos.HIGH_RATE)
        self.snapshot_pub = n.create_publisher(ComplianceSnapshot, "compliance", qos.LATCHED)
        self.target_pub = n.create_publisher(PointStamped, "target", qos.HIGH_RATE)
        self.servo_pub = n.create_publisher(JointState, "servo/joint_states", qos.HIGH_RATE)

    def now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(self.node, timeout_sec=0.01)

    def target(self, stamp: float, frame: str = "base_link", z: float = 0.118) -> None:
        msg = PointStamped()
        msg.header.stamp = to_time(stamp)
        msg.header.frame_id = frame
        msg.point.z = z
        self.target_pub.publish(msg)

    def since(self, t0: float) -> list[ActuatorCommand]:
        return [c for t, c in self.commands if t >= t0]


def snapshot_message():
    """(A) compliance snapshot message of the built-in robot at rest under gravity."""
    from soft_inverse_ros.core.model.description import load_robot_description
    from soft_inverse_ros.core.model.robot_model import RobotModel

    model = RobotModel.from_description(load_robot_description("builtin_diamond"))
    model.equilibrate(np.zeros(len(model.actuator_names)), from_rest=True)
    return snapshot_to_msg(model.snapshot(seq=1, stamp=0.0), frame_id="base_link", state_seq=1)


def feed(probe, snapshot: ComplianceSnapshot, stamp: float, seq: int) -> None:
    snapshot.header.stamp = to_time(stamp)
    snapshot.seq = seq
    probe.snapshot_pub.publish(snapshot)
