"""The synthetic compliance generator produces physically shaped, consistent snapshots."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.model.snapshot import ActuatorKind
from soft_inverse_ros.testing.synthetic_compliance import make_synthetic_robot


def test_compliance_is_j_kinv_jt_with_realistic_scales():
    robot = make_synthetic_robot(4, 3, kinds=[0, 0, 2, 1], rng=3)
    w_ea, w_aa, w_ee = robot.compliance()
    kinv = np.linalg.inv(robot.stiffness)
    np.testing.assert_allclose(w_ea, robot.effector_jacobian @ kinv @ robot.actuator_jacobian.T, rtol=1e-9)
    np.testing.assert_allclose(w_aa, w_aa.T)
    assert np.linalg.eigvalsh(w_aa).min() > 0 and np.linalg.eigvalsh(w_ee).min() > 0
    cable, cavity = np.abs(w_ea[:, 0]).max(), np.abs(w_ea[:, 2]).max()
    assert 1e-6 < cable < 1e-2  # m/N
    assert 1e-10 < cavity < 1e-6  # m/Pa
    snap = robot.snapshot(np.array([1.0, 2.0, 3e4, -1.0]), seq=4, stamp=1.5)
    assert snap.seq == 4 and snap.stamp == 1.5 and snap.is_finite()
    assert snap.actuator_kinds == (ActuatorKind.CABLE, ActuatorKind.CABLE, ActuatorKind.PRESSURE, ActuatorKind.FORCE)
    # linear robot: the zero-effort extrapolation does not depend on the linearization point
    np.testing.assert_allclose(snap.effector_free, robot.effector_rest, atol=1e-15)
    np.testing.assert_allclose(snap.delta_a_free, 0.0, atol=1e-15)


def test_limits_and_stiffening():
    robot = make_synthetic_robot(3, 2, kinds=[0, 1, 2], rng=1)
    limits = robot.limits(max_effort_step=[1.0, 1.0, 100.0])
    np.testing.assert_array_equal(limits.effort_min, [0.0, -20.0, 0.0])
    np.testing.assert_array_equal(limits.effort_max, [20.0, 20.0, 1e5])
    assert limits.names == robot.actuator_names
    stiff = robot.stiffened(2.0)
    np.testing.assert_allclose(stiff.compliance()[0], 0.5 * robot.compliance()[0], rtol=1e-9)


def test_rejects_impossible_shapes():
    with pytest.raises(ValueError):
        make_synthetic_robot(0, 3)
    with pytest.raises(ValueError):
        make_synthetic_robot(2, 3, kinds=[0])
    with pytest.raises(ValueError):
        make_synthetic_robot(2, 100, n_nodes=10)
