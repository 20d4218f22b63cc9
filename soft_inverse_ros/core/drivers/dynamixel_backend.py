"""Dynamixel X-series servos over Protocol 2.0, through the ROBOTIS ``dynamixel-sdk``.

Per command period the backend sends one SYNC WRITE of Goal Position (116, 4 bytes) and
one SYNC READ of the block Present Current … Present Temperature (126–146, 21 bytes).
Status packets are collected one by one with the SDK's ``rxPacket`` so that each servo's
error byte is seen (the SDK's GroupSyncRead drops it, and stops at the first missing
servo); a servo missing from the sync read is then read on its own, so one silent servo
cannot hide the others. A status with the Alert bit set triggers a read of Hardware
Error Status (70).

Control-table addresses are those of X-series servos (XM430, XL430, XM540, ...).
"""

from __future__ import annotations

import struct
import termios
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import serial
from dynamixel_sdk import COMM_SUCCESS, GroupSyncWrite, PacketHandler, PortHandler
from dynamixel_sdk.robotis_def import COMM_RX_CORRUPT, COMM_RX_TIMEOUT

from soft_inverse_ros.core.drivers.driver_state import PortError
from soft_inverse_ros.core.drivers.servo_backend import ServoBackend, ServoSample
from soft_inverse_ros.core.drivers.servo_config import DynamixelConfig

# X-series control table (Protocol 2.0).
ADDR_OPERATING_MODE = 11
ADDR_MAX_POSITION_LIMIT = 48
ADDR_MIN_POSITION_LIMIT = 52
ADDR_TORQUE_ENABLE = 64
ADDR_HARDWARE_ERROR_STATUS = 70
ADDR_PROFILE_VELOCITY = 112
ADDR_GOAL_POSITION = 116
ADDR_PRESENT_CURRENT = 126
ADDR_PRESENT_VELOCITY = 128
ADDR_PRESENT_POSITION = 132
ADDR_PRESENT_INPUT_VOLTAGE = 144
ADDR_PRESENT_TEMPERATURE = 146
#: Sync-read block: Present Current (126) … Present Temperature (146).
READ_START = ADDR_PRESENT_CURRENT
READ_LENGTH = ADDR_PRESENT_TEMPERATURE + 1 - ADDR_PRESENT_CURRENT
ERRBIT_ALERT = 0x80
#: Attempts of a ping / register write during lifecycle transitions before giving up
#: (a lost packet is not a fault; periodic reads have their own tolerance).
TRANSITION_ATTEMPTS = 3

_PORT_ERRORS = (OSError, termios.error, serial.SerialException)


#: Longest a single port read blocks waiting for bytes [s].
READ_BLOCK_S = 0.001


class _TimedPortHandler(PortHandler):
    """PortHandler with a configurable USB latency (the SDK's is 16 ms) and blocking reads."""

    def __init__(self, port_name: str, latency_ms: float) -> None:
        super().__init__(port_name)
        self.latency_ms = latency_ms

    def setupPort(self, cflag_baud: int) -> bool:  # noqa: N802 (SDK API)
        opened = super().setupPort(cflag_baud)
        # The SDK polls with timeout=0 (a busy loop); a short blocking read waits for
        # bytes without burning the CPU, returning as soon as the requested bytes are in.
        self.ser.timeout = READ_BLOCK_S
        return opened

    def setPacketTimeout(self, packet_length: int) -> None:  # noqa: N802 (SDK API)
        self.packet_start_time = self.getCurrentTime()
        self.packet_timeout = self.tx_time_per_byte * packet_length + 2.0 * self.latency_ms + 2.0


