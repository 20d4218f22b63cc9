"""Hybrid soft-rigid statics and compliance in mixed coordinates z = [q, x_free] (Coevoet eq. 6-11).

The linearised static system in z is ``A dz = tau`` with ``A = J^T K J + K_joint`` (eq. 6; K the
(3N, 3N) FEM tangent stiffness in N/m, K_joint the joint servo stiffness in N m/rad, zero for
torque-driven joints). Constraint rows (effectors, actuators, contacts) are rows ``H`` acting on
z; the compliance seen by their forces is ``W = H A^{-1} H^T`` (eq. 11's Schur complement), in
m/N for node rows and rad/(N m) for joint rows.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from soft_inverse_ros.core.rigid.mapping import RigidMapping


class HybridCompliance:
    """Factorised hybrid stiffness at one linearisation point z, and the W of given rows."""

    def __init__(self, mapping: RigidMapping, z: np.ndarray, stiffness: sp.spmatrix,
                 joint_stiffness: np.ndarray) -> None:
        """``stiffness``: (3N, 3N) FEM tangent stiffness over all nodes (N/m), world frame;
        ``joint_stiffness``: (nq,) N m/rad (>= 0) of the joint servos."""
        kj = np.asarray(joint_stiffness, float)
        if kj.shape != (mapping.chain.nq,) or np.any(kj < 0) or not np.all(np.isfinite(kj)):
            raise SystemExit(f"joint_stiffness must be {mapping.chain.nq} finite values >= 0 [N m/rad]")
        self.mapping, self.z = mapping, np.asarray(z, float)
        self.jacobian = mapping.jacobian(self.z)
        nq, n = mapping.chain.nq, mapping.n_coords
        joints = sp.diags(np.concatenate([kj, np.zeros(n - nq)]), format="csr")
        a = mapping.project_stiffness(self.z, stiffness, jac=self.jacobian) + joints  # eq. 6
        self._lu = spla.splu(a.tocsc())

    def node_rows(self, nodes: np.ndarray, directions: np.ndarray) -> sp.csr_matrix:
        """Rows ``d_k^T dx_{node_k}/dz`` (k rows, n_coords columns): a force along the unit
        direction ``directions[k]`` (world) applied at FEM node ``nodes[k]``."""
        nodes = np.asarray(nodes, int)
        d = np.asarray(directions, float).reshape(-1, 3)
        n = 3 * self.mapping.n_nodes
        rows = np.repeat(np.arange(len(nodes)), 3)
        cols = (3 * nodes[:, None] + np.arange(3)).ravel()
        hx = sp.csr_matrix((d.ravel(), (rows, cols)), shape=(len(nodes), n))
        return (hx @ self.jacobian).tocsr()

    def joint_rows(self, joints: np.ndarray) -> sp.csr_matrix:
        """Rows selecting joint coordinates q_j (a torque actuator at joint j, N m)."""
        joints = np.asarray(joints, int)
        return sp.csr_matrix((np.ones(len(joints)), (np.arange(len(joints)), joints)),
                             shape=(len(joints), self.mapping.n_coords))

    def solve(self, tau: np.ndarray) -> np.ndarray:
        """dz = A^{-1} tau (rad for joints, m for free nodes)."""
        return self._lu.solve(np.asarray(tau, float))

    def compliance(self, rows_a: sp.spmatrix, rows_b: sp.spmatrix | None = None) -> np.ndarray:
        """W_ab = H_a A^{-1} H_b^T (dense, rows_a.shape[0] x rows_b.shape[0])."""
        rows_b = rows_a if rows_b is None else rows_b
        sol = self._lu.solve(np.asarray(sp.csr_matrix(rows_b).T.toarray()))
        return np.asarray(sp.csr_matrix(rows_a) @ sol)
