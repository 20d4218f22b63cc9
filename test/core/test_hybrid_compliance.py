"""Hybrid (rigid chain + soft FEM body) stiffness and compliance by static condensation.

Three checks, each against something computed another way:
1. rigid modes: a joint torque alone moves the soft body rigidly, u = (J_f K_q⁻¹ τ, K_q⁻¹ τ);
2. series springs (exact): the compliance of a soft-tip point equals the soft body clamped on
   the tool frame (the project's reduced FEM with those nodes fixed) plus the joints'
   compliance seen through the point's rigid lever, J_p K_q⁻¹ J_pᵀ (5-joint arm);
3. stiff FEM block: one joint held by a servo-like stiffness, its link replaced by an FEM block
   1e4 times stiffer than the soft body, clamped at the joint and sharing the interface nodes
   with the soft box — the 3×3 soft-tip compliance agrees within 1 %.
"""
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.model.mesh_generation import box_mesh
from soft_inverse_ros.core.rigid.hybrid_compliance import HybridCompliance, hybrid_stiffness
from soft_inverse_ros.core.rigid.rigid_mapping import RigidAttachment
from soft_inverse_ros.core.rigid.urdf_chain import UrdfChain

ARM = Path(__file__).resolve().parents[2] / "config" / "robots" / "hybrid_arm.urdf"
E_SOFT, NU = 1.0e5, 0.3  # silicone-like [Pa]
BOX = (0.04, 0.03, 0.03)  # soft box [m], carried on its -x face
DIV = (4, 2, 2)

ONE_JOINT_URDF = """<?xml version="1.0"?>
<robot name="one_joint">
  <link name="base"/><link name="link"/><link name="tool"/>
  <joint name="j" type="revolute"><parent link="base"/><child link="link"/>
    <origin xyz="0 0 0"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="5" velocity="2"/></joint>
  <joint name="t" type="fixed"><parent link="link"/><child link="tool"/><origin xyz="0.1 0 0"/></joint>
</robot>
"""


