"""Pressure references (Pa) → valve PWM duties, per chamber.

* **Antagonistic pairs** (:func:`apply_pairs`): the net command p₊ − p₋ of a pair goes to
  the side it favours (``bias + |net|``); the other side gets ``bias``, so one chamber
  inflates while the other deflates, never both.
* **Pressure-rate limit** (:func:`limit_pressure_change`): the reference changes by at
  most ``max_pressure_rate_pa_s · period_s`` per period (pairs kept exclusive while they
  ramp); the driver ramps from its vented state (0 Pa) too, so re-inflation after a SAFE
  command or the watchdog ramps; a vent itself is never rate-limited.
* **Feedforward**: the duty whose steady state is the reference
  (:func:`~soft_inverse_ros.core.drivers.pneumatic_model.steady_state_duty`): the whole
  command for chambers without a sensor (open loop).
* **Pressure loop** for chambers with a sensor: PI on the pressure error added to the
  feedforward, with conditional-integration anti-windup.
* **Duty cap**: duties never exceed the steady-state duty of the chamber's maximum
  pressure; since the model is first order without overshoot, no duty the driver sends
  can by itself drive the chamber above its maximum.
* **Minimum pulse**: a valve cannot open for less than ``min_pulse_s``; at PWM frequency
  f, duties in (0, f·min_pulse) round to 0 or f·min_pulse, symmetric at the top.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticParams, steady_state_duty
from soft_inverse_ros.core.drivers.valve_config import AntagonisticPair


def apply_pairs(pressure: np.ndarray, pairs: Sequence[AntagonisticPair]) -> np.ndarray:
    """Pressure references [Pa] with every antagonistic pair made exclusive."""
    out = np.array(pressure, dtype=float)
    for pair in pairs:
        net = out[pair.positive] - out[pair.negative]
        out[pair.positive] = pair.bias_pa + max(net, 0.0)
        out[pair.negative] = pair.bias_pa + max(-net, 0.0)
    return out


def limit_pressure_change(
    previous: np.ndarray, wanted: np.ndarray, max_step: np.ndarray, pairs: Sequence[AntagonisticPair]
) -> np.ndarray:
    """References [Pa] moving from ``previous`` towards ``wanted`` by at most ``max_step``
    [Pa] per chamber (the driver's pressure-rate limit, one period).

    ``wanted`` and ``previous`` are references with the pairs made exclusive
    (:func:`apply_pairs`; a vented ``previous`` of zeros is too). A pair is limited on its
    net (positive − negative) and its common part (the bias), with the smaller of its two
    chambers' steps shared between them, so the result stays exclusive: a pair whose net
    changes sign ramps one side down through the bias before the other side rises (never
    both inflated), and no chamber changes by more than its step.
    """
    prev = np.asarray(previous, dtype=float)
    want = np.asarray(wanted, dtype=float)
    step = np.asarray(max_step, dtype=float)
    out = np.where(np.abs(want - prev) <= step, want, prev + np.clip(want - prev, -step, step))
    for pair in pairs:
        i, j = pair.positive, pair.negative
        s = float(min(step[i], step[j]))
        c_prev, n_prev = min(prev[i], prev[j]), prev[i] - prev[j]
        c_want, n_want = min(want[i], want[j]), want[i] - want[j]
        dc = float(np.clip(c_want - c_prev, -s, s))
        room = s - abs(dc)
        if abs(c_want - c_prev) <= s and abs(n_want - n_prev) <= room:
            out[i], out[j] = want[i], want[j]  # within the step: exactly the wanted values
            continue
        c = c_prev + dc
        n = n_prev + float(np.clip(n_want - n_prev, -room, room))
        out[i] = c + max(n, 0.0)
        out[j] = c + max(-n, 0.0)
    return out


def quantize_duty(duty: np.ndarray, pwm_frequency_hz: float, min_pulse_s: float) -> np.ndarray:
    """Round duties the valve cannot produce (pulses shorter than ``min_pulse_s``)."""
    d = np.clip(np.asarray(duty, dtype=float), 0.0, 1.0)
    d_min = min_pulse_s * pwm_frequency_hz
    if d_min <= 0.0:
        return d
    low = d < d_min
    d = np.where(low, np.where(d < 0.5 * d_min, 0.0, d_min), d)
    high = d > 1.0 - d_min
    return np.where(high, np.where(d > 1.0 - 0.5 * d_min, 1.0, 1.0 - d_min), d)


class PressureController:
    """Per-chamber duty from pressure reference and (when sensed) measurement.

    Args:
        params: Pneumatic model of each chamber.
        has_sensor: (n,) bool, closed loop where True.
        max_pressure: (n,) pressure limits [Pa] (define the duty caps).
        kp_per_pa: Proportional gain [1/Pa].
        ki_per_pa_s: Integral gain [1/(Pa·s)].
        period_s: Loop period [s].
        pwm_frequency_hz: Valve PWM frequency [Hz].
        min_pulse_s: Shortest valve pulse [s].
    """

    def __init__(
        self,
        params: Sequence[PneumaticParams],
        has_sensor: np.ndarray,
        max_pressure: np.ndarray,
        kp_per_pa: float,
        ki_per_pa_s: float,
        period_s: float,
        pwm_frequency_hz: float,
        min_pulse_s: float,
    ) -> None:
        self.params = tuple(params)
        self.has_sensor = np.asarray(has_sensor, dtype=bool)
        self.max_pressure = np.asarray(max_pressure, dtype=float)
        self.kp = kp_per_pa
        self.ki = ki_per_pa_s
        self.period_s = period_s
        self.pwm_frequency_hz = pwm_frequency_hz
        self.min_pulse_s = min_pulse_s
        #: Highest duty per chamber: the one holding its maximum pressure.
        self.duty_cap = np.array(
            [float(steady_state_duty(p, m)) for p, m in zip(self.params, self.max_pressure)]
        )
        self._integral = np.zeros(len(self.params))  # duty units

    def reset(self) -> None:
        self._integral[:] = 0.0

    def feedforward(self, reference: np.ndarray) -> np.ndarray:
        return np.array([float(steady_state_duty(p, r)) for p, r in zip(self.params, reference)])

    def duty(self, reference: np.ndarray, measured: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Duties in [0, duty_cap] for references [Pa] and measurements [Pa] (NaN = none).

        Returns:
            (duty, saturated): duties, and where the cap or 0 limited them.
        """
        ref = np.asarray(reference, dtype=float)
        meas = np.asarray(measured, dtype=float)
        ff = self.feedforward(ref)
        closed = self.has_sensor & np.isfinite(meas)
        error = np.where(closed, ref - np.where(closed, meas, 0.0), 0.0)
        raw = ff + self.kp * error + self._integral + self.ki * self.period_s * error
        limited = np.clip(raw, 0.0, self.duty_cap)
        saturated = limited != raw
        # Integrate only while it does not push further into saturation.
        pushing = (saturated & (raw > limited) & (error > 0)) | (saturated & (raw < limited) & (error < 0))
        self._integral = np.where(
            closed & ~pushing, self._integral + self.ki * self.period_s * error, self._integral
        )
        self._integral = np.where(closed, self._integral, 0.0)
        quantized = quantize_duty(limited, self.pwm_frequency_hz, self.min_pulse_s)
        # Rounding up to a minimum pulse must not cross the cap.
        return np.minimum(quantized, self.duty_cap), saturated
