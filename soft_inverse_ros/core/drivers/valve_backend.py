"""Valve board backends: the framed serial protocol, or the simulated board.

Both speak the messages of :mod:`~soft_inverse_ros.core.drivers.valve_protocol`
(payloads encoded and decoded the same way); only the transport differs. Requests
return the board's :class:`~soft_inverse_ros.core.drivers.valve_protocol.DeviceState`.

Errors: :class:`~soft_inverse_ros.core.drivers.driver_state.PortError` when the port is
gone, :class:`ValveCommError` when one exchange failed (no reply in time, bad checksum,
NACK) — the driver counts those.
"""

from __future__ import annotations

import struct
import time
import termios
from abc import ABC, abstractmethod

import numpy as np
import serial

from soft_inverse_ros.core.drivers import valve_protocol as vp
from soft_inverse_ros.core.drivers.driver_state import PortError
from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticChambers, PneumaticParams
from soft_inverse_ros.core.drivers.valve_config import SerialValveConfig
from soft_inverse_ros.core.drivers.valve_device_model import ValveDeviceModel

_PORT_ERRORS = (OSError, termios.error, serial.SerialException)


class ValveCommError(RuntimeError):
    """One exchange with the board failed (timeout, checksum, NACK)."""


class ValveBackend(ABC):
    """A valve board with ``n_channels`` channels (known after :meth:`open`)."""

    #: How long :meth:`open` keeps saying HELLO before giving up [s] (boards such as the
    #: Arduino Uno reboot when their USB serial port is opened).
    boot_timeout_s = 0.0

    def __init__(self) -> None:
        self.info: vp.DeviceInfo | None = None

    @property
    def n_channels(self) -> int:
        if self.info is None:
            raise PortError("valve board not opened")
        return self.info.n_channels

    @abstractmethod
    def _exchange(self, now: float, msg_type: vp.MsgType, payload: bytes) -> tuple[int, bytes]:
        """Send one request, return the reply (type, payload)."""

    @abstractmethod
    def _open_transport(self) -> None:
        """Open the link (raises PortError)."""

    @abstractmethod
    def close(self) -> None:
        """Close the link (idempotent, never raises)."""

    def open(self, now: float) -> vp.DeviceInfo:
        """Open the link and identify the board (HELLO → INFO)."""
        self._open_transport()
        deadline = time.monotonic() + self.boot_timeout_s
        while True:
            try:
                msg_type, payload = self._exchange(now, vp.MsgType.HELLO, b"")
                break
            except ValveCommError:
                if time.monotonic() >= deadline:
                    raise
        if msg_type != vp.MsgType.INFO:
            raise ValveCommError(f"HELLO answered with message 0x{msg_type:02x}, expected INFO")
        try:
            info = vp.decode_info(payload)
        except vp.ProtocolError as exc:
            raise ValveCommError(f"bad INFO: {exc}") from exc
        if info.protocol_version != vp.PROTOCOL_VERSION:
            raise ValveCommError(
                f"board speaks protocol version {info.protocol_version}, expected {vp.PROTOCOL_VERSION}"
            )
        self.info = info
        return info

    def _state_request(self, now: float, msg_type: vp.MsgType, payload: bytes = b"") -> vp.DeviceState:
        try:
            reply_type, reply = self._exchange(now, msg_type, payload)
        except vp.ProtocolError as exc:  # a request the protocol cannot carry
            raise ValveCommError(f"cannot send {msg_type.name}: {exc}") from exc
        if reply_type == vp.MsgType.NACK:
            try:
                code, rejected = vp.decode_nack(reply)
            except vp.ProtocolError as exc:
                raise ValveCommError(f"bad NACK to {msg_type.name}: {exc}") from exc
            try:
                reason = vp.NackCode(code).name
            except ValueError:
                reason = f"code {code}"
            raise ValveCommError(f"board rejected {msg_type.name}: {reason}")
        if reply_type != vp.MsgType.STATE:
            raise ValveCommError(f"{msg_type.name} answered with message 0x{reply_type:02x}")
        try:
            state = vp.decode_state(reply)
        except vp.ProtocolError as exc:
            raise ValveCommError(f"bad STATE: {exc}") from exc
        if len(state.pressure_pa) != self.n_channels:
            raise ValveCommError(f"STATE has {len(state.pressure_pa)} channels, board has {self.n_channels}")
        return state

    def configure(
        self, now: float, pwm_hz: int, watchdog_s: float, max_pressure_pa: list[int]
    ) -> vp.DeviceState:
        try:
            payload = vp.encode_config(int(pwm_hz), int(round(watchdog_s * 1000.0)), max_pressure_pa)
        except struct.error as exc:  # a value the CONFIG fields cannot hold
            raise ValveCommError(f"cannot encode CONFIG (pwm {pwm_hz} Hz, watchdog {watchdog_s} s, "
                                 f"limits {max_pressure_pa} Pa): {exc}") from exc
        return self._state_request(now, vp.MsgType.CONFIG, payload)

    def arm(self, now: float) -> vp.DeviceState:
        return self._state_request(now, vp.MsgType.ARM)

    def set_duty(self, now: float, duty: np.ndarray) -> vp.DeviceState:
        """Board duties in [0, 1], one per board channel."""
        return self._state_request(now, vp.MsgType.SET_DUTY, vp.encode_duties([float(d) for d in duty]))

    def heartbeat(self, now: float) -> vp.DeviceState:
        return self._state_request(now, vp.MsgType.HEARTBEAT)

    def read_state(self, now: float) -> vp.DeviceState:
        return self._state_request(now, vp.MsgType.READ_STATE)

    def vent_all(self, now: float) -> vp.DeviceState:
        return self._state_request(now, vp.MsgType.VENT_ALL)


