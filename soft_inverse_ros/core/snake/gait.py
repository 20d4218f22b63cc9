"""The open-loop undulation gait (paper eq. 9) and its antagonistic valve duties.

p_i(t) = A·sin(2π f t + i φ) + offset for link i [Pa]; p_i > 0 inflates the right chamber,
p_i < 0 the left one. Each link has two 3/2 valves in antagonism: the chamber on the
command's side gets the feed-forward PWM duty that holds |p_i|
(:func:`steady_state_duty` of the chamber pressure model), the other chamber vents.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticParams, steady_state_duty


@dataclass(frozen=True)
class Gait:
    """Eq. 9 parameters: frequency f [Hz], phase shift between links φ [rad], offset [Pa],
    amplitude A [Pa]."""

    frequency_hz: float
    phase_rad: float
    offset_pa: float
    amplitude_pa: float

    def __post_init__(self) -> None:
        vals = (self.frequency_hz, self.phase_rad, self.offset_pa, self.amplitude_pa)
        if not (all(np.isfinite(vals)) and self.frequency_hz >= 0 and self.amplitude_pa >= 0):
            raise ValueError(f"invalid gait {self!r}")

    def pressures(self, t: float, n_links: int) -> np.ndarray:
        """Signed pressure command of each link (n_links,) [Pa] at time t [s]."""
        i = np.arange(n_links)
        return self.amplitude_pa * np.sin(2 * np.pi * self.frequency_hz * t + i * self.phase_rad) + self.offset_pa


def antagonistic_duties(signed_pa: np.ndarray, params: PneumaticParams) -> np.ndarray:
    """Valve duties (n_links, 2) = (left, right) for signed pressure commands (n_links,) [Pa]."""
    p = np.asarray(signed_pa, dtype=float)
    duty = steady_state_duty(params, np.abs(p))
    return np.stack([np.where(p < 0, duty, 0.0), np.where(p > 0, duty, 0.0)], axis=1)
