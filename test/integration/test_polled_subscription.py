"""PolledSubscription over real DDS: the newest message is taken on demand, the owner's
remappings apply, and no executor callback runs for the messages."""

from __future__ import annotations

import time

import pytest

try:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from soft_inverse_ros_msgs.msg import ActuatorCommand

    from soft_inverse_ros.nodes import qos
    from soft_inverse_ros.nodes.polled_subscription import PolledSubscription
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

pytestmark = pytest.mark.integration


@pytest.fixture
def context(graph_env):
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.try_shutdown(context=ctx)


def _wait_matched(pub, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while pub.get_subscription_count() < 1:
        assert time.monotonic() < end, "the polled subscription never matched the publisher"
        time.sleep(0.02)


def test_takes_the_newest_message_with_the_owners_remapping_and_no_callback(context):
    owner = Node("owner", context=context,
                 cli_args=["--ros-args", "-r", "actuator_command:=remapped_command"])
    polled = PolledSubscription(owner, ActuatorCommand, "actuator_command", qos.HIGH_RATE)
    assert polled.topic == "/remapped_command"
    talker = Node("talker", context=context)
    pub = talker.create_publisher(ActuatorCommand, "remapped_command", qos.HIGH_RATE)
    # the owner is spun as a node is: nothing of the polled subscription may run in it
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(owner)
    _wait_matched(pub)
    assert polled.take_newest() is None
    for seq in range(1, 21):
        msg = ActuatorCommand()
        msg.seq = seq
        pub.publish(msg)
        executor.spin_once(timeout_sec=0.005)
    end = time.monotonic() + 5.0
    newest = None
    while newest is None or newest.seq < 20:
        assert time.monotonic() < end, f"the newest message was not taken ({newest})"
        got = polled.take_newest()
        newest = got or newest
        time.sleep(0.01)
    assert newest.seq == 20
    assert polled.take_newest() is None  # taken once
    assert polled.taken <= 20
    executor.shutdown()
    for node in (owner, talker):
        node.destroy_node()


def test_an_owners_polled_subscriptions_share_one_reader_node(context):
    """One ``<owner>_reader`` node however many polled subscriptions (two nodes of one name
    would be a duplicate in the graph), each taking only its own topic."""
    owner = Node("owner2", context=context)
    first = PolledSubscription(owner, ActuatorCommand, "polled_a", qos.HIGH_RATE)
    second = PolledSubscription(owner, ActuatorCommand, "polled_b", qos.HIGH_RATE)
    assert first._reader is second._reader and first._reader.get_name() == "owner2_reader"
    talker = Node("talker2", context=context)
    pub_a = talker.create_publisher(ActuatorCommand, "polled_a", qos.HIGH_RATE)
    pub_b = talker.create_publisher(ActuatorCommand, "polled_b", qos.HIGH_RATE)
    _wait_matched(pub_a)
    _wait_matched(pub_b)
    msg = ActuatorCommand()
    msg.seq = 7
    pub_b.publish(msg)
    end = time.monotonic() + 5.0
    while (got := second.take_newest()) is None:
        assert time.monotonic() < end, "the second subscription took nothing"
        time.sleep(0.01)
    assert got.seq == 7 and first.take_newest() is None
    for node in (owner, talker):
        node.destroy_node()
