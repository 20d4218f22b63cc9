"""A Dynamixel Protocol 2.0 bus emulator on a pseudo-terminal (X-series servos, XM430).

The emulator owns the master side of a pseudo-terminal; drivers open ``port_name`` (the
slave side) as if it were a USB-serial adapter. A background thread decodes instruction
packets (header ``FF FF FD 00``, ID, length, instruction, byte-stuffed parameters,
CRC-16 with polynomial 0x8005) and answers with status packets (instruction 0x55) like
the servos do: PING, READ, WRITE, SYNC READ, SYNC WRITE, REBOOT; unsupported instructions
get an Instruction error. Each servo has an XM430-W350 control table (EEPROM locked
while torque is on, Access and Data Limit errors) and a shaft that moves toward its goal
(first-order lag capped by the Velocity Limit register).

Faults to inject: :meth:`DynamixelEmulator.mute` (no status packet),
:meth:`~DynamixelEmulator.corrupt_crc` (status packets with a wrong CRC),
:meth:`~DynamixelEmulator.raise_hardware_error` (Hardware Error Status bits, torque off,
Alert bit in every status packet) and :meth:`~DynamixelEmulator.unplug` (closes the
pseudo-terminal, as when the adapter is pulled out).
"""

from __future__ import annotations

import math
import os
import select
import struct
import time
from dataclasses import dataclass, field

from soft_inverse_ros.testing.pty_emulator import PtyEmulator

# -- Protocol 2.0 framing ---------------------------------------------------------------
HEADER = b"\xff\xff\xfd\x00"
BROADCAST_ID = 0xFE
INST_PING = 0x01
INST_READ = 0x02
INST_WRITE = 0x03
INST_REBOOT = 0x08
INST_STATUS = 0x55
INST_SYNC_READ = 0x82
INST_SYNC_WRITE = 0x83

ERR_RESULT_FAIL = 0x01
ERR_INSTRUCTION = 0x02
ERR_CRC = 0x03
ERR_DATA_RANGE = 0x04
ERR_DATA_LENGTH = 0x05
ERR_DATA_LIMIT = 0x06
ERR_ACCESS = 0x07
ERR_ALERT = 0x80


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC_TABLE = _crc_table()


