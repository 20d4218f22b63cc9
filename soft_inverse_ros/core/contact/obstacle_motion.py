"""Prescribed motion of a rigid obstacle (translation only).

The obstacle's offset from its declared pose at time t [s] after the simulation start:

    o(t) = v t + A ⊙ (sin(2π f t + φ) − sin φ)

``velocity`` v [m/s] (a plate pushed at constant speed), ``amplitude`` A [m] per axis,
``frequency`` f [Hz] and ``phase`` φ [rad] (a breathing or pulsating environment). The
declared pose is the pose at t = 0. ``stop_after`` [s] freezes the offset afterwards
(a plate pushed by 5 mm, then held). Frame: the robot frame (the description's), metres.

The simulated robot moves its obstacles with this law; the controller's model does not
know it: it receives the obstacles' offsets (``/obstacles/poses``, from the simulated robot
or, on hardware, from motion capture) and detects contacts against them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ObstacleMotion:
    """o(t) = v t + A (sin(2π f t + φ) − sin φ), frozen after ``stop_after`` [s]."""

    velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)
    amplitude: tuple[float, float, float] = (0.0, 0.0, 0.0)
    frequency: float = 0.0
    phase: float = 0.0
    stop_after: float = math.inf

    def __post_init__(self) -> None:
        for name in ("velocity", "amplitude"):
            vec = np.asarray(getattr(self, name), dtype=float)
            if vec.shape != (3,) or not np.isfinite(vec).all():
                raise ValueError(f"motion.{name}: expected a finite 3-vector, got {getattr(self, name)!r}")
        if not (math.isfinite(self.frequency) and self.frequency >= 0):
            raise ValueError(f"motion.frequency must be >= 0 Hz, got {self.frequency}")
        if not math.isfinite(self.phase):
            raise ValueError(f"motion.phase must be finite, got {self.phase}")
        if not self.stop_after > 0:
            raise ValueError(f"motion.stop_after must be > 0 s, got {self.stop_after}")
        if np.any(np.asarray(self.amplitude) != 0) and self.frequency == 0:
            raise ValueError("motion: an amplitude needs a frequency > 0 Hz")
        if not np.any(np.asarray(self.amplitude) != 0) and (self.frequency != 0 or self.phase != 0):
            raise ValueError("motion: frequency and phase shape the oscillation of an amplitude; without "
                             "one they would do nothing")
        if not (np.any(np.asarray(self.velocity) != 0) or np.any(np.asarray(self.amplitude) != 0)):
            raise ValueError("motion: give a non-zero velocity or amplitude (or leave 'motion' out)")

    def offset(self, t: float) -> np.ndarray:
        """Translation (3,) [m] from the declared pose at time ``t`` [s] (t < 0: none)."""
        t = min(max(float(t), 0.0), self.stop_after)
        v, a = np.asarray(self.velocity, dtype=float), np.asarray(self.amplitude, dtype=float)
        wave = math.sin(2.0 * math.pi * self.frequency * t + self.phase) - math.sin(self.phase)
        return v * t + a * wave

    def speed_bound(self) -> float:
        """An upper bound on the obstacle's speed [m/s] (for step-size checks)."""
        return float(np.linalg.norm(self.velocity)
                     + 2.0 * math.pi * self.frequency * np.linalg.norm(self.amplitude))
