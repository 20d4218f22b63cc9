"""The interface every servo backend implements (real bus or simulation).

A backend talks to n servos in actuator order, in servo units: shaft angle [rad],
angular velocity [rad/s], current [A]. It holds no safety policy: the
:class:`~soft_inverse_ros.core.drivers.servo_driver.ServoDriver` decides what to send;
the backend only refuses, as a last line of defence, to send a goal outside the device
limits it was given (clipping it and counting it in ``device_clip_count``).

Port failures (unplugged adapter, closed pseudo-terminal) raise
:class:`~soft_inverse_ros.core.drivers.driver_state.PortError`; a servo that does not
answer is reported in the returned :class:`ServoSample`, never raised.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

#: X-series Hardware Error Status bits (register 70).
HARDWARE_ERROR_BITS = {
    0: "input voltage error",
    2: "overheating",
    3: "motor encoder error",
    4: "electrical shock",
    5: "overload",
}


def describe_hardware_error(bits: int) -> str:
    """Readable list of the Hardware Error Status bits set in ``bits``."""
    names = [text for bit, text in HARDWARE_ERROR_BITS.items() if bits >> bit & 1]
    unknown = bits & ~sum(1 << b for b in HARDWARE_ERROR_BITS)
    if unknown:
        names.append(f"unknown bits 0x{unknown:02x}")
    return ", ".join(names) if names else "none"


@dataclass(frozen=True)
class ServoSample:
    """One read of all servos, arrays of shape (n,) in actuator order.

    Values of servos that did not answer (or were not asked) are NaN; quantities a device
    does not report are NaN too.

    Attributes:
        position: Shaft angle [rad].
        velocity: Shaft angular velocity [rad/s].
        current: Motor current [A].
        effort: Shaft torque [N·m] (NaN unless the backend knows a torque constant).
        voltage: Input voltage [V].
        temperature: Internal temperature [°C].
        hardware_error: Hardware Error Status bits (0 = none; see HARDWARE_ERROR_BITS).
        answered: True where the servo returned a valid status.
        errors: Per servo, "" or a description of the communication failure.
    """

    position: np.ndarray
    velocity: np.ndarray
    current: np.ndarray
    effort: np.ndarray
    voltage: np.ndarray
    temperature: np.ndarray
    hardware_error: np.ndarray
    answered: np.ndarray
    errors: tuple[str, ...]

    @classmethod
    def empty(cls, n: int) -> "ServoSample":
        nan = np.full(n, np.nan)
        return cls(
            position=nan.copy(),
            velocity=nan.copy(),
            current=nan.copy(),
            effort=nan.copy(),
            voltage=nan.copy(),
            temperature=nan.copy(),
            hardware_error=np.zeros(n, dtype=np.int64),
            answered=np.zeros(n, dtype=bool),
            errors=("not read",) * n,
        )


class ServoBackend(ABC):
    """n servos on one bus (or simulated), in actuator order.

    Args:
        position_limits: (lower, upper) shaft angle limits [rad], arrays of shape (n,);
            goals outside are clipped to them before reaching the device.
    """

    def __init__(self, position_limits: tuple[np.ndarray, np.ndarray]) -> None:
        lo, hi = (np.asarray(x, dtype=float) for x in position_limits)
        if lo.shape != hi.shape or lo.ndim != 1 or np.any(lo > hi):
            raise ValueError(f"bad servo position limits {lo}, {hi}")
        self.position_lower = lo
        self.position_upper = hi
        #: Goals the backend had to clip (the driver should have clipped them already).
        self.device_clip_count = np.zeros(lo.shape[0], dtype=np.int64)

    @property
    def size(self) -> int:
        return int(self.position_lower.shape[0])

    @property
    def measures_tension(self) -> bool:
        """Whether :meth:`read` reports a shaft torque (``ServoSample.effort``), hence a cable
        tension the driver can limit (False: effort is NaN; ``max_force_n`` not enforced)."""
        return False

    @abstractmethod
    def open(self) -> list[str]:
        """Open the port, ping every servo and write its static settings (torque off).

        Returns:
            One entry per servo: "" when it answered and is usable, otherwise why not.

        Raises:
            PortError: the port cannot be opened.
        """

    @abstractmethod
    def close(self) -> None:
        """Close the port (idempotent; never raises)."""

    @abstractmethod
    def set_torque(self, enabled: bool, mask: np.ndarray, confirm: bool = True) -> np.ndarray:
        """Enable or disable torque of the servos where ``mask`` is True.

        Args:
            confirm: Wait for each servo's confirmation. ``False`` (disable only) sends
                one broadcast and returns at once: the fast path for faults, where a
                silent servo must not delay the others.

        Returns:
            (n,) bool, True where the servo confirmed the new state (all False when not
            confirmed).
        """

    @abstractmethod
    def write_goal(self, now: float, position: np.ndarray, mask: np.ndarray) -> None:
        """Send goal shaft angles [rad] to the servos where ``mask`` is True.

        Args:
            now: Current time [s] (used by simulations).
            position: (n,) goal angles; entries outside ``mask`` are ignored.
        """

    @abstractmethod
    def read(self, now: float, mask: np.ndarray) -> ServoSample:
        """Read the state of the servos where ``mask`` is True (others: NaN, not answered)."""

    def clip_goal(self, position: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Clip goals to the device limits, counting clipped entries (last line of defence)."""
        q = np.asarray(position, dtype=float)
        if q.shape != (self.size,):
            raise ValueError(f"goal shape {q.shape}, expected ({self.size},)")
        if np.any(mask & ~np.isfinite(q)):
            raise ValueError(f"non-finite servo goal {q}")
        clipped = np.clip(q, self.position_lower, self.position_upper)
        self.device_clip_count += (mask & (clipped != q)).astype(np.int64)
        return clipped
