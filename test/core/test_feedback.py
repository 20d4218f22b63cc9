"""Closed-loop target correction: convergence, anti-windup, stale fallback, switching."""

from __future__ import annotations

import bisect

import numpy as np
import pytest

from soft_inverse_ros.core.control.feedback import (
    FeedbackConfig,
    FeedbackMode,
    TargetFeedback,
)

DT = 0.002  # 500 Hz control loop
BIAS = np.array([0.004, -0.003, 0.002])  # model error: real effector = commanded + bias [m]


class DelayedBiasPlant:
    """Real effector = first-order response to the commanded target, plus a bias.

    ``tau`` is the response time [s]; measurements come back ``latency`` s late.
    ``lo``/``hi`` clip the command (actuator bounds); ``saturated`` reports clipping.
    """

    def __init__(self, tau=0.0, latency=0.0, lo=-np.inf, hi=np.inf):
        self.tau, self.latency, self.lo, self.hi = tau, latency, lo, hi
        self.x = np.zeros(3)
        self.times: list[float] = []
        self.states: list[np.ndarray] = []
        self.saturated = False

    def step(self, t, command):
        clipped = np.clip(command, self.lo, self.hi)
        self.saturated = bool(np.any(clipped != command))
        goal = clipped + BIAS
        if self.tau == 0:
            self.x = goal
        else:
            self.x = self.x + (goal - self.x) * (1 - np.exp(-DT / self.tau))
        self.times.append(t)
        self.states.append(self.x.copy())

    def measurement(self, now):
        """Latest state captured at least ``latency`` before ``now``: (position, stamp)."""
        i = bisect.bisect_right(self.times, now - self.latency + 1e-12)
        return (self.states[i - 1], self.times[i - 1]) if i else (None, None)


def run(feedback, plant, target_fn, t_end, measure=True):
    errors = []
    out = None
    for k in range(int(round(t_end / DT))):
        t = k * DT
        target = target_fn(t)
        y, stamp = plant.measurement(t) if measure else (None, None)
        out = feedback.update(t, target, y, stamp, saturated=plant.saturated)
        plant.step(t, out.target)
        errors.append(np.linalg.norm(plant.x - target))
    return np.asarray(errors), out


@pytest.mark.parametrize("tau, latency", [(0.0, 0.0), (0.02, 0.01)])
def test_integral_correction_removes_constant_bias(tau, latency):
    target = np.array([0.01, 0.02, 0.15])
    fb = TargetFeedback(FeedbackConfig(ki=5.0, enabled=True), 3)
    errors, out = run(fb, DelayedBiasPlant(tau, latency), lambda t: target, 3.0)
    open_loop, _ = run(
        TargetFeedback(FeedbackConfig(enabled=False), 3), DelayedBiasPlant(tau, latency),
        lambda t: target, 3.0,
    )
    assert open_loop[-1] == pytest.approx(np.linalg.norm(BIAS), rel=1e-6)
    assert errors[-1] < 1e-3 * np.linalg.norm(BIAS)  # e^(-5·3) of the bias
    settled = int(0.5 / DT)  # past the plant's own response to the step
    assert np.mean(errors[settled:]) < 0.1 * np.mean(open_loop[settled:])
    assert out.mode is FeedbackMode.CLOSED_LOOP
    assert np.allclose(out.correction, -BIAS, atol=1e-6)


def test_proportional_term_speeds_up_convergence():
    target = np.zeros(3)
    slow, _ = run(TargetFeedback(FeedbackConfig(ki=2.0, enabled=True), 3),
                  DelayedBiasPlant(0.02), lambda t: target, 0.5)
    fast, _ = run(TargetFeedback(FeedbackConfig(ki=2.0, kp=0.5, enabled=True), 3),
                  DelayedBiasPlant(0.02), lambda t: target, 0.5)
    assert fast[-1] < slow[-1]


def test_target_alignment_compensates_latency_on_a_ramp():
    """With a moving target and late measurements, comparing the measurement with the
    target of its own time avoids the lag-induced bias of comparing with the current one."""
    speed = np.array([0.01, 0.0, 0.0])  # m/s
    ramp = lambda t: speed * t  # noqa: E731
    results = {}
    for align in (True, False):
        fb = TargetFeedback(FeedbackConfig(ki=5.0, align_target=align, enabled=True), 3)
        errors, _ = run(fb, DelayedBiasPlant(0.0, latency=0.05), ramp, 3.0)
        results[align] = errors[-1]
    assert results[True] < 1e-5
    assert results[False] > 0.4e-3  # ≈ speed × latency = 0.5 mm of steady error


def test_max_correction_caps_the_correction_and_the_integrator():
    fb = TargetFeedback(FeedbackConfig(ki=20.0, max_correction=0.002, enabled=True), 3)
    errors, out = run(fb, DelayedBiasPlant(), lambda t: np.zeros(3), 1.0)
    assert np.linalg.norm(out.correction) == pytest.approx(0.002)
    assert np.linalg.norm(fb.integrator) <= 0.002 + 1e-15
    assert out.clipped
    # The remaining error is the part of the bias beyond the cap.
    assert errors[-1] == pytest.approx(np.linalg.norm(BIAS) - 0.002, rel=1e-6)


