"""The sim clock's lockstep over real DDS: periodic callbacks that keep their period under
simulation time (nodes/periodic.py), and the simulated robot's clock waiting for the
compliance snapshots it polls (plant_sim_node, clock: sim)."""

from __future__ import annotations

import threading
import time

import pytest

try:
    import rclpy
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rclpy.time import Time
    from soft_inverse_ros_msgs.msg import ComplianceSnapshot

    from soft_inverse_ros.nodes import qos
    from soft_inverse_ros.nodes.node_runtime import make_executor
    from soft_inverse_ros.nodes.periodic import SimTimePeriodic, create_periodic
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

pytestmark = pytest.mark.integration

PERIOD = 1.0 / 30.0  # s, fem_node's period in config/sim.yaml
BUSY = 0.05  # s of wall time per callback: slower than the period, as a starved FEM update


CLOCK_SOURCE = """
import sys, time
import rclpy
from rclpy.node import Node
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from soft_inverse_ros.nodes import qos
advance_s, hold_s = float(sys.argv[1]), float(sys.argv[2])
rclpy.init()
node = Node("lockstep_clock_source")
pub = node.create_publisher(Clock, "/clock", qos.CLOCK)
while pub.get_subscription_count() == 0:
    time.sleep(0.01)
time.sleep(0.2)
msg, ns, t0 = Clock(), 0, time.monotonic()
while time.monotonic() - t0 < advance_s:
    ns += 1_000_000
    msg.clock = Time(nanoseconds=ns).to_msg()
    pub.publish(msg)
    time.sleep(0.001)
print(ns * 1e-9, flush=True)
t1 = time.monotonic()
while time.monotonic() - t1 < hold_s:
    pub.publish(msg)
    time.sleep(0.01)
print("done", flush=True)
"""


