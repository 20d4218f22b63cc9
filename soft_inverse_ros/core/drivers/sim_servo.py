"""Simulated servos: dead time, rate limit and first-order lag, driven by the caller's clock.

Each servo's shaft angle q follows its goal g delayed by the dead time T_d:

    dq/dt = clip((g(t − T_d) − q) / τ, −v_max, v_max)

integrated exactly for the lag between calls (piecewise-constant delayed goal), with the
per-step change capped at v_max·dt. With τ = 0 the shaft moves at v_max until it reaches
the goal. Time comes from the ``now`` arguments, so a simulated robot can run it on
simulation time.

Faults can be injected (``mute``, ``inject_hardware_error``, ``unplug``) to exercise the
driver's safety layer without a bus.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from soft_inverse_ros.core.drivers.driver_state import PortError
from soft_inverse_ros.core.drivers.servo_backend import ServoBackend, ServoSample
from soft_inverse_ros.core.drivers.servo_config import SimServoConfig


class SimServoBackend(ServoBackend):
    """n simulated servos.

    Args:
        config: Dynamics (time constant, dead time, speed limit).
        position_limits: (lower, upper) shaft limits [rad].
        initial_position: (n,) initial shaft angles [rad].
    """

    #: Values reported as device health (a healthy servo at room temperature on 12 V).
    VOLTAGE_V = 12.0
    TEMPERATURE_C = 35.0

    def __init__(
        self,
        config: SimServoConfig,
        position_limits: tuple[np.ndarray, np.ndarray],
        initial_position: np.ndarray,
    ) -> None:
        super().__init__(position_limits)
        self.config = config
        n = self.size
        self.position = np.array(initial_position, dtype=float).reshape(n)
        self.velocity = np.zeros(n)
        self.torque = np.zeros(n, dtype=bool)
        self._goal = self.position.copy()  # goal in effect (after dead time)
        self._pending: deque[tuple[float, np.ndarray]] = deque()  # (effective time, goal)
        self._time: float | None = None
        self._open = False
        self.muted = np.zeros(n, dtype=bool)
        self.hardware_error = np.zeros(n, dtype=np.int64)
        self._unplugged = False

    # -- fault injection -------------------------------------------------------------
    def mute(self, index: int, muted: bool = True) -> None:
        """Servo ``index`` stops (or resumes) answering."""
        self.muted[index] = muted

    def inject_hardware_error(self, index: int, bits: int) -> None:
        """Servo ``index`` raises Hardware Error Status ``bits`` and drops its torque."""
        self.hardware_error[index] = bits
        self.torque[index] = False

    def unplug(self) -> None:
        """The port disappears: every later call raises PortError."""
        self._unplugged = True

    def _check_port(self) -> None:
        if self._unplugged:
            raise PortError("simulated servo port unplugged")
        if not self._open:
            raise PortError("simulated servo port is not open")

    # -- dynamics --------------------------------------------------------------------
    def advance(self, now: float) -> None:
        """Integrate the shaft motion up to time ``now`` [s]."""
        if self._time is None:
            self._time = now
            return
        t = self._time
        while t < now:
            t_next = now
            if self._pending and self._pending[0][0] <= now:
                t_next = max(self._pending[0][0], t)
            self._integrate(t_next - t)
            t = t_next
            while self._pending and self._pending[0][0] <= t:
                self._goal = self._pending.popleft()[1]
        self._time = max(self._time, now)

    def _integrate(self, dt: float) -> None:
        if dt <= 0.0:
            return
        cfg = self.config
        error = np.where(self.torque, self._goal - self.position, 0.0)
        if cfg.time_constant_s > 0.0:
            step = error * -np.expm1(-dt / cfg.time_constant_s)
        else:
            step = error
        vmax_step = cfg.max_velocity_rad_s * dt
        step = np.clip(step, -vmax_step, vmax_step)
        self.position = self.position + step
        self.velocity = step / dt

    # -- ServoBackend ----------------------------------------------------------------
    def open(self) -> list[str]:
        if self._unplugged:
            raise PortError("simulated servo port unplugged")
        self._open = True
        self.torque[:] = False
        return [
            "no answer to ping" if self.muted[i]
            else f"hardware error 0x{self.hardware_error[i]:02x}" if self.hardware_error[i]
            else ""
            for i in range(self.size)
        ]

    def close(self) -> None:
        self._open = False

    def set_torque(self, enabled: bool, mask: np.ndarray, confirm: bool = True) -> np.ndarray:
        self._check_port()
        mask = np.asarray(mask, dtype=bool)
        reachable = mask & ~self.muted
        if enabled:
            reachable &= self.hardware_error == 0
            # Like X-series servos: enabling torque holds the current angle.
            self._goal = np.where(reachable & ~self.torque, self.position, self._goal)
        self.torque = np.where(reachable, enabled, self.torque)
        return reachable if (confirm or enabled) else np.zeros(self.size, dtype=bool)

    def write_goal(self, now: float, position: np.ndarray, mask: np.ndarray) -> None:
        self._check_port()
        mask = np.asarray(mask, dtype=bool) & ~self.muted
        goal = self.clip_goal(position, mask)
        self.advance(now)
        # A goal is latched only by servos that receive it (and have torque on).
        latest = self._pending[-1][1] if self._pending else self._goal
        new_goal = np.where(mask & self.torque, goal, latest)
        self._pending.append((now + self.config.dead_time_s, new_goal))
        self.advance(now)

    def read(self, now: float, mask: np.ndarray) -> ServoSample:
        self._check_port()
        self.advance(now)
        mask = np.asarray(mask, dtype=bool)
        answered = mask & ~self.muted
        nan = np.full(self.size, np.nan)
        errors = tuple(
            "" if answered[i] else ("no status packet" if mask[i] else "not read")
            for i in range(self.size)
        )
        return ServoSample(
            position=np.where(answered, self.position, nan),
            velocity=np.where(answered, self.velocity, nan),
            current=nan.copy(),
            effort=nan.copy(),
            voltage=np.where(answered, self.VOLTAGE_V, nan),
            temperature=np.where(answered, self.TEMPERATURE_C, nan),
            hardware_error=np.where(answered, self.hardware_error, 0),
            answered=answered,
            errors=errors,
        )
