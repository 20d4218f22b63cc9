"""The controller's throttled copy of its commands (actuator_command_throttle, the low-rate
loop's input): every command_throttle_hz and at each change of status, the same bytes as
the command it copies. Over DDS, test_pipeline.py's FEM states follow the commands through
fem_node's remapped subscription (graph.FEM_COMMAND_REMAP); without it they stay put."""

from __future__ import annotations

import pytest

try:
    from geometry_msgs.msg import PointStamped
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy not importable: {err}", allow_module_level=True)

from hostile_probe import snapshot_message
from soft_inverse_ros.nodes.conversions import to_time

pytestmark = pytest.mark.integration


def test_the_copy_follows_its_rate_and_every_change_of_status(fake_clock_controller, monkeypatch):
    clock, make = fake_clock_controller
    node = make(command_throttle_hz=100.0)
    sent, copies = [], []
    monkeypatch.setattr(node._cmd_pub, "publish", lambda p: sent.append((clock[0], p)))
    monkeypatch.setattr(node._throttle_pub, "publish", lambda p: copies.append((clock[0], p)))

    def ticks(n: int) -> None:
        for _ in range(n):
            clock[0] += 1e-3
            node._tick()

    ticks(50)  # no snapshot: SAFE commands, a copy every 10 ms
    assert len(sent) == 50 and len(copies) == 5
    assert all(any(p is q or p == q for _, q in sent) for _, p in copies)
    assert [round(1e3 * (t - 100.0)) for t, _ in copies] == [1, 11, 21, 31, 41]
    msg = snapshot_message()
    msg.header.stamp = to_time(clock[0])
    node._on_snapshot(msg)
    target = PointStamped()
    target.header.frame_id, target.header.stamp = "base_link", to_time(clock[0])
    target.point.z = float(msg.effector_position[2])
    node._on_target(target)
    ticks(20)  # the snapshot's steps run after the ticks; the first OK command is copied at once
    first_ok = next(t for t, p in sent if _status(p) == 0)
    assert 100.051 < first_ok < 100.0705 and first_ok in [t for t, _ in copies]
    assert _status(copies[-1][1]) == 0
    off = make(command_throttle_hz=0.0)
    assert off._throttle_pub is None
    off._tick()


def _status(payload) -> int:
    """The status of a published command (CDR bytes or the message)."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        from rclpy.serialization import deserialize_message
        from soft_inverse_ros_msgs.msg import ActuatorCommand

        return deserialize_message(bytes(payload), ActuatorCommand).status
    return payload.status
