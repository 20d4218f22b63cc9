"""The open-loop undulation gait (paper eq. 9) and its antagonistic valve duties.

p_i(t) = A·sin(2π f t + i φ) + offset for link i [Pa]; p_i > 0 inflates the right chamber,
p_i < 0 the left one. Each link has two 3/2 valves in antagonism: the chamber on the
command's side gets the feed-forward PWM duty that holds |p_i|
(:func:`steady_state_duty` of the chamber pressure model), the other chamber vents.

Two ways to turn the setpoints into valve duties:
- :func:`antagonistic_duties`, open loop: the duty whose *steady state* is |p_i|. Averaged
  over the PWM, a chamber under a constant intermediate duty approaches its steady state
  exponentially, with time constant 1/|∂Ṗ/∂P| (0.19 s at 8 psi with the snake-gait valves),
  so at a 1 Hz gait it reaches only ~60 % of the command.
- :func:`tracking_duties`, the paper's eq. 11–12: "the pressure update for inflation in each
  step is … defined based on the difference" between the desired and the current pressure,
  limited by the valve's flow (eq. 10); deflation vents to the atmosphere (eq. 12). Each PWM
  period gets the duty that brings the chamber's predicted pressure to its setpoint by the
  period's end, clipped to [0, 1]: far below, the valve is fully open (orifice-limited
  inflation, eq. 10); above, it vents at the exhaust's rate (eq. 12).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.drivers.pneumatic_model import (
    PneumaticChambers,
    PneumaticParams,
    pressure_rate,
    steady_state_duty,
)


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


def tracking_duties(chambers: PneumaticChambers, now: float, setpoints: np.ndarray, period_s: float) -> np.ndarray:
    """Duties (n,) in [0, 1] that bring each chamber to its setpoint [Pa] within one PWM
    period (paper eq. 11–12; see the module docstring).

    The command takes effect after the chambers' latency τ: the pressure it acts on is
    predicted by integrating a copy of ``chambers`` (with the duties already sent) to
    ``now + τ``. Then u solves P̂ + T·(u·A(P̂) − (1 − u)·B(P̂)) = P_d over the period T
    (A the supply inflow rate, B the exhaust rate of the model), clipped to [0, 1]. No gain
    is tuned: the duty follows from the chamber model and the PWM period."""
    ahead = copy.deepcopy(chambers)
    ahead.advance(now + float(np.max(ahead.latency)))
    p = ahead.pressure
    target = np.clip(np.asarray(setpoints, dtype=float).reshape(p.shape), 0.0, ahead.supply)
    inflow = pressure_rate(p, 1.0, ahead.supply, ahead.k_in, ahead.k_out, ahead.knee)
    outflow = -pressure_rate(p, 0.0, ahead.supply, ahead.k_in, ahead.k_out, ahead.knee)
    total = inflow + outflow
    u = ((target - p) / period_s + outflow) / np.where(total > 0.0, total, 1.0)
    return np.clip(np.where(total > 0.0, u, 0.0), 0.0, 1.0)


def chamber_pressures(signed_pa: np.ndarray) -> np.ndarray:
    """Chamber pressure setpoints (n_links, 2) = (left, right) [Pa gauge] for signed link
    commands (n_links,) [Pa]: the command's side gets |p_i|, the other side 0 (vents)."""
    p = np.asarray(signed_pa, dtype=float)
    return np.stack([np.maximum(-p, 0.0), np.maximum(p, 0.0)], axis=1)


@dataclass(frozen=True)
class GaitLimits:
    """What a gait may ask of the valves.

    Attributes:
        max_pressure_pa: highest chamber pressure a command may reach [Pa gauge]: the
            lower of the valves' supply pressure and the chambers' pressure limit.
        max_frequency_hz: highest gait frequency [Hz] (the valves' 60 Hz PWM and the
            chambers' fill time make faster waves meaningless).
    """

    max_pressure_pa: float
    max_frequency_hz: float = 5.0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.max_pressure_pa) and self.max_pressure_pa > 0
                and np.isfinite(self.max_frequency_hz) and self.max_frequency_hz > 0):
            raise ValueError(f"invalid gait limits {self!r}")

    def check(self, frequency_hz: float, phase_rad: float, offset_pa: float,
              amplitude_pa: float) -> str:
        """Why these eq. 9 parameters are refused ("" when they are accepted)."""
        vals = (frequency_hz, phase_rad, offset_pa, amplitude_pa)
        if not all(np.isfinite(v) for v in vals):
            return "gait parameters must be finite"
        if not 0.0 <= frequency_hz <= self.max_frequency_hz:
            return f"frequency {frequency_hz:g} Hz outside [0, {self.max_frequency_hz:g}] Hz"
        if abs(phase_rad) > 2 * np.pi:
            return f"phase {phase_rad:g} rad outside [-2π, 2π]"
        if amplitude_pa < 0:
            return f"amplitude {amplitude_pa:g} Pa is negative"
        peak = amplitude_pa + abs(offset_pa)
        if peak > self.max_pressure_pa:
            return (f"amplitude + |offset| = {peak:.0f} Pa exceeds the {self.max_pressure_pa:.0f} Pa "
                    "the valves can supply (supply pressure / chamber limit)")
        return ""


class GaitSource:
    """Eq. 9 with parameters that may change while it runs: the wave's phase
    θ(t) = ∫ 2π f dt is integrated, so a new frequency continues the wave from where it is
    instead of jumping (p_i = A·sin(θ + iφ) + offset).

    Args:
        gait: initial parameters (checked against ``limits``).
        limits: what the valves can do.
        n_links: links of the snake.

    Raises:
        ValueError: the initial gait is refused by ``limits`` (the reason).
    """

    def __init__(self, gait: Gait, limits: GaitLimits, n_links: int) -> None:
        if n_links < 1:
            raise ValueError(f"n_links must be >= 1, got {n_links}")
        self.limits = limits
        self.n_links = n_links
        self.gait = gait
        reason = self.refuse(gait)
        if reason:
            raise ValueError(reason)
        self.theta = 0.0
        self._t: float | None = None

    def refuse(self, gait: Gait) -> str:
        """Why ``gait`` is refused ("" when accepted)."""
        return self.limits.check(gait.frequency_hz, gait.phase_rad, gait.offset_pa, gait.amplitude_pa)

    def set(self, gait: Gait) -> str:
        """Switch to ``gait`` at the current phase; returns the refusal reason ("" = applied;
        a refused gait leaves the running one unchanged)."""
        reason = self.refuse(gait)
        if not reason:
            self.gait = gait
        return reason

    def signed(self, t: float) -> np.ndarray:
        """Advance the phase to time t [s] (monotonic; the first call starts the wave at θ=0)
        and return the signed link commands (n_links,) [Pa], within ±max_pressure_pa."""
        if self._t is not None and t > self._t:
            self.theta = (self.theta + 2 * np.pi * self.gait.frequency_hz * (t - self._t)) % (2 * np.pi)
        if self._t is None or t > self._t:
            self._t = t
        g = self.gait
        p = g.amplitude_pa * np.sin(self.theta + np.arange(self.n_links) * g.phase_rad) + g.offset_pa
        lim = self.limits.max_pressure_pa
        return np.clip(p, -lim, lim)

    def chambers(self, t: float) -> np.ndarray:
        """(n_links, 2) = (left, right) chamber setpoints [Pa] at time t [s]."""
        return chamber_pressures(self.signed(t))