def test_anti_windup_stops_integrator_growth_when_saturated_and_recovers_faster():
    # The actuators cannot move the effector beyond 0.010 m in x: target 0.020 is
    # unreachable between t = 1 s and t = 2.5 s; before, the integrator learns the bias.
    unreachable = np.array([0.020, 0.0, 0.0])
    reachable = np.array([0.0, 0.0, 0.0])
    target_fn = lambda t: unreachable if 1.0 <= t < 2.5 else reachable  # noqa: E731
    integ = {}
    recovery = {}
    for mode in ("freeze", "none", "back_calculation"):
        cfg = FeedbackConfig(ki=5.0, max_correction=0.05, anti_windup=mode, enabled=True)
        fb = TargetFeedback(cfg, 3)
        plant = DelayedBiasPlant(hi=np.array([0.010, 1.0, 1.0]))
        norms = []
        errs = []
        saturated = []
        residual = None  # what the (bias-free) model predicts minus the commanded target
        for k in range(int(3.5 / DT)):
            t = k * DT
            y, stamp = plant.measurement(t)
            out = fb.update(t, target_fn(t), y, stamp, saturated=plant.saturated,
                            qp_residual=residual)
            plant.step(t, out.target)
            residual = np.clip(out.target, plant.lo, plant.hi) - out.target
            norms.append(np.linalg.norm(fb.integrator))
            errs.append(np.linalg.norm(plant.x - target_fn(t)))
            saturated.append(plant.saturated)
        norms = np.asarray(norms)
        learned = norms[int(0.99 / DT)]
        assert learned == pytest.approx(np.linalg.norm(BIAS), rel=0.01)
        assert all(saturated[int(1.01 / DT):int(2.49 / DT)])
        integ[mode] = norms[int(2.49 / DT)]
        if mode == "freeze":
            # While saturated the integrator never grows.
            assert np.all(np.diff(norms[int(1.0 / DT):int(2.49 / DT)]) <= 1e-15)
        # Settling time after the target becomes reachable again at t = 2.5 s.
        after = np.asarray(errs[int(2.5 / DT):])
        recovery[mode] = np.argmax(after < 0.5e-3) * DT if np.any(after < 0.5e-3) else np.inf
    # Without anti-windup the integrator winds up far beyond the bias it had to learn.
    assert integ["none"] > 5 * np.linalg.norm(BIAS)
    assert integ["freeze"] <= np.linalg.norm(BIAS) * (1 + 1e-6)
    assert integ["back_calculation"] < 2 * np.linalg.norm(BIAS)
    assert recovery["freeze"] < 0.5 * recovery["none"]
    assert recovery["back_calculation"] < 0.5 * recovery["none"]


def test_stale_measurement_falls_back_to_open_loop_and_holds_integrator():
    cfg = FeedbackConfig(ki=5.0, stale_after=0.05, enabled=True)
    fb = TargetFeedback(cfg, 3)
    target = np.array([0.0, 0.0, 0.1])
    plant = DelayedBiasPlant()
    run(fb, plant, lambda t: target, 1.0)
    held = fb.integrator
    assert np.linalg.norm(held) > 0
    # The last measurement is 0.2 s old at t = 1.2 s.
    y, stamp = plant.measurement(1.0)
    out = fb.update(1.2, target, y, stamp)
    assert out.mode is FeedbackMode.STALE and not out.closed_loop
    assert np.array_equal(out.target, target) and not np.any(out.correction)
    assert out.measurement_age == pytest.approx(0.2 + DT, abs=1e-9)
    assert np.array_equal(fb.integrator, held)
    # Missing or NaN measurements are open loop too; NaN never reaches the output.
    for y_bad, s_bad in ((None, None), (np.array([np.nan, 0, 0]), 1.21)):
        out = fb.update(1.21, target, y_bad, s_bad)
        assert out.mode is FeedbackMode.STALE
        assert np.all(np.isfinite(out.target))


def test_run_time_switching_resets_on_enable_and_disabled_is_open_loop():
    fb = TargetFeedback(FeedbackConfig(ki=5.0), 3)
    assert not fb.enabled
    target = np.zeros(3)
    plant = DelayedBiasPlant()
    errors, out = run(fb, plant, lambda t: target, 0.2)
    assert out.mode is FeedbackMode.DISABLED
    assert errors[-1] == pytest.approx(np.linalg.norm(BIAS))
    fb.set_enabled(True)
    run(fb, plant, lambda t: target, 0.5)
    assert np.linalg.norm(fb.integrator) > 0
    fb.set_enabled(False)
    fb.set_enabled(True)
    assert not np.any(fb.integrator)


def test_bad_configuration_and_shapes_are_rejected():
    with pytest.raises(ValueError, match="feedback.ki"):
        FeedbackConfig(ki=-1.0)
    with pytest.raises(ValueError, match="feedback.anti_windup"):
        FeedbackConfig(anti_windup="clamp")
    with pytest.raises(ValueError, match="feedback.max_correction"):
        FeedbackConfig(max_correction=0.0)
    fb = TargetFeedback(FeedbackConfig(enabled=True), 3)
    with pytest.raises(ValueError, match="rows"):
        fb.update(0.0, np.zeros(6))
    with pytest.raises(ValueError, match="NaN"):
        fb.update(0.0, np.array([np.nan, 0, 0]))


def test_measurement_stamped_in_the_future_is_not_used():
    fb = TargetFeedback(FeedbackConfig(ki=5.0, stale_after=0.05, enabled=True), 3)
    target = np.array([0.0, 0.0, 0.1])
    measured = target + 0.001
    out = fb.update(1.0, target, measured, 1.2)  # 0.2 s ahead: clock skew
    assert out.mode is FeedbackMode.STALE and not np.any(out.correction)
    near = fb.update(1.001, target, measured, 1.02)  # 19 ms ahead: within stale_after
    assert near.mode is FeedbackMode.CLOSED_LOOP