def _run_clock_and_callback(factory, advance_s: float, hold_s: float):
    """A /clock source (another process) advancing 1 ms per ~1 ms of wall time for
    ``advance_s`` [s], then holding its last value for ``hold_s`` [s] (re-sent every 10 ms,
    as the plant does); a node here on use_sim_time whose periodic callback
    (``factory(node, period, cb)``) takes BUSY s of wall time. Returns (simulated times of
    the calls [s], the held time [s])."""
    import subprocess
    import sys

    rclpy.init()
    calls: list[float] = []
    source = None
    try:
        user = Node("periodic_user", parameter_overrides=[Parameter("use_sim_time", value=True)])

        def callback() -> None:
            calls.append(user.get_clock().now().nanoseconds * 1e-9)
            start = time.monotonic()
            while time.monotonic() - start < BUSY:
                pass

        factory(user, PERIOD, callback)
        executor = make_executor()
        executor.add_node(user)
        source = subprocess.Popen([sys.executable, "-c", CLOCK_SOURCE, str(advance_s),
                                   str(hold_s)], stdout=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(source.stdout), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60.0
        while source.poll() is None or reader.is_alive():
            assert time.monotonic() < deadline, "the clock source did not finish"
            executor.spin_once(timeout_sec=0.05)
        assert source.returncode == 0 and lines and lines[-1].strip() == "done", lines
        user.destroy_node()
    finally:
        if source is not None and source.poll() is None:
            source.kill()
        rclpy.try_shutdown()
    return calls, float(lines[0])


def test_a_busy_periodic_callback_keeps_its_period_and_catches_up_while_the_clock_holds(graph_env):
    """Under simulation time a callback slower than its period must run at most once per
    period of simulated time, never twice at one time, and must run for a call that fell
    due before the clock stopped (a plant in lockstep waits for it). rclpy's
    EventsExecutor with a plain ROS-time timer fails both (module doc of nodes/periodic.py:
    the timer fired up to 7 times at one simulated time, then sat 188 ms ahead of the
    held clock)."""
    calls, held_at = _run_clock_and_callback(create_periodic, advance_s=1.5, hold_s=1.0)
    assert len(calls) > 10, calls
    # calls fall due every PERIOD from the clock's start (rcl's phase): one call per slot
    # at most (a late call and the next one on time may be closer than a period)
    slots = [int(t / PERIOD + 1e-6) for t in calls]
    assert all(b > a for a, b in zip(slots, slots[1:])), f"two calls in one period: {calls}"
    # the last call due before the clock held has run (while it held, or just before)
    assert calls[-1] >= held_at - PERIOD - 0.0015, (calls[-3:], held_at)


def test_create_periodic_is_an_ordinary_timer_on_the_wall_clock(graph_env):
    rclpy.init()
    try:
        wall = Node("periodic_wall")
        sim = Node("periodic_sim", parameter_overrides=[Parameter("use_sim_time", value=True)])
        timer = create_periodic(wall, 0.01, lambda: None)
        periodic = create_periodic(sim, 0.01, lambda: None)
        assert not isinstance(timer, SimTimePeriodic) and timer.timer_period_ns == 10_000_000
        assert isinstance(periodic, SimTimePeriodic) and periodic.period_s == pytest.approx(0.01)
        periodic.cancel()
        assert periodic.is_canceled()
        wall.destroy_node()
        sim.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_the_plant_clock_waits_for_the_compliance_snapshots_it_polls(graph_env):
    """plant_sim_node with clock: sim and max_snapshot_lag: the clock runs until a snapshot
    arrives, holds one tick past the lag after the newest snapshot's stamp, moves on when a
    fresh one arrives over DDS, and steps on without it after input_wait_timeout (2 s)."""
    from soft_inverse_ros.nodes.plant_sim_node import PlantSimNode

    rclpy.init()
    try:
        node = PlantSimNode(parameter_overrides=[
            Parameter("clock", value="sim"), Parameter("input", value="command"),
            Parameter("model", value="modal"), Parameter("mesh_cell_size", value=0.011),
            Parameter("visualization_rate_hz", value=0.0), Parameter("start", value="rest"),
            Parameter("max_snapshot_lag", value=0.05), Parameter("input_wait_timeout", value=2.0)])
        producer = Node("snapshot_producer")
        pub = producer.create_publisher(ComplianceSnapshot, "compliance", qos.LATCHED)
        clock = node.plant_clock
        try:
            def publish(t: float) -> None:
                msg = ComplianceSnapshot()
                msg.header.stamp = Time(nanoseconds=int(round(t * 1e9))).to_msg()
                pub.publish(msg)

            stream = node.lockstep.streams["compliance snapshots"]
            for _ in range(20):  # no snapshot yet: the clock runs (fem_node needs it)
                clock.clock_tick()
            assert clock.sim_ticks == 20
            publish(0.02)
            deadline = time.monotonic() + 5.0
            while stream.stamp != pytest.approx(0.02):  # a look at time 0 only polls
                assert time.monotonic() < deadline, "the snapshot did not reach the plant"
                node.lockstep.hold(0.0)
                time.sleep(0.001)
            for _ in range(100):
                clock.clock_tick()
            held = clock.sim_ticks
            assert held == 71, held  # 1 ms ticks: stops at 0.071 s, the first tick past 0.07
            publish(0.06)
            while clock.sim_ticks == held:  # held until the snapshot arrives over DDS
                assert time.monotonic() < deadline, "the clock did not move on"
                clock.clock_tick()
                time.sleep(0.001)
            for _ in range(100):
                clock.clock_tick()
            assert clock.sim_ticks == 111  # moved on to 0.111 s, the first tick past 0.11
            assert node.lockstep.counters()["lockstep_timeouts"] == 0
            time.sleep(2.1)  # over input_wait_timeout: the clock steps on without fem_node
            clock.clock_tick()
            clock.clock_tick()
            assert clock.sim_ticks == 113
            assert node.lockstep.counters()["lockstep_timeouts"] == 1
            assert "compliance snapshots" in node.lockstep.last_error
        finally:
            producer.destroy_node()
            node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_the_hybrid_plant_waits_for_its_servos_and_its_model(graph_env):
    """hybrid_plant_node builds the same lockstep from sim_hybrid.yaml's lags: the joint
    servos' states (stamped when accepted), the hybrid model's snapshots and the mocap's
    frames (with their shorter wait); the wall clock has none."""
    from sensor_msgs.msg import JointState

    import yaml

    from soft_inverse_ros.graph import resolve_params_file
    from soft_inverse_ros.nodes.hybrid_plant_node import INPUT_STREAM, HybridPlantNode

    with open(resolve_params_file("sim_hybrid.yaml")) as handle:
        params = yaml.safe_load(handle)["hybrid_plant_node"]["ros__parameters"]
    lags = {k: params[k] for k in ("max_input_lag", "max_snapshot_lag", "max_mocap_lag",
                                   "mocap_wait_timeout")}
    rclpy.init()
    try:
        node = HybridPlantNode(parameter_overrides=[
            Parameter("clock", value="sim"), Parameter("visualization_rate_hz", value=0.0)]
            + [Parameter(k, value=v) for k, v in lags.items()])
        try:
            streams = node.lockstep.streams
            assert set(streams) == {INPUT_STREAM, "compliance snapshots", "mocap frames"}
            assert streams["mocap frames"].wait_timeout == lags["mocap_wait_timeout"]
            assert streams[INPUT_STREAM].max_lag == lags["max_input_lag"]
            assert streams["compliance snapshots"].max_lag == lags["max_snapshot_lag"]
            msg = JointState()
            msg.header.stamp = Time(nanoseconds=250_000_000).to_msg()
            msg.name = list(node.desc.joint_names)
            msg.position = [0.0] * len(msg.name)
            node._on_servo_states(msg)
            assert streams[INPUT_STREAM].stamp == pytest.approx(0.25)
        finally:
            node.destroy_node()
        wall = HybridPlantNode(parameter_overrides=[Parameter("visualization_rate_hz", value=0.0)]
                               + [Parameter(k, value=v) for k, v in lags.items()])
        assert not wall.lockstep.active
        wall.destroy_node()
    finally:
        rclpy.try_shutdown()
