"""A robot with two effector points: the controller takes one target per point on
``target/<point>``, commands safely until every point has one, then solves for both; the
closed loop (one measured point) is refused for it, at start-up and at run time."""

from __future__ import annotations

import dataclasses
import io
import time
from pathlib import Path

import numpy as np
import pytest

try:
    import rclpy
    from geometry_msgs.msg import PointStamped
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    from soft_inverse_ros_msgs.msg import ActuatorCommand
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

from driver_probe import wait_exit
from hostile_probe import Probe, feed
from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.graph import build_graph
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.conversions import snapshot_to_msg, to_time
from soft_inverse_ros.nodes.node_runtime import EXIT_CONFIG_ERROR
from soft_inverse_ros.process_launcher import GraphProcesses

pytestmark = pytest.mark.integration

TWO_POINTS = """effectors:
  - name: tip                # centre of the top platform
    points: [[0, 0, 125]]
    axes: [x, y, z]
  - name: knee_left          # where cable_left is attached
    points: [[0, 97, 45]]
    axes: [x, z]
"""


def _two_point_robot(folder: Path) -> Path:
    """The built-in Diamond with a second effector point (rows tip.x/y/z, knee_left.x/z)."""
    text = find_config("robots/builtin_diamond.yaml").read_text()
    path = folder / "diamond_two_points.yaml"
    path.write_text(text[:text.index("\neffectors:")] + "\n" + TWO_POINTS)
    return path


def _controller(robot: Path, **params):
    spec = next(s for s in build_graph("sim") if s.name == "inverse_controller_node")
    return dataclasses.replace(spec, parameters={**spec.parameters, "robot": str(robot), "realtime_priority": 0,
                                                 "rate_hz": 50.0, "snapshot_timeout": 30.0, **params})


def _point(probe: Probe, publisher, stamp: float, xyz) -> None:
    msg = PointStamped()
    msg.header.stamp = to_time(stamp)
    msg.header.frame_id = "base_link"
    msg.point.x, msg.point.y, msg.point.z = map(float, xyz)
    publisher.publish(msg)


def test_each_point_has_its_target_topic_and_both_are_needed(graph_env, tmp_path):
    from soft_inverse_ros.core.model.description import load_robot_description
    from soft_inverse_ros.core.model.robot_model import RobotModel

    robot = _two_point_robot(tmp_path)
    model = RobotModel.from_description(load_robot_description(str(robot)))
    assert model.effector_names == ("tip.x", "tip.y", "tip.z", "knee_left.x", "knee_left.z")
    model.equilibrate(np.zeros(len(model.actuator_names)), from_rest=True)
    snapshot = model.snapshot(seq=1, stamp=0.0)
    rest = snapshot.effector_position  # tip x y z, knee x z [m]
    snap = snapshot_to_msg(snapshot, frame_id="base_link", state_seq=1)
    log = io.StringIO()
    graph = GraphProcesses([_controller(robot)], output=log).start()
    try:
        rclpy.init()
        probe = Probe()
        tip_pub = probe.node.create_publisher(PointStamped, "target/tip", qos.HIGH_RATE)
        knee_pub = probe.node.create_publisher(PointStamped, "target/knee_left", qos.HIGH_RATE)
        deadline = time.monotonic() + 60.0
        while not probe.commands:  # start-up: SAFE commands
            assert time.monotonic() < deadline and not graph.poll(), log.getvalue()
            probe.spin_for(0.1)
        feed(probe, snap, probe.now(), 1)
        probe.spin_for(0.5)
        # the tip's target alone: still safe, and the command says which point lacks one
        t0 = time.monotonic()
        for _ in range(10):
            _point(probe, tip_pub, probe.now(), rest[:3] + [0.0, 0.0, 0.002])
            probe.spin_for(0.05)
        only_tip = probe.since(t0)
        assert only_tip and all(c.status == ActuatorCommand.STATUS_SAFE for c in only_tip)
        assert "knee_left" in only_tip[-1].status_text, only_tip[-1].status_text
        # both: solved (the tip 2 mm up, the knee where it is)
        t1 = time.monotonic()
        for _ in range(20):
            now = probe.now()
            _point(probe, tip_pub, now, rest[:3] + [0.0, 0.0, 0.002])
            _point(probe, knee_pub, now, [rest[3], 0.0, rest[4]])  # y is not a row: ignored
            probe.spin_for(0.05)
        both = probe.since(t1)
        ok = [c for c in both if c.status == ActuatorCommand.STATUS_OK]
        assert len(ok) > 10, [c.status_text for c in both[-3:]]
        assert np.all(np.isfinite(ok[-1].efforts)) and np.any(np.asarray(ok[-1].efforts) > 0)
        # the closed loop corrects one measured point: refused at run time
        client = probe.node.create_client(SetParameters, "/inverse_controller_node/set_parameters")
        assert client.wait_for_service(timeout_sec=10.0)
        request = SetParameters.Request(parameters=[Parameter(
            name="closed_loop", value=ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=True))])
        future = client.call_async(request)
        end = time.monotonic() + 10.0
        while not future.done() and time.monotonic() < end:
            rclpy.spin_once(probe.node, timeout_sec=0.05)
        (result,) = future.result().results
        assert not result.successful and "one measured effector point" in result.reason
        probe.node.destroy_node()
    finally:
        rclpy.try_shutdown()
        graph.shutdown()


def test_a_closed_loop_on_two_points_is_a_one_line_config_error(graph_env, tmp_path):
    log = io.StringIO()
    graph = GraphProcesses([_controller(_two_point_robot(tmp_path), closed_loop=True)], output=log).start()
    try:
        code = wait_exit(graph, 60.0)
    finally:
        graph.shutdown()
    out = log.getvalue()
    assert code == EXIT_CONFIG_ERROR, out
    fatal = [line for line in out.splitlines() if "[FATAL]" in line]
    assert len(fatal) == 1 and "closed_loop corrects one measured effector point" in fatal[0], out
    assert "Traceback" not in out
