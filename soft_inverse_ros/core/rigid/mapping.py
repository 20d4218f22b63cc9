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
        #: node -> its position among the free nodes (z = [q, x_free]), −1 for a rigidified node
        self.free_index = np.full(len(x0), -1)
        self.free_index[self.free] = np.arange(self.free.size)
        p0, r0 = chain.frame_pose(q0, self.frame)
        self.offsets = (x0[nodes] - p0) @ r0  # local offsets r_i = R0^T (x_i - p0)
        #: DOF indices into x (3N,) of the rigidified nodes (the rows of J_r) and of the free
        #: nodes (node-major, in z's order after q: J is the identity there)
        self.rigid_dofs = (3 * self.nodes[:, None] + np.arange(3)).ravel()
        self.free_dofs = (3 * self.free[:, None] + np.arange(3)).ravel()
        self._jac_pattern: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # jacobian()'s
        self._projections: list[_Projection] = []  # project_stiffness()'s, one per pattern of K

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
        if self._jac_pattern is None:  # the pattern is fixed: built once, the values gathered
            nq, nr = self.chain.nq, len(self.nodes)
            rows = np.concatenate([np.repeat(self.rigid_dofs, nq), self.free_dofs])
            cols = np.concatenate([np.tile(np.arange(nq), 3 * nr), nq + np.arange(self.free_dofs.size)])
            order = sp.csr_matrix((np.arange(rows.size, dtype=float) + 1.0, (rows, cols)),
                                  shape=(3 * self.n_nodes, self.n_coords))  # no duplicates: positions + 1
            self._jac_pattern = (order.indptr, order.indices, order.data.astype(np.int64) - 1)
        indptr, indices, gather = self._jac_pattern
        vals = np.concatenate([self.rigid_jacobian(q).ravel(), np.ones(self.free_dofs.size)])
        return sp.csr_matrix((vals[gather], indices, indptr), shape=(3 * self.n_nodes, self.n_coords))

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

    def project_stiffness(self, z: np.ndarray, k: sp.spmatrix, joint_diagonal: np.ndarray | None = None
                          ) -> sp.csr_matrix:
        """K_z = J^T K J (eq. 6), K the (3N, 3N) FEM tangent stiffness (N/m) or any (3N, 3N)
        matrix (the lumped mass), plus ``joint_diagonal`` (nq,) on the joint coordinates'
        diagonal (e.g. the joint servos' stiffness, N m/rad).

        Assembled by blocks (:class:`_Projection`, one per sparsity pattern of K): the
        free-free block is K's, the free-joint blocks are K_fr J_r and its transpose, the
        joint block J_rᵀ K_rr J_r. The result has the same pattern at every z (a product
        of sparse matrices drops the entries that happen to sum to zero, which made the
        factorization's analysis start over) and costs ~1 ms instead of ~2.7 ms on the
        grid-7 rod."""
        k = sp.csr_matrix(k)
        plan = next((p for p in self._projections if p.matches(k)), None)
        if plan is None:
            plan = _Projection(self, k)
            self._projections = [plan, *self._projections[:3]]  # a few patterns (K, the mass)
        q, _ = self.split(np.asarray(z, float))
        return plan(k.data, self.rigid_jacobian(q), joint_diagonal)


