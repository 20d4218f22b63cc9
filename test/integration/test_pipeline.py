"""The two-rate pipeline as separate processes over real DDS: target_node, fem_node,
compliance_node and inverse_controller_node on the built-in robot.

Checks: snapshots arrive at the low rate and commands at the high rate; the command
follows a moving target (the efforts change, the FEM states under them move with the
target and, when the host delivers the low rate, lie on its path); killing the low-rate
loop makes the controller go to the safe command (it does not crash) and it resumes when
a fresh snapshot arrives.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
import warnings

import numpy as np
import pytest

try:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PointStamped
    from rclpy.node import Node
    from soft_inverse_ros_msgs.msg import (
        ActuatorCommand,
        ComplianceSnapshot,
    )

    from soft_inverse_ros.nodes import qos
    from soft_inverse_ros.nodes.conversions import to_seconds, to_time
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

from soft_inverse_ros.graph import build_graph
from soft_inverse_ros.process_launcher import GraphProcesses

pytestmark = pytest.mark.integration

PIPELINE = ("target_node", "fem_node", "compliance_node", "inverse_controller_node")
OVERRIDES = {
    "target_node": {"start_delay": 0.0, "speed": 0.02, "size": 0.016},
    "fem_node": {"rate_hz": 20.0},
    # A generous timeout: the FEM update must not go stale on a loaded CI machine. With
    # 2 s, one CI run had 1.5 s of its 6 s window stale (the snapshots stopped for ~3.5 s);
    # the assertion below now says which stalled, the low-rate loop or the whole host.
    "inverse_controller_node": {"snapshot_timeout": 5.0},
}
SNAPSHOT_TIMEOUT = OVERRIDES["inverse_controller_node"]["snapshot_timeout"]


class Probe:
    def __init__(self) -> None:
        self.node = Node("pipeline_probe")
        self.commands: list[tuple[float, ActuatorCommand]] = []
        self.snapshots: list[tuple[float, ComplianceSnapshot]] = []
        self.targets: list[tuple[float, PointStamped]] = []
        self.diagnostics: dict[str, dict[str, str]] = {}  # newest values per status name
        n = self.node
        n.create_subscription(ActuatorCommand, "actuator_command",
                              lambda m: self.commands.append((time.monotonic(), m)), qos.HIGH_RATE)
        n.create_subscription(ComplianceSnapshot, "compliance",
                              lambda m: self.snapshots.append((time.monotonic(), m)), qos.LATCHED)
        n.create_subscription(PointStamped, "target",
                              lambda m: self.targets.append((time.monotonic(), m)), qos.HIGH_RATE)
        n.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        self.snapshot_pub = n.create_publisher(ComplianceSnapshot, "compliance", qos.LATCHED)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            self.diagnostics[status.name] = {
                "message": status.message, **{kv.key: kv.value for kv in status.values}}

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(self.node, timeout_sec=0.01)

    def spin_until(self, predicate, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return
            rclpy.spin_once(self.node, timeout_sec=0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture(scope="module")
def pipeline(graph_env):
    specs = []
    for spec in build_graph("sim"):
        if spec.name in PIPELINE:
            params = {**spec.parameters, **OVERRIDES.get(spec.name, {})}
            specs.append(dataclasses.replace(spec, parameters=params))
    graph = GraphProcesses(specs, output=None).start()
    rclpy.init()
    probe = Probe()
    try:
        yield graph, probe
    finally:
        probe.node.destroy_node()
        rclpy.try_shutdown()
        graph.shutdown()


def _window(samples, start: float, end: float):
    return [m for t, m in samples if start <= t < end]


def test_rates_and_tracking(pipeline):
    graph, probe = pipeline
    probe.spin_until(lambda: len(probe.snapshots) >= 3, 120.0, "three compliance snapshots")
    # steady state: the target node's first target may come after the first snapshots
    probe.spin_until(lambda: any(c.status == ActuatorCommand.STATUS_OK for _, c in probe.commands[-50:]),
                     60.0, "a first OK command")
    assert not graph.poll(), f"a node exited: {graph.exits}"
    start = time.monotonic()
    probe.spin_for(6.0)
    end = time.monotonic()
    commands = _window(probe.commands, start, end)
    snapshots = _window(probe.snapshots, start, end)
    # the controller's rate: commands sent (sequence numbers over their stamps), which the
    # test's own probe, starved on a loaded machine, may not all receive
    seqs = [c.seq for c in commands]
    stamps = [c.header.stamp.sec + 1e-9 * c.header.stamp.nanosec for c in commands]
    command_rate = (max(seqs) - min(seqs)) / (max(stamps) - min(stamps))
    # the low rate the same way: snapshots produced (their seq over their state stamps), not
    # those the probe took (it keeps one snapshot, the newest, between its spins)
    assert len(snapshots) >= 2, (
        f"{len(snapshots)} snapshots received in {end - start:.1f} s; low-rate loop's diagnostics: "
        f"{[d for name, d in probe.diagnostics.items() if 'fem' in name or 'compliance' in name]}")
    snapshot_seqs = [s.seq for s in snapshots]
    snapshot_stamps = [to_seconds(s.header.stamp) for s in snapshots]
    snapshot_rate = ((max(snapshot_seqs) - min(snapshot_seqs))
                     / (max(snapshot_stamps) - min(snapshot_stamps)))
    # The high rate is 1 kHz; the bound leaves room for a loaded CI machine.
    assert command_rate > 200.0, command_rate
    assert 1.0 <= snapshot_rate <= 25.0, snapshot_rate
    assert command_rate > 10 * snapshot_rate
    ok = [c for c in commands if c.status == ActuatorCommand.STATUS_OK]
    if len(ok) <= 0.9 * len(commands):  # say whether the low-rate loop or the whole host stalled
        snapshot_times = [t for t, _ in probe.snapshots]
        raise AssertionError(
            f"{len(ok)} of {len(commands)} commands OK: {sorted({c.status_text for c in commands})[:4]}; "
            f"largest gap between snapshots {np.diff(snapshot_times).max():.2f} s, between the "
            f"stamps of the commands received {np.diff(stamps).max():.3f} s; low-rate loop's "
            f"diagnostics: {[d for name, d in probe.diagnostics.items() if 'fem' in name or 'compliance' in name]}")
    # The command follows the moving target: efforts change, and the FEM states computed
    # under the commanded efforts (the snapshots' effector positions) move with it. A
    # command ignoring the target leaves the effector near the square's centre.
    efforts = np.array([c.efforts for c in ok])
    assert np.ptp(efforts, axis=0).max() > 0.05, "efforts did not change with the target"
    targets = [(to_seconds(m.header.stamp), [m.point.x, m.point.y, m.point.z])
               for _, m in probe.targets]
    target_t = np.array([t for t, _ in targets])
    target_p = np.array([p for _, p in targets])
    assert np.ptp(target_p[:, :2], axis=0).max() > 0.005, "the target did not move"
    reached = np.array([s.effector_position for s in snapshots])
    assert np.ptp(reached[:, :2], axis=0).max() > 0.005, "the effector did not move"
    # How close each state lies to where the target was in the second before it (the path
    # the commands it answers were chasing: 8 mm, the square's half side, from an effector
    # left at the centre; several mm from a lagging or reversed one) depends on the low
    # rate: each command extrapolates the target's motion since its snapshot's state with
    # one linearization. Measured median distance here: 0.29-0.30 mm with snapshots at
    # 20 Hz (three runs), 4.0 mm at 2.5 Hz (fem_node's rate_hz lowered). It is judged when
    # the host delivers at least half the configured rate; a slower host is said (a
    # warning), not judged. (Two CI runs had the low-rate loop at 0.3 and 3.2 Hz: the test
    # process itself had been left at SCHED_FIFO 8 by an earlier test, above fem_node's 5;
    # test/conftest.py now fails such a test.)
    off_path = np.array([
        np.linalg.norm(target_p[(target_t > to_seconds(s.header.stamp) - 1.0)
                                & (target_t <= to_seconds(s.header.stamp))] - x, axis=1).min(
            initial=np.inf)
        for s, x in zip(snapshots, reached)])
    configured = OVERRIDES["fem_node"]["rate_hz"]
    if snapshot_rate >= 0.5 * configured:
        assert np.median(off_path) < 1e-3, (np.median(off_path), snapshot_rate)
    else:
        warnings.warn(f"snapshots at {snapshot_rate:.1f} Hz (configured {configured:.0f} Hz): "
                      f"the tracking accuracy (median {np.median(off_path) * 1e3:.1f} mm off "
                      "the target's path) is not judged on this host")
    assert all(c.names == ["cable_left", "cable_back", "cable_right", "cable_front"] for c in ok[:5])
    assert all(c.modes[0] == ActuatorCommand.MODE_DISPLACEMENT for c in ok[:5])
    # Efforts within the description's limits (cables pull only, at most 5 N).
    assert efforts.min() >= 0.0 and efforts.max() <= 5.0 + 1e-9
    # the snapshots are prepared in a thread of their own (inverse_controller_node's
    # snapshot_thread), at SCHED_FIFO 1 when the controller runs real-time
    controller = probe.diagnostics.get("inverse_controller_node: inverse QP")
    assert controller is not None, sorted(probe.diagnostics)
    if controller["scheduling"].startswith("SCHED_FIFO"):
        assert controller["snapshot_thread"] == "SCHED_FIFO 1", controller
    else:
        assert controller["snapshot_thread"].startswith("inherited"), controller
    assert int(controller["snapshots"]) >= 2, controller


def test_stale_snapshot_gives_safe_command_then_resumes(pipeline):
    graph, probe = pipeline
    probe.spin_until(lambda: len(probe.snapshots) >= 1, 120.0, "a compliance snapshot")
    last_snapshot = probe.snapshots[-1][1]
    for name in ("fem_node", "compliance_node"):
        os.kill(graph.pid(name), signal.SIGKILL)
    killed = time.monotonic()
    probe.spin_for(SNAPSHOT_TIMEOUT + 1.0)
    assert "inverse_controller_node" in graph.running(), "the controller died with fem_node"
    late = _window(probe.commands, killed + SNAPSHOT_TIMEOUT + 0.5, time.monotonic())
    assert late, "no commands after the low-rate loop died"
    assert all(c.status == ActuatorCommand.STATUS_SAFE for c in late)
    assert all("stale" in c.status_text for c in late), {c.status_text for c in late}
    assert np.allclose([c.efforts for c in late], 0.0), "safe command must release the cables"
    # A fresh snapshot (the last one, restamped now) brings the controller back.
    fresh = last_snapshot
    fresh.header.stamp = to_time(to_seconds(probe.node.get_clock().now().to_msg()))
    fresh.seq = last_snapshot.seq + 1000
    probe.snapshot_pub.publish(fresh)
    resumed = time.monotonic()

    def after():
        return _window(probe.commands, resumed + 0.1, time.monotonic())

    try:  # within the snapshot timeout (a loaded machine may delay the probe, not the test)
        probe.spin_until(lambda: any(c.status == ActuatorCommand.STATUS_OK for c in after()),
                         1.5, "an OK command after the fresh snapshot")
    except AssertionError as err:
        raise AssertionError(f"{err}: {({c.status_text for c in after()})}") from None
    assert "inverse_controller_node" in graph.running()
