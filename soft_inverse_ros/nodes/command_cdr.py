"""The controller's ActuatorCommand written straight into its CDR bytes.

rclpy publishes a Python message by converting it field by field to its C struct and
serializing that: ~60 µs per ActuatorCommand on the development machine, at ~1.2 k
commands/s a tenth of a core on a 2-core robot computer. Publishing the serialized bytes
(``Publisher.publish(bytes)``) skips the conversion; :class:`CommandEncoder` writes those
bytes itself: the parts fixed for a controller's life (frame, actuator names and modes)
once, then per command the stamps, sequence numbers, the three arrays, the status and its
text (2.5 µs; the publish of the bytes 7 µs more: BENCHMARKS.md, "Ninth session").

The encoding is the one rmw_fastrtps uses for ROS 2 messages: a 4-byte encapsulation
header (``00 01 00 00``: plain CDR, little endian), then the fields in ``.msg`` order,
each primitive aligned to its size (8 at most) counted from the end of the header (padding
bytes zero), sequences and strings as a uint32 length then the elements (strings
NUL-terminated, the length counting the NUL). :meth:`CommandEncoder.matches_rclpy`
checks the bytes against ``rclpy.serialization`` for the same command; the controller
checks it once at start-up and publishes messages instead when it does not match
(another rmw).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

__all__ = ["CommandEncoder"]

_HEADER = b"\x00\x01\x00\x00"  # CDR, little endian, no options


def _pad(length: int, alignment: int) -> int:
    """Padding bytes so that a field aligned to ``alignment`` starts after ``length``
    payload bytes (counted from the end of the encapsulation header)."""
    return -length % alignment


def _string(text: str, length: int) -> bytes:
    """A CDR string starting after ``length`` payload bytes (its alignment padding first)."""
    data = text.encode("utf-8") + b"\x00"
    return b"\x00" * _pad(length, 4) + struct.pack("<I", len(data)) + data


class CommandEncoder:
    """Serialized ``soft_inverse_ros_msgs/ActuatorCommand`` for one controller: the frame,
    the actuator names and their modes are fixed at construction.

    Args:
        frame_id: header frame (REP-103 base frame of the robot).
        names: the n actuator names, in command order.
        modes: the n ``MODE_*`` values.
    """

    def __init__(self, frame_id: str, names: Sequence[str], modes: Sequence[int]) -> None:
        if not names or len(modes) != len(names):
            raise ValueError(f"{len(names)} actuator names and {len(modes)} modes "
                             "(at least one of each, as many)")
        self.n = len(names)
        self._fixed_fields = (frame_id, list(names), [int(m) for m in modes])  # matches_rclpy
        body = bytearray()
        body += struct.pack("<iI", 0, 0)  # header.stamp: sec, nanosec (offset 0)
        body += _string(frame_id, len(body))
        self._target_at = len(body) + _pad(len(body), 4)
        body += b"\x00" * (self._target_at - len(body)) + struct.pack("<iI", 0, 0)
        self._seq_at = len(body) + _pad(len(body), 8)
        body += b"\x00" * (self._seq_at - len(body)) + struct.pack("<QQ", 0, 0)
        body += struct.pack("<I", self.n)  # names (offset a multiple of 8: aligned)
        for name in names:
            body += _string(name, len(body))
        body += b"\x00" * _pad(len(body), 4) + struct.pack("<I", self.n)
        body += bytes(int(m) for m in modes)
        self._arrays_at = []  # offsets of values, efforts, strokes (their doubles)
        for _ in range(3):
            body += b"\x00" * _pad(len(body), 4) + struct.pack("<I", self.n)
            body += b"\x00" * _pad(len(body), 8)
            self._arrays_at.append(len(body))
            body += b"\x00" * (8 * self.n)
        self._status_at = len(body)
        body += b"\x00"
        self._fixed = bytes(body)  # payload up to and including status (status_text follows)
        self._buffer = bytearray(_HEADER + self._fixed)
        self._doubles = [np.frombuffer(self._buffer, dtype="<f8", count=self.n, offset=4 + at)
                         for at in self._arrays_at]
        self._text_cache: tuple[str, bytes] = ("", _string("", len(self._fixed)))

    def encode(self, stamp: tuple[int, int], target_stamp: tuple[int, int], seq: int,
               snapshot_seq: int, values: np.ndarray, efforts: np.ndarray,
               strokes: np.ndarray, status: int, status_text: str) -> bytes:
        """The serialized command.

        Args:
            stamp: header stamp (sec, nanosec) of the node clock.
            target_stamp: stamp (sec, nanosec) of the target it answers.
            seq, snapshot_seq: the command's and the snapshot's sequence numbers (≥ 0).
            values, efforts, strokes: (n,) setpoints [mode unit], efforts [N or Pa],
                predicted strokes [m or m³].
            status: ``STATUS_*``; status_text: why, "" when OK.
        """
        buf = self._buffer
        struct.pack_into("<iI", buf, 4, *stamp)
        struct.pack_into("<iI", buf, 4 + self._target_at, *target_stamp)
        struct.pack_into("<QQ", buf, 4 + self._seq_at, seq, snapshot_seq)
        for view, array in zip(self._doubles, (values, efforts, strokes)):
            view[:] = array  # a wrong length raises (numpy broadcasting)
        buf[4 + self._status_at] = status
        cached_text, text_bytes = self._text_cache
        if status_text != cached_text:
            text_bytes = _string(status_text, len(self._fixed))
            self._text_cache = (status_text, text_bytes)
        return bytes(buf) + text_bytes

    def matches_rclpy(self, message_type) -> bool:
        """True when :meth:`encode` gives rclpy's own serialization of the same command:
        the same length, and rclpy reads every field back (checked with several status
        texts: the alignment of the text varies). Padding bytes are not compared: rclpy
        leaves them uninitialized."""
        from rclpy.serialization import deserialize_message, serialize_message

        frame_id, names, modes = self._fixed_fields
        rng = np.random.default_rng(0)
        for text in ("", "q", "qp infeasible", "stale snapshot (0.51 s)"):
            arrays = [rng.normal(size=self.n) for _ in range(3)]
            msg = message_type()
            msg.header.frame_id = frame_id
            msg.header.stamp.sec, msg.header.stamp.nanosec = 1_795_000_000, 123_456_789
            msg.target_stamp.sec, msg.target_stamp.nanosec = 1_794_999_999, 987_654_321
            msg.seq, msg.snapshot_seq = 2**40 + 7, 12345
            msg.names, msg.modes = names, modes
            msg.values, msg.efforts, msg.strokes = (a.tolist() for a in arrays)
            msg.status, msg.status_text = 2, text
            ours = self.encode((1_795_000_000, 123_456_789), (1_794_999_999, 987_654_321),
                               2**40 + 7, 12345, *arrays, 2, text)
            if (len(ours) != len(serialize_message(msg))
                    or deserialize_message(ours, message_type) != msg):
                return False
        return True
