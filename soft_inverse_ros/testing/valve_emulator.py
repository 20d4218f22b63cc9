"""The valve board (``firmware/valve_controller``) emulated on a pseudo-terminal.

A background thread decodes host frames, runs
:class:`~soft_inverse_ros.core.drivers.valve_device_model.ValveDeviceModel` on simulated
chambers in real time (``time.monotonic``), and answers like the firmware: a NACK
BAD_CRC for a corrupted frame, one reply per valid frame. Between frames it keeps
ticking, so the board's watchdog and overpressure vents happen on their own.

Faults to inject: :meth:`ValveEmulator.mute` (no replies), :meth:`~ValveEmulator.corrupt_crc`
(replies with a wrong checksum), :meth:`~ValveEmulator.sensor_fault` (a sensor reading
out of range) and :meth:`~ValveEmulator.unplug` (closes the pseudo-terminal).
"""

from __future__ import annotations

import os
import select
import struct
import time

from soft_inverse_ros.core.drivers import valve_protocol as vp
from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticChambers, PneumaticParams
from soft_inverse_ros.testing.pty_emulator import PtyEmulator
from soft_inverse_ros.core.drivers.valve_device_model import ValveDeviceModel

#: Period of the board's main loop between frames [s].
TICK_S = 0.002


class ValveEmulator(PtyEmulator):
    """A valve board behind a pseudo-terminal; give ``port_name`` to the driver.

    Args:
        params: Pneumatic model per channel.
        sensor_mask: Bit c set when channel c has a sensor.
        sensor_noise_pa: Sensor noise [Pa].
    """

    thread_name = "valve-emulator"

    def __init__(self, params: list[PneumaticParams], sensor_mask: int, sensor_noise_pa: float = 0.0) -> None:
        super().__init__()
        self.device = ValveDeviceModel(PneumaticChambers(params), sensor_mask, sensor_noise_pa)
        self._decoder = vp.FrameDecoder()
        self._muted = False
        self._bad_crc = False
        self.frames_received = 0
        self.bad_frames_received = 0
        self.received_types: list[int] = []

    # fault injection
    def mute(self, muted: bool = True) -> None:
        with self._lock:
            self._muted = muted

    def corrupt_crc(self, corrupt: bool = True) -> None:
        with self._lock:
            self._bad_crc = corrupt

    def sensor_fault(self, channel: int, fault: bool = True) -> None:
        with self._lock:
            self.device.sensor_fault[channel] = fault

    def unplug(self) -> None:
        self.stop()

    def pressures(self) -> list[float]:
        """True chamber pressures now [Pa]."""
        with self._lock:
            self.device.tick(time.monotonic())
            return [float(p) for p in self.device.chambers.pressure]

    def flags(self) -> vp.Flags:
        with self._lock:
            self.device.tick(time.monotonic())
            return self.device.flags

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._master], [], [], TICK_S)
                data = os.read(self._master, 4096) if ready else b""
            except (OSError, ValueError):
                time.sleep(TICK_S)
                data = b""
            with self._lock:
                now = time.monotonic()
                self.device.tick(now)
                replies = [self._reply(now, frame) for frame in self._decoder.feed(data)]
                muted, bad_crc = self._muted, self._bad_crc
            for reply in replies:
                if muted or not reply:
                    continue
                if bad_crc:
                    reply = reply[:-2] + struct.pack("<H", struct.unpack("<H", reply[-2:])[0] ^ 0xBEEF)
                try:
                    os.write(self._master, reply)
                except OSError:
                    pass

    def _reply(self, now: float, frame: vp.Frame) -> bytes:
        if not frame.crc_ok:
            self.bad_frames_received += 1
            return vp.encode_frame(vp.MsgType.NACK, frame.seq, bytes([vp.NackCode.BAD_CRC, frame.msg_type]))
        self.frames_received += 1
        self.received_types.append(frame.msg_type)
        msg_type, payload = self.device.handle(now, frame.msg_type, frame.payload)
        return vp.encode_frame(msg_type, frame.seq, payload)
