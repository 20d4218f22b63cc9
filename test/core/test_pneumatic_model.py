"""Chamber pressure model: closed-form checks, steady state, and fit to a step response."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import lambertw

from soft_inverse_ros.core.drivers.pneumatic_model import (
    PneumaticChambers,
    PneumaticParams,
    fit_step_response,
    simulate_schedule,
    steady_state_duty,
    steady_state_pressure,
)

TRUE = PneumaticParams(
    supply_pressure_pa=100e3,
    inflow_coefficient=2100.0,
    outflow_rate_pa_s=4.0e5,
    outflow_knee_pa=2.0e4,
    latency_s=0.015,
)
# Inflate fully, deflate fully (both deflation regimes), half duty, deflate.
SWITCHES = [0.1, 0.8, 1.6, 2.4]
DUTIES = [1.0, 0.0, 0.5, 0.0]


def test_full_inflation_matches_the_closed_form():
    t = np.linspace(0.0, 0.4, 81)
    p = simulate_schedule(TRUE, t, [0.0], [1.0])
    ps, k = TRUE.supply_pressure_pa, TRUE.inflow_coefficient
    tt = np.clip(t - TRUE.latency_s, 0.0, None)
    exact = ps - np.clip(math.sqrt(ps) - 0.5 * k * tt, 0.0, None) ** 2
    np.testing.assert_allclose(p, exact, atol=2.0)  # Pa, on a 100 kPa swing
    assert TRUE.fill_time_s == pytest.approx(2 * math.sqrt(ps) / k)


def test_full_deflation_matches_the_lambert_w_solution():
    p0 = 90e3
    t = np.linspace(0.0, 0.5, 101)
    p = simulate_schedule(TRUE, t, [0.0], [0.0], initial_pressure=p0, initial_duty=0.0)
    knee, k_out = TRUE.outflow_knee_pa, TRUE.outflow_rate_pa_s
    # P + p_knee·ln P = P0 + p_knee·ln P0 − k_out·t
    exact = knee * np.real(lambertw((p0 / knee) * np.exp((p0 - k_out * t) / knee)))
    np.testing.assert_allclose(p, exact, atol=2.0)
    # Near-linear at high pressure (rate → k_out·P/(P+knee)), damped near zero.
    early = -np.diff(p[:6]) / np.diff(t[:6])
    assert np.all(early > 0.75 * k_out)
    late = p[t > 0.4]
    assert np.all(late > 0) and late[-1] < 0.05 * knee


def test_steady_state_duty_inverts_steady_state_pressure():
    for duty in (0.05, 0.2, 0.5, 0.8):
        pressure = steady_state_pressure(TRUE, duty)
        assert steady_state_duty(TRUE, pressure) == pytest.approx(duty, abs=1e-9)
    assert steady_state_duty(TRUE, 0.0) == 0.0
    assert steady_state_duty(TRUE, TRUE.supply_pressure_pa) == 1.0
    # A constant duty settles at its steady state, from below, without overshoot.
    t = np.linspace(0.0, 3.0, 301)
    p = simulate_schedule(TRUE, t, [0.0], [0.3])
    target = steady_state_pressure(TRUE, 0.3)
    assert np.all(p <= target + 1e-6) and p[-1] == pytest.approx(target, rel=1e-3)


def test_vectorized_chambers_match_the_scalar_schedule_with_latency():
    params = [TRUE, PneumaticParams(80e3, 1500.0, 2.0e5, 1.0e4, 0.03)]
    chambers = PneumaticChambers(params)
    dt = 0.005
    times = np.arange(0.0, 1.2, dt)
    duty_of = lambda t: np.array([1.0 if 0.1 <= t < 0.6 else 0.0, 0.4 if t >= 0.2 else 0.0])  # noqa: E731
    out = []
    for t in times:
        chambers.command(t, duty_of(t))
        out.append(chambers.pressure.copy())
    out = np.array(out)
    first = simulate_schedule(params[0], times, [0.1, 0.6], [1.0, 0.0])
    second = simulate_schedule(params[1], times, [0.2], [0.4])
    np.testing.assert_allclose(out[:, 0], first, atol=5.0)
    np.testing.assert_allclose(out[:, 1], second, atol=5.0)


def test_parameters_are_validated():
    with pytest.raises(ValueError, match="inflow_coefficient"):
        PneumaticParams(1e5, -1.0, 1e5, 1e4)
    with pytest.raises(ValueError, match="latency_s"):
        PneumaticParams(1e5, 1.0, 1e5, 1e4, latency_s=-0.01)


def _measured(seed: int, sigma: float, rate_hz: float = 200.0):
    t = np.arange(0.0, 3.0, 1.0 / rate_hz)
    clean = simulate_schedule(TRUE, t, SWITCHES, DUTIES)
    rng = np.random.default_rng(seed)
    return t, clean, clean + rng.normal(0.0, sigma, t.size)


@pytest.mark.parametrize("seed", [0, 1])
def test_fit_recovers_parameters_from_a_noisy_step_response(seed):
    sigma = 500.0  # 0.5 % of the supply pressure
    t, clean, measured = _measured(seed, sigma)
    fit = fit_step_response(t, measured, SWITCHES, DUTIES, TRUE.supply_pressure_pa)
    got = fit.params
    assert got.inflow_coefficient == pytest.approx(TRUE.inflow_coefficient, rel=0.02)
    assert got.outflow_rate_pa_s == pytest.approx(TRUE.outflow_rate_pa_s, rel=0.02)
    assert got.outflow_knee_pa == pytest.approx(TRUE.outflow_knee_pa, rel=0.05)
    assert got.latency_s == pytest.approx(TRUE.latency_s, abs=0.002)
    # The residual is the noise, and the fitted model reproduces the clean response.
    assert fit.rms_error_pa == pytest.approx(sigma, rel=0.15)
    assert np.sqrt(np.mean((fit.fitted - clean) ** 2)) < 0.25 * sigma
    # On a fresh schedule (not used for the fit) the fitted model still predicts well.
    t2 = np.linspace(0.0, 2.0, 201)
    schedule = ([0.05, 0.5, 1.0, 1.5], [0.3, 0.9, 0.1, 0.6])
    err = simulate_schedule(got, t2, *schedule) - simulate_schedule(TRUE, t2, *schedule)
    assert np.max(np.abs(err)) < 0.01 * TRUE.supply_pressure_pa


def test_fit_converges_from_a_poor_initial_guess():
    t, _, measured = _measured(3, 300.0)
    guess = PneumaticParams(100e3, 700.0, 1.5e6, 6.0e4, 0.08)
    fit = fit_step_response(
        t, measured, SWITCHES, DUTIES, TRUE.supply_pressure_pa, initial_guess=guess
    )
    assert fit.params.inflow_coefficient == pytest.approx(TRUE.inflow_coefficient, rel=0.02)
    assert fit.params.latency_s == pytest.approx(TRUE.latency_s, abs=0.002)


def test_fit_rejects_bad_data():
    t = np.linspace(0, 1, 50)
    with pytest.raises(ValueError, match="non-finite"):
        fit_step_response(t, np.full(50, np.nan), [0.1], [1.0], 1e5)
    with pytest.raises(ValueError, match="equal length"):
        fit_step_response(t, np.zeros(49), [0.1], [1.0], 1e5)


def test_fit_reports_parameters_pinned_at_its_bounds():
    """A step response timed in ms (read as s): the knee and the latency end at their bounds."""
    truth = PneumaticParams(80e3, 1500.0, 2.5e5, 1.5e4, 0.02)
    times = np.arange(0.0, 0.55, 0.005)
    clean = simulate_schedule(truth, times, [0.05, 0.3], [1.0, 0.0])
    measured = clean + np.random.default_rng(7).normal(0.0, 300.0, times.size)
    in_s = fit_step_response(times, measured, [0.05, 0.3], [1.0, 0.0], 80e3)
    assert in_s.at_bounds == {}
    # (RK4 sub-steps of 1 "s" on the 550 "s" log: the default 2 ms ones took 50 s, same result)
    in_ms = fit_step_response(1e3 * times, measured, [50.0, 300.0], [1.0, 0.0], 80e3, max_step=1.0)
    assert in_ms.at_bounds == {"outflow_knee_pa": "lower", "latency_s": "upper"}
