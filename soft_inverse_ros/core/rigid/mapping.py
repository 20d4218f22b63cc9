"""Rigidified FEM nodes driven by a rigid frame (Coevoet et al., eq. 1-6).

Nodes listed in ``nodes`` are attached to a frame of a :class:`RigidChain` with fixed offsets
``r`` (m, in the frame's local axes, taken at the reference configuration). The remaining nodes
keep their own coordinates. Mixed coordinates: ``z = [q, x_free]`` (q in rad, x_free in m,
node-major x,y,z). Mapping ``x = M(z)`` (eq. 1-2), Jacobian ``J = dM/dz`` (eq. 3), forces
``tau = J^T f`` (eq. 4), stiffness ``K_z = J^T K J`` (eq. 6, the paper's projection; the
geometric term ``(dJ^T/dz) f`` is left out, as in eq. 6).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from soft_inverse_ros.core.rigid.chain import RigidChain


def _skew_columns(v: np.ndarray) -> np.ndarray:
    """(n, 3, 3) skew matrices [v]x of the rows of v (n, 3)."""
    s = np.zeros((len(v), 3, 3))
    s[:, 0, 1], s[:, 0, 2] = -v[:, 2], v[:, 1]
    s[:, 1, 0], s[:, 1, 2] = v[:, 2], -v[:, 0]
    s[:, 2, 0], s[:, 2, 1] = -v[:, 1], v[:, 0]
    return s


class RigidMapping:
    """x = M(q, x_free): rigidified nodes follow ``frame``; free nodes are the identity."""

    def __init__(self, chain: RigidChain, frame: str, rest_positions: np.ndarray,
                 nodes: np.ndarray, q0: np.ndarray) -> None:
        """``rest_positions`` (N, 3) m world; ``nodes`` rigidified node indices; ``q0`` the
        configuration at which ``rest_positions`` were given (fixes the local offsets)."""
        x0 = np.asarray(rest_positions, float)
        nodes = np.unique(np.asarray(nodes, int))
        if nodes.size == 0 or nodes.min() < 0 or nodes.max() >= len(x0):
            raise SystemExit(f"rigidified node indices must lie in [0, {len(x0)}) and not be empty")
        q0 = np.asarray(q0, float)
        if q0.shape != (chain.nq,):
            raise SystemExit(f"q0 must have {chain.nq} joint coordinates, got shape {q0.shape}")
        self.chain, self.frame = chain, chain.frame_id(frame)
        self.n_nodes, self.nodes = len(x0), nodes
        self.free = np.setdiff1d(np.arange(len(x0)), nodes)
        p0, r0 = chain.frame_pose(q0, self.frame)
        self.offsets = (x0[nodes] - p0) @ r0  # local offsets r_i = R0^T (x_i - p0)
        #: DOF indices into x (3N,) of the rigidified nodes (the rows of J_r) and of the free
        #: nodes (node-major, in z's order after q: J is the identity there)
        self.rigid_dofs = (3 * self.nodes[:, None] + np.arange(3)).ravel()
        self.free_dofs = (3 * self.free[:, None] + np.arange(3)).ravel()

    @property
    def n_coords(self) -> int:
        """Size of the mixed coordinate vector z = [q, x_free]."""
        return self.chain.nq + 3 * len(self.free)

    def split(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(q, x_free (n_free, 3)) from the mixed vector z."""
        nq = self.chain.nq
        return z[:nq], z[nq:].reshape(-1, 3)

    def positions(self, z: np.ndarray) -> np.ndarray:
        """All FEM node positions (N, 3) in m, world frame (eq. 2)."""
        q, xf = self.split(np.asarray(z, float))
        p, r = self.chain.frame_pose(q, self.frame)
        x = np.empty((self.n_nodes, 3))
        x[self.nodes] = p + self.offsets @ r.T
        x[self.free] = xf
        return x

    def rigid_jacobian(self, q: np.ndarray) -> np.ndarray:
        """(3 n_rigid, nq) Jacobian of the rigidified node positions w.r.t. q (J_r, eq. 3):
        ẋ_i = v + ω × (R r_i) = (J_v - [R r_i]x J_ω) q̇."""
        p, r = self.chain.frame_pose(q, self.frame)
        jac = self.chain.frame_jacobian(q, self.frame)
        arm = self.offsets @ r.T
        rows = jac[None, :3, :] - _skew_columns(arm) @ jac[None, 3:, :]
        return rows.reshape(-1, self.chain.nq)

    def jacobian(self, z: np.ndarray) -> sp.csr_matrix:
        """(3N, n_coords) sparse Jacobian dx/dz of the whole mapping (eq. 3)."""
        q, _ = self.split(np.asarray(z, float))
        nq, nr = self.chain.nq, len(self.nodes)
        jr = self.rigid_jacobian(q)
        rdofs, fdofs = self.rigid_dofs, self.free_dofs
        rows = np.concatenate([np.repeat(rdofs, nq), fdofs])
        cols = np.concatenate([np.tile(np.arange(nq), 3 * nr), nq + np.arange(fdofs.size)])
        vals = np.concatenate([jr.ravel(), np.ones(fdofs.size)])
        return sp.csr_matrix((vals, (rows, cols)), shape=(3 * self.n_nodes, self.n_coords))

    def dense_jacobian(self, z: np.ndarray) -> np.ndarray:
        """(3N, n_coords) dx/dz as a dense array: the same entries as :meth:`jacobian` (for
        small systems, whose sparse products cost more in overhead than in arithmetic)."""
        q, _ = self.split(np.asarray(z, float))
        nq = self.chain.nq
        j = np.zeros((3 * self.n_nodes, self.n_coords))
        j[self.rigid_dofs, :nq] = self.rigid_jacobian(q)
        j[self.free_dofs, nq + np.arange(self.free_dofs.size)] = 1.0
        return j

    def forces_to_coords(self, z: np.ndarray, f: np.ndarray, jac: sp.csr_matrix | None = None) -> np.ndarray:
        """Generalised forces tau = J^T f (eq. 4): N m per joint, N per free node dof.
        ``jac``: :meth:`jacobian` at ``z`` when the caller has built it."""
        j = self.jacobian(z) if jac is None else jac
        return j.T @ np.asarray(f, float).ravel()

    def project_stiffness(self, z: np.ndarray, k: sp.spmatrix, jac: sp.csr_matrix | None = None) -> sp.csr_matrix:
        """K_z = J^T K J (eq. 6), K the (3N, 3N) FEM tangent stiffness (N/m) or any (3N, 3N)
        matrix (the lumped mass). ``jac``: :meth:`jacobian` at ``z`` when the caller has
        built it."""
        j = self.jacobian(z) if jac is None else jac
        return (j.T @ sp.csr_matrix(k) @ j).tocsr()
