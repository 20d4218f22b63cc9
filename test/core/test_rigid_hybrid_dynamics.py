"""Implicit Euler of the hybrid robot in mixed coordinates (Coevoet eq. 7-9)."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.model.mesh_generation import box_mesh
from soft_inverse_ros.core.rigid.chain import RigidChain
from soft_inverse_ros.core.rigid.hybrid import HybridCompliance
from soft_inverse_ros.core.rigid.hybrid_dynamics import HybridDynamicsConfig, HybridPlant
from soft_inverse_ros.core.rigid.mapping import RigidMapping

Q0 = np.array([0.0, 0.6, -0.9, 0.0, 0.5])
KJ = np.full(5, 200.0)


def _plant(gravity=(0.0, 0.0, 0.0), dense: bool | None = None) -> HybridPlant:
    chain = RigidChain.from_urdf("hybrid_arm")
    mesh = box_mesh((0.02, 0.02, 0.06), (1, 1, 3), origin=(-0.01, -0.01, 0.0))
    p, r = chain.frame_pose(Q0, chain.frame_id("flange"))
    pts = p + np.asarray(mesh.points) @ r.T
    fem = CorotationalFEM(pts, np.asarray(mesh.tets), 0.8e6, 0.45, density=1100.0, kernels="numpy")
    base = np.flatnonzero(np.asarray(mesh.points)[:, 2] < 1e-9)
    mapping = RigidMapping(chain, "flange", pts, base, Q0)
    return HybridPlant(mapping, fem, KJ, Q0, HybridDynamicsConfig(step=5e-3, rayleigh_mass=5.0,
                                                                 gravity=gravity), dense=dense)


def test_rest_state_stays_at_rest() -> None:
    plant = _plant()
    x0 = plant.positions.copy()
    for _ in range(5):
        plant.step()
    np.testing.assert_allclose(plant.positions, x0, atol=1e-12)


def test_settles_to_the_commanded_joints_and_the_linear_static_response() -> None:
    """A small joint command: the robot settles where the hybrid statics (K_z dz = τ) put it."""
    plant = _plant()
    z0 = plant.z.copy()
    plant.q_cmd = Q0 + np.array([0.0, 2e-4, 0.0, 0.0, -1e-4])
    for _ in range(400):
        plant.step()
    assert np.linalg.norm(plant.v) < 1e-6
    np.testing.assert_allclose(plant.z[:5], plant.q_cmd, atol=1e-9)  # no external load: q = q_cmd
    # soft part carried rigidly: its shape is unchanged
    x = plant.positions
    d = np.linalg.norm(x[:, None] - x[None], axis=-1)
    x0 = plant.mapping.positions(z0)
    np.testing.assert_allclose(d, np.linalg.norm(x0[:, None] - x0[None], axis=-1), atol=1e-9)


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "sparse"])
def test_gravity_sag_matches_the_hybrid_compliance(dense: bool) -> None:
    """Under (small) gravity the settled state equals A^{-1} τ_g of the linearised statics,
    with the step assembled dense (small systems, the default here) or sparse."""
    g = (0.0, 0.0, -0.5)
    plant = _plant(gravity=g, dense=dense)
    assert plant.dense is dense
    z0 = plant.z.copy()
    tau0 = plant.generalized_forces()
    comp = HybridCompliance(plant.mapping, z0, plant.fem.stiffness(), KJ)
    expected = comp.solve(tau0)
    for _ in range(600):
        plant.step()
    assert np.linalg.norm(plant.v) < 1e-5
    dz = plant.z - z0
    assert np.linalg.norm(dz - expected) <= 0.02 * np.linalg.norm(expected)
    assert np.linalg.norm(expected) > 0


def test_bad_step_is_one_line() -> None:
    with pytest.raises(SystemExit, match="time step"):
        HybridDynamicsConfig(step=0.0)


def test_a_servo_gives_at_most_its_effort_limit() -> None:
    """The URDF's effort was ignored by the simulated robot: a 1e-4 N m motor tracked as the
    5 N m one. Under gravity a saturated joint sags (no servo stiffness), an unlimited one holds."""
    g = (0.0, 0.0, -9.81)
    strong, weak = _plant(gravity=g), _plant(gravity=g)
    weak.joint_effort_limit = np.array([5.0, 1e-4, 5.0, 5.0, 5.0])
    for plant in (strong, weak):
        for _ in range(300):
            plant.step()
    tau_strong, at_limit_strong = strong._servo_torque(strong.z[:5], strong._joint_terms(strong.z[:5])[1])
    tau_weak, at_limit_weak = weak._servo_torque(weak.z[:5], weak._joint_terms(weak.z[:5])[1])
    assert not at_limit_strong.any() and at_limit_weak[1] and abs(tau_weak[1]) == pytest.approx(1e-4)
    assert abs(strong.z[1] - Q0[1]) < 0.05 < abs(weak.z[1] - Q0[1])  # the weak shoulder falls