class DynamixelBackend(ServoBackend):
    """n Dynamixel servos on one Protocol 2.0 bus.

    Args:
        config: Bus settings (port, baud rate, operating mode, units).
        ids: Servo IDs in actuator order.
        position_limits: (lower, upper) shaft angle limits [rad].
    """

    def __init__(
        self,
        config: DynamixelConfig,
        ids: tuple[int, ...],
        position_limits: tuple[np.ndarray, np.ndarray],
    ) -> None:
        super().__init__(position_limits)
        if len(ids) != self.size:
            raise ValueError(f"{len(ids)} servo ids for {self.size} position limits")
        self.config = config
        self.ids = tuple(ids)
        scale = config.ticks_per_rad
        lo_t, hi_t = config.tick_range
        # Device limits in ticks: inside the driver limits, then inside the mode's range.
        self.tick_lower = np.clip(np.ceil(self.position_lower * scale - 1e-9), lo_t, hi_t).astype(np.int64)
        self.tick_upper = np.clip(np.floor(self.position_upper * scale + 1e-9), lo_t, hi_t).astype(np.int64)
        self._port: _TimedPortHandler | None = None
        self._packet = PacketHandler(2.0)

    @property
    def measures_tension(self) -> bool:
        """Present Current × ``torque_constant_nm_per_a`` = shaft torque (only with one).

        No Current Limit / Goal Current is written: in the position modes the servo does
        not enforce them (only ``current_based_position`` does); the driver's
        ``max_force_n`` acts on the measured current instead."""
        return self.config.torque_constant_nm_per_a is not None

    # -- helpers ---------------------------------------------------------------------
    @contextmanager
    def _io(self, what: str) -> Iterator[_TimedPortHandler]:
        """Run SDK calls, turning serial failures into PortError."""
        if self._port is None or not self._port.is_open:
            raise PortError(f"{what}: port {self.config.port} is not open")
        try:
            yield self._port
        except _PORT_ERRORS as exc:
            self._port.is_using = False
            raise PortError(f"{what} on {self.config.port}: {exc}") from exc

    def _result_text(self, result: int, error: int) -> str:
        """"" for success, else the SDK's description of the failure."""
        if result != COMM_SUCCESS:
            return self._packet.getTxRxResult(result).replace("[TxRxResult] ", "")
        if error & ~ERRBIT_ALERT:
            return self._packet.getRxPacketError(error & ~ERRBIT_ALERT).replace("[RxPacketError] ", "")
        return ""

    def _write_register(self, port: PortHandler, dxl_id: int, address: int, size: int, value: int) -> str:
        write = {1: self._packet.write1ByteTxRx, 2: self._packet.write2ByteTxRx,
                 4: self._packet.write4ByteTxRx}[size]
        for _ in range(TRANSITION_ATTEMPTS):
            result, error = write(port, dxl_id, address, value & ((1 << (8 * size)) - 1))
            if result == COMM_SUCCESS:
                break  # a device error (in ``error``) would repeat: do not retry it
        text = self._result_text(result, error)
        return f"write of register {address} failed: {text}" if text else ""

    def ticks_from_position(self, position: np.ndarray) -> np.ndarray:
        return np.rint(np.asarray(position, dtype=float) * self.config.ticks_per_rad).astype(np.int64)

    def position_from_ticks(self, ticks: np.ndarray) -> np.ndarray:
        return np.asarray(ticks, dtype=float) / self.config.ticks_per_rad

    # -- ServoBackend ----------------------------------------------------------------
    def open(self) -> list[str]:
        self.close()
        port = _TimedPortHandler(self.config.port, self.config.latency_timer_ms)
        try:
            opened = port.setBaudRate(self.config.baud_rate)  # opens the port
        except _PORT_ERRORS as exc:
            raise PortError(f"cannot open {self.config.port}: {exc}") from exc
        if not opened:
            raise PortError(f"cannot open {self.config.port} at {self.config.baud_rate} baud")
        self._port = port
        problems = []
        with self._io("configure") as port:
            for i, dxl_id in enumerate(self.ids):
                problems.append(self._prepare_servo(port, i, dxl_id))
        return problems

    def _prepare_servo(self, port: PortHandler, i: int, dxl_id: int) -> str:
        for _ in range(TRANSITION_ATTEMPTS):
            model, result, error = self._packet.ping(port, dxl_id)
            text = self._result_text(result, error)
            if not text:
                break
        if text:
            return f"no answer to ping ({text})"
        expected = self.config.expected_model_number
        if expected is not None and model != expected:
            return f"model number {model}, expected {expected}"
        if error & ERRBIT_ALERT:
            bits, result, error = self._packet.read1ByteTxRx(port, dxl_id, ADDR_HARDWARE_ERROR_STATUS)
            if self._result_text(result, error):  # the alert is real, its bits unknown
                return "hardware error (alert bit set; status unreadable) (reboot the servo)"
            return f"hardware error 0x{bits:02x} (reboot the servo)"
        cfg = self.config
        writes = [
            (ADDR_TORQUE_ENABLE, 1, 0),
            (ADDR_OPERATING_MODE, 1, cfg.operating_mode_value),
            (ADDR_PROFILE_VELOCITY, 4, cfg.profile_velocity),
        ]
        if cfg.write_position_limits and cfg.operating_mode == "position":
            writes += [
                (ADDR_MAX_POSITION_LIMIT, 4, int(self.tick_upper[i])),
                (ADDR_MIN_POSITION_LIMIT, 4, int(self.tick_lower[i])),
            ]
        for address, size, value in writes:
            text = self._write_register(port, dxl_id, address, size, value)
            if text:
                return text
        return ""

    def close(self) -> None:
        if self._port is not None:
            try:
                if self._port.is_open:
                    self._port.closePort()
            except _PORT_ERRORS:
                pass
            self._port = None

    def set_torque(self, enabled: bool, mask: np.ndarray, confirm: bool = True) -> np.ndarray:
        mask = np.asarray(mask, dtype=bool)
        ok = np.zeros(self.size, dtype=bool)
        with self._io("torque " + ("on" if enabled else "off")) as port:
            if not enabled:
                # One broadcast first: reaches every live servo even if some are silent.
                group = GroupSyncWrite(port, self._packet, ADDR_TORQUE_ENABLE, 1)
                for i in np.flatnonzero(mask):
                    group.addParam(self.ids[i], [0])
                if group.txPacket() != COMM_SUCCESS:
                    raise PortError(f"torque off: cannot write to {self.config.port}")
                if not confirm:
                    return ok
            for i in np.flatnonzero(mask):
                ok[i] = not self._write_register(port, self.ids[i], ADDR_TORQUE_ENABLE, 1, int(enabled))
        return ok

    def write_goal(self, now: float, position: np.ndarray, mask: np.ndarray) -> None:
        mask = np.asarray(mask, dtype=bool)
        q = self.clip_goal(position, mask)
        ticks = self.ticks_from_position(q)
        # Rounding to ticks must not leave the device limits either.
        ticks = np.clip(ticks, self.tick_lower, self.tick_upper)
        selected = np.flatnonzero(mask)
        if selected.size == 0:
            return
        with self._io("goal write") as port:
            group = GroupSyncWrite(port, self._packet, ADDR_GOAL_POSITION, 4)
            for i in selected:
                group.addParam(self.ids[i], list(struct.pack("<i", int(ticks[i]))))
            result = group.txPacket()
            if result != COMM_SUCCESS:
                raise PortError(f"goal write: {self._result_text(result, 0)}")

    def read(self, now: float, mask: np.ndarray) -> ServoSample:
        mask = np.asarray(mask, dtype=bool)
        n = self.size
        raw: dict[int, tuple[int, bytes]] = {}
        errors = ["" if mask[i] else "not read" for i in range(n)]
        wanted = [self.ids[i] for i in np.flatnonzero(mask)]
        index = {dxl_id: i for i, dxl_id in enumerate(self.ids)}
        if wanted:
            with self._io("sync read") as port:
                self._sync_read(port, wanted, raw, errors, index)
                for dxl_id in wanted:  # silent in the sync read: ask it alone
                    if dxl_id not in raw:
                        data, result, error = self._packet.readTxRx(port, dxl_id, READ_START, READ_LENGTH)
                        text = self._result_text(result, error)
                        if text:
                            i = index[dxl_id]
                            errors[i] = f"{errors[i]}; alone: {text}" if errors[i] else text
                        else:
                            raw[dxl_id] = (error, bytes(data))
                hw_errors = {}
                for dxl_id, (error, _) in raw.items():
                    if error & ERRBIT_ALERT:
                        bits, result, err = self._packet.read1ByteTxRx(
                            port, dxl_id, ADDR_HARDWARE_ERROR_STATUS
                        )
                        # Alert bit with an unreadable status: still a hardware error.
                        hw_errors[dxl_id] = bits if result == COMM_SUCCESS and bits else 0xFF
        return self._sample(raw, errors, index, hw_errors if wanted else {})

    def _sync_read(
        self,
        port: PortHandler,
        wanted: list[int],
        raw: dict[int, tuple[int, bytes]],
        errors: list[str],
        index: dict[int, int],
    ) -> None:
        result = self._packet.syncReadTx(port, READ_START, READ_LENGTH, wanted, len(wanted), False)
        if result != COMM_SUCCESS:
            raise PortError(f"sync read: {self._result_text(result, 0)}")
        pending = set(wanted)
        for _ in range(2 * len(wanted) + 2):
            packet, result = self._packet.rxPacket(port, False)
            if result == COMM_SUCCESS:
                dxl_id = packet[4]
                if dxl_id in pending:
                    pending.discard(dxl_id)
                    error = packet[8]
                    text = self._result_text(COMM_SUCCESS, error)
                    if text:
                        errors[index[dxl_id]] = text
                    else:
                        raw[dxl_id] = (error, bytes(packet[9 : 9 + READ_LENGTH]))
            elif result == COMM_RX_CORRUPT:
                dxl_id = packet[4] if len(packet) > 4 else -1
                if dxl_id in pending:
                    errors[index[dxl_id]] = "status packet failed its CRC check"
            if result == COMM_RX_TIMEOUT or not pending:
                break
            if result not in (COMM_SUCCESS, COMM_RX_CORRUPT):
                break
        for dxl_id in pending:
            i = index[dxl_id]
            if not errors[i]:
                errors[i] = "no status packet"

    def _sample(
        self,
        raw: dict[int, tuple[int, bytes]],
        errors: list[str],
        index: dict[int, int],
        hw_errors: dict[int, int],
    ) -> ServoSample:
        n = self.size
        cfg = self.config
        current = np.full(n, np.nan)
        velocity = np.full(n, np.nan)
        ticks = np.full(n, np.nan)
        voltage = np.full(n, np.nan)
        temperature = np.full(n, np.nan)
        hardware = np.zeros(n, dtype=np.int64)
        answered = np.zeros(n, dtype=bool)
        for dxl_id, (_, data) in raw.items():
            i = index[dxl_id]
            if len(data) < READ_LENGTH:
                errors[i] = f"short status packet ({len(data)} of {READ_LENGTH} bytes)"
                continue
            c, v, p = struct.unpack_from("<hii", data, 0)
            current[i], velocity[i], ticks[i] = c, v, p
            voltage[i] = struct.unpack_from("<H", data, ADDR_PRESENT_INPUT_VOLTAGE - READ_START)[0]
            temperature[i] = data[ADDR_PRESENT_TEMPERATURE - READ_START]
            hardware[i] = hw_errors.get(dxl_id, 0)
            answered[i] = True
            errors[i] = ""
        current_a = current * cfg.current_unit_a
        effort = (
            current_a * cfg.torque_constant_nm_per_a
            if cfg.torque_constant_nm_per_a is not None
            else np.full(n, np.nan)
        )
        return ServoSample(
            position=self.position_from_ticks(ticks),
            velocity=velocity * cfg.velocity_unit_rad_s,
            current=current_a,
            effort=effort,
            voltage=voltage * cfg.voltage_unit_v,
            temperature=temperature,
            hardware_error=hardware,
            answered=answered,
            errors=tuple(errors),
        )
