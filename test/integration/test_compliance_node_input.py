"""compliance_node facing FEM states it must not turn into snapshots: one stamped an hour
ahead of its clock was republished as a future snapshot, without a log line."""

from __future__ import annotations

import time

import numpy as np
import pytest

try:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.node import Node
    from soft_inverse_ros_msgs.msg import ComplianceSnapshot, FemState

    from soft_inverse_ros import topics
    from soft_inverse_ros.nodes import qos
    from soft_inverse_ros.nodes.conversions import to_time
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

from soft_inverse_ros.core.model.description import load_robot_description
from soft_inverse_ros.core.model.robot_model import RobotModel
from soft_inverse_ros.graph import build_graph
from soft_inverse_ros.process_launcher import GraphProcesses

pytestmark = pytest.mark.integration


def test_future_and_zero_stamped_states_are_refused_and_good_ones_still_served(graph_env):
    model = RobotModel.from_description(load_robot_description("builtin_diamond"))
    model.equilibrate(np.zeros(len(model.actuator_names)), from_rest=True)
    spec = next(s for s in build_graph("sim") if s.name == "compliance_node")
    graph = GraphProcesses([spec], output=None).start()
    try:
        rclpy.init()
        node = Node("compliance_input_probe")
        snapshots: list[ComplianceSnapshot] = []
        messages: list[str] = []
        node.create_subscription(ComplianceSnapshot, topics.COMPLIANCE, snapshots.append, qos.LATCHED)
        node.create_subscription(DiagnosticArray, topics.DIAGNOSTICS,
                                 lambda m: messages.extend(s.message for s in m.status), qos.DIAGNOSTICS)
        pub = node.create_publisher(FemState, topics.FEM_STATE, qos.STATE)

        def state(offset: float | None, seq: int) -> FemState:
            msg = FemState()
            now = node.get_clock().now().nanoseconds * 1e-9
            msg.header.stamp = to_time(0.0 if offset is None else now + offset)
            msg.header.frame_id = "base_link"
            msg.seq = seq
            msg.positions = model.positions.ravel().tolist()
            msg.lambda_a = [0.0] * len(model.actuator_names)
            return msg

        def send_until(offset, seq, until, seconds):
            end = time.monotonic() + seconds
            while time.monotonic() < end and not until():
                assert not graph.poll(), graph.exits
                pub.publish(state(offset, seq))
                rclpy.spin_once(node, timeout_sec=0.05)
            return until()

        assert send_until(0.0, 1, lambda: snapshots, 120.0), "no snapshot for a good state"
        served = len(snapshots)
        assert send_until(3600.0, 2, lambda: any("rejected FEM state 2: stamped" in m for m in messages),
                          20.0), set(messages)
        assert send_until(None, 3, lambda: any("rejected FEM state 3: stamped 0.000 s" in m
                                               for m in messages), 20.0), set(messages)
        now = node.get_clock().now().nanoseconds * 1e-9
        assert all(s.header.stamp.sec < now + 1.0 for s in snapshots[served:])  # none from the future
        assert send_until(0.0, 4, lambda: any(s.seq and s.header.stamp.sec > 0 for s in snapshots[served:]),
                          20.0), "good states are served again"
        assert "compliance_node" in graph.running()
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
        graph.shutdown()
