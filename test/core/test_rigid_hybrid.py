"""Hybrid W (rigid chain + soft cylinder) against the same system with the rigid attachment
modelled as very stiff springs between the FEM nodes and the flange (no elimination by J)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.model.mesh_generation import box_mesh
from soft_inverse_ros.core.rigid.chain import RigidChain
from soft_inverse_ros.core.rigid.hybrid import HybridCompliance
from soft_inverse_ros.core.rigid.mapping import RigidMapping

Q0 = np.array([0.2, 0.5, -0.6, 0.3, 0.4])
KJ = np.full(5, 40.0)  # joint servo stiffness [N m/rad]


def _system() -> tuple[np.ndarray, RigidMapping, CorotationalFEM, np.ndarray]:
    chain = RigidChain.from_urdf("hybrid_arm")
    mesh = box_mesh((0.02, 0.02, 0.06), (2, 2, 4), origin=(-0.01, -0.01, 0.0))
    p, r = chain.frame_pose(Q0, chain.frame_id("flange"))
    pts = p + np.asarray(mesh.points) @ r.T
    fem = CorotationalFEM(pts, np.asarray(mesh.tets), 0.8e6, 0.45, kernels="numpy")
    base = np.flatnonzero(np.asarray(mesh.points)[:, 2] < 1e-9)
    mapping = RigidMapping(chain, "flange", pts, base, Q0)
    tip = int(np.argmax(np.asarray(mesh.points)[:, 2] + 1e-3 * np.asarray(mesh.points)[:, 0]))
    return pts, mapping, fem, np.array([tip])


def _stiff_spring_w(mapping: RigidMapping, k: sp.spmatrix, tip: int, joint: int, kp: float) -> np.ndarray:
    """W of [tip x, y, z, joint] with rigidified nodes tied to the flange by springs kp [N/m]."""
    nq, n = mapping.chain.nq, 3 * mapping.n_nodes
    jr = mapping.rigid_jacobian(Q0)
    rdofs = (3 * mapping.nodes[:, None] + np.arange(3)).ravel()
    s = sp.csr_matrix((np.ones(rdofs.size), (np.arange(rdofs.size), rdofs)), shape=(rdofs.size, n))
    b = sp.bmat([[sp.diags(KJ) + kp * sp.csr_matrix(jr.T @ jr), -kp * sp.csr_matrix(jr.T) @ s],
                 [-kp * s.T @ sp.csr_matrix(jr), k + kp * (s.T @ s)]]).tocsc()
    h = np.zeros((4, nq + n))
    h[np.arange(3), nq + 3 * tip + np.arange(3)] = 1.0
    h[3, joint] = 1.0
    return h @ spla.splu(b).solve(h.T)


def test_hybrid_w_matches_stiff_spring_model() -> None:
    pts, mapping, fem, tip = _system()
    k = fem.stiffness()
    z = np.concatenate([Q0, pts[mapping.free].ravel()])
    hybrid = HybridCompliance(mapping, z, k, KJ)
    rows = sp.vstack([hybrid.node_rows(np.repeat(tip, 3), np.eye(3)), hybrid.joint_rows([1])])
    w = hybrid.compliance(rows)
    kp = 1e5 * float(k.diagonal().max())
    w_ref = _stiff_spring_w(mapping, k, int(tip[0]), 1, kp)
    assert np.linalg.norm(w - w_ref) <= 0.01 * np.linalg.norm(w_ref)
    np.testing.assert_allclose(w, w.T, atol=1e-12 * np.abs(w).max())
    assert np.all(np.linalg.eigvalsh(w) > 0)
    # the arm's compliance matters: a clamped soft cylinder alone is much stiffer at the tip
    np.testing.assert_allclose(mapping.positions(z), pts, atol=1e-12)
    clamped = CorotationalFEM(pts, fem.tets, 0.8e6, 0.45, fixed_nodes=mapping.nodes,
                              kernels="numpy")
    free_index = int(np.flatnonzero(clamped.free_nodes == tip[0])[0])
    sel = 3 * free_index + np.arange(3)
    w_clamped = spla.splu(clamped.stiffness().tocsc()).solve(np.eye(clamped.stiffness().shape[0])[:, sel])[sel]
    assert np.trace(w[:3, :3]) > 1.5 * np.trace(w_clamped)


def test_joint_torque_row_is_inverse_joint_stiffness_for_a_rigidly_carried_part() -> None:
    """With a very stiff soft part the joint row's compliance tends to 1 / k_joint (rigid arm)."""
    x, mapping, fem, _ = _system()
    stiff = CorotationalFEM(x, fem.tets, 1e12, 0.3, kernels="numpy")
    z = np.concatenate([Q0, x[mapping.free].ravel()])
    hybrid = HybridCompliance(mapping, z, stiff.stiffness(), KJ)
    w = hybrid.compliance(hybrid.joint_rows(np.arange(5)))
    np.testing.assert_allclose(w, np.diag(1.0 / KJ), rtol=1e-6, atol=1e-6 / KJ.max())
