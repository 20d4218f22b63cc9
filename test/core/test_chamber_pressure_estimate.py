"""Open-loop chamber pressure estimate: settles where the model says, vents on lost readings."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.drivers.chamber_pressure_estimate import OpenLoopPressureEstimate
from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticParams, steady_state_pressure

PARAMS = PneumaticParams(1.0e5, 2100.0, 4.0e5, 2.0e4, 0.015)


def test_constant_duty_settles_at_the_steady_state_pressure_after_the_latency():
    estimate = OpenLoopPressureEstimate([PARAMS, PARAMS])
    duty = np.array([0.3, 0.0])
    p = estimate.update(0.0, duty)
    assert np.all(p == 0.0)
    # Nothing moves before the valve latency has passed.
    assert np.all(estimate.update(0.01, duty) == 0.0)
    for k in range(2, 300):
        p = estimate.update(0.01 * k, duty)
    assert p[0] == pytest.approx(steady_state_pressure(PARAMS, 0.3), rel=1e-3)
    assert p[1] == 0.0


def test_missing_reading_counts_as_vented_and_shape_is_checked():
    estimate = OpenLoopPressureEstimate([PARAMS])
    for k in range(100):
        p = estimate.update(0.01 * k, np.array([1.0]))
    high = p[0]
    assert high > 5.0e4
    for k in range(100, 120):
        p = estimate.update(0.01 * k, np.array([np.nan]))
    assert p[0] < high - 3.0e4  # deflating at about outflow_rate_pa_s
    estimate.reset()
    assert estimate.pressure[0] == 0.0
    with pytest.raises(ValueError, match="expected \\(1,\\)"):
        estimate.update(2.0, np.array([0.1, 0.2]))