class SerialValveBackend(ValveBackend):
    """The board on a serial port (USB CDC or UART), framed protocol."""

    def __init__(self, config: SerialValveConfig) -> None:
        super().__init__()
        self.config = config
        self.boot_timeout_s = config.boot_timeout_s
        self._serial: serial.Serial | None = None
        self._decoder = vp.FrameDecoder()
        self._seq = 0

    def _open_transport(self) -> None:
        self.close()
        try:
            self._serial = serial.Serial(self.config.port, self.config.baud_rate, timeout=0)
            self._serial.reset_input_buffer()
        except _PORT_ERRORS as exc:
            self._serial = None
            raise PortError(f"cannot open {self.config.port}: {exc}") from exc
        self._decoder = vp.FrameDecoder()

    def close(self) -> None:
        if self._serial is not None:
            try:
                self._serial.close()
            except _PORT_ERRORS:
                pass
            self._serial = None

    def _exchange(self, now: float, msg_type: vp.MsgType, payload: bytes) -> tuple[int, bytes]:
        if self._serial is None:
            raise PortError(f"valve port {self.config.port} is not open")
        self._seq = (self._seq + 1) & 0xFF
        seq = self._seq
        frame = vp.encode_frame(msg_type, seq, payload)
        port = self._serial
        try:
            port.write(frame)
            deadline = time.monotonic() + self.config.reply_timeout_s
            while True:
                remaining = deadline - time.monotonic()
                # Past the deadline the read is non-blocking (timeout 0): bytes that arrived
                # while this thread was descheduled still count before declaring a timeout.
                port.timeout = min(max(remaining, 0.0), 0.005)
                data = port.read(max(1, port.in_waiting))
                for reply in self._decoder.feed(data):
                    if not reply.crc_ok:
                        self._resync(port)
                        raise ValveCommError(f"reply to {msg_type.name} failed its checksum")
                    if reply.seq == seq:
                        return reply.msg_type, reply.payload
                    # A late reply to an earlier request: skip it.
                if remaining <= 0.0:
                    raise ValveCommError(
                        f"no reply to {msg_type.name} within {self.config.reply_timeout_s * 1e3:.0f} ms"
                    )
        except _PORT_ERRORS as exc:
            raise PortError(f"valve port {self.config.port}: {exc}") from exc

    def _resync(self, port: serial.Serial) -> None:
        time.sleep(0.001)
        port.reset_input_buffer()
        self._decoder = vp.FrameDecoder()


class SimValveBackend(ValveBackend):
    """The board simulated in-process (:class:`ValveDeviceModel` on simulated chambers).

    Args:
        params: Pneumatic model per board channel.
        sensor_mask: Bit c set when channel c has a sensor.
        sensor_noise_pa: Sensor noise [Pa].
        seed: Noise seed.
    """

    def __init__(
        self,
        params: list[PneumaticParams],
        sensor_mask: int,
        sensor_noise_pa: float = 0.0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.device = ValveDeviceModel(PneumaticChambers(params), sensor_mask, sensor_noise_pa, seed)
        self._open = False
        self.muted = False  # fault injection: the board stops answering
        self.unplugged = False

    def _open_transport(self) -> None:
        if self.unplugged:
            raise PortError("simulated valve port unplugged")
        self._open = True

    def close(self) -> None:
        self._open = False

    def _exchange(self, now: float, msg_type: vp.MsgType, payload: bytes) -> tuple[int, bytes]:
        if self.unplugged or not self._open:
            raise PortError("simulated valve port " + ("unplugged" if self.unplugged else "not open"))
        reply = self.device.handle(now, msg_type, payload)
        if self.muted:
            raise ValveCommError(f"no reply to {msg_type.name}")
        return reply
