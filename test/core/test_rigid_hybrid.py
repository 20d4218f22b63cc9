"""Hybrid W (rigid chain + soft cylinder) against the same system with the rigid attachment
modelled as very stiff springs between the FEM nodes and the flange (no elimination by J)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.model.mesh_generation import box_mesh
from soft_inverse_ros.core.rigid.chain import RigidChain
from soft_inverse_ros.core.rigid.hybrid import HybridCompliance, SharedFactor
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
    # cond(A) is ~2.5e10 here: a backward-stable solve promises ~cond·eps ≈ 3e-6 relative
    # (the block LDLᵀ gives 1.8e-6, QDLDL 4e-8, SuperLU 4e-8); the soft part's own share is
    # ~1e-12 of 1 / k_joint, far below
    np.testing.assert_allclose(w, np.diag(1.0 / KJ), rtol=1e-5, atol=1e-5 / KJ.max())


@pytest.mark.parametrize("solver", ["block_ldl", "qdldl", "scipy"])
def test_shared_factor_is_backward_stable_on_a_nearly_rigid_arm(solver: str) -> None:
    """Normwise backward error ‖A x − b‖ / (‖A‖ ‖x‖) at machine precision on the worst-scaled
    system (a soft part 1e6 times stiffer than silicone): the joint angles each get a block of
    the block LDLᵀ (grouped three to a block, the 3 × 3 pivots' inverses gave 3e-11)."""
    x, mapping, fem, _ = _system()
    stiff = CorotationalFEM(x, fem.tets, 1e12, 0.3, kernels="numpy")
    z = np.concatenate([Q0, x[mapping.free].ravel()])
    hybrid = HybridCompliance(mapping, z, stiff.stiffness(), KJ, SharedFactor(solver))
    a = mapping.project_stiffness(z, stiff.stiffness(), joint_diagonal=KJ)
    b = np.random.default_rng(0).standard_normal((a.shape[0], 3))
    sol = hybrid.solve(b)
    for col in range(3):
        err = np.linalg.norm(a @ sol[:, col] - b[:, col]) / (abs(a).max() * np.linalg.norm(sol[:, col]))
        assert err < 1e-14, (solver, col, err)


def test_shared_factor_follows_its_newest_holder_and_keeps_old_ones_correct() -> None:
    """Two linearisations on one factor: each solves with its own matrix, in any order."""
    x, mapping, fem, _ = _system()
    factor = SharedFactor()
    z1 = np.concatenate([Q0, x[mapping.free].ravel()])
    z2 = z1.copy()
    z2[:5] += 0.3
    h1 = HybridCompliance(mapping, z1, fem.stiffness(), KJ, factor)
    h2 = HybridCompliance(mapping, z2, fem.stiffness(), 2 * KJ, factor)
    b = np.random.default_rng(1).standard_normal(mapping.n_coords)
    for h, z, kj in ((h1, z1, KJ), (h2, z2, 2 * KJ), (h1, z1, KJ)):
        a = mapping.project_stiffness(z, fem.stiffness(), joint_diagonal=kj)
        np.testing.assert_allclose(a @ h.solve(b), b, atol=1e-9 * np.abs(b).max())


def test_node_rows_of_free_and_rigidified_nodes_are_n_dot_dx_dz() -> None:
    """The free nodes' rows (z's own coordinates) and a rigidified node's (through J) both equal
    dᵀ dx_node/dz from the full Jacobian."""
    x, mapping, fem, tip = _system()
    z = np.concatenate([Q0, x[mapping.free].ravel()])
    hybrid = HybridCompliance(mapping, z, fem.stiffness(), KJ)
    jac = mapping.jacobian(z).toarray()
    rng = np.random.default_rng(2)
    for nodes in (np.array([tip[0], mapping.free[0]]), np.array([tip[0], mapping.nodes[0]])):
        d = rng.standard_normal((len(nodes), 3))
        expected = np.stack([d[k] @ jac[3 * n:3 * n + 3] for k, n in enumerate(nodes)])
        np.testing.assert_allclose(hybrid.node_rows(nodes, d).toarray(), expected, atol=1e-14)
