"""target_node's ``start_on: commanding`` over DDS, in-process: the start point is held
while the controller reports no OK command (SAFE statuses included), and the trajectory
moves ``start_delay`` after the first OK one."""

from __future__ import annotations

import time

import numpy as np
import pytest

try:
    import rclpy
    from geometry_msgs.msg import PointStamped
    from rclpy.parameter import Parameter
    from soft_inverse_ros_msgs.msg import ActuatorCommand, InverseSolverStatus

    from soft_inverse_ros import topics
    from soft_inverse_ros.nodes import qos
    from soft_inverse_ros.nodes.node_runtime import make_executor
    from soft_inverse_ros.nodes.target_node import TargetNode
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy not importable: {err}", allow_module_level=True)

pytestmark = pytest.mark.integration

DELAY = 0.4  # s


@pytest.fixture()
def ros(graph_env):
    rclpy.init()
    yield
    rclpy.try_shutdown()


def _target_node(start_on: str) -> TargetNode:
    return TargetNode(parameter_overrides=[
        Parameter("trajectory", value="line"), Parameter("center", value=[0.0, 0.0, 0.1]),
        Parameter("size", value=0.02), Parameter("speed", value=0.05),
        Parameter("publish_rate_hz", value=100.0), Parameter("start_delay", value=DELAY),
        Parameter("start_on", value=start_on)])


class _Harness:
    """A controller stand-in publishing statuses and a recorder of the targets."""

    def __init__(self, node: TargetNode) -> None:
        self.node = node
        self.peer = rclpy.create_node("status_source")
        self.status_pub = self.peer.create_publisher(InverseSolverStatus, topics.INVERSE_STATUS,
                                                     qos.HIGH_RATE)
        self.targets: list[tuple[float, np.ndarray]] = []
        self.peer.create_subscription(PointStamped, topics.TARGET, self._on_target, qos.HIGH_RATE)
        self.executor = make_executor()
        self.executor.add_node(node)
        self.executor.add_node(self.peer)

    def _on_target(self, msg: PointStamped) -> None:
        self.targets.append((time.monotonic(), np.array([msg.point.x, msg.point.y, msg.point.z])))

    def run(self, seconds: float, status: int | None = None) -> None:
        """Spin for ``seconds``, publishing ``status`` at 100 Hz (None: nothing)."""
        end = time.monotonic() + seconds
        next_status = 0.0
        while time.monotonic() < end:
            if status is not None and time.monotonic() >= next_status:
                msg = InverseSolverStatus()
                msg.command_status = status
                self.status_pub.publish(msg)
                next_status = time.monotonic() + 0.01
            self.executor.spin_once(timeout_sec=0.005)

    def close(self) -> None:
        self.executor.shutdown()
        self.peer.destroy_node()
        self.node.destroy_node()


def test_the_start_point_is_held_until_the_controller_commands(ros):
    node = _target_node("commanding")
    harness = _Harness(node)
    try:
        start = node.trajectory.position(0.0)
        harness.run(1.0)  # no controller yet
        harness.run(1.0, ActuatorCommand.STATUS_SAFE)  # a controller without a snapshot
        held = np.array([p for _, p in harness.targets])
        assert len(held) > 50, "the held start point is still published"
        assert np.allclose(held, start, atol=1e-12), "moved before the controller commanded"

        t_ok = time.monotonic()
        harness.run(DELAY + 0.6, ActuatorCommand.STATUS_OK)
        after = [(t, p) for t, p in harness.targets if t > t_ok]
        moved = [t - t_ok for t, p in after if np.linalg.norm(p - start) > 1e-6]
        assert moved, "the trajectory never started after an OK command"
        assert DELAY - 0.05 <= moved[0] <= DELAY + 0.25, moved[0]
        assert node._status is None, "inverse_status is still read after the start"
    finally:
        harness.close()


def test_start_on_now_counts_from_the_node_start(ros):
    node = _target_node("now")
    harness = _Harness(node)
    try:
        t0 = time.monotonic()
        harness.run(DELAY + 0.6)  # no controller at all
        start = node.trajectory.position(0.0)
        moved = [t - t0 for t, p in harness.targets if np.linalg.norm(p - start) > 1e-6]
        assert moved and moved[0] <= DELAY + 0.25
    finally:
        harness.close()
