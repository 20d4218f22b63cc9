"""Rigid chain (URDF via Pinocchio) and the rigid mapping of attached soft nodes."""
from pathlib import Path

import numpy as np
import pytest

from soft_inverse_ros.core.rigid.rigid_mapping import RigidAttachment
from soft_inverse_ros.core.rigid.urdf_chain import UrdfChain

ARM = Path(__file__).resolve().parents[2] / "config" / "robots" / "hybrid_arm.urdf"


@pytest.fixture(scope="module")
def chain() -> UrdfChain:
    return UrdfChain(ARM)


def _attachment(chain: UrdfChain, seed: int = 0) -> tuple[RigidAttachment, np.ndarray]:
    rng = np.random.default_rng(seed)
    q_ref = rng.uniform(0.5 * chain.lower, 0.5 * chain.upper)
    _, tool = chain.frame_placement(q_ref, "tool")
    points = tool + rng.uniform(-0.03, 0.03, size=(7, 3))
    return RigidAttachment.capture(chain, "tool", points, q_ref), q_ref


def test_chain_limits_and_home_pose(chain: UrdfChain) -> None:
    assert chain.n_q == 5
    assert chain.joint_names == ["joint1", "joint2", "joint3", "joint4", "joint5"]
    np.testing.assert_allclose(chain.lower, [-2.6, -1.8, -2.2, -2.0, -2.8])
    np.testing.assert_allclose(chain.upper, [2.6, 1.8, 2.2, 2.0, 2.8])
    assert chain.within_limits(np.zeros(5))
    assert not chain.within_limits(np.array([0.0, 1.9, 0.0, 0.0, 0.0]))
    rot, p = chain.frame_placement(np.zeros(5), "tool")
    np.testing.assert_allclose(rot, np.eye(3), atol=1e-15)
    # base 0.05 + link1 0.12 up; 0.18 + 0.15 + 0.10 + 0.05 along x
    np.testing.assert_allclose(p, [0.48, 0.0, 0.17], atol=1e-12)
    # joint 2 pitches the whole arm about +y: the tool goes down by 0.48 sin(0.3)
    _, p2 = chain.frame_placement(np.array([0.0, 0.3, 0.0, 0.0, 0.0]), "tool")
    np.testing.assert_allclose(p2, [0.48 * np.cos(0.3), 0.0, 0.17 - 0.48 * np.sin(0.3)], atol=1e-12)


def test_frame_jacobian_matches_finite_differences(chain: UrdfChain) -> None:
    q = np.array([0.3, -0.4, 0.7, 0.2, -0.5])
    jac = chain.frame_jacobian(q, "tool")
    h = 1e-6
    for k in range(chain.n_q):
        dq = np.zeros(5)
        dq[k] = h
        rp, pp = chain.frame_placement(q + dq, "tool")
        rm, pm = chain.frame_placement(q - dq, "tool")
        np.testing.assert_allclose((pp - pm) / (2 * h), jac[:3, k], atol=1e-8)
        dr = (rp - rm) / (2 * h) @ chain.frame_placement(q, "tool")[0].T  # [ω]×
        np.testing.assert_allclose([dr[2, 1], dr[0, 2], dr[1, 0]], jac[3:, k], atol=1e-8)


def test_bad_inputs_give_one_line_errors(chain: UrdfChain, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="URDF file not found") as exc:
        UrdfChain(tmp_path / "missing.urdf")
    assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="frame 'gripper' not in URDF") as exc:
        chain.frame_placement(np.zeros(5), "gripper")
    assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="q must be 5"):
        chain.frame_jacobian(np.zeros(4), "tool")
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot name='x'><link name='a'>")
    with pytest.raises(ValueError, match="cannot load URDF") as exc:
        UrdfChain(bad)
    assert "\n" not in str(exc.value)


def test_mapping_positions_follow_the_frame(chain: UrdfChain) -> None:
    att, q_ref = _attachment(chain)
    q = q_ref + 0.2
    rot, p = chain.frame_placement(q, "tool")
    x = att.positions(q)
    # rigid: pairwise distances are preserved from q_ref to q
    x0 = att.positions(q_ref)
    d = np.linalg.norm(x[:, None] - x[None], axis=-1)
    d0 = np.linalg.norm(x0[:, None] - x0[None], axis=-1)
    np.testing.assert_allclose(d, d0, atol=1e-14)
    np.testing.assert_allclose((x - p) @ rot, att.offsets, atol=1e-14)


def test_mapping_jacobian_matches_central_differences(chain: UrdfChain) -> None:
    att, q_ref = _attachment(chain, seed=1)
    q = q_ref + np.array([0.1, -0.2, 0.15, 0.3, -0.25])
    jac = att.jacobian(q)
    assert jac.shape == (3 * att.n_nodes, chain.n_q)
    h = 1e-6
    fd = np.empty_like(jac)
    for k in range(chain.n_q):
        dq = np.zeros(chain.n_q)
        dq[k] = h
        fd[:, k] = (att.positions(q + dq) - att.positions(q - dq)).ravel() / (2 * h)
    rel = np.linalg.norm(jac - fd) / np.linalg.norm(jac)
    assert rel <= 1e-6, rel


def test_force_mapping_preserves_virtual_work(chain: UrdfChain) -> None:
    att, q_ref = _attachment(chain, seed=2)
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = q_ref + rng.uniform(-0.3, 0.3, chain.n_q)
        qdot = rng.normal(size=chain.n_q)
        f = rng.normal(size=(att.n_nodes, 3))
        tau = att.joint_forces(q, f)
        xdot = att.jacobian(q) @ qdot
        power_joint, power_nodes = tau @ qdot, f.ravel() @ xdot
        scale = np.abs(tau) @ np.abs(qdot)
        assert abs(power_joint - power_nodes) <= 1e-12 * scale
    with pytest.raises(ValueError, match="forces must be"):
        att.joint_forces(q, np.zeros((att.n_nodes + 1, 3)))
