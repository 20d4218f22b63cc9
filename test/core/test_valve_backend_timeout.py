"""SerialValveBackend's reply deadline: bytes already waiting when it expires still count."""

from __future__ import annotations

import time

import pytest

from soft_inverse_ros.core.drivers import valve_protocol as vp
from soft_inverse_ros.core.drivers.valve_backend import SerialValveBackend, ValveCommError
from soft_inverse_ros.core.drivers.valve_config import SerialValveConfig

REPLY_TIMEOUT_S = 0.005
INFO = vp.DeviceInfo(vp.PROTOCOL_VERSION, 2, 0b11, 1, 1000)


class _LatePort:
    """A port whose reply lands just after a blocking read gave up (a descheduled host).

    Every blocking read sleeps past the backend's whole reply deadline and returns nothing;
    the reply is then in the input buffer. Only a non-blocking read can see it in time.
    """

    def __init__(self, answer: bool = True) -> None:
        self.timeout: float | None = 0.0
        self.answer = answer
        self._pending = b""
        self._buffer = b""

    @property
    def in_waiting(self) -> int:
        return len(self._buffer)

    def write(self, frame: bytes) -> int:
        seq = frame[3]
        if self.answer:
            self._pending = vp.encode_frame(vp.MsgType.INFO, seq, vp.encode_info(INFO))
        return len(frame)

    def read(self, size: int = 1) -> bytes:
        if self.timeout and not self._buffer:
            time.sleep(3 * REPLY_TIMEOUT_S)
            self._buffer, self._pending = self._buffer + self._pending, b""
            return b""
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data


def _backend(port: _LatePort) -> SerialValveBackend:
    backend = SerialValveBackend(SerialValveConfig("/dev/fake", reply_timeout_s=REPLY_TIMEOUT_S))
    backend._serial = port  # the transport under test, without a real device
    return backend


def test_reply_waiting_at_the_deadline_is_read_not_lost():
    msg_type, payload = _backend(_LatePort())._exchange(0.0, vp.MsgType.HELLO, b"")
    assert msg_type == vp.MsgType.INFO
    assert vp.decode_info(payload) == INFO


def test_no_reply_still_times_out():
    with pytest.raises(ValveCommError, match="no reply to HELLO"):
        _backend(_LatePort(answer=False))._exchange(0.0, vp.MsgType.HELLO, b"")
