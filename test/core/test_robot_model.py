"""RobotModel on the built-in Diamond (no external files)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from soft_inverse_ros.core.model.description import load_robot_description
from soft_inverse_ros.core.model.robot_model import RobotModel
from soft_inverse_ros.core.model.snapshot import ActuatorKind


@pytest.fixture(scope="module")
def desc():
    # Gravity off: the built-in Diamond mesh is soft enough to buckle under its own weight
    # (0.5 kg at 180 kPa), which would make these API tests slow and state-dependent.
    return dataclasses.replace(load_robot_description("builtin_diamond"), gravity=np.zeros(3))


@pytest.fixture(scope="module")
def model(desc):
    return RobotModel.from_description(desc, solver="scipy")


def test_names_kinds_and_limits(model, desc):
    assert model.actuator_names == desc.actuator_names
    assert model.actuator_kinds == (ActuatorKind.CABLE,) * 4
    assert model.effector_names == ("tip.x", "tip.y", "tip.z")
    lim = model.actuator_limits()
    assert np.allclose(lim.effort_min, 0.0) and np.allclose(lim.effort_max, 5.0)
    assert np.allclose(lim.stroke_max, 0.02) and np.allclose(lim.stroke_min, -0.02)  # default: -max_stroke
    assert lim.names == desc.actuator_names
    assert lim.max_effort_step.shape == (4,)
    assert model.positions.shape == (model.fem.n_nodes, 3)
    assert np.allclose(model.effector_position, [0.0, 0.0, 0.125], atol=1e-12)


def test_update_gives_finite_spd_snapshot_and_moves_the_state(model):
    model.reset()
    lam = np.array([0.3, 0.0, 0.0, 0.0])
    tip0 = model.effector_position
    for k in range(3):
        info, snap = model.update(lam, seq=k, stamp=0.1 * k)
    assert snap.is_finite() and snap.seq == 2
    assert np.allclose(snap.w_aa, snap.w_aa.T)
    assert np.all(np.linalg.eigvalsh(snap.w_aa) > 0)
    assert np.allclose(snap.lambda0, lam)
    assert info.residual_norm < info.residual_before
    assert np.linalg.norm(model.effector_position - tip0) > 1e-4  # the robot moved
    assert snap.actuator_stroke[0] > 0  # the pulled cable shortened
    assert snap.fem_step_time > 0 and snap.compliance_time > 0
    with pytest.raises(ValueError, match="4 efforts"):
        model.update(np.zeros(3), seq=3, stamp=0.0)
    with pytest.raises(ValueError, match="finite"):
        model.step(np.array([np.nan, 0, 0, 0]))
    model.reset()
    assert np.allclose(model.positions, model.rest_positions)


def test_step_iterations_reach_equilibrium_of_equilibrate(model):
    model.reset()
    lam = np.array([0.0, 0.2, 0.0, 0.1])
    model.equilibrate(np.zeros(4), from_rest=True)
    info = model.step(lam, newton_iterations=12)
    x_steps = model.positions.copy()
    result = model.equilibrate(lam)
    assert result.residual_norm <= result.tolerance
    assert np.abs(x_steps - model.positions).max() < 1e-6
    assert info.newton_iterations == 12


def test_young_modulus_scale_scales_compliance_at_rest(desc):
    stiff = RobotModel.from_description(desc, solver="scipy", factor_reuse=False)
    soft = RobotModel.from_description(desc, solver="scipy", factor_reuse=False,
                                       young_modulus_scale=0.5)
    a = stiff.snapshot(0, 0.0)
    b = soft.snapshot(0, 0.0)
    assert np.allclose(b.w_aa, 2.0 * a.w_aa, rtol=1e-9)
    assert np.allclose(b.w_ea, 2.0 * a.w_ea, rtol=1e-9, atol=1e-15)
    with pytest.raises(ValueError, match="young_modulus_scale"):
        RobotModel.from_description(desc, young_modulus_scale=0.0)


def test_mesh_override(desc):
    from soft_inverse_ros.core.model.mesh_generation import diamond_robot_mesh

    coarse = diamond_robot_mesh(cell_size=0.009)
    model = RobotModel.from_description(desc, mesh=coarse, solver="scipy")
    assert model.fem.n_nodes == coarse.n_points
    assert model.snapshot(0, 0.0).is_finite()
