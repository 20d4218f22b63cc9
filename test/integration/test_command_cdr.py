"""The controller's ActuatorCommand bytes (nodes/command_cdr.py) against rclpy's own
serialization: every field reads back, for actuator counts, names and status texts whose
lengths move every alignment."""

from __future__ import annotations

import numpy as np
import pytest

try:
    from rclpy.serialization import deserialize_message, serialize_message
    from soft_inverse_ros_msgs.msg import ActuatorCommand
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

from soft_inverse_ros.nodes.command_cdr import CommandEncoder


@pytest.mark.parametrize("frame_id", ["base_link", "w", ""])
@pytest.mark.parametrize("names", [["a"], ["cable_left", "cable_back", "cable_right", "cable_front"],
                                   ["j1", "joint_22", "x" * 13, "c", "dd", "eee", "ffff"]])
def test_encoded_commands_read_back_as_sent(frame_id, names):
    modes = [i % 3 for i in range(len(names))]
    encoder = CommandEncoder(frame_id, names, modes)
    assert encoder.matches_rclpy(ActuatorCommand)
    rng = np.random.default_rng(len(names))
    for text in ["", "x", "compliance snapshot stale (0.612 s > 0.5 s)", "é-ü"]:
        values, efforts, strokes = (rng.normal(size=len(names)) for _ in range(3))
        data = encoder.encode((1_795_578_371, 800_579_661), (1_795_578_371, 799_000_000), 123456,
                              42, values, efforts, strokes, ActuatorCommand.STATUS_SAFE, text)
        msg = deserialize_message(data, ActuatorCommand)
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (1_795_578_371, 800_579_661)
        assert (msg.target_stamp.sec, msg.target_stamp.nanosec) == (1_795_578_371, 799_000_000)
        assert msg.header.frame_id == frame_id and msg.names == names and list(msg.modes) == modes
        assert (msg.seq, msg.snapshot_seq, msg.status, msg.status_text) == (123456, 42, 2, text)
        np.testing.assert_array_equal(msg.values, values)
        np.testing.assert_array_equal(msg.efforts, efforts)
        np.testing.assert_array_equal(msg.strokes, strokes)
        assert len(data) == len(serialize_message(msg))


def test_the_encoder_refuses_what_it_cannot_encode():
    with pytest.raises(ValueError, match="names"):
        CommandEncoder("base_link", [], [])
    with pytest.raises(ValueError, match="modes"):
        CommandEncoder("base_link", ["a", "b"], [0])
    encoder = CommandEncoder("base_link", ["a", "b"], [0, 0])
    with pytest.raises(ValueError):  # a command with the wrong number of efforts
        encoder.encode((0, 0), (0, 0), 1, 0, np.zeros(2), np.zeros(3), np.zeros(2), 0, "")