class _Projection:
    """J^T K J on a fixed pattern for one sparsity pattern of K (see
    :meth:`RigidMapping.project_stiffness`). K's stored entries are split once into the
    free-free, free-rigid, rigid-free and rigid-rigid blocks (rigid: the DOFs of the
    rigidified nodes, ``r``; free: the others, which are z's own coordinates)."""

    def __init__(self, mapping: RigidMapping, k: sp.csr_matrix) -> None:
        nq, size = mapping.chain.nq, mapping.n_coords
        n = 3 * mapping.n_nodes
        if k.shape != (n, n):
            raise ValueError(f"the matrix to project must be ({n}, {n}), got {k.shape}")
        self.indptr, self.indices = k.indptr.copy(), k.indices.copy()
        canonical = sp.csr_matrix((np.arange(k.nnz, dtype=float) + 1.0, self.indices, self.indptr), shape=k.shape)
        canonical.sum_duplicates()  # duplicate entries would add their positions: refuse them
        if canonical.nnz != k.nnz:
            raise ValueError("the matrix to project has duplicate entries")
        rows = np.repeat(np.arange(n), np.diff(self.indptr))
        cols, pos = self.indices.astype(np.int64), np.arange(k.nnz)
        zi = np.full(n, -1)
        zi[mapping.free_dofs] = nq + np.arange(mapping.free_dofs.size)
        ri = np.full(n, -1)
        ri[mapping.rigid_dofs] = np.arange(mapping.rigid_dofs.size)
        nr = mapping.rigid_dofs.size
        ff = (zi[rows] >= 0) & (zi[cols] >= 0)
        fr = (zi[rows] >= 0) & (ri[cols] >= 0)
        rf = (ri[rows] >= 0) & (zi[cols] >= 0)
        rr = (ri[rows] >= 0) & (ri[cols] >= 0)
        self.ff_pos = pos[ff]
        # K_fr over the free coordinates that touch a rigid DOF (its rows), K_rf likewise
        self.fr_rows, fr_local = np.unique(zi[rows[fr]], return_inverse=True)
        self.k_fr = sp.csr_matrix((pos[fr] + 1.0, (fr_local, ri[cols[fr]])), shape=(self.fr_rows.size, nr))
        self.fr_gather = self.k_fr.data.astype(np.int64) - 1
        self.rf_cols, rf_local = np.unique(zi[cols[rf]], return_inverse=True)
        self.k_rf = sp.csr_matrix((pos[rf] + 1.0, (ri[rows[rf]], rf_local)), shape=(nr, self.rf_cols.size))
        self.rf_gather = self.k_rf.data.astype(np.int64) - 1
        self.rr = (ri[rows[rr]], ri[cols[rr]], pos[rr])
        self.nr = nr
        # the result's pattern: every block's entries (disjoint), as sorted keys row * size + col
        q = np.arange(nq)
        blocks = [zi[rows[ff]] * size + zi[cols[ff]],
                  (self.fr_rows[:, None] * size + q[None, :]).ravel(),
                  (q[:, None] * size + self.rf_cols[None, :]).ravel(),
                  (q[:, None] * size + q[None, :]).ravel()]
        keys = np.concatenate(blocks)
        order = np.argsort(keys, kind="stable")
        self.slots = np.empty(keys.size, np.int64)
        self.slots[order] = np.arange(keys.size)
        self.bounds = np.cumsum([0] + [b.size for b in blocks])
        sorted_keys = keys[order]
        self.out_indices = (sorted_keys % size).astype(np.int32)
        self.out_indptr = np.searchsorted(sorted_keys, np.arange(size + 1) * size).astype(np.int32)
        self.size = size

    def matches(self, k: sp.csr_matrix) -> bool:
        """``k`` has this plan's pattern."""
        return (k.indptr.shape == self.indptr.shape and k.indices.shape == self.indices.shape
                and np.array_equal(k.indptr, self.indptr) and np.array_equal(k.indices, self.indices))

    def __call__(self, data: np.ndarray, jr: np.ndarray, joint_diagonal: np.ndarray | None = None) -> sp.csr_matrix:
        """J^T K J (+ ``joint_diagonal`` on the joint block's diagonal) for K's values
        ``data`` and the rigid Jacobian ``jr`` (3 n_rigid, nq)."""
        k_fr, k_rf = self.k_fr, self.k_rf
        k_fr.data = data[self.fr_gather]
        k_rf.data = data[self.rf_gather]
        k_rr = np.zeros((self.nr, self.nr))
        i, j, pos = self.rr
        k_rr[i, j] = data[pos]
        values = np.empty(self.bounds[-1])
        b = self.bounds
        values[b[0]:b[1]] = data[self.ff_pos]
        values[b[1]:b[2]] = (k_fr @ jr).ravel()  # (fr rows, nq)
        values[b[2]:b[3]] = (k_rf.T @ jr).T.ravel()  # (nq, rf cols)
        k_qq = jr.T @ k_rr @ jr
        if joint_diagonal is not None:
            k_qq[np.diag_indices_from(k_qq)] += joint_diagonal
        values[b[3]:b[4]] = k_qq.ravel()
        out = np.empty_like(values)
        out[self.slots] = values
        return sp.csr_matrix((out, self.out_indices, self.out_indptr), shape=(self.size, self.size))
