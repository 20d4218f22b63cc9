"""Test-side helpers for the driver node tests: a probe node that publishes ActuatorCommand,
records JointState and /diagnostics, and starts one driver node as a separate process."""

from __future__ import annotations

import io
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import rclpy
import rclpy.executors
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from soft_inverse_ros_msgs.msg import ActuatorCommand

import yaml

from soft_inverse_ros import topics
from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.graph import NodeSpec
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.process_launcher import GraphProcesses


@dataclass
class DiagRecord:
    """One received DiagnosticArray, with its statuses by name."""

    received: float
    statuses: dict[str, DiagnosticStatus]

    def values(self, name: str) -> dict[str, str]:
        return {kv.key: kv.value for kv in self.statuses[name].values}


class DriverProbe:
    """A node in the test process facing one driver node."""

    def __init__(self, name: str, state_topic: str, log: io.StringIO | None = None) -> None:
        self.node = rclpy.create_node(name)
        # One executor holding the node (rclpy.spin_once would add and remove it each call):
        # the loop below must stay light, the device emulator thread shares this process.
        self.executor = rclpy.executors.SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.log = log  # the driver node's output, appended to timeout messages
        self.states: list[tuple[float, JointState]] = []
        self.diagnostics: list[DiagRecord] = []
        self._seq = 0
        self.node.create_subscription(JointState, state_topic,
                                      lambda m: self.states.append((time.monotonic(), m)),
                                      qos.HIGH_RATE)
        self.node.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, self._on_diag,
                                      QoSProfile(depth=100))
        self._cmd_pub = self.node.create_publisher(ActuatorCommand, topics.ACTUATOR_COMMAND,
                                                   qos.HIGH_RATE)

    def _on_diag(self, msg: DiagnosticArray) -> None:
        self.diagnostics.append(DiagRecord(time.monotonic(), {s.name: s for s in msg.status}))

    def destroy(self) -> None:
        self.executor.remove_node(self.node)
        self.executor.shutdown()
        self.node.destroy_node()

    def spin_once(self, timeout: float) -> None:
        self.executor.spin_once(timeout_sec=max(0.0, timeout))

    # -- commands ---------------------------------------------------------------------
    def command(self, names: Sequence[str], mode: int | Sequence[int], values: Sequence[float], *,
                status: int = ActuatorCommand.STATUS_OK, stamp_offset: float = 0.0) -> None:
        """Publish a command stamped now (+ ``stamp_offset`` [s]) with ``status``."""
        self._seq += 1
        msg = ActuatorCommand()
        now = self.node.get_clock().now().nanoseconds * 1e-9 + stamp_offset
        msg.header.stamp.sec = int(now // 1)
        msg.header.stamp.nanosec = int(round((now % 1) * 1e9)) % 1_000_000_000
        msg.status = status
        msg.seq = self._seq
        msg.names = list(names)
        modes = [mode] * len(names) if isinstance(mode, int) else list(mode)
        msg.modes = modes
        msg.values = [float(v) for v in values]
        msg.efforts = [0.0] * len(names)
        msg.strokes = [0.0] * len(names)
        self._cmd_pub.publish(msg)

    def drive_until(self, send: Callable[[], None] | None, predicate: Callable[[], bool],
                    timeout: float, what: str, period: float = 0.01) -> None:
        """Call ``send`` every ``period`` (spinning in between) until ``predicate``."""
        deadline = time.monotonic() + timeout
        next_send = 0.0
        while time.monotonic() < deadline:
            now = time.monotonic()
            if send is not None and now >= next_send:
                send()
                next_send = now + period
            # Sleep in the executor until the next send (or a message arrives).
            wake = next_send if send is not None else now + period
            self.spin_once(min(wake, deadline) - time.monotonic())
            if predicate():
                return
        state = self.latest_state()
        text = f"timed out after {timeout} s waiting for {what}"
        if state is not None:
            text += f"\nlast state: {list(state.name)} position {list(state.position)} effort {list(state.effort)}"
        if self.log is not None:
            text += f"\n--- node output ---\n{self.log.getvalue()}"
        raise AssertionError(text)

    def drive_for(self, send: Callable[[], None] | None, seconds: float, period: float = 0.01) -> None:
        end = time.monotonic() + seconds
        try:
            self.drive_until(send, lambda: time.monotonic() >= end, seconds + 1.0, "", period)
        except AssertionError:
            pass

    # -- readings ---------------------------------------------------------------------
    def latest_state(self) -> JointState | None:
        return self.states[-1][1] if self.states else None

    def last_diag(self, name: str) -> DiagRecord | None:
        for record in reversed(self.diagnostics):
            if name in record.statuses:
                return record
        return None

    def diag_value(self, name: str, key: str, default: str = "") -> str:
        record = self.last_diag(name)
        return record.values(name).get(key, default) if record else default


def node_process(executable: str, parameters: dict, params_files: Sequence[str] = ()) -> tuple[GraphProcesses, io.StringIO]:
    """Start one driver node (``python -m soft_inverse_ros.nodes.<executable>``); its output
    goes to the returned buffer (for assertion messages)."""
    log = io.StringIO()
    spec = NodeSpec(executable, executable, tuple(params_files), parameters)
    return GraphProcesses([spec], output=log).start(), log


def wait_exit(graph: GraphProcesses, timeout: float) -> int | None:
    """Exit code of the graph's single process, or None if still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        graph.poll()
        if graph.exits:
            return graph.exits[0].returncode
        time.sleep(0.02)
    return None


def level(status: DiagnosticStatus) -> int:
    return int.from_bytes(status.level, "little") if isinstance(status.level, bytes) else int(status.level)


def finite(values: Sequence[float]) -> bool:
    return all(math.isfinite(v) for v in values)



def change_state(probe: DriverProbe, node: str, transition: int, timeout: float = 10.0) -> bool:
    """Request a lifecycle transition of ``node`` (lifecycle_msgs/Transition id) through its
    ``change_state`` service; True when the node accepted it."""
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState

    client = probe.node.create_client(ChangeState, f"/{node}/change_state")
    try:
        if not client.wait_for_service(timeout_sec=timeout):
            raise AssertionError(f"/{node}/change_state not available")
        future = client.call_async(ChangeState.Request(transition=Transition(id=transition)))
        probe.drive_until(None, future.done, timeout, f"{node} transition {transition}")
        return bool(future.result().success)
    finally:
        probe.node.destroy_client(client)


def dynamixel_config(tmp_path: Path, port: str, max_comm_errors: int = 3,
                     period: float = 0.02) -> Path:
    """The shipped servo_dynamixel.yaml on the emulator's port: single-turn position mode
    (the emulated servos then enforce their position-limit registers themselves), a short
    releasing watchdog, and for a loaded 2-core machine (the emulator thread shares this
    process) a generous status timeout (202 ms) and tolerance of lost status packets."""
    data = yaml.safe_load(find_config("drivers/servo_dynamixel.yaml").read_text())
    section = data["servo_driver"]
    section["period_s"] = period
    section["watchdog"] = {"periods": 5, "action": "release"}
    section["max_consecutive_comm_errors"] = max_comm_errors
    section["dynamixel"].update(port=port, operating_mode="position", latency_timer_ms=100)
    path = tmp_path / "servos.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
