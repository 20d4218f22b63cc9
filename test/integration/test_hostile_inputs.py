"""Hostile and broken messages published into running nodes over DDS: the controller must
not be fooled by future stamps, targets in another frame or at time zero, and the plant
must refuse absurd servo angles (it used to diverge to 1e8 m)."""

from __future__ import annotations

import copy
import dataclasses
import re
import time

import numpy as np
import pytest

try:
    import rclpy
    from sensor_msgs.msg import JointState
    from soft_inverse_ros_msgs.msg import ActuatorCommand

    from hostile_probe import Probe, feed
    from soft_inverse_ros.nodes.conversions import snapshot_to_msg
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

from soft_inverse_ros.core.model.description import load_robot_description
from soft_inverse_ros.core.model.robot_model import RobotModel
from soft_inverse_ros.graph import build_graph
from soft_inverse_ros.process_launcher import GraphProcesses

pytestmark = pytest.mark.integration
TIMEOUT = 0.5  # controller snapshot_timeout [s]


def _spec(name: str, **params):
    spec = next(s for s in build_graph("sim") if s.name == name)
    return dataclasses.replace(spec, parameters={**spec.parameters, **params})


@pytest.fixture(scope="module")
def snapshot_msg():
    model = RobotModel.from_description(load_robot_description("builtin_diamond"))
    model.equilibrate(np.zeros(len(model.actuator_names)), from_rest=True)
    return model, snapshot_to_msg(model.snapshot(seq=1, stamp=0.0), frame_id="base_link",
                                  state_seq=1)


@pytest.fixture
def controller(graph_env):
    graph = GraphProcesses([_spec("inverse_controller_node", snapshot_timeout=TIMEOUT,
                                  realtime_priority=0)], output=None).start()
    try:
        rclpy.init()
        probe = Probe()
        yield graph, probe
        probe.node.destroy_node()
    finally:
        rclpy.try_shutdown()
        graph.shutdown()


def _wait_up(graph, probe) -> None:
    """Until the controller publishes (SAFE: no snapshot yet): its start takes seconds."""
    deadline = time.monotonic() + 60.0
    while not probe.commands:
        assert time.monotonic() < deadline and not graph.poll(), graph.exits
        probe.spin_for(0.1)


_feed = feed


def _until_commanding(graph, probe, model, snap) -> float:
    """Feed snapshots and a target 1 mm below the rest tip until the controller commands OK;
    returns that target's z [m]."""
    z = float(model.effector_position[2]) - 0.001
    _wait_up(graph, probe)
    deadline = time.monotonic() + 60.0
    while not any(c.status == ActuatorCommand.STATUS_OK for c in probe.since(0.0)[-20:]):
        assert time.monotonic() < deadline and not graph.poll(), graph.exits
        _feed(probe, snap, probe.now(), 1)
        probe.target(probe.now(), z=z)
        probe.spin_for(0.1)
    return z


def test_a_future_stamped_snapshot_does_not_defeat_the_staleness_check(controller,
                                                                        snapshot_msg):
    graph, probe = controller
    _, snap = snapshot_msg
    deadline = time.monotonic() + 60.0
    while not any(c.status == ActuatorCommand.STATUS_OK for c in probe.since(0.0)[-20:]):
        assert time.monotonic() < deadline, "the controller never commanded"
        assert not graph.poll(), f"the controller exited: {graph.exits}"
        _feed(probe, snap, probe.now(), 1)
        probe.target(probe.now())
        probe.spin_for(0.2)
    # one snapshot stamped 1e6 s in the future, then silence from the low-rate loop
    _feed(probe, snap, probe.now() + 1e6, 2)
    t0 = time.monotonic()
    for _ in range(20):
        probe.target(probe.now())
        probe.spin_for(0.1)
    late = [c for t, c in probe.commands if t > t0 + TIMEOUT + 0.3]
    assert late, "no commands"
    assert all(c.status == ActuatorCommand.STATUS_SAFE for c in late), \
        {c.status_text for c in late}
    assert "inverse_controller_node" in graph.running()


