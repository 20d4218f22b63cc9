"""Cable ↔ servo mapping: cable displacement (m) to servo shaft angle (rad) and back.

A servo turns a spool, possibly through a gear pair; the spool winds the cable. For
actuator i, with spool radius r, servo shaft angle q0 at zero displacement, winding
direction s = ±1 and gear ratio g (servo shaft turns per spool turn):

    spool angle     φ = s · d / r                 (d: cable displacement, m, + = pulled)
    servo angle     q = q0 + g · φ                (rad at the servo output shaft)

and conversely d = s · r · (q − q0) / g. Speeds map with the same factor; a servo shaft
torque τ (N·m) pulls the cable with tension T = s · g · τ / r (N).

All methods are vectorized over the actuators (arrays of shape (n,) or (..., n)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ServoCalibration:
    """Per-actuator calibration arrays, all of shape (n,).

    Attributes:
        spool_radius: Effective spool radius r [m] (> 0).
        zero_offset: Servo shaft angle q0 at zero cable displacement [rad].
        direction: +1 when a positive servo rotation pulls the cable, −1 otherwise.
        gear_ratio: Servo shaft turns per spool turn g (> 0; 1 for a direct drive).
    """

    spool_radius: np.ndarray
    zero_offset: np.ndarray
    direction: np.ndarray
    gear_ratio: np.ndarray

    def __post_init__(self) -> None:
        arrays = {}
        for name in ("spool_radius", "zero_offset", "direction", "gear_ratio"):
            value = np.asarray(getattr(self, name), dtype=float)
            if value.ndim != 1:
                raise ValueError(f"calibration {name} must be 1-D, got shape {value.shape}")
            if not np.all(np.isfinite(value)):
                raise ValueError(f"calibration {name} has non-finite values: {value}")
            value.setflags(write=False)
            arrays[name] = value
        n = arrays["spool_radius"].shape[0]
        for name, value in arrays.items():
            if value.shape != (n,):
                raise ValueError(f"calibration {name} has shape {value.shape}, expected ({n},)")
            object.__setattr__(self, name, value)
        if np.any(self.spool_radius <= 0):
            raise ValueError(f"calibration spool_radius must be > 0, got {self.spool_radius}")
        if np.any(self.gear_ratio <= 0):
            raise ValueError(f"calibration gear_ratio must be > 0, got {self.gear_ratio}")
        if not np.all(np.abs(self.direction) == 1):
            raise ValueError(f"calibration direction must be +1 or -1, got {self.direction}")

    @property
    def size(self) -> int:
        return int(self.spool_radius.shape[0])

    @property
    def rad_per_m(self) -> np.ndarray:
        """Servo shaft angle change per metre of cable pulled [rad/m] (signed)."""
        return self.direction * self.gear_ratio / self.spool_radius

    def position_from_displacement(self, displacement: np.ndarray) -> np.ndarray:
        """Servo shaft angle [rad] for cable displacement(s) [m]."""
        return self.zero_offset + self.rad_per_m * np.asarray(displacement, dtype=float)

    def displacement_from_position(self, position: np.ndarray) -> np.ndarray:
        """Cable displacement [m] for servo shaft angle(s) [rad]."""
        return (np.asarray(position, dtype=float) - self.zero_offset) / self.rad_per_m

    def velocity_from_speed(self, speed: np.ndarray) -> np.ndarray:
        """Servo shaft angular velocity [rad/s] for cable speed(s) [m/s]."""
        return self.rad_per_m * np.asarray(speed, dtype=float)

    def speed_from_velocity(self, velocity: np.ndarray) -> np.ndarray:
        """Cable speed [m/s] for servo shaft angular velocity(ies) [rad/s]."""
        return np.asarray(velocity, dtype=float) / self.rad_per_m

    def tension_from_torque(self, torque: np.ndarray) -> np.ndarray:
        """Cable tension [N] (+ = pulling) for servo shaft torque(s) [N·m]."""
        return np.asarray(torque, dtype=float) * self.rad_per_m

    def position_limits(
        self, min_displacement: np.ndarray, max_displacement: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Servo angle interval [rad] (lower, upper) covering a displacement interval [m]."""
        a = self.position_from_displacement(min_displacement)
        b = self.position_from_displacement(max_displacement)
        return np.minimum(a, b), np.maximum(a, b)
