"""The real SOFA robots (Diamond, finger, Springy) through their descriptions."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.model.description import load_robot_description
from soft_inverse_ros.core.model.robot_model import RobotModel
from soft_inverse_ros.core.model.snapshot import ActuatorKind

pytestmark = pytest.mark.shared_data


@pytest.fixture
def robot(sofa_data, monkeypatch):
    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))

    def build(name: str, **kwargs) -> RobotModel:
        return RobotModel.from_description(load_robot_description(name), **kwargs)

    return build


def test_diamond_w_aa_symmetric_positive_definite_under_gravity(robot):
    model = robot("diamond")
    assert (model.fem.n_nodes, model.fem.n_elements) == (1628, 4147)
    result = model.equilibrate(np.zeros(4), from_rest=True)
    assert result.residual_norm <= result.tolerance
    assert model.effector_position[2] < 0.125  # sags under its weight
    model.equilibrate(np.array([1.0, 0.0, 0.0, 0.0]))
    snap = model.snapshot(seq=0, stamp=0.0)
    assert snap.is_finite()
    assert np.allclose(snap.w_aa, snap.w_aa.T, rtol=0, atol=1e-14)
    assert np.linalg.eigvalsh(snap.w_aa).min() > 0
    # the four cables are symmetric: similar self-compliance; each moves the tip
    diag = np.diag(snap.w_aa)
    assert diag.max() / diag.min() < 1.3
    assert np.all(np.linalg.norm(snap.w_ea, axis=0) > 1e-3)  # [m/N]


def test_finger_cable_row(robot):
    model = robot("finger")
    assert model.actuator_kinds == (ActuatorKind.CABLE,)
    ja_t = model.actuators.jacobian_t(model.positions)
    assert ja_t.shape == (model.fem.n_free, 1) and np.abs(ja_t).max() > 0
    model.equilibrate(np.zeros(1), from_rest=True)
    tip0 = model.effector_position
    model.equilibrate(np.array([1.0]))
    assert model.actuator_stroke[0] > 0  # the cable shortened
    assert np.linalg.norm(model.effector_position - tip0) > 1e-3  # the finger bends
    snap = model.snapshot(seq=0, stamp=0.0)
    assert snap.w_aa[0, 0] > 0


def test_springy_pressure_row_is_volume_change(robot):
    model = robot("springy")
    assert model.actuator_kinds == (ActuatorKind.PRESSURE,)
    cavity = model.actuators.constraints[0]
    assert cavity.rest_volume > 0
    assert model.actuator_stroke[0] == pytest.approx(0.0, abs=1e-15)
    # δ_a is the volume change and its row is dV/dx: finite differences
    rng = np.random.default_rng(0)
    v = np.zeros((model.fem.n_nodes, 3))
    v[model.fem.free_nodes] = rng.normal(size=(model.fem.n_free_nodes, 3))
    x = model.positions.copy()
    h = 1e-7
    plus = model.actuators.values(x + h * v)[0]
    minus = model.actuators.values(x - h * v)[0]
    fd = (plus - minus) / (2 * h)
    row = model.actuators.jacobian_t(x)[:, 0] @ model.fem.reduce(v)
    assert row == pytest.approx(fd, rel=1e-6)
    # pressure inflates the cavity
    model.equilibrate(np.array([500.0]), from_rest=True)
    assert model.actuator_stroke[0] > 0
    snap = model.snapshot(seq=0, stamp=0.0)
    assert snap.w_aa[0, 0] > 0 and snap.is_finite()