def test_targets_in_another_frame_at_zero_or_from_the_future_are_ignored(controller,
                                                                          snapshot_msg):
    graph, probe = controller
    model, snap = snapshot_msg
    rest_z = float(model.effector_position[2])
    _wait_up(graph, probe)
    # a fresh snapshot and no valid target yet: SAFE "no target"
    # also (once taken as targets): an hour old, NaN (ignored without a log line), 100 m up
    for bad in (dict(frame="world"), dict(stamp=0.0), dict(stamp=-5.0),
                dict(stamp=probe.now() + 100.0), dict(stamp=probe.now() - 3600.0),
                dict(z=float("nan")), dict(z=100.0)):
        _feed(probe, snap, probe.now(), 10)
        probe.target(bad.get("stamp", probe.now()), bad.get("frame", "base_link"),
                     z=bad.get("z", rest_z - 0.01))
        probe.spin_for(0.2)
    commands = probe.since(0.0)
    assert commands and all(c.status == ActuatorCommand.STATUS_SAFE for c in commands[-20:])
    assert all("no target" in c.status_text for c in commands[-20:])
    # a good target is taken at once
    _feed(probe, snap, probe.now(), 11)
    sent = time.monotonic()
    probe.target(probe.now(), z=rest_z - 0.001)
    end = sent + 1.5  # taken at once: OK while the snapshot is fresh (TIMEOUT)
    while time.monotonic() < end and not any(c.status == ActuatorCommand.STATUS_OK
                                             for c in probe.since(sent)):
        probe.spin_for(0.05)
    assert any(c.status == ActuatorCommand.STATUS_OK for c in probe.since(sent))


def test_refused_newer_targets_end_the_tracking_of_the_last_accepted_one(controller, snapshot_msg):
    """A goal beyond the robot's scale (3.4 m for a 10 m waypoint check) was refused at every
    message while OK commands went on towards the last target accepted, for good."""
    graph, probe = controller
    model, snap = snapshot_msg
    z = _until_commanding(graph, probe, model, snap)
    t0, seq = time.monotonic(), 2
    while time.monotonic() < t0 + 2.5:  # fresh snapshots, every target 4 m up: refused
        _feed(probe, snap, probe.now(), seq)
        probe.target(probe.now(), z=4.0)
        probe.spin_for(0.1)
        seq += 1
    early = [c for t, c in probe.commands if t0 < t < t0 + 0.5]  # within max_target_age: held
    late = [c for t, c in probe.commands if t > t0 + 1.6]
    assert early and all(c.status == ActuatorCommand.STATUS_OK for c in early)
    assert late and all(c.status == ActuatorCommand.STATUS_SAFE for c in late), {c.status_text for c in late}
    assert all("newer targets refused" in c.status_text and "beyond the robot's scale" in c.status_text
               for c in late)
    t1 = time.monotonic()
    while time.monotonic() < t1 + 1.0:  # a good target again: OK again
        _feed(probe, snap, probe.now(), seq)
        probe.target(probe.now(), z=z)
        probe.spin_for(0.1)
        seq += 1
    assert any(c.status == ActuatorCommand.STATUS_OK for c in probe.since(t1 + 0.5))


def test_the_plant_refuses_an_absurd_servo_angle(graph_env):
    graph = GraphProcesses([_spec("plant_sim_node", model="modal", mesh_cell_size=0.011,
                                  visualization_rate_hz=0.0, realtime_priority=0)],
                           output=None).start()
    try:
        rclpy.init()
        probe = Probe()
        deadline = time.monotonic() + 120.0
        while len(probe.effector) < 20:
            assert time.monotonic() < deadline and not graph.poll(), graph.exits
            probe.spin_for(0.1)
        before = probe.effector[-1]
        msg = JointState()
        msg.name = ["cable_left", "cable_back", "cable_right", "cable_front"]
        msg.position = [1e6, 0.0, 0.0, 0.0]
        for _ in range(10):
            msg.header.stamp = probe.node.get_clock().now().to_msg()
            probe.servo_pub.publish(msg)
            probe.spin_for(0.1)
        probe.spin_for(0.5)
        after = probe.effector[-1]
        assert np.all(np.isfinite(after)) and np.linalg.norm(after - before) < 1e-3
        assert "plant_sim_node" in graph.running()
        probe.node.destroy_node()
    finally:
        rclpy.try_shutdown()
        graph.shutdown()


