"""The valve microcontroller's behaviour in Python, on simulated chambers.

Mirrors ``firmware/valve_controller/valve_controller.ino`` message by message, so the
simulated backend and the pseudo-terminal emulator behave like the real board:

* boots vented (``VENT_BOOT``); SET_DUTY is refused until CONFIG; duties stay 0 until ARM;
* any latched vent (host VENT_ALL, watchdog, overpressure, boot) forces every duty to 0
  until ARM; ARM refuses to clear an overpressure that is still present;
* the watchdog (armed, configured) vents when no SET_DUTY / HEARTBEAT / ARM / CONFIG
  arrives within ``watchdog_ms``;
* a sensed pressure above its channel maximum latches ``VENT_OVERPRESSURE``; a sensor
  reading out of range raises ``SENSOR_FAULT`` and holds that channel at 0.

Time comes from the ``now`` arguments [s].
"""

from __future__ import annotations

import numpy as np

from soft_inverse_ros.core.drivers import valve_protocol as vp
from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticChambers

FIRMWARE_VERSION = 100  # 1.0.0
MAX_PWM_HZ = 500
MIN_WATCHDOG_MS = 10


class ValveDeviceModel:
    """One valve board with ``chambers.size`` channels.

    Args:
        chambers: Simulated chambers (one per channel, channel order).
        sensor_mask: Bit c set when channel c has a pressure sensor.
        sensor_noise_pa: Standard deviation of the sensor noise [Pa].
        seed: Noise seed.
    """

    def __init__(
        self,
        chambers: PneumaticChambers,
        sensor_mask: int,
        sensor_noise_pa: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.chambers = chambers
        n = chambers.size
        if not 1 <= n <= vp.MAX_CHANNELS:
            raise ValueError(f"valve board has 1..{vp.MAX_CHANNELS} channels, got {n}")
        self.n = n
        self.sensor_mask = sensor_mask & ((1 << n) - 1)
        self.has_sensor = np.array([bool(sensor_mask >> c & 1) for c in range(n)])
        self.sensor_noise_pa = sensor_noise_pa
        self._rng = np.random.default_rng(seed)
        self.flags = vp.Flags.VENT_BOOT
        self.pwm_hz = 60
        self.watchdog_ms = 100
        self.max_pressure = np.full(n, np.inf)
        self.duty_wire = np.zeros(n, dtype=np.int64)  # as commanded by the host
        self.sensor_fault = np.zeros(n, dtype=bool)
        self._last_feed: float | None = None

    @property
    def info(self) -> vp.DeviceInfo:
        return vp.DeviceInfo(vp.PROTOCOL_VERSION, self.n, self.sensor_mask, FIRMWARE_VERSION, MAX_PWM_HZ)

    def applied_duty_wire(self) -> np.ndarray:
        if self.flags & vp.Flags.latched():
            return np.zeros(self.n, dtype=np.int64)
        return np.where(self.sensor_fault, 0, self.duty_wire)

    def _sense(self) -> list[int | None]:
        p = self.chambers.pressure
        if self.sensor_noise_pa > 0.0:
            p = p + self._rng.normal(0.0, self.sensor_noise_pa, self.n)
        return [
            None if not self.has_sensor[c] else (-1 if self.sensor_fault[c] else int(round(p[c])))
            for c in range(self.n)
        ]

    def tick(self, now: float) -> None:
        """Advance the chambers and run the watchdog and pressure checks at ``now``."""
        self.chambers.advance(now)
        latched = bool(self.flags & vp.Flags.latched())
        if (
            not latched
            and self.flags & vp.Flags.CONFIGURED
            and self._last_feed is not None
            and (now - self._last_feed) * 1000.0 > self.watchdog_ms
        ):
            self._vent(now, vp.Flags.VENT_WATCHDOG)
        sensed = self.has_sensor & ~self.sensor_fault
        if np.any(sensed & (self.chambers.pressure > self.max_pressure)):
            self._vent(now, vp.Flags.VENT_OVERPRESSURE)
        if np.any(self.sensor_fault):
            self.flags |= vp.Flags.SENSOR_FAULT
        else:
            self.flags &= ~vp.Flags.SENSOR_FAULT
        self._apply(now)

    def _vent(self, now: float, reason: vp.Flags) -> None:
        self.flags |= reason
        self.duty_wire[:] = 0
        self.chambers.vent(now)

    def _apply(self, now: float) -> None:
        wanted = self.applied_duty_wire() / vp.DUTY_FULL_SCALE
        self.chambers.command(now, wanted)

    def _state(self) -> tuple[int, bytes]:
        payload = vp.encode_state(int(self.flags), self._sense(), list(self.applied_duty_wire()))
        return vp.MsgType.STATE, payload

    def _nack(self, code: vp.NackCode, msg_type: int) -> tuple[int, bytes]:
        return vp.MsgType.NACK, bytes([int(code), msg_type & 0xFF])

    def handle(self, now: float, msg_type: int, payload: bytes) -> tuple[int, bytes]:
        """Process one valid host frame; returns the reply (type, payload)."""
        self.tick(now)
        try:
            reply = self._dispatch(now, msg_type, payload)
        except vp.ProtocolError:
            return self._nack(vp.NackCode.BAD_LENGTH, msg_type)
        self.tick(now)
        return reply if reply is not None else self._state()

    def _dispatch(self, now: float, msg_type: int, payload: bytes) -> tuple[int, bytes] | None:
        T = vp.MsgType
        configured = bool(self.flags & vp.Flags.CONFIGURED)
        if msg_type == T.HELLO:
            return T.INFO, vp.encode_info(self.info)
        if msg_type == T.CONFIG:
            pwm_hz, watchdog_ms, max_pressure = vp.decode_config(payload)
            if not (1 <= pwm_hz <= MAX_PWM_HZ and watchdog_ms >= MIN_WATCHDOG_MS and len(max_pressure) == self.n):
                return self._nack(vp.NackCode.BAD_VALUE, msg_type)
            self.pwm_hz, self.watchdog_ms = pwm_hz, watchdog_ms
            self.max_pressure = np.array(max_pressure, dtype=float)
            self.flags |= vp.Flags.CONFIGURED
            self._last_feed = now
            return None
        if msg_type == T.ARM:
            if not configured:
                return self._nack(vp.NackCode.NOT_CONFIGURED, msg_type)
            self.flags &= ~(vp.Flags.VENT_HOST | vp.Flags.VENT_WATCHDOG | vp.Flags.VENT_BOOT)
            sensed = self.has_sensor & ~self.sensor_fault
            if not np.any(sensed & (self.chambers.pressure > self.max_pressure)):
                self.flags &= ~vp.Flags.VENT_OVERPRESSURE
            self.duty_wire[:] = 0
            self._last_feed = now
            return None
        if msg_type == T.SET_DUTY:
            if not configured:
                return self._nack(vp.NackCode.NOT_CONFIGURED, msg_type)
            duties = vp.decode_duties(payload)
            if len(duties) != self.n or max(duties) > vp.DUTY_FULL_SCALE:
                return self._nack(vp.NackCode.BAD_VALUE, msg_type)
            self._last_feed = now
            if not self.flags & vp.Flags.latched():
                self.duty_wire[:] = duties
            return None
        if msg_type == T.HEARTBEAT:
            if payload:
                raise vp.ProtocolError("HEARTBEAT has no payload")
            self._last_feed = now
            return None
        if msg_type == T.READ_STATE:
            if payload:
                raise vp.ProtocolError("READ_STATE has no payload")
            return None
        if msg_type == T.VENT_ALL:
            self._vent(now, vp.Flags.VENT_HOST)
            return None
        return self._nack(vp.NackCode.UNKNOWN_TYPE, msg_type)