def _soft_box_on_tool(chain: UrdfChain, q_ref: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Soft box mesh in world axes at q_ref, its -x face on the tool origin; the attached
    (-x face) nodes and the tip node (centre of the +x face)."""
    mesh = box_mesh(BOX, DIV, origin=(0.0, -BOX[1] / 2, -BOX[2] / 2))
    rot, p = chain.frame_placement(q_ref, "tool")
    points = p + np.asarray(mesh.points) @ rot.T
    local = np.asarray(mesh.points)
    attached = np.flatnonzero(np.isclose(local[:, 0], 0.0))
    tip = np.flatnonzero(np.all(np.isclose(local, [BOX[0], 0.0, 0.0]), axis=1))
    assert tip.size == 1
    return points, np.asarray(mesh.tets), attached, tip


def _arm_case(k_q: np.ndarray) -> tuple[HybridCompliance, CorotationalFEM, np.ndarray, np.ndarray]:
    chain = UrdfChain(ARM)
    q_ref = np.array([0.4, -0.3, 0.6, -0.2, 0.5])
    points, tets, attached, tip = _soft_box_on_tool(chain, q_ref)
    fem = CorotationalFEM(points, tets, E_SOFT, NU)
    hybrid = HybridCompliance.from_fem(fem, chain, "tool", attached, q_ref, k_q)
    return hybrid, fem, attached, tip


def test_joint_torque_moves_the_soft_body_rigidly() -> None:
    k_q = np.array([40.0, 30.0, 20.0, 10.0, 5.0])  # N·m/rad
    hybrid, fem, _, _ = _arm_case(k_q)
    tau = np.array([0.3, -0.2, 0.1, 0.05, -0.04])  # N·m
    u = hybrid.solve(np.concatenate([np.zeros(hybrid.n - 5), tau]))
    dq = tau / k_q
    np.testing.assert_allclose(u[-5:], dq, rtol=1e-8)
    free_map = RigidAttachment.capture(
        hybrid.attachment.chain, "tool", fem.rest_points[hybrid.free_nodes], hybrid.q_ref
    )
    rigid = free_map.jacobian(hybrid.q_ref) @ dq
    assert np.linalg.norm(u[:-5] - rigid) <= 1e-8 * np.linalg.norm(rigid)


def test_tip_compliance_is_clamped_body_plus_joints_in_series() -> None:
    k_q = np.array([40.0, 30.0, 20.0, 10.0, 5.0])
    hybrid, fem, attached, tip = _arm_case(k_q)
    w_h = hybrid.compliance(hybrid.node_rows(tip))
    clamped = CorotationalFEM(fem.rest_points, fem.tets, E_SOFT, NU, fixed_nodes=attached)
    slot = int(np.flatnonzero(clamped.free_nodes == tip[0])[0])
    k_c = clamped.rest_stiffness().toarray()
    c_soft = np.linalg.inv(k_c)[3 * slot:3 * slot + 3, 3 * slot:3 * slot + 3]
    lever = RigidAttachment.capture(hybrid.attachment.chain, "tool", fem.rest_points[tip], hybrid.q_ref)
    j_p = lever.jacobian(hybrid.q_ref)
    expected = c_soft + j_p @ np.diag(1.0 / k_q) @ j_p.T
    # the joint part is a sizeable share of the total, so the coupling blocks are exercised
    assert np.linalg.norm(j_p @ np.diag(1.0 / k_q) @ j_p.T) > 0.05 * np.linalg.norm(c_soft)
    np.testing.assert_allclose(w_h, expected, rtol=1e-8, atol=1e-10 * np.abs(expected).max())
    # an attached node moves only through the joints
    mixed = hybrid.node_rows(np.array([tip[0], attached[0]]))
    np.testing.assert_array_equal(mixed[:3], hybrid.node_rows(tip))
    np.testing.assert_array_equal(mixed[3:, -5:], hybrid.attached_jacobian[:3])
    assert not mixed[3:, :-5].any()
    w_a = hybrid.compliance(hybrid.node_rows(attached[:1]))
    j_a = hybrid.attached_jacobian[:3]
    np.testing.assert_allclose(w_a, j_a @ np.diag(1.0 / k_q) @ j_a.T, rtol=1e-8, atol=1e-14)


def _merge_stiffness(parts: list[tuple[np.ndarray, sp.spmatrix]]) -> tuple[np.ndarray, sp.csr_matrix]:
    """Union of several meshes' nodes (coincident nodes shared) and their summed stiffness."""
    all_points = np.vstack([p for p, _ in parts])
    _, first, inverse = np.unique(np.round(all_points, 9), axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    n = first.size
    blocks, start = [], 0
    for points, k in parts:
        idx = inverse[start:start + len(points)]
        start += len(points)
        dofs = (3 * idx[:, None] + np.arange(3)).ravel()
        coo = sp.coo_matrix(k)
        blocks.append(sp.coo_matrix((coo.data, (dofs[coo.row], dofs[coo.col])), shape=(3 * n, 3 * n)))
    return all_points[first], sp.csr_matrix(sum(blocks))


def test_one_joint_hybrid_matches_stiff_fem_link(tmp_path: Path) -> None:
    urdf = tmp_path / "one_joint.urdf"
    urdf.write_text(ONE_JOINT_URDF)
    chain = UrdfChain(urdf)
    q_ref = np.zeros(1)
    points, tets, attached, tip = _soft_box_on_tool(chain, q_ref)
    k_servo = np.array([1.0e6])  # position-controlled joint [N·m/rad]
    soft = CorotationalFEM(points, tets, E_SOFT, NU)
    hybrid = HybridCompliance.from_fem(soft, chain, "tool", attached, q_ref, k_servo)
    w_h = hybrid.compliance(hybrid.node_rows(tip))

    # reference: link = FEM block [0, 0.1] m along x, E × 1e4, clamped at the joint (x = 0)
    link_mesh = box_mesh((0.1, BOX[1], BOX[2]), (10, 2, 2), origin=(0.0, -BOX[1] / 2, -BOX[2] / 2))
    link = CorotationalFEM(link_mesh.points, link_mesh.tets, E_SOFT * 1e4, NU)
    merged, k_ref = _merge_stiffness([(points, soft.rest_stiffness()), (link.rest_points, link.rest_stiffness())])
    assert len(merged) == len(points) + len(link.rest_points) - len(attached)  # interface shared
    free = np.flatnonzero(~np.isclose(merged[:, 0], 0.0))
    dofs = (3 * free[:, None] + np.arange(3)).ravel()
    tip_ref = int(np.flatnonzero(np.all(np.isclose(merged[free], points[tip[0]]), axis=1))[0])
    rhs = np.zeros((dofs.size, 3))
    rhs[3 * tip_ref:3 * tip_ref + 3] = np.eye(3)
    sol = sp.linalg.spsolve(sp.csc_matrix(k_ref[dofs][:, dofs]), rhs)
    w_ref = sol[3 * tip_ref:3 * tip_ref + 3]
    rel = np.linalg.norm(w_h - w_ref) / np.linalg.norm(w_ref)
    assert rel <= 0.01, rel
    # the comparison is not vacuous: the soft box alone (no joint, no link) is what dominates,
    # and a soft joint would change the answer far beyond 1 %
    soft_joint = HybridCompliance.from_fem(soft, chain, "tool", attached, q_ref, np.array([0.2]))
    w_soft_joint = soft_joint.compliance(soft_joint.node_rows(tip))
    assert np.linalg.norm(w_soft_joint - w_ref) > 0.1 * np.linalg.norm(w_ref)


def test_hybrid_inputs_are_validated() -> None:
    k = sp.identity(12, format="csr")
    with pytest.raises(ValueError, match="joint_stiffness must be finite and > 0"):
        hybrid_stiffness(k, np.array([0]), np.zeros((3, 1)), np.array([0.0]))
    with pytest.raises(ValueError, match="attached_jacobian must be"):
        hybrid_stiffness(k, np.array([0]), np.zeros((6, 1)), np.array([1.0]))
    with pytest.raises(ValueError, match="every soft node is attached"):
        hybrid_stiffness(k, np.arange(4), np.zeros((12, 1)), np.array([1.0]))
    with pytest.raises(ValueError, match="outside the mesh"):
        hybrid_stiffness(k, np.array([7]), np.zeros((3, 1)), np.array([1.0]))
