"""Framed serial protocol between the host and the valve microcontroller.

Documented in ``firmware/valve_controller/PROTOCOL.md`` and implemented by the reference
firmware ``firmware/valve_controller/valve_controller.ino``. Summary::

    0xA5 | LEN | TYPE | SEQ | PAYLOAD (LEN bytes) | CRC16 (little-endian)

CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF) over LEN, TYPE, SEQ and PAYLOAD; all
multi-byte fields little-endian. Every host frame gets exactly one reply with the same
SEQ: STATE for commands, INFO for HELLO, NACK when the frame is rejected.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum, IntFlag

START = 0xA5
MAX_PAYLOAD = 64
OVERHEAD = 6  # start, len, type, seq, crc16
PROTOCOL_VERSION = 1
#: Duty resolution on the wire: 10000 = 100 %.
DUTY_FULL_SCALE = 10000
#: Pressure value meaning "this channel has no sensor".
NO_SENSOR = -(2**31)
#: channels a board may have (INFO's sensor mask is one byte)
MAX_CHANNELS = 8


class MsgType(IntEnum):
    # host → device
    HELLO = 0x01  #: → INFO
    CONFIG = 0x02  #: pwm_hz u16, watchdog_ms u16, n u8, n × max_pressure_pa u32 → STATE
    ARM = 0x03  #: clear latched vents → STATE
    SET_DUTY = 0x04  #: n u8, n × duty u16 (0..10000); feeds the watchdog → STATE
    HEARTBEAT = 0x05  #: feeds the watchdog → STATE
    READ_STATE = 0x06  #: → STATE (does not feed the watchdog)
    VENT_ALL = 0x07  #: all channels to exhaust, latched → STATE
    # device → host
    INFO = 0x81  #: version u8, n_channels u8, sensor_mask u8, firmware u16, max_pwm_hz u16
    STATE = 0x82  #: flags u8, n u8, n × pressure_pa i32, n × duty u16
    NACK = 0x8F  #: code u8, rejected type u8


class Flags(IntFlag):
    """STATE flags. The ``VENT_*`` ones latch (duties forced to 0) until ARM."""

    CONFIGURED = 0x01  #: CONFIG accepted since power-up
    VENT_HOST = 0x02  #: VENT_ALL received
    VENT_WATCHDOG = 0x04  #: no SET_DUTY / HEARTBEAT within the watchdog time
    VENT_OVERPRESSURE = 0x08  #: a sensed pressure exceeded its maximum
    SENSOR_FAULT = 0x10  #: a pressure sensor reads out of range (live, not latched)
    VENT_BOOT = 0x20  #: vented since power-up / reset, never armed

    @classmethod
    def latched(cls) -> "Flags":
        return cls.VENT_HOST | cls.VENT_WATCHDOG | cls.VENT_OVERPRESSURE | cls.VENT_BOOT


class NackCode(IntEnum):
    BAD_CRC = 1
    BAD_LENGTH = 2
    UNKNOWN_TYPE = 3
    BAD_VALUE = 4
    NOT_CONFIGURED = 5


class ProtocolError(ValueError):
    """A frame or payload does not follow the protocol."""


def crc16_ccitt(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no final XOR)."""
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def encode_frame(msg_type: int, seq: int, payload: bytes = b"") -> bytes:
    if len(payload) > MAX_PAYLOAD:
        raise ProtocolError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    body = bytes([len(payload), int(msg_type), seq & 0xFF]) + payload
    return bytes([START]) + body + struct.pack("<H", crc16_ccitt(body))


@dataclass(frozen=True)
class Frame:
    msg_type: int
    seq: int
    payload: bytes
    crc_ok: bool