def test_finite_but_absurd_snapshots_are_refused(controller, snapshot_msg):
    graph, probe = controller
    model, good = snapshot_msg
    z = float(model.effector_position[2]) - 0.001
    _wait_up(graph, probe)
    for field, scale in (("actuator_stroke", -1e296), ("w_aa", 1e6)):
        bad = copy.deepcopy(good)
        setattr(bad, field, (np.asarray(getattr(good, field)) * scale).tolist())
        t0 = time.monotonic()
        for _ in range(5):
            _feed(probe, bad, probe.now(), 20)
            probe.target(probe.now(), z=z)
            probe.spin_for(0.1)
        commands = [c for t, c in probe.commands if t > t0 + 0.1]
        assert commands and all(c.status == ActuatorCommand.STATUS_SAFE for c in commands), \
            (field, {c.status_text for c in commands})
        assert all(np.all(np.abs(c.strokes) < 1.0) for c in commands)
    # a good snapshot again: OK commands again (within 3 s: the suite loads the 2 cores)
    deadline = time.monotonic() + 3.0
    recovered = False
    while not recovered and time.monotonic() < deadline:
        _feed(probe, good, probe.now(), 21)
        probe.target(probe.now(), z=z)
        probe.spin_for(0.1)
        recovered = any(c.status == ActuatorCommand.STATUS_OK for c in probe.since(0.0)[-50:])
    assert recovered


def test_stale_and_out_of_order_snapshots_do_not_replace_the_one_in_use(controller, snapshot_msg):
    """A snapshot an hour old was installed (SAFE at once, counted as accepted), and one
    older than the snapshot in use replaced it: fresh and 0.45 s old snapshots alternating
    made about half the commands SAFE."""
    graph, probe = controller
    model, snap = snapshot_msg
    z = _until_commanding(graph, probe, model, snap)
    seq = 2
    t0 = time.monotonic()
    while time.monotonic() < t0 + 1.5:  # fresh, then an older one 10 ms later, at 10 Hz
        _feed(probe, snap, probe.now(), seq)
        probe.target(probe.now(), z=z)
        probe.spin_for(0.01)
        _feed(probe, snap, probe.now() - 0.45, seq + 1)
        probe.spin_for(0.09)
        seq += 2
    window = [c for t, c in probe.commands if t0 + 0.3 < t < t0 + 1.5]
    assert window and all(c.status == ActuatorCommand.STATUS_OK for c in window), \
        {c.status_text for c in window if c.status != ActuatorCommand.STATUS_OK}
    t1 = time.monotonic()
    while time.monotonic() < t1 + 1.0:  # only hour-old snapshots: SAFE once the good one ages
        _feed(probe, snap, probe.now() - 3600.0, seq)
        probe.target(probe.now(), z=z)
        probe.spin_for(0.1)
        seq += 1
    safe = [c for t, c in probe.commands if t > t1 and c.status == ActuatorCommand.STATUS_SAFE]
    assert safe, "the good snapshot aged past snapshot_timeout: SAFE expected"
    ages = [float(c.status_text.split("(")[1].split(" s")[0]) for c in safe if "stale" in c.status_text]
    assert ages and max(ages) < 5.0, {c.status_text for c in safe}  # the good one's age, not 3600 s
    assert "inverse_controller_node" in graph.running()


def test_a_controller_that_never_commanded_says_why_its_commands_are_safe(graph_env, tmp_path):
    """With no snapshot ever (the workstation of a two-computer deployment unreachable, the
    FEM side not started) the controller sent SAFE commands for good without a word: it only
    logged a fall from OK commands."""
    from soft_inverse_ros.nodes.inverse_controller_node import STILL_SAFE_AFTER

    graph = GraphProcesses([_spec("inverse_controller_node", realtime_priority=0)], output=None,
                           log_dir=tmp_path).start()
    try:
        log = tmp_path / "inverse_controller_node.log"
        deadline = time.monotonic() + STILL_SAFE_AFTER + 60.0
        while "no OK command yet" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline and not graph.poll(), graph.exits
            time.sleep(0.5)
        assert re.search(r"no OK command yet, 1\d s after the first tick: commands SAFE: no target yet",
                         log.read_text()), log.read_text()[-2000:]
    finally:
        graph.shutdown()
