"""Pressure dynamics of a chamber fed by a PWM-driven 3/2 valve, and its fit to a step response.

During each PWM period the valve connects the chamber to the supply for a fraction u
(the duty) and to the exhaust for the rest. Averaged over the period (PWM frequency well
above the pneumatic bandwidth), the gauge pressure P obeys

    dP/dt = u(t − τ) · k_in · sqrt(max(P_s − P, 0))  −  (1 − u(t − τ)) · k_out · P / (P + p_knee)

* inflation is limited by the valve orifice: the pressure rate grows with the square root
  of the supply–chamber pressure difference (k_in, Pa^½/s);
* deflation is near-linear in time while P ≫ p_knee (rate → k_out, Pa/s, the choked
  exhaust) and damped, exponential with time constant p_knee / k_out, as P → 0;
* τ is the command latency (serial link, valve switching, tubing).

With u constant the pressure settles, without overshoot, at P_ss(u), the root of
u·A(P) = (1 − u)·B(P); conversely :func:`steady_state_duty` gives the duty that holds a
pressure (the open-loop feedforward).

:func:`simulate_schedule` integrates a piecewise-constant duty schedule exactly at its
switching instants (RK4 between them), so the response is smooth in every parameter,
latency included; :func:`fit_step_response` recovers (k_in, k_out, p_knee, τ) from a
measured response by nonlinear least squares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

#: Largest RK4 sub-step [s] when integrating the chamber pressure.
DEFAULT_MAX_STEP_S = 0.001


@dataclass(frozen=True)
class PneumaticParams:
    """Parameters of one chamber + valve (SI, gauge pressures).

    Attributes:
        supply_pressure_pa: Regulated supply pressure P_s [Pa] (> 0).
        inflow_coefficient: k_in [Pa^½/s] (> 0).
        outflow_rate_pa_s: k_out, deflation rate at high pressure [Pa/s] (> 0).
        outflow_knee_pa: p_knee, pressure below which deflation turns exponential [Pa] (> 0).
        latency_s: Command latency τ [s] (>= 0).
    """

    supply_pressure_pa: float
    inflow_coefficient: float
    outflow_rate_pa_s: float
    outflow_knee_pa: float
    latency_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("supply_pressure_pa", "inflow_coefficient", "outflow_rate_pa_s", "outflow_knee_pa"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"pneumatic parameter {name} must be finite and > 0, got {value}")
        if not (math.isfinite(self.latency_s) and self.latency_s >= 0.0):
            raise ValueError(f"pneumatic parameter latency_s must be >= 0, got {self.latency_s}")

    @property
    def deflation_time_constant_s(self) -> float:
        """Time constant of the damped (low-pressure) deflation, p_knee / k_out [s]."""
        return self.outflow_knee_pa / self.outflow_rate_pa_s

    @property
    def fill_time_s(self) -> float:
        """Time to fill from 0 to the supply pressure at full duty, 2·sqrt(P_s)/k_in [s]."""
        return 2.0 * math.sqrt(self.supply_pressure_pa) / self.inflow_coefficient


def pressure_rate(
    pressure: np.ndarray | float,
    duty: np.ndarray | float,
    supply: np.ndarray | float,
    k_in: np.ndarray | float,
    k_out: np.ndarray | float,
    knee: np.ndarray | float,
) -> np.ndarray | float:
    """dP/dt [Pa/s] for pressure [Pa] and applied duty in [0, 1] (vectorized)."""
    p = np.maximum(pressure, 0.0)
    inflow = k_in * np.sqrt(np.maximum(supply - p, 0.0))
    outflow = k_out * p / (p + knee)
    return duty * inflow - (1.0 - duty) * outflow


def steady_state_duty(params: PneumaticParams, pressure: np.ndarray | float) -> np.ndarray:
    """Duty in [0, 1] whose steady state is ``pressure`` [Pa] (0 at or below 0, 1 at P_s)."""
    p = np.clip(np.asarray(pressure, dtype=float), 0.0, params.supply_pressure_pa)
    inflow = params.inflow_coefficient * np.sqrt(params.supply_pressure_pa - p)
    outflow = params.outflow_rate_pa_s * p / (p + params.outflow_knee_pa)
    total = inflow + outflow
    return np.where(total > 0.0, outflow / np.where(total > 0.0, total, 1.0), 1.0)


def steady_state_pressure(params: PneumaticParams, duty: float) -> float:
    """Pressure [Pa] a constant duty settles at (bisection on the monotone balance)."""
    u = float(np.clip(duty, 0.0, 1.0))
    lo, hi = 0.0, params.supply_pressure_pa
    if u <= 0.0:
        return 0.0
    if u >= 1.0:
        return hi
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if pressure_rate(mid, u, params.supply_pressure_pa, params.inflow_coefficient,
                         params.outflow_rate_pa_s, params.outflow_knee_pa) > 0.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _rk4_segment(
    p: float, u: float, dt: float, supply: float, k_in: float, k_out: float, knee: float, max_step: float
) -> float:
    """Integrate one constant-duty interval of length ``dt`` (scalar, fast path)."""
    if dt <= 0.0:
        return p
    n = max(1, math.ceil(dt / max_step - 1e-9))
    h = dt / n
    v = 1.0 - u

    def f(x: float) -> float:
        x = x if x > 0.0 else 0.0
        d = supply - x
        return u * k_in * math.sqrt(d if d > 0.0 else 0.0) - v * k_out * x / (x + knee)

    for _ in range(n):
        a = f(p)
        b = f(p + 0.5 * h * a)
        c = f(p + 0.5 * h * b)
        d = f(p + h * c)
        p = p + h * (a + 2.0 * b + 2.0 * c + d) / 6.0
        p = min(max(p, 0.0), supply)
    return p


def simulate_schedule(
    params: PneumaticParams,
    times: np.ndarray,
    switch_times: Sequence[float],
    duties: Sequence[float],
    initial_pressure: float = 0.0,
    initial_duty: float = 0.0,
    max_step: float = DEFAULT_MAX_STEP_S,
) -> np.ndarray:
    """Pressure [Pa] at sorted ``times`` [s] for a piecewise-constant commanded duty.

    The command is ``initial_duty`` before ``switch_times[0]``, then ``duties[k]`` from
    ``switch_times[k]`` on; the chamber sees it ``latency_s`` later. The state at
    ``times[0]`` is ``initial_pressure``.
    """
    t = np.asarray(times, dtype=float)
    if t.ndim != 1 or t.size == 0 or np.any(np.diff(t) < 0):
        raise ValueError("times must be a non-empty sorted 1-D array")
    if len(switch_times) != len(duties):
        raise ValueError("switch_times and duties differ in length")
    effective = [(float(s) + params.latency_s, float(np.clip(u, 0.0, 1.0))) for s, u in zip(switch_times, duties)]
    effective.sort()
    supply, k_in = params.supply_pressure_pa, params.inflow_coefficient
    k_out, knee = params.outflow_rate_pa_s, params.outflow_knee_pa
    out = np.empty_like(t)
    p = float(initial_pressure)
    now = float(t[0])
    u = float(np.clip(initial_duty, 0.0, 1.0))
    k = 0
    while k < len(effective) and effective[k][0] <= now:
        u = effective[k][1]
        k += 1
    for i, target in enumerate(t):
        while k < len(effective) and effective[k][0] <= target:
            p = _rk4_segment(p, u, effective[k][0] - now, supply, k_in, k_out, knee, max_step)
            now = max(now, effective[k][0])
            u = effective[k][1]
            k += 1
        p = _rk4_segment(p, u, target - now, supply, k_in, k_out, knee, max_step)
        now = max(now, float(target))
        out[i] = p
    return out


class PneumaticChambers:
    """n chambers integrated together (vectorized), with per-chamber parameters and latency.

    Args:
        params: One :class:`PneumaticParams` per chamber.
        initial_pressure: (n,) initial gauge pressures [Pa].
        max_step: Largest RK4 sub-step [s].
    """

    def __init__(
        self,
        params: Sequence[PneumaticParams],
        initial_pressure: np.ndarray | None = None,
        max_step: float = DEFAULT_MAX_STEP_S,
    ) -> None:
        self.params = tuple(params)
        n = len(self.params)
        self.supply = np.array([p.supply_pressure_pa for p in self.params])
        self.k_in = np.array([p.inflow_coefficient for p in self.params])
        self.k_out = np.array([p.outflow_rate_pa_s for p in self.params])
        self.knee = np.array([p.outflow_knee_pa for p in self.params])
        self.latency = np.array([p.latency_s for p in self.params])
        self.pressure = np.zeros(n) if initial_pressure is None else np.array(initial_pressure, float)
        self.max_step = max_step
        self._applied = np.zeros(n)  # duty acting on each chamber now
        self._command_times: list[float] = []
        self._command_duties: list[np.ndarray] = []
        self._time: float | None = None

    @property
    def size(self) -> int:
        return len(self.params)

    @property
    def applied_duty(self) -> np.ndarray:
        """Duty acting on each chamber now (commands older than the latency)."""
        return self._applied.copy()

    def command(self, now: float, duty: np.ndarray) -> None:
        """Command duties in [0, 1] at time ``now``; each chamber sees them after its latency."""
        self.advance(now)
        self._command_times.append(float(now))
        self._command_duties.append(np.clip(np.asarray(duty, float).reshape(self.size), 0.0, 1.0))
        self._update_applied(self._time)

    def _update_applied(self, t: float) -> None:
        if not self._command_times:
            return
        cts = np.asarray(self._command_times)
        effective = cts[:, None] + self.latency[None, :] <= t + 1e-12  # (m, n)
        has = effective.any(axis=0)
        last = effective.shape[0] - 1 - np.argmax(effective[::-1], axis=0)
        duties = np.asarray(self._command_duties)
        self._applied = np.where(has, duties[last, np.arange(self.size)], self._applied)
        # Drop commands every chamber has moved past.
        superseded = int(np.min(np.where(has, last, 0)))
        if superseded > 0:
            del self._command_times[:superseded]
            del self._command_duties[:superseded]

    def advance(self, now: float) -> None:
        """Integrate up to ``now`` [s]."""
        if self._time is None:
            self._time = float(now)
            self._update_applied(self._time)
            return
        if self._command_times:
            events = (np.asarray(self._command_times)[:, None] + self.latency[None, :]).ravel()
            events = np.unique(events[(events > self._time) & (events <= now)])
        else:
            events = np.empty(0)
        for e in events:
            self._integrate(float(e) - self._time)
            self._time = float(e)
            self._update_applied(self._time)
        if now > self._time:
            self._integrate(now - self._time)
            self._time = float(now)

    def _integrate(self, dt: float) -> None:
        if dt <= 0.0:
            return
        n = max(1, math.ceil(dt / self.max_step - 1e-9))
        h = dt / n
        u = self._applied
        args = (u, self.supply, self.k_in, self.k_out, self.knee)
        p = self.pressure
        for _ in range(n):
            a = pressure_rate(p, *args)
            b = pressure_rate(p + 0.5 * h * a, *args)
            c = pressure_rate(p + 0.5 * h * b, *args)
            d = pressure_rate(p + h * c, *args)
            p = np.clip(p + h * (a + 2.0 * b + 2.0 * c + d) / 6.0, 0.0, self.supply)
        self.pressure = p

    def vent(self, now: float) -> None:
        """Open every chamber to the exhaust at once (no latency: a local safety action)."""
        self.advance(now)
        self._command_times.clear()
        self._command_duties.clear()
        self._applied = np.zeros(self.size)


@dataclass(frozen=True)
class StepFit:
    """Result of :func:`fit_step_response`.

    Attributes:
        params: Fitted parameters (supply pressure as given).
        rms_error_pa: RMS of (measured − fitted response) [Pa].
        max_error_pa: Largest |measured − fitted response| [Pa].
        fitted: Fitted response at the measurement times [Pa].
        iterations: Model evaluations used.
        at_bounds: Fitted parameters pinned at a bound of the fit → ``"lower"`` or
            ``"upper"`` (empty when all are inside): such a value is the bound, not a
            measurement (the data do not determine it, e.g. a log in ms read as s).
    """

    params: PneumaticParams
    rms_error_pa: float
    max_error_pa: float
    fitted: np.ndarray
    iterations: int
    at_bounds: dict[str, str] = field(default_factory=dict)


#: Fitted parameters in the order of the fit's vector (log k_in, log k_out, log p_knee, τ).
FIT_PARAMETERS = ("inflow_coefficient", "outflow_rate_pa_s", "outflow_knee_pa", "latency_s")


def _pinned(active_mask: np.ndarray) -> dict[str, str]:
    """Parameter name → ``"lower"``/``"upper"`` for each bound ``least_squares`` reports active."""
    return {name: "lower" if side < 0 else "upper" for name, side in zip(FIT_PARAMETERS, active_mask) if side}


def _initial_guess(
    times: np.ndarray, pressure: np.ndarray, switch_times: Sequence[float], duties: Sequence[float],
    supply: float, initial_duty: float,
) -> tuple[float, float, float, float]:
    """Rough (k_in, k_out, p_knee, τ) from slopes and onset delay of the measurement."""
    span = max(float(np.max(pressure) - np.min(pressure)), 1.0)
    window = max(3, int(0.02 / max(np.median(np.diff(times)), 1e-6)))
    kernel = np.ones(window) / window
    smooth = np.convolve(pressure, kernel, mode="same")
    slope = np.gradient(smooth, times)
    valid = slice(window, len(times) - window)
    rise = float(np.max(slope[valid])) if len(times) > 2 * window else span / (times[-1] - times[0])
    fall = float(-np.min(slope[valid])) if len(times) > 2 * window else rise
    k_in = max(rise, 1.0) / math.sqrt(supply)
    k_out = max(fall, 1.0)
    knee = 0.2 * max(float(np.max(pressure)), 1.0)
    latency = 0.0
    previous = initial_duty
    for s, u in zip(switch_times, duties):
        if u > previous + 0.2:  # first clear inflation step: onset delay
            base = float(np.median(pressure[(times >= s - 0.05) & (times <= s)])) if np.any(
                (times >= s - 0.05) & (times <= s)) else float(pressure[0])
            after = (times > s) & (pressure > base + 0.05 * span)
            if np.any(after):
                latency = max(0.0, float(times[np.argmax(after)] - s) * 0.5)
            break
        previous = u
    return k_in, k_out, knee, latency


def fit_step_response(
    times: np.ndarray,
    pressure: np.ndarray,
    switch_times: Sequence[float],
    duties: Sequence[float],
    supply_pressure_pa: float,
    initial_duty: float = 0.0,
    initial_guess: PneumaticParams | None = None,
    max_latency_s: float = 0.2,
    max_step: float = 0.002,
) -> StepFit:
    """Fit (k_in, k_out, p_knee, τ) to a measured response of a duty schedule.

    Args:
        times: (m,) sample times [s], sorted.
        pressure: (m,) measured gauge pressure [Pa].
        switch_times, duties: The commanded duty schedule (see :func:`simulate_schedule`);
            for a well-posed fit it should contain a full inflation (duty 1) and a full
            deflation (duty 0) long enough to cover both deflation regimes.
        supply_pressure_pa: Known supply pressure P_s [Pa].
        initial_duty: Duty commanded before the first switch.
        initial_guess: Starting point; estimated from the data when None.
        max_latency_s: Upper bound of the latency [s].
        max_step: RK4 sub-step of the model during the fit [s].
    """
    from scipy.optimize import least_squares

    t = np.asarray(times, dtype=float)
    y = np.asarray(pressure, dtype=float)
    if t.shape != y.shape or t.ndim != 1 or t.size < 10:
        raise ValueError("times and pressure must be 1-D arrays of equal length (>= 10 samples)")
    if not np.all(np.isfinite(y)):
        raise ValueError("measured pressure has non-finite samples")
    if initial_guess is None:
        k_in0, k_out0, knee0, tau0 = _initial_guess(t, y, switch_times, duties, supply_pressure_pa, initial_duty)
    else:
        g = initial_guess
        k_in0, k_out0, knee0, tau0 = g.inflow_coefficient, g.outflow_rate_pa_s, g.outflow_knee_pa, g.latency_s
    tau0 = min(max(tau0, 0.0), max_latency_s)
    p0 = float(np.median(y[: max(1, min(5, y.size))]))
    scale = max(float(np.max(y) - np.min(y)), 1.0)

    def params_of(x: np.ndarray) -> PneumaticParams:
        return PneumaticParams(
            supply_pressure_pa=supply_pressure_pa,
            inflow_coefficient=float(math.exp(x[0])),
            outflow_rate_pa_s=float(math.exp(x[1])),
            outflow_knee_pa=float(math.exp(x[2])),
            latency_s=float(x[3]),
        )

    def residual(x: np.ndarray) -> np.ndarray:
        model = simulate_schedule(params_of(x), t, switch_times, duties, p0, initial_duty, max_step)
        return (model - y) / scale

    x0 = np.array([math.log(k_in0), math.log(k_out0), math.log(knee0), tau0])
    lower = np.array([x0[0] - 5.0, x0[1] - 5.0, math.log(1.0), 0.0])
    upper = np.array([x0[0] + 5.0, x0[1] + 5.0, math.log(10.0 * supply_pressure_pa), max_latency_s])
    x0 = np.clip(x0, lower + 1e-9, upper - 1e-9)
    result = least_squares(
        residual, x0, bounds=(lower, upper), diff_step=np.array([1e-4, 1e-4, 1e-4, 1e-3]),
        x_scale=np.array([1.0, 1.0, 1.0, 0.01]), xtol=1e-10, ftol=1e-10, max_nfev=200,
    )
    fitted_params = params_of(result.x)
    fitted = simulate_schedule(fitted_params, t, switch_times, duties, p0, initial_duty, max_step)
    err = fitted - y
    return StepFit(
        params=fitted_params,
        rms_error_pa=float(np.sqrt(np.mean(err**2))),
        max_error_pa=float(np.max(np.abs(err))),
        fitted=fitted,
        iterations=int(result.nfev),
        at_bounds=_pinned(result.active_mask),
    )

