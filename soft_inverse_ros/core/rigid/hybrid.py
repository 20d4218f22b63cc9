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

from soft_inverse_ros.core.model.linear_solvers import DirectSolver, make_solver
from soft_inverse_ros.core.rigid.mapping import RigidMapping


class SharedFactor:
    """One sparse LDLᵀ reused by the successive linearisations of a scene.

    A is SPD (K = Σ R K0 Rᵀ is, J has full column rank, the joint stiffness is ≥ 0) and
    keeps its sparsity pattern from one linearisation to the next, so the ordering and the
    symbolic analysis are done once and each linearisation only refactorizes the values,
    with the FEM's own solvers (core/model/linear_solvers.py): the 3 × 3 block LDLᵀ when
    numba is installed, QDLDL without it, SciPy's SuperLU without either.

    - The block LDLᵀ works on node triples. Each of the ``leading`` coordinates (the joint
      angles) gets a block of its own, filled with two decoupled unit coordinates: a joint
      grouped with two others in one block made the block's explicit 3 × 3 inverse lose
      digits (normwise backward error 3e-11 on a nearly rigid arm, against 9e-16 with a
      block each and 1e-16 for QDLDL).
    - A pattern that changes is written into the union of the patterns seen so far (its
      missing entries as zeros), so the analysis is not redone for a subset.

    On the grid-7 rod (965 coordinates) a linearisation refactorizes in ~2.5 ms and solves
    64 columns in ~3 ms, against 7.5 / 5.3 ms with QDLDL and 15–19 / 25–38 ms for a fresh
    ``splu`` (BENCHMARKS.md, twenty-fifth session).

    The factor belongs to the newest :class:`HybridCompliance` built on it; an older one
    that still solves factorizes its own matrix again first (correct, only not free).
    """

    def __init__(self, solver: str | None = None) -> None:
        """``solver``: a name of :func:`make_solver` (None: block_ldl, else qdldl, else scipy)."""
        names = ("block_ldl", "qdldl", "scipy") if solver is None else (solver,)
        for i, name in enumerate(names):
            try:
                self.solver: DirectSolver = make_solver(name)
                break
            except ValueError:  # not installed here
                if i == len(names) - 1:
                    raise
        self._blocks = self.solver.name == "block_ldl"
        self._holder: object | None = None
        self._layout = (-1, -1)  # (n, leading) the index below is for
        self._index = np.zeros(0, np.int64)  # coordinate -> its row in the factorized system
        self._size = 0  # that system's size (the unit coordinates included)
        self._units = np.zeros(0, np.int64)  # the unit coordinates' rows
        self._keys = np.zeros(0, np.int64)  # sorted row * size + col of the factorized pattern
        self._pattern: tuple[np.ndarray, np.ndarray] | None = None  # its (indptr, indices)
        self._seen: tuple | None = None  # A's last (indptr, indices), its positions, the units'

    def acquire(self, holder: object, matrix: sp.csr_matrix, leading: int = 0) -> DirectSolver:
        """The solver factorized for ``holder``'s ``matrix`` (refactorized if another holds
        it); ``leading``: how many first coordinates are not node triples."""
        if self._holder is not holder:
            self._holder = None  # a failed factorization leaves no holder
            self.solver.factorize(self._embed(matrix, leading))
            self._holder = holder
        return self.solver

    def solve(self, holder: object, matrix: sp.csr_matrix, rhs: np.ndarray, leading: int = 0) -> np.ndarray:
        """``matrix``⁻¹ ``rhs`` for (n,) or (n, k) ``rhs``."""
        solver = self.acquire(holder, matrix, leading)
        rhs = np.asarray(rhs, float)
        if self._size == rhs.shape[0]:  # no unit coordinates: the index is the identity
            return solver.solve(rhs)
        return solver.solve(self._padded(rhs))[self._index]

    def quadratic_form(self, holder: object, matrix: sp.csr_matrix, rhs: np.ndarray, leading: int = 0) -> np.ndarray:
        """``rhs``ᵀ ``matrix``⁻¹ ``rhs`` (k, k) for (n, k) ``rhs``."""
        solver = self.acquire(holder, matrix, leading)
        return solver.quadratic_form(self._padded(np.asarray(rhs, float)))

    def _padded(self, rhs: np.ndarray) -> np.ndarray:
        """``rhs`` (n, ...) in the factorized system's rows (zeros on the unit coordinates)."""
        if self._size == rhs.shape[0]:
            return rhs
        padded = np.zeros((self._size,) + rhs.shape[1:])
        padded[self._index] = rhs
        return padded

    def _set_layout(self, n: int, leading: int) -> None:
        if not self._blocks:
            self._index, self._size = np.arange(n), n
        else:
            tail = n - leading
            start = 3 * leading + (-tail) % 3  # the tail's node triples start on a block
            self._index = np.concatenate([3 * np.arange(leading), start + np.arange(tail)])
            self._size = start + tail
        self._units = np.setdiff1d(np.arange(self._size), self._index)
        self._layout = (n, leading)
        self._keys, self._pattern, self._seen = np.zeros(0, np.int64), None, None

    def _embed(self, a: sp.csr_matrix, leading: int) -> sp.csr_matrix:
        """``a`` written into the factorized system (the class docstring)."""
        if (a.shape[0], leading) != self._layout:
            self._set_layout(a.shape[0], leading)
        size, seen = self._size, self._seen
        if not (seen is not None and np.array_equal(seen[0], a.indptr) and np.array_equal(seen[1], a.indices)):
            rows = self._index[np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))]
            cols = self._index[a.indices]
            keys = rows * size + cols
            pos = np.searchsorted(self._keys, keys)
            inside = pos < self._keys.size
            if self._pattern is None or not inside.all() or not np.all(self._keys[pos] == keys):
                diagonal = np.arange(size, dtype=np.int64) * (size + 1)  # the unit entries, and a full diagonal
                self._keys = np.unique(np.concatenate([self._keys, keys, cols * size + rows, diagonal]))
                indices = (self._keys % size).astype(np.int32)
                indptr = np.searchsorted(self._keys, np.arange(size + 1, dtype=np.int64) * size).astype(np.int32)
                self._pattern = (indptr, indices)
                pos = np.searchsorted(self._keys, keys)
            units = np.searchsorted(self._keys, self._units * (size + 1))
            self._seen = seen = (a.indptr.copy(), a.indices.copy(), pos, units)
        indptr, indices = self._pattern
        data = np.zeros(indices.size)
        data[seen[3]] = 1.0
        data[seen[2]] = a.data
        return sp.csr_matrix((data, indices, indptr), shape=(size, size))


