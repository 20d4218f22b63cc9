"""The soft snake's live graph over real DDS (issue 16): gait → simulated valves → snake
plant → plate mocap → recorder. Checks from the bag that plate poses arrive, that a gait
change made at run time (rclpy's SetParameters, what ``ros2 param set`` calls) reaches the
valve setpoints while a change beyond the valves' limit is refused, and that the CoM crawls forward."""

from __future__ import annotations

import time

import numpy as np
import pytest

try:
    import rclpy
    from geometry_msgs.msg import PointStamped
    from rcl_interfaces.srv import SetParameters
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from soft_inverse_ros.nodes import qos
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy not importable: {err}", allow_module_level=True)

from soft_inverse_ros.analysis.snake import load_snake, snake_metrics
from soft_inverse_ros.graph import build_graph
from soft_inverse_ros.process_launcher import GraphProcesses
from soft_inverse_ros.recording.bag_reader import BagReader

pytestmark = pytest.mark.integration


def _set(node, client, name, value):
    req = SetParameters.Request()
    req.parameters = [Parameter(name, value=value).to_parameter_msg()]
    future = client.call_async(req)
    rclpy.spin_until_future_complete(node, future, timeout_sec=10.0)
    assert future.result() is not None, f"no answer to setting {name}"
    return future.result().results[0]


def test_snake_graph_records_plates_takes_gait_changes_and_crawls(graph_env, tmp_path):
    bag = tmp_path / "bag"
    graph = GraphProcesses(build_graph("snake", {"record": str(bag), "clock": "sim"}),
                           output=None).start()
    rclpy.init()
    node = None
    coms: list[float] = []
    try:
        node = Node("snake_probe", parameter_overrides=[
            Parameter("use_sim_time", Parameter.Type.BOOL, True)])
        node.create_subscription(PointStamped, "plant/com_true",
                                 lambda m: coms.append(m.point.x), qos.HIGH_RATE)
        client = node.create_client(SetParameters, "/gait_node/set_parameters")

        def spin_until(sim_s: float, what: str) -> None:
            deadline = time.monotonic() + 120.0
            while node.get_clock().now().nanoseconds * 1e-9 < sim_s:
                assert time.monotonic() < deadline, f"no progress while waiting for {what}"
                assert not graph.poll(), f"a node exited: {graph.exits}"
                rclpy.spin_once(node, timeout_sec=0.05)

        deadline = time.monotonic() + 120.0
        while not coms:
            assert time.monotonic() < deadline, "the snake plant published nothing"
            assert not graph.poll(), f"a node exited: {graph.exits}"
            rclpy.spin_once(node, timeout_sec=0.05)
        assert client.wait_for_service(timeout_sec=30.0)
        # the gait's commands are judged from the bag: from when the recorder takes them
        deadline = time.monotonic() + 120.0
        while not any(i.node_name in ("recorder_node", "recorder_node_reader")  # "poll": its reader
                      for i in node.get_subscriptions_info_by_topic("/actuator_command")):
            assert time.monotonic() < deadline, "the recorder never subscribed to the commands"
            assert not graph.poll(), f"a node exited: {graph.exits}"
            rclpy.spin_once(node, timeout_sec=0.05)
        t_recorded = node.get_clock().now().nanoseconds * 1e-9
        spin_until(t_recorded + 4.0, "4 simulated s of recorded gait")
        refused = _set(node, client, "offset_pa", 4.0e4)  # 55 + 40 kPa > the 62 kPa limit
        assert not refused.successful and "exceeds" in refused.reason
        accepted = _set(node, client, "amplitude_pa", 2.0e4)
        assert accepted.successful, accepted.reason
        t_change = node.get_clock().now().nanoseconds * 1e-9
        spin_until(t_change + 2.5, "2.5 simulated s after the change")
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
        graph.shutdown()
    assert (bag / "metadata.yaml").exists(), "the recorder did not close the bag"

    with BagReader(bag) as reader:
        counts = {t: len(reader.read_topic(t)) for t in reader.topics
                  if t.startswith("/mocap/plate") or t in ("/plant/plate_poses", "/actuator_command")}
        commands = [(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec, max(m.values))
                    for _, m in reader.read_topic("/actuator_command")]
    for k in range(5):
        assert counts.get(f"/mocap/plate{k}/pose", 0) > 100, counts
    assert counts["/plant/plate_poses"] > 100, counts
    t, peak = np.array(commands).T
    before = peak[(t > t_recorded + 2.0) & (t < t_change - 0.05)]
    after = peak[t > t_change + 0.05]
    assert len(before) and before.max() > 5.0e4, "the 8 psi gait never reached its peak before the change"
    assert len(after) > 50 and after.max() <= 2.0e4 + 1e-6, "the new amplitude did not apply"

    data = load_snake(bag)
    metrics = snake_metrics(data)
    # crawls forward: the least-squares slope of the CoM along the heading, over seconds of
    # gait (the CoM's end-to-end travel swings with the gait's phase and the marker noise:
    # 0.8 mm in a CI run whose slope gave 0.40 mm/s over 6 s)
    for source in ("plant", "mocap"):
        assert metrics[source]["speed_window_s"] > 2.0, metrics
        assert metrics[source]["forward_speed_mm_s"] > 0.1, metrics


def test_the_sim_clock_waits_for_the_valve_driver_in_lockstep(graph_env):
    """clock: sim with max_input_lag: the clock holds while the newest chamber state lags
    by more than the lag, moves on when a fresh one arrives, and gives up after the
    wall-clock timeout (counted)."""
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from soft_inverse_ros.nodes.snake_plant_node import SnakePlantNode

    rclpy.init()
    try:
        node = SnakePlantNode(parameter_overrides=[
            Parameter("clock", value="sim"), Parameter("sections", value=4),
            Parameter("max_input_lag", value=0.05), Parameter("input_wait_timeout", value=0.3),
            Parameter("settle_time", value=0.0)])
        try:
            for _ in range(20):  # no chamber state yet: the clock runs (the driver needs it to start)
                node.plant_clock.clock_tick()
            assert node.plant_clock.sim_ticks == 20

            def state(t: float) -> JointState:
                msg = JointState()
                msg.header.stamp.sec, msg.header.stamp.nanosec = int(t), int(round((t % 1) * 1e9))
                msg.name = list(node.names)
                msg.effort = [0.0] * len(node.names)
                return msg

            node._on_pressures(state(0.1))  # the clock is at 20 ticks × 5 ms = 0.1 s
            for _ in range(30):
                node.plant_clock.clock_tick()
            held = node.plant_clock.sim_ticks
            assert held == 31 and node.lockstep.counters()["lockstep_waits"] > 0  # stops one tick past 50 ms after the stamp
            node._on_pressures(state(0.15))
            node.plant_clock.clock_tick()
            assert node.plant_clock.sim_ticks == held + 1
            for _ in range(20):
                node.plant_clock.clock_tick()
            ticks = node.plant_clock.sim_ticks
            time.sleep(0.35)  # longer than input_wait_timeout: the clock steps on without the driver
            node.plant_clock.clock_tick()
            node.plant_clock.clock_tick()
            assert node.plant_clock.sim_ticks == ticks + 2
            assert node.lockstep.counters()["lockstep_timeouts"] == 1
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown()