def dynamixel_crc16(data: bytes) -> int:
    """CRC-16 of Dynamixel Protocol 2.0 (poly 0x8005, init 0, MSB first, no final XOR)."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) ^ _CRC_TABLE[((crc >> 8) ^ byte) & 0xFF]) & 0xFFFF
    return crc


def add_stuffing(payload: bytes) -> bytes:
    """Insert 0xFD after every FF FF FD inside instruction + parameters."""
    out = bytearray()
    for byte in payload:
        out.append(byte)
        if byte == 0xFD and len(out) >= 3 and out[-3] == 0xFF and out[-2] == 0xFF:
            out.append(0xFD)
    return bytes(out)


def remove_stuffing(payload: bytes) -> bytes:
    """Drop the 0xFD inserted after every FF FF FD."""
    out = bytearray()
    i = 0
    while i < len(payload):
        out.append(payload[i])
        if (
            payload[i] == 0xFD
            and len(out) >= 3
            and out[-3] == 0xFF
            and out[-2] == 0xFF
            and i + 1 < len(payload)
            and payload[i + 1] == 0xFD
        ):
            i += 1  # skip the stuffed byte
        i += 1
    return bytes(out)


def encode_packet(dxl_id: int, instruction: int, params: bytes = b"") -> bytes:
    """A complete Protocol 2.0 packet (header, stuffing, CRC)."""
    body = add_stuffing(bytes([instruction]) + params)
    head = HEADER + bytes([dxl_id]) + struct.pack("<H", len(body) + 2)
    packet = head + body
    return packet + struct.pack("<H", dynamixel_crc16(packet))


def encode_status(dxl_id: int, error: int, params: bytes = b"", *, bad_crc: bool = False) -> bytes:
    """A status packet; ``bad_crc`` flips the CRC (fault injection)."""
    packet = encode_packet(dxl_id, INST_STATUS, bytes([error]) + params)
    if bad_crc:
        packet = packet[:-2] + bytes([packet[-2] ^ 0x5A, packet[-1]])
    return packet


@dataclass(frozen=True)
class DecodedPacket:
    dxl_id: int
    instruction: int
    params: bytes
    crc_ok: bool


class PacketDecoder:
    """Incremental decoder: feed bytes, get complete packets (with their CRC verdict)."""

    MAX_LENGTH = 1024

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[DecodedPacket]:
        self._buffer += data
        packets = []
        while True:
            start = self._buffer.find(HEADER)
            if start < 0:
                del self._buffer[: max(0, len(self._buffer) - 3)]
                return packets
            del self._buffer[:start]
            if len(self._buffer) < 7:
                return packets
            length = struct.unpack_from("<H", self._buffer, 5)[0]
            if length < 3 or length > self.MAX_LENGTH:
                del self._buffer[:1]
                continue
            total = 7 + length
            if len(self._buffer) < total:
                return packets
            raw = bytes(self._buffer[:total])
            del self._buffer[:total]
            crc_ok = dynamixel_crc16(raw[:-2]) == struct.unpack_from("<H", raw, total - 2)[0]
            body = remove_stuffing(raw[7:-2])
            packets.append(DecodedPacket(raw[4], body[0], body[1:], crc_ok))


# -- X-series control table -------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    address: int
    size: int
    signed: bool = False
    writable: bool = True
    eeprom: bool = False


#: XM430-W350 (Protocol 2.0) control table, the registers the emulator models.
XM430 = {
    "model_number": Field(0, 2, writable=False),
    "model_information": Field(2, 4, writable=False),
    "firmware_version": Field(6, 1, writable=False),
    "id": Field(7, 1, eeprom=True),
    "baud_rate": Field(8, 1, eeprom=True),
    "return_delay_time": Field(9, 1, eeprom=True),
    "drive_mode": Field(10, 1, eeprom=True),
    "operating_mode": Field(11, 1, eeprom=True),
    "secondary_id": Field(12, 1, eeprom=True),
    "protocol_type": Field(13, 1, eeprom=True),
    "homing_offset": Field(20, 4, signed=True, eeprom=True),
    "moving_threshold": Field(24, 4, eeprom=True),
    "temperature_limit": Field(31, 1, eeprom=True),
    "max_voltage_limit": Field(32, 2, eeprom=True),
    "min_voltage_limit": Field(34, 2, eeprom=True),
    "pwm_limit": Field(36, 2, eeprom=True),
    "current_limit": Field(38, 2, eeprom=True),
    "velocity_limit": Field(44, 4, eeprom=True),
    "max_position_limit": Field(48, 4, eeprom=True),
    "min_position_limit": Field(52, 4, eeprom=True),
    "shutdown": Field(63, 1, eeprom=True),
    "torque_enable": Field(64, 1),
    "led": Field(65, 1),
    "status_return_level": Field(68, 1),
    "registered_instruction": Field(69, 1, writable=False),
    "hardware_error_status": Field(70, 1, writable=False),
    "velocity_i_gain": Field(76, 2),
    "velocity_p_gain": Field(78, 2),
    "position_d_gain": Field(80, 2),
    "position_i_gain": Field(82, 2),
    "position_p_gain": Field(84, 2),
    "bus_watchdog": Field(98, 1, signed=True),
    "goal_pwm": Field(100, 2, signed=True),
    "goal_current": Field(102, 2, signed=True),
    "goal_velocity": Field(104, 4, signed=True),
    "profile_acceleration": Field(108, 4),
    "profile_velocity": Field(112, 4),
    "goal_position": Field(116, 4, signed=True),
    "realtime_tick": Field(120, 2, writable=False),
    "moving": Field(122, 1, writable=False),
    "moving_status": Field(123, 1, writable=False),
    "present_pwm": Field(124, 2, signed=True, writable=False),
    "present_current": Field(126, 2, signed=True, writable=False),
    "present_velocity": Field(128, 4, signed=True, writable=False),
    "present_position": Field(132, 4, signed=True, writable=False),
    "velocity_trajectory": Field(136, 4, signed=True, writable=False),
    "position_trajectory": Field(140, 4, signed=True, writable=False),
    "present_input_voltage": Field(144, 2, writable=False),
    "present_temperature": Field(146, 1, writable=False),
}
TABLE_SIZE = 147
XM430_W350_MODEL = 1020
_FORMATS = {(1, False): "<B", (1, True): "<b", (2, False): "<H", (2, True): "<h",
            (4, False): "<I", (4, True): "<i"}
_BY_ADDRESS = {f.address: f for f in XM430.values()}
_READ_ONLY = {a for f in XM430.values() if not f.writable for a in range(f.address, f.address + f.size)}
_EEPROM_END = 64
#: Position range of extended position mode [ticks].
EXTENDED_RANGE = 1_048_575
#: Present Velocity / Velocity Limit unit [ticks/s] (0.229 rpm at 4096 ticks/turn).
VELOCITY_UNIT_TICKS_S = 0.229 / 60.0 * 4096.0
#: Tracking time constant of the emulated position controller [s].
TRACKING_TIME_CONSTANT_S = 0.02


class EmulatedServo:
    """One X-series servo: control table, access rules, shaft motion."""

    def __init__(self, dxl_id: int, model_number: int = XM430_W350_MODEL) -> None:
        self.table = bytearray(TABLE_SIZE)
        self.dxl_id = dxl_id
        for name, value in {
            "model_number": model_number, "firmware_version": 48, "id": dxl_id,
            "baud_rate": 3, "return_delay_time": 250, "operating_mode": 3, "protocol_type": 2,
            "moving_threshold": 10, "temperature_limit": 80, "max_voltage_limit": 160,
            "min_voltage_limit": 95, "pwm_limit": 885, "current_limit": 1193,
            "velocity_limit": 200, "max_position_limit": 4095, "min_position_limit": 0,
            "shutdown": 52, "status_return_level": 2, "velocity_i_gain": 1920,
            "velocity_p_gain": 100, "position_p_gain": 800, "present_input_voltage": 120,
            "present_temperature": 36, "present_position": 2048, "goal_position": 2048,
        }.items():
            self.set(name, value)
        self._position = 2048.0  # ticks, continuous
        self._time = time.monotonic()
        self.goal_writes: list[int] = []  # accepted Goal Position writes [ticks]
        self.rejected_goals: list[int] = []  # Goal Position writes refused (Data Limit)

    # register access
    def get(self, name: str) -> int:
        f = XM430[name]
        return struct.unpack_from(_FORMATS[f.size, f.signed], self.table, f.address)[0]

    def set(self, name: str, value: int) -> None:
        f = XM430[name]
        struct.pack_into(_FORMATS[f.size, f.signed], self.table, f.address, int(value))

    @property
    def alert(self) -> int:
        return ERR_ALERT if self.get("hardware_error_status") else 0

    def advance(self, now: float) -> None:
        """Move the shaft toward the goal over the time since the last call."""
        dt = max(0.0, now - self._time)
        self._time = now
        goal = float(self.get("goal_position"))
        if self.get("torque_enable") and dt > 0.0:
            step = (goal - self._position) * -math.expm1(-dt / TRACKING_TIME_CONSTANT_S)
            vmax = self.get("velocity_limit") * VELOCITY_UNIT_TICKS_S * dt
            step = max(-vmax, min(vmax, step))
            self._position += step
            velocity = step / dt
            current = max(-1193, min(1193, round(0.5 * (goal - self._position))))
        else:
            velocity, current = 0.0, 0
        self.set("present_position", round(self._position))
        self.set("present_velocity", round(velocity / VELOCITY_UNIT_TICKS_S))
        self.set("present_current", current)
        self.set("moving", int(abs(velocity) > self.get("moving_threshold") * VELOCITY_UNIT_TICKS_S))
        self.set("realtime_tick", int(now * 1000) % 32768)

    def read(self, address: int, length: int) -> tuple[int, bytes]:
        if length < 1 or address + length > TABLE_SIZE:
            return ERR_ACCESS, b""
        self.advance(time.monotonic())
        return 0, bytes(self.table[address : address + length])

    def write(self, address: int, data: bytes) -> int:
        """Apply a write; returns the Protocol 2.0 error number (0 = accepted)."""
        end = address + len(data)
        if not data or end > TABLE_SIZE or any(a in _READ_ONLY for a in range(address, end)):
            return ERR_ACCESS
        if address < _EEPROM_END and self.get("torque_enable"):
            return ERR_ACCESS
        self.advance(time.monotonic())
        goal = XM430["goal_position"]
        if address <= goal.address < end:
            if address != goal.address or len(data) < goal.size:
                return ERR_DATA_LENGTH
            ticks = struct.unpack_from("<i", data, 0)[0]
            if self.get("operating_mode") == 3:
                lo, hi = self.get("min_position_limit"), self.get("max_position_limit")
            else:
                lo, hi = -EXTENDED_RANGE, EXTENDED_RANGE
            if not lo <= ticks <= hi:
                self.rejected_goals.append(ticks)
                return ERR_DATA_LIMIT
            self.goal_writes.append(ticks)
        torque = XM430["torque_enable"].address
        if address <= torque < end:
            value = data[torque - address]
            if value > 1:
                return ERR_DATA_RANGE
            if value and self.get("hardware_error_status"):
                return ERR_RESULT_FAIL  # torque cannot be enabled until a reboot
        self.table[address:end] = data
        return 0

    def raise_hardware_error(self, bits: int) -> None:
        self.set("hardware_error_status", bits)
        self.set("torque_enable", 0)

    def reboot(self) -> None:
        self.set("hardware_error_status", 0)
        self.set("torque_enable", 0)


@dataclass
class _Faults:
    muted: set[int] = field(default_factory=set)
    bad_crc: set[int] = field(default_factory=set)


class DynamixelEmulator(PtyEmulator):
    """A bus of emulated X-series servos behind a pseudo-terminal.

    Args:
        ids: Servo IDs on the bus.
        model_number: Model Number register of every servo (1020 = XM430-W350).

    Use as a context manager (starts and stops the thread) and give ``port_name`` to the
    driver. ``servos[id]`` exposes each servo's control table and goal history.
    """

    thread_name = "dynamixel-emulator"

    def __init__(self, ids: list[int] | tuple[int, ...], model_number: int = XM430_W350_MODEL) -> None:
        super().__init__()
        self.servos = {i: EmulatedServo(i, model_number) for i in ids}
        self._faults = _Faults()
        self._decoder = PacketDecoder()
        self.instructions_received = 0
        self.crc_errors_received = 0
        self.unplugged = False
        self._busy = False  # bytes read but not yet handled

    # fault injection
    def mute(self, dxl_id: int, muted: bool = True) -> None:
        """Servo ``dxl_id`` stops (or resumes) sending status packets."""
        with self._lock:
            (self._faults.muted.add if muted else self._faults.muted.discard)(dxl_id)

    def corrupt_crc(self, dxl_id: int, corrupt: bool = True) -> None:
        """Status packets of ``dxl_id`` get a wrong CRC (or correct ones again)."""
        with self._lock:
            (self._faults.bad_crc.add if corrupt else self._faults.bad_crc.discard)(dxl_id)

    def raise_hardware_error(self, dxl_id: int, bits: int = 1 << 5) -> None:
        """Set Hardware Error Status ``bits`` (default: overload), torque drops."""
        with self._lock:
            self.servos[dxl_id].raise_hardware_error(bits)

    def unplug(self) -> None:
        """Close the pseudo-terminal: the driver's port starts failing with I/O errors."""
        self.stop()
        self.unplugged = True

    def wait_until_idle(self, timeout: float = 1.0) -> bool:
        """Wait until every byte written to the bus has been handled; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._master < 0:
                    return True
                pending, _, _ = select.select([self._master], [], [], 0)
                if not pending and not self._busy:
                    return True
            time.sleep(0.001)
        return False

    def register(self, dxl_id: int, name: str) -> int:
        with self._lock:
            return self.servos[dxl_id].get(name)

    # serving
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._master], [], [], 0.02)
                if not ready:
                    continue
                with self._lock:
                    data = os.read(self._master, 4096)
                    self._busy = True
            except (OSError, ValueError):
                # No client has the slave open, or the pty was closed: wait and retry.
                time.sleep(0.005)
                continue
            try:
                for packet in self._decoder.feed(data):
                    reply = self._handle(packet)
                    if reply:
                        try:
                            os.write(self._master, reply)
                        except OSError:
                            pass
            finally:
                self._busy = False

    def _status(self, servo: EmulatedServo, error: int, params: bytes = b"") -> bytes:
        """Status packet of ``servo`` honouring mute / bad CRC faults (lock held)."""
        if servo.dxl_id in self._faults.muted:
            return b""
        return encode_status(
            servo.dxl_id, error | servo.alert, params, bad_crc=servo.dxl_id in self._faults.bad_crc
        )

    def _handle(self, p: DecodedPacket) -> bytes:
        with self._lock:
            self.instructions_received += 1
            target = self.servos.get(p.dxl_id)
            if not p.crc_ok:
                self.crc_errors_received += 1
                return self._status(target, ERR_CRC) if target is not None else b""
            if p.dxl_id == BROADCAST_ID:
                return self._handle_broadcast(p)
            if target is None:
                return b""
            if p.instruction == INST_PING:
                return self._status(target, 0, struct.pack("<HB", target.get("model_number"),
                                                           target.get("firmware_version")))
            if p.instruction == INST_READ:
                if len(p.params) != 4:
                    return self._status(target, ERR_DATA_LENGTH)
                address, length = struct.unpack("<HH", p.params)
                error, data = target.read(address, length)
                return self._status(target, error, data)
            if p.instruction == INST_WRITE:
                if len(p.params) < 3:
                    return self._status(target, ERR_DATA_LENGTH)
                address = struct.unpack_from("<H", p.params)[0]
                return self._status(target, target.write(address, p.params[2:]))
            if p.instruction == INST_REBOOT:
                target.reboot()
                return self._status(target, 0)
            return self._status(target, ERR_INSTRUCTION)

    def _handle_broadcast(self, p: DecodedPacket) -> bytes:
        if p.instruction == INST_PING:
            return b"".join(
                self._status(s, 0, struct.pack("<HB", s.get("model_number"), s.get("firmware_version")))
                for s in self.servos.values()
            )
        if p.instruction == INST_SYNC_READ and len(p.params) >= 4:
            address, length = struct.unpack_from("<HH", p.params)
            replies = []
            for dxl_id in p.params[4:]:
                servo = self.servos.get(dxl_id)
                if servo is not None:
                    error, data = servo.read(address, length)
                    replies.append(self._status(servo, error, data))
            return b"".join(replies)
        if p.instruction == INST_SYNC_WRITE and len(p.params) >= 4:
            address, length = struct.unpack_from("<HH", p.params)
            records = p.params[4:]
            for k in range(0, len(records) - length, length + 1):
                servo = self.servos.get(records[k])
                if servo is not None:
                    servo.write(address, records[k + 1 : k + 1 + length])
            return b""
        return b""  # other broadcast instructions: no status packet