class HybridCompliance:
    """Factorised hybrid stiffness at one linearisation point z, and the W of given rows."""

    def __init__(self, mapping: RigidMapping, z: np.ndarray, stiffness: sp.spmatrix,
                 joint_stiffness: np.ndarray, factor: SharedFactor | None = None) -> None:
        """``stiffness``: (3N, 3N) FEM tangent stiffness over all nodes (N/m), world frame;
        ``joint_stiffness``: (nq,) N m/rad (>= 0) of the joint servos; ``factor``: the
        scene's :class:`SharedFactor` (None: one of its own)."""
        kj = np.asarray(joint_stiffness, float)
        if kj.shape != (mapping.chain.nq,) or np.any(kj < 0) or not np.all(np.isfinite(kj)):
            raise SystemExit(f"joint_stiffness must be {mapping.chain.nq} finite values >= 0 [N m/rad]")
        self.mapping, self.z = mapping, np.asarray(z, float)
        self.jacobian = mapping.jacobian(self.z)
        self._a = mapping.project_stiffness(self.z, stiffness, joint_diagonal=kj)  # eq. 6
        self._factor = SharedFactor() if factor is None else factor
        self._leading = mapping.chain.nq
        self._factor.acquire(self, self._a, self._leading)

    def node_rows(self, nodes: np.ndarray, directions: np.ndarray) -> sp.csr_matrix:
        """Rows ``d_k^T dx_{node_k}/dz`` (k rows, n_coords columns): a force along the unit
        direction ``directions[k]`` (world) applied at FEM node ``nodes[k]``."""
        nodes = np.asarray(nodes, int)
        d = np.asarray(directions, float).reshape(-1, 3)
        m = self.mapping
        free = m.free_index[nodes]
        if np.all(free >= 0):  # free nodes only: their rows are z's own coordinates
            cols = (m.chain.nq + 3 * free[:, None] + np.arange(3)).ravel()
            out = sp.csr_matrix((d.ravel(), cols, np.arange(0, 3 * len(nodes) + 1, 3)),
                                shape=(len(nodes), m.n_coords))
            out.eliminate_zeros()  # as the product below leaves them
            return out
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
        return self._factor.solve(self, self._a, tau, self._leading)

    def compliance(self, rows_a: sp.spmatrix, rows_b: sp.spmatrix | None = None) -> np.ndarray:
        """W_ab = H_a A^{-1} H_b^T (dense, rows_a.shape[0] x rows_b.shape[0])."""
        if rows_b is None:  # symmetric: the forward half of the solve (SharedFactor.quadratic_form)
            return self._factor.quadratic_form(self, self._a, sp.csr_matrix(rows_a).T.toarray(), self._leading)
        sol = self.solve(sp.csr_matrix(rows_b).T.toarray())
        return np.asarray(sp.csr_matrix(rows_a) @ sol)