class FrameDecoder:
    """Incremental frame decoder: resynchronizes on START bytes after garbage."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while True:
            start = self._buffer.find(bytes([START]))
            if start < 0:
                self._buffer.clear()
                return frames
            del self._buffer[:start]
            if len(self._buffer) < 2:
                return frames
            length = self._buffer[1]
            if length > MAX_PAYLOAD:
                del self._buffer[:1]
                continue
            total = OVERHEAD + length
            if len(self._buffer) < total:
                return frames
            raw = bytes(self._buffer[:total])
            crc_ok = crc16_ccitt(raw[1:-2]) == struct.unpack_from("<H", raw, total - 2)[0]
            if not crc_ok:
                # Might be a false START inside garbage: drop one byte, keep the verdict.
                frames.append(Frame(raw[2], raw[3], raw[4:-2], False))
                del self._buffer[:1]
                continue
            del self._buffer[:total]
            frames.append(Frame(raw[2], raw[3], raw[4:-2], True))


# -- payloads ---------------------------------------------------------------------------
def duty_to_wire(duty: float) -> int:
    if not 0.0 <= duty <= 1.0:
        raise ProtocolError(f"duty {duty} outside [0, 1]")
    return int(round(duty * DUTY_FULL_SCALE))


def encode_config(pwm_hz: int, watchdog_ms: int, max_pressure_pa: list[int]) -> bytes:
    n = len(max_pressure_pa)
    return struct.pack(f"<HHB{n}I", pwm_hz, watchdog_ms, n, *max_pressure_pa)


def decode_config(payload: bytes) -> tuple[int, int, list[int]]:
    if len(payload) < 5:
        raise ProtocolError("CONFIG too short")
    pwm_hz, watchdog_ms, n = struct.unpack_from("<HHB", payload)
    if len(payload) != 5 + 4 * n:
        raise ProtocolError(f"CONFIG length {len(payload)} for {n} channels")
    return pwm_hz, watchdog_ms, list(struct.unpack_from(f"<{n}I", payload, 5))


def encode_duties(duties: list[float]) -> bytes:
    n = len(duties)
    return struct.pack(f"<B{n}H", n, *(duty_to_wire(d) for d in duties))


def decode_duties(payload: bytes) -> list[int]:
    if len(payload) < 1 or len(payload) != 1 + 2 * payload[0]:
        raise ProtocolError("SET_DUTY length does not match its channel count")
    return list(struct.unpack_from(f"<{payload[0]}H", payload, 1))


@dataclass(frozen=True)
class DeviceInfo:
    protocol_version: int
    n_channels: int
    sensor_mask: int
    firmware_version: int
    max_pwm_hz: int

    def has_sensor(self, channel: int) -> bool:
        return bool(self.sensor_mask >> channel & 1)


def encode_info(info: DeviceInfo) -> bytes:
    return struct.pack(
        "<BBBHH", info.protocol_version, info.n_channels, info.sensor_mask,
        info.firmware_version, info.max_pwm_hz,
    )


def decode_info(payload: bytes) -> DeviceInfo:
    if len(payload) != 7:
        raise ProtocolError(f"INFO has {len(payload)} bytes, expected 7")
    info = DeviceInfo(*struct.unpack("<BBBHH", payload))
    if not 1 <= info.n_channels <= MAX_CHANNELS:
        raise ProtocolError(f"the board reports {info.n_channels} channels; the protocol carries "
                            f"1 to {MAX_CHANNELS}")
    return info


@dataclass(frozen=True)
class DeviceState:
    """A STATE reply: flags, pressures [Pa] (None without sensor), duties [0, 1]."""

    flags: Flags
    pressure_pa: tuple[int | None, ...]
    duty: tuple[float, ...]


def encode_state(flags: int, pressure_pa: list[int | None], duty_wire: list[int]) -> bytes:
    n = len(pressure_pa)
    wire = [NO_SENSOR if p is None else int(p) for p in pressure_pa]
    return struct.pack(f"<BB{n}i{n}H", flags, n, *wire, *duty_wire)


def decode_state(payload: bytes) -> DeviceState:
    if len(payload) < 2:
        raise ProtocolError("STATE too short")
    flags, n = struct.unpack_from("<BB", payload)
    if len(payload) != 2 + 6 * n:
        raise ProtocolError(f"STATE length {len(payload)} for {n} channels")
    values = struct.unpack_from(f"<{n}i{n}H", payload, 2)
    pressure = tuple(None if v == NO_SENSOR else v for v in values[:n])
    duty = tuple(v / DUTY_FULL_SCALE for v in values[n:])
    return DeviceState(Flags(flags), pressure, duty)


def decode_nack(payload: bytes) -> tuple[int, int]:
    if len(payload) != 2:
        raise ProtocolError("NACK must have 2 bytes")
    return payload[0], payload[1]
