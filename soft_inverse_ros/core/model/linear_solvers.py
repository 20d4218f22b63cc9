"""Sparse symmetric positive-definite solvers behind one interface, plus factor reuse.

Direct solvers (all take the full symmetric CSR matrix of the reduced stiffness):

- ``"block_ldl"``: LDLᵀ by 3 × 3 node blocks, compiled with numba (:mod:`block_ldl`;
  ordering and pattern once per pattern, the numeric factorization each update). On the
  Diamond's K (4710 unknowns) it refactorizes in a third of QDLDL's time or less, and a
  10k-node box's (30 576) in 2.5 s against superlu_nd's 3.0 s (BENCHMARKS.md, nineteenth
  session).
  Needs numba; matrices that are not node triples go to QDLDL.
- ``"cholmod"``: supernodal Cholesky from SuiteSparse via scikit-sparse (optional: needs
  ``libsuitesparse-dev``/``libopenblas-dev`` from apt and ``scikit-sparse`` from PyPI; see
  ``requirements/fast.txt``). Refactorization reuses the symbolic analysis.
- ``"pardiso"``: Intel MKL PARDISO via pypardiso in SPD mode (optional, if importable).
- ``"qdldl"``: the QDLDL LDLᵀ factorization (AMD ordering, numeric refactorization with the
  same pattern); solves one right-hand side per call.
- ``"scipy"``: SuperLU (``scipy.sparse.linalg.splu``) with a symmetric ordering and
  symmetric-mode pivoting: always available, slowest to factorize.
- ``"superlu_nd"``: SuperLU's supernodal factorization on K permuted by METIS's nested
  dissection of the mesh graph (pip ``pymetis``; no pivoting: K = P L D Lᵀ Pᵀ), solved
  by :mod:`ldl_kernels`. QDLDL factorizes column by column, which is fastest on small
  meshes but scales badly (a 10k-node box: ~15 s against ~4 s); without numba ``auto``
  takes this one from :data:`SUPERNODAL_SIZE` unknowns.

``auto`` (:func:`make_solver`): ``block_ldl`` whenever numba is installed (the set-up
installs it), unless CHOLMOD or PARDISO is installed and the system has at least
:data:`SUPERNODAL_SIZE` unknowns; then the first of the rest that imports.

:class:`FactorReuseSolver` keeps the factorization of a reference matrix and solves the
current one by block preconditioned conjugate gradients (one CG per column, vectorized,
warm-started from the previous solution), refactorizing when the iterations exceed a
threshold, so a matrix that changes little between updates costs a few preconditioned
iterations instead of a factorization.

Gram columns. A caller that only needs products G = Bᵀ K⁻¹ B of some columns (the
compliance W = J K⁻¹ Jᵀ) forms them from approximate columns X and their residual
R = B − K X as Ĝ = Bᵀ X + Xᵀ R (:func:`gram_from_columns`), whose error is Eᵀ K E with
E = K⁻¹ R: second order in the residual, |G_ij − Ĝ_ij| ≤ √(e_i e_j) with e_j = r_jᵀ K⁻¹ r_j
(Cauchy–Schwarz in the K inner product). Such columns are judged by that energy error
instead of by their residual: e_j ≤ ``gram_rtol`` · Ĝ_jj bounds every entry's error by
``gram_rtol`` · max_j Ĝ_jj. The energy is bounded through K's lowest modes v_i (λ_i):
e_j ≤ Σ_i (v_iᵀ r_j)² / λ_i + |r_j − Σ_i v_i v_iᵀ r_j|² / λ_{m+1}. Judged so, the
columns need fewer PCG iterations than a residual test for the same accuracy of W (a warm
start within the bound needs no preconditioner solve at all).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

__all__ = [
    "DirectSolver",
    "ScipySuperLUSolver",
    "QDLDLSolver",
    "BlockLDLSolver",
    "CholmodSolver",
    "PardisoSolver",
    "SOLVER_NAMES",
    "SuperLUNDSolver",
    "FactorReuseSolver",
    "PCGStats",
    "ConvergenceError",
    "available_solvers",
    "gram_from_columns",
    "make_solver",
]


class ConvergenceError(RuntimeError):
    """A solve or equilibrium iteration did not reach its tolerance (or produced NaN)."""


class DirectSolver(ABC):
    """A direct sparse SPD solver: ``factorize(K)`` then ``solve(B)`` for (n,) or (n, k) B."""

    name: str = "?"

    @abstractmethod
    def factorize(self, matrix: sp.spmatrix) -> None:
        """(Re)factorize K (full symmetric storage); reuses the analysis for the same pattern."""

    @abstractmethod
    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """K⁻¹ B for B of shape (n,) or (n, k)."""

    def quadratic_form(self, rhs: np.ndarray) -> np.ndarray:
        """Bᵀ K⁻¹ B (k, k) for B of shape (n, k) (e.g. a compliance H K⁻¹ Hᵀ)."""
        rhs = np.asarray(rhs, dtype=float)
        return rhs.T @ self.solve(rhs)

    @staticmethod
    def _check(matrix: sp.spmatrix) -> sp.csr_matrix:
        if type(matrix) is not sp.csr_matrix:
            matrix = sp.csr_matrix(matrix)  # (a CSR matrix as it is: keeps its sorted-indices flag)
        if matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"matrix must be square, got {matrix.shape}")
        if not np.all(np.isfinite(matrix.data)):
            raise ValueError("matrix has non-finite entries")
        return matrix


class ScipySuperLUSolver(DirectSolver):
    """SuperLU with MMD on Aᵀ+A ordering and diagonal pivoting (symmetric mode)."""

    name = "scipy"

    def __init__(self) -> None:
        self._lu = None

    def factorize(self, matrix: sp.spmatrix) -> None:
        from scipy.sparse.linalg import splu

        matrix = self._check(matrix)
        self._lu = splu(
            matrix.tocsc(),
            permc_spec="MMD_AT_PLUS_A",
            diag_pivot_thresh=0.0,
            options={"SymmetricMode": True},
        )

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        if self._lu is None:
            raise RuntimeError("factorize() first")
        return self._lu.solve(np.asarray(rhs, dtype=float))


def _same_pattern(pattern: tuple | None, matrix: sp.csr_matrix) -> bool:
    """``matrix`` (sorted CSR) has the sparsity ``pattern`` = (n, indptr, indices) recorded
    at an earlier factorization (None: none yet)."""
    if pattern is None:
        return False
    n, indptr, indices = pattern
    return (
        matrix.shape[0] == n
        and matrix.nnz == indices.shape[0]
        and np.array_equal(matrix.indptr, indptr)
        and np.array_equal(matrix.indices, indices)
    )


def _block_solve_kernel():
    """:func:`~soft_inverse_ros.core.model.ldl_kernels.ldl_block_solve`, compiled now (see
    ``ldl_kernels.warm_up``), or None without numba."""
    try:
        from soft_inverse_ros.core.model import ldl_kernels
    except ImportError:
        return None
    ldl_kernels.warm_up()
    return ldl_kernels.ldl_block_solve


class QDLDLSolver(DirectSolver):
    """QDLDL (pip ``qdldl``): LDLᵀ with AMD; ``factorize`` on the same pattern only updates.

    The upper triangle QDLDL takes is gathered from K's data through an index computed
    once per pattern (no ``scipy.sparse.triu`` per update). Block right-hand sides are
    solved in one pass over the factor by :mod:`ldl_kernels` when numba is installed
    (QDLDL's binding solves one column per call), else column by column with QDLDL.
    """

    name = "qdldl"

    def __init__(self) -> None:
        import qdldl  # noqa: F401  (fail early when absent)

        self._solver = None
        self._pattern: tuple | None = None  # (n, indptr, indices) of K's CSR pattern
        self._upper: sp.csc_matrix | None = None  # upper triangle of K, data refreshed per update
        self._gather: np.ndarray | None = None  # upper.data = K.data[gather]
        self._factor: tuple | None = None  # (L indptr, indices, data, d, perm) for the block solve
        self._block_solve = _block_solve_kernel()

    def factorize(self, matrix: sp.spmatrix) -> None:
        import qdldl

        matrix = self._check(matrix)
        matrix.sort_indices()
        if _same_pattern(self._pattern, matrix):
            self._upper.data[:] = matrix.data[self._gather]
            self._solver.update(self._upper, upper=True)
        else:
            # index of each upper-triangle entry in K.data: triu of a matrix holding 0..nnz-1
            # (exact in float64), then the values gathered through it
            positions = sp.csr_matrix((np.arange(matrix.nnz, dtype=float), matrix.indices, matrix.indptr),
                                      shape=matrix.shape)
            upper = sp.triu(positions, format="csc")
            upper.sort_indices()
            self._gather = upper.data.astype(np.int64)
            upper.data = matrix.data[self._gather]
            self._solver = qdldl.Solver(upper, upper=True)
            self._upper = upper
            self._pattern = (matrix.shape[0], matrix.indptr.copy(), matrix.indices.copy())
        self._factor = None  # extracted at the first block solve of this factorization

    def _factor_arrays(self) -> tuple:
        """(L indptr, indices, data, d, perm) of the current factorization, for the block solve."""
        if self._factor is None:
            lower, d, perm = self._solver.factors()
            lower = sp.csc_matrix(lower)
            self._factor = (lower.indptr, lower.indices, lower.data, np.asarray(d, dtype=float),
                            np.asarray(perm, dtype=np.int64))
        return self._factor

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        if self._solver is None:
            raise RuntimeError("factorize() first")
        rhs = np.asarray(rhs, dtype=float)
        if rhs.ndim == 1:
            return self._solver.solve(rhs)
        if self._block_solve is not None and rhs.shape[1] > 1:
            return self._block_solve(*self._factor_arrays(), np.ascontiguousarray(rhs))
        return np.column_stack([self._solver.solve(np.ascontiguousarray(c)) for c in rhs.T])


class BlockLDLSolver(DirectSolver):
    """LDLᵀ by 3 × 3 node blocks (:mod:`~soft_inverse_ros.core.model.block_ldl`, numba):
    the ordering and the pattern of L are computed once per pattern; ``factorize`` on the
    same pattern only runs the compiled numeric factorization.

    Needs numba (ImportError without: ``auto`` then takes the next solver). A matrix whose
    size is not a multiple of 3 (not node triples, e.g. a hybrid system with joint
    coordinates) is factorized by QDLDL instead, and :attr:`name` says ``qdldl``.
    """

    name = "block_ldl"

    def __init__(self) -> None:
        from soft_inverse_ros.core.model import block_ldl

        if block_ldl.njit is None:
            raise ImportError("block_ldl needs numba")
        block_ldl.warm_up()
        self._b = block_ldl
        self._pattern: tuple | None = None
        self._symbolic: tuple | None = None  # (dofs, a_colptr, a_rows, a_pos, l_colptr, l_rows)
        self._l_vals = self._d = self._d_inv = None
        self._fallback: QDLDLSolver | None = None
        self._factored = False

    def factorize(self, matrix: sp.spmatrix) -> None:
        matrix = self._check(matrix)
        n = matrix.shape[0]
        if n % self._b.BLOCK:
            if self._fallback is None:
                self._fallback = QDLDLSolver()
            self.name = self._fallback.name
            self._fallback.factorize(matrix)
            return
        self._fallback, self.name = None, "block_ldl"
        matrix.sort_indices()
        if not _same_pattern(self._pattern, matrix):
            graph = self._b.node_pattern(matrix)
            perm, l_colptr, l_rows = self._b.symbolic(graph)
            a_colptr, a_rows, a_pos = self._b.gather_index(matrix, perm)
            dofs = (self._b.BLOCK * perm[:, None] + np.arange(self._b.BLOCK)).ravel()
            self._symbolic = (dofs, a_colptr, a_rows, a_pos, l_colptr, l_rows)
            nb = graph.shape[0]
            self._l_vals = np.zeros((l_rows.size, 3, 3))
            self._d = np.zeros((nb, 3, 3))
            self._d_inv = np.zeros((nb, 3, 3))
            self._pattern = (n, matrix.indptr.copy(), matrix.indices.copy())
        _, a_colptr, a_rows, a_pos, l_colptr, l_rows = self._symbolic
        self._factored = False
        bad = self._b.factorize_blocks(matrix.data, a_colptr, a_rows, a_pos, l_colptr, l_rows,
                                       self._l_vals, self._d, self._d_inv)
        if bad >= 0:
            raise ConvergenceError(f"block LDL: the pivot block of node {int(self._symbolic[0][3 * bad]) // 3} "
                                   "is singular (the stiffness matrix is singular: is the robot fixed?)")
        self._factored = True

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        if self._fallback is not None:
            return self._fallback.solve(rhs)
        if not self._factored:
            raise RuntimeError("factorize() first")
        rhs = np.asarray(rhs, dtype=float)
        dofs, *_, l_colptr, l_rows = self._symbolic
        out = self._b.solve_blocks(l_colptr, l_rows, self._l_vals, self._d_inv, dofs,
                                   np.ascontiguousarray(rhs.reshape(rhs.shape[0], -1)))
        return out.reshape(rhs.shape)

    def quadratic_form(self, rhs: np.ndarray) -> np.ndarray:
        """Bᵀ K⁻¹ B = Yᵀ D⁻¹ Y with Y = L⁻¹ Pᵀ B: the forward substitution only, then one
        matrix product (half the work of :meth:`solve`)."""
        if self._fallback is not None:
            return self._fallback.quadratic_form(rhs)
        if not self._factored:
            raise RuntimeError("factorize() first")
        rhs = np.asarray(rhs, dtype=float)
        dofs, *_, l_colptr, l_rows = self._symbolic
        y = self._b.forward_blocks(l_colptr, l_rows, self._l_vals, dofs, np.ascontiguousarray(rhs))
        z = np.einsum("bij,bjm->bim", self._d_inv, y)
        out = y.reshape(-1, rhs.shape[1]).T @ z.reshape(-1, rhs.shape[1])
        return 0.5 * (out + out.T)


class SuperLUNDSolver(DirectSolver):
    """SuperLU (supernodal) on K permuted by a METIS nested dissection, as LDLᵀ.

    The ordering is computed once per pattern on the graph of 3 × 3 node blocks (any
    symmetric ordering is valid; with FEM's three DOFs per node it is the mesh's graph),
    SuperLU factorizes the permuted K with its natural order and diagonal pivots
    (symmetric mode: SPD needs no pivoting), so K = P L U Pᵀ with U = D Lᵀ; block
    right-hand sides are solved in one pass over L by :mod:`ldl_kernels` (SuperLU's own
    solve without numba).
    """

    name = "superlu_nd"

    def __init__(self) -> None:
        import pymetis  # noqa: F401  (fail early when absent)

        self._pattern: tuple | None = None  # (n, indptr, indices) of K's CSR pattern
        self._perm: np.ndarray | None = None  # K_p = K[perm][:, perm]
        self._lu = None
        self._factor: tuple | None = None  # (L indptr, indices, data, d, perm) for the block solve
        self._block_solve = _block_solve_kernel()

    @staticmethod
    def nested_dissection(matrix: sp.csr_matrix) -> np.ndarray:
        """A fill-reducing symmetric permutation of K (METIS nested dissection), (n,)."""
        import pymetis

        n = matrix.shape[0]
        block = 3 if n % 3 == 0 and n >= 6 else 1
        pattern = sp.csr_matrix((np.ones(matrix.nnz), matrix.indices, matrix.indptr), shape=matrix.shape)
        if block > 1:  # the graph of node blocks: S |K| Sᵀ with S summing each block's rows
            s = sp.csr_matrix((np.ones(n), np.arange(n) // block, np.arange(n + 1)), shape=(n, n // block)).T
            pattern = (s @ pattern @ s.T).tocsr()
        pattern.setdiag(0.0)
        pattern.eliminate_zeros()
        graph = pymetis.CSRAdjacency(pattern.indptr.astype(np.int64), pattern.indices.astype(np.int64))
        order, _ = pymetis.nested_dissection(graph)
        order = np.asarray(order, dtype=np.int64)
        return (block * order[:, None] + np.arange(block)).ravel()

    def factorize(self, matrix: sp.spmatrix) -> None:
        from scipy.sparse.linalg import splu

        matrix = self._check(matrix)
        matrix.sort_indices()
        n = matrix.shape[0]
        if not _same_pattern(self._pattern, matrix):
            self._perm = self.nested_dissection(matrix)
            self._pattern = (n, matrix.indptr.copy(), matrix.indices.copy())
        permuted = matrix[self._perm][:, self._perm].tocsc()
        self._lu = splu(permuted, permc_spec="NATURAL", diag_pivot_thresh=0.0,
                        options={"SymmetricMode": True})
        if not (np.array_equal(self._lu.perm_r, np.arange(n)) and np.array_equal(self._lu.perm_c, np.arange(n))):
            raise RuntimeError("SuperLU pivoted: the matrix is not symmetric positive definite")
        self._factor = None  # extracted at the first block solve of this factorization

    def _factor_arrays(self) -> tuple:
        """(strict L indptr, indices, data, d, perm) of K_p = L D Lᵀ, for the block solve."""
        if self._factor is None:
            lower = sp.tril(self._lu.L, -1, format="csc")
            lower.eliminate_zeros()
            lower.sort_indices()
            d = np.asarray(self._lu.U.diagonal(), dtype=float)
            index = np.int32 if lower.nnz < 2**31 else np.int64  # int32: the compiled signature
            self._factor = (lower.indptr.astype(index), lower.indices.astype(index), lower.data,
                            d, self._perm)
        return self._factor

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        if self._lu is None:
            raise RuntimeError("factorize() first")
        rhs = np.asarray(rhs, dtype=float)
        if self._block_solve is not None and rhs.ndim == 2 and rhs.shape[1] > 1:
            return self._block_solve(*self._factor_arrays(), np.ascontiguousarray(rhs))
        x = np.empty_like(rhs)
        x[self._perm] = self._lu.solve(np.ascontiguousarray(rhs[self._perm]))
        return x


class CholmodSolver(DirectSolver):
    """CHOLMOD supernodal Cholesky (scikit-sparse); symbolic analysis done once per pattern."""

    name = "cholmod"

    def __init__(self) -> None:
        from sksparse import cholmod  # noqa: F401

        self._factor = None
        self._pattern: tuple[int, int] | None = None
        self._indices = self._indptr = None

    def factorize(self, matrix: sp.spmatrix) -> None:
        from sksparse.cholmod import analyze

        csr = self._check(matrix)
        # K is symmetric: its CSR arrays are the CSC arrays of Kᵀ = K (no conversion).
        csc = sp.csc_matrix((csr.data, csr.indices, csr.indptr), shape=csr.shape, copy=False)
        key = (csc.shape[0], csc.nnz)
        same = (
            self._factor is not None and self._pattern == key
            and np.array_equal(self._indices, csc.indices) and np.array_equal(self._indptr, csc.indptr)
        )
        if not same:
            self._indices, self._indptr = csc.indices.copy(), csc.indptr.copy()
            self._factor = analyze(csc, mode="supernodal", ordering_method="best")
            self._pattern = key
        self._factor.cholesky_inplace(csc)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        if self._factor is None:
            raise RuntimeError("factorize() first")
        return self._factor(np.asarray(rhs, dtype=float))


class PardisoSolver(DirectSolver):
    """MKL PARDISO (pip ``pypardiso``) in real symmetric positive-definite mode (mtype 2)."""

    name = "pardiso"

    def __init__(self) -> None:
        import pypardiso

        self._solver = pypardiso.PyPardisoSolver(mtype=2)
        self._matrix: sp.csr_matrix | None = None

    def factorize(self, matrix: sp.spmatrix) -> None:
        upper = sp.triu(self._check(matrix), format="csr")
        upper.sort_indices()
        self._solver.factorize(upper)
        self._matrix = upper

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        if self._matrix is None:
            raise RuntimeError("factorize() first")
        return self._solver.solve(self._matrix, np.asarray(rhs, dtype=float))


_SOLVERS: dict[str, type[DirectSolver]] = {
    "block_ldl": BlockLDLSolver,
    "cholmod": CholmodSolver,
    "pardiso": PardisoSolver,
    "qdldl": QDLDLSolver,
    "superlu_nd": SuperLUNDSolver,
    "scipy": ScipySuperLUSolver,
}
#: every name :func:`make_solver` accepts
SOLVER_NAMES = ("auto", *_SOLVERS)
#: preference order of ``make_solver("auto")`` (fastest first, as measured by bench fem).
AUTO_ORDER = ("block_ldl", "cholmod", "pardiso", "qdldl", "scipy")
#: from this many unknowns ``auto`` tries the supernodal CHOLMOD and PARDISO (when installed)
#: before the node-block LDLᵀ, and the supernodal ``superlu_nd`` before QDLDL
SUPERNODAL_SIZE = 12_000
AUTO_ORDER_LARGE = ("cholmod", "pardiso", "block_ldl", "superlu_nd", "qdldl", "scipy")


def available_solvers() -> list[str]:
    """Names of the direct solvers that import on this machine."""
    names = []
    for name in AUTO_ORDER_LARGE:
        try:
            _SOLVERS[name]()
        except ImportError:
            continue
        names.append(name)
    return names


def make_solver(name: str = "auto", *, size: int | None = None) -> DirectSolver:
    """A direct solver by name (``auto``: the first of :data:`AUTO_ORDER` that imports, or
    of :data:`AUTO_ORDER_LARGE` for ``size`` ≥ :data:`SUPERNODAL_SIZE` unknowns)."""
    if name == "auto":
        large = size is not None and size >= SUPERNODAL_SIZE
        for candidate in AUTO_ORDER_LARGE if large else AUTO_ORDER:
            try:
                return _SOLVERS[candidate]()
            except ImportError:
                continue
        raise RuntimeError("no sparse solver available")  # scipy is always there
    if name not in _SOLVERS:
        raise ValueError(f"unknown solver {name!r}; choose one of {['auto', *_SOLVERS]}")
    try:
        return _SOLVERS[name]()
    except ImportError as exc:
        raise ValueError(f"solver {name!r} is not installed here ({exc})") from exc


@dataclass
class PCGStats:
    """Counters of a :class:`FactorReuseSolver` (cumulative unless noted)."""

    solves: int = 0
    factorizations: int = 0
    direct_solves: int = 0  #: solves done by a fresh factorization (no PCG)
    last_iterations: int = 0  #: PCG iterations of the last solve (0: exact factor solve)
    last_residual: float = 0.0  #: max relative residual over columns of the last solve
    total_iterations: int = 0
    factorization_time: float = 0.0
    history: list[int] = field(default_factory=list)


class FactorReuseSolver:
    """Solve K X = B with a factorization of a reference K as CG preconditioner.

    The first solve factorizes K exactly. Later solves run preconditioned CG on the
    current K (one CG per column, vectorized across columns) warm-started from ``x0``,
    preconditioned by the reference factor. The policy is cost based: when the last PCG
    solve's predicted cost (its iterations × the measured time per iteration) exceeds a
    fresh factorization plus a direct solve (measured too), the next solve refactorizes K
    and solves directly; a PCG probe (capped at the cost of a refactorization) is retried
    after ``probe_every`` solves, the interval doubling after each losing probe (up to 16×)
    and going back to ``probe_every`` once PCG wins a solve that is not a probe, so the
    solver picks whichever is cheaper for the mesh size and the rate of change of K.
    A PCG solve above ``refactor_iterations`` iterations (or not converged within
    ``max_iterations``) refactorizes (synchronously, or in a background thread with
    ``background=True``, the old factor preconditioning meanwhile).

    Columns marked ``gram`` in :meth:`solve` are judged by the energy bound of the module
    docstring once a PCG solve has cost less than a refactorization (the bound's estimate
    costs about ten PCG iterations; until then, and while refactorizing wins, by ``rtol``),
    with the :attr:`GRAM_MODES` lowest modes of the K of an earlier solve and
    the next eigenvalue (LOBPCG preconditioned by the reference factor, a few block
    solves), the eigenvalues scaled by :attr:`GRAM_SAFETY` (Ritz values are upper bounds)
    and by the drift of the Rayleigh quotient along the lowest mode since (K softening
    lowers them); the modes are estimated again when that quotient has dropped below
    1 / :attr:`GRAM_DRIFT` of its value. A higher quotient keeps the estimate: K stiffened,
    or its lowest modes rotated (a Rayleigh quotient only bounds λ_min from above, so
    re-estimating on it would not detect a softer mode, and on the Diamond, whose cables
    rotate the nearly degenerate bending modes, it re-estimated at 15 of 35 PCG solves,
    ~80 ms each). Once K's modes have moved, the bound is an estimate with the safety
    factor as its margin, not a guarantee; ``bench fem`` measures W's error against an
    exact solve. Without an estimate (LOBPCG failed) those columns are judged by ``rtol``.

    Args:
        direct: the direct solver used for (re)factorizations.
        rtol: relative residual tolerance per column, ``|b − K x| ≤ rtol |b|``.
        max_iterations: cap on CG iterations (then refactorize and solve exactly).
        refactor_iterations: refactorize after a solve that needed more iterations.
        adaptive: use the cost-based choice between PCG and refactorization.
        probe_every: with ``adaptive``, retry PCG at least every this many solves.
        background: refactorize in a background thread (after too many iterations).
        gram_rtol: energy tolerance of ``gram`` columns (relative to their Gram diagonal).
    """

    #: factor applied to the estimated eigenvalues of the energy bound (Rayleigh–Ritz
    #: values, upper bounds of the true ones)
    GRAM_SAFETY = 0.5
    #: lowest modes of K resolved by the energy bound (the rest is bounded by the next
    #: eigenvalue)
    GRAM_MODES = 6
    #: the lowest mode's Rayleigh quotient dropped by more than this factor triggers a new
    #: estimate
    GRAM_DRIFT = 1.5

    def __init__(
        self,
        direct: DirectSolver,
        *,
        rtol: float = 1e-7,
        max_iterations: int = 60,
        refactor_iterations: int = 20,
        adaptive: bool = True,
        probe_every: int = 8,
        background: bool = False,
        gram_rtol: float = 1e-8,
    ) -> None:
        if (rtol <= 0 or max_iterations < 1 or refactor_iterations < 0 or probe_every < 1
                or not gram_rtol > 0):
            raise ValueError("rtol > 0, max_iterations ≥ 1, refactor_iterations ≥ 0, "
                             "probe_every ≥ 1, gram_rtol > 0 required")
        self.direct = direct
        self.rtol = float(rtol)
        self.max_iterations = int(max_iterations)
        self.refactor_iterations = int(refactor_iterations)
        self.adaptive = bool(adaptive)
        self.probe_every = int(probe_every)
        self.background = bool(background)
        self.gram_rtol = float(gram_rtol)
        #: B − K X of the last :meth:`solve`'s columns (None after a direct solve: exact)
        self.residual_block: np.ndarray | None = None
        #: first factorizations faster than this [s] are repeated once to time the numeric
        #: part (larger ones count on PCG until a refactorization is timed)
        self.measure_below = 1.0
        self.stats = PCGStats()
        self._has_factor = False
        self._lock = threading.Lock()
        self._pending: threading.Thread | None = None
        self._pending_solver: DirectSolver | None = None
        self._t_factor: float | None = None  # EMA of a numeric factorization [s]
        self._t_solve: float | None = None  # EMA of a direct block solve [s]
        self._t_iteration: float | None = None  # EMA of one PCG iteration [s]
        self._pcg_iterations: int | None = None  # iterations of the last PCG solve
        self._since_probe = 0
        self._probe_interval = self.probe_every
        # the last PCG solve cost less than a refactorization would have (PCG is the
        # policy's steady state, so gram columns are worth a spectrum estimate)
        self._pcg_pays = False
        # lowest eigenpairs of an earlier K for the gram columns' energy bound: orthonormal
        # vectors (n, GRAM_MODES + 1) (they also start the next estimate) and their Ritz
        # values (None: not estimated yet)
        self._modes: np.ndarray | None = None
        self._ritz: np.ndarray | None = None

    @property
    def has_factor(self) -> bool:
        return self._has_factor

    def factorize(self, matrix: sp.spmatrix) -> None:
        """Factorize K now (synchronously) and use it as the new reference."""
        t0 = time.perf_counter()
        self.direct.factorize(matrix)
        dt = time.perf_counter() - t0
        self.stats.factorization_time += dt
        if self.stats.factorizations > 0:  # the first one includes the symbolic analysis
            self._t_factor = self._ema(self._t_factor, dt)
        elif self.adaptive and dt < self.measure_below:
            # time one numeric refactorization now, so the cost-based choice works at once
            t0 = time.perf_counter()
            self.direct.factorize(matrix)
            self._t_factor = time.perf_counter() - t0
            self.stats.factorization_time += self._t_factor
        self.stats.factorizations += 1
        self._has_factor = True

    def _swap_background(self) -> None:
        if self._pending is not None and not self._pending.is_alive():
            self._pending.join()
            with self._lock:
                if self._pending_solver is not None:
                    self.direct = self._pending_solver
                    self.stats.factorizations += 1
                self._pending = None
                self._pending_solver = None

    def _start_background(self, matrix: sp.csr_matrix) -> None:
        if self._pending is not None:
            return
        solver = type(self.direct)()
        copy = matrix.copy()

        def work() -> None:
            t0 = time.perf_counter()
            solver.factorize(copy)
            with self._lock:
                self._pending_solver = solver
                self.stats.factorization_time += time.perf_counter() - t0

        self._pending = threading.Thread(target=work, name="refactorize", daemon=True)
        self._pending.start()

    @staticmethod
    def _ema(old: float | None, new: float) -> float:
        return new if old is None else 0.7 * old + 0.3 * new

    def _direct_solve(self, matrix: sp.csr_matrix, b: np.ndarray) -> np.ndarray:
        self.factorize(matrix)
        t0 = time.perf_counter()
        x = np.asarray(self.direct.solve(b)).reshape(b.shape)
        self._t_solve = self._ema(self._t_solve, time.perf_counter() - t0)
        self.stats.direct_solves += 1
        self.stats.last_iterations = 0
        self.stats.last_residual = 0.0  # exact up to the factorization's round-off
        self.residual_block = None
        return x

    def next_solve_is_direct(self) -> bool:
        """True when the next :meth:`solve` will refactorize and solve directly (a warm
        start would be ignored, so callers may skip building one)."""
        return not self._has_factor or self._prefer_direct()

    def _pcg_costs_more(self) -> bool:
        """The last PCG solve cost more than refactorizing + a direct solve (measured)."""
        if self._pcg_iterations is None or self._t_factor is None or self._t_iteration is None:
            return False
        t_direct = self._t_factor + (self._t_solve if self._t_solve is not None else self._t_iteration)
        return self._pcg_iterations * self._t_iteration > t_direct

    def _prefer_direct(self) -> bool:
        """Refactorizing + a direct solve is expected to cost less than the last PCG (and
        no probe is due)."""
        if not self.adaptive or self._since_probe >= self._probe_interval:
            return False
        return self._pcg_costs_more()

    def solve(
        self,
        matrix: sp.csr_matrix,
        rhs: np.ndarray,
        x0: np.ndarray | None = None,
        *,
        rtol: float | np.ndarray | None = None,
        gram: np.ndarray | None = None,
        residual0: np.ndarray | None = None,
    ) -> np.ndarray:
        """X with ``|B − K X| ≤ rtol |B|`` per column; B (n,) or (n, k).

        Args:
            rtol: per-column tolerances (k,) or one value (default: the solver's).
            gram: (k,) bool, columns judged by the energy bound of their Gram products
                instead (see the class docstring); form those products with
                :func:`gram_from_columns` and :attr:`residual_block`.
            residual0: B − K x0 when the caller has it (saves a product with K).

        After the call :attr:`residual_block` holds B − K X (None after a direct solve).
        """
        b = np.asarray(rhs, dtype=float)
        vector = b.ndim == 1
        b2 = b[:, None] if vector else b
        self.stats.solves += 1
        self._swap_background()
        self.residual_block = None
        if not self._has_factor or self._prefer_direct():
            x = self._direct_solve(matrix, b2)
            self._since_probe += 1
            self.stats.history.append(0)
            if not np.all(np.isfinite(x)):
                raise ConvergenceError("linear solve produced non-finite values")
            return x[:, 0] if vector else x
        # PCG only because the probe interval elapsed (it lost last time)
        probing = self.adaptive and self._pcg_costs_more()
        self._since_probe = 0
        r0 = None
        if x0 is not None:
            x = np.array(x0, dtype=float).reshape(b2.shape)
            if not np.all(np.isfinite(x)):
                x = np.zeros_like(b2)
            elif residual0 is not None and np.shape(residual0) in (b.shape, b2.shape):
                r0 = np.array(residual0, dtype=float).reshape(b2.shape)
        else:
            x = np.zeros_like(b2)
        gram_mask = None
        spectrum = None
        if gram is not None and np.any(gram) and (self._pcg_pays or not self.adaptive):
            # the estimate costs ~10 PCG iterations: only once PCG is the cheaper path
            # (until then, and on meshes where refactorizing wins, gram columns are judged
            # by their residual)
            gram_mask = np.broadcast_to(np.asarray(gram, dtype=bool), (b2.shape[1],))
            spectrum = self._spectrum(matrix)
        col_rtol = np.broadcast_to(
            np.asarray(self.rtol if rtol is None else rtol, dtype=float), (b2.shape[1],)
        )
        max_iterations = self.max_iterations
        if self.adaptive and self._t_iteration and self._t_factor:
            # a probe may not cost much more than refactorizing would
            t_direct = self._t_factor + (self._t_solve or self._t_iteration)
            max_iterations = min(max_iterations, max(2, int(t_direct / self._t_iteration)))
        t0 = time.perf_counter()
        x, r, iterations, residual, ok = self._pcg(matrix, b2, x, col_rtol, max_iterations, r0,
                                                   gram_mask, spectrum)
        if iterations > 0:
            self._t_iteration = self._ema(self._t_iteration, (time.perf_counter() - t0) / iterations)
        self._pcg_iterations = iterations
        self.stats.total_iterations += iterations
        self.stats.last_iterations = iterations
        self.stats.last_residual = residual
        self.stats.history.append(iterations)
        self.residual_block = r[:, 0] if vector else r
        if not ok:
            # The reference factor is too far from K (or the probe got as expensive as a
            # refactorization): refactorize, solve exactly, and probe less often.
            x = self._direct_solve(matrix, b2)
            self.stats.last_iterations = iterations  # report the work of the lost probe
            self._pcg_iterations = self.max_iterations  # PCG lost: prefer the direct path
            self._probe_interval = min(16 * self.probe_every, 2 * self._probe_interval)
            self._pcg_pays = False
        else:
            self._pcg_pays = not self._pcg_costs_more()
            if not probing:
                # a won probe keeps the interval until PCG also wins the solve after it
                # (on a factor one update older): a probe right after a refactorization
                # can win where the next solve loses, and resetting the interval there
                # paid a lost PCG every 2 × probe_every solves
                self._probe_interval = self.probe_every
            if iterations > self.refactor_iterations:
                if self.background:
                    self._start_background(matrix)
                else:
                    self.factorize(matrix)
        if not np.all(np.isfinite(x)):
            raise ConvergenceError("linear solve produced non-finite values")
        return x[:, 0] if vector else x

    def _pcg(
        self, matrix: sp.csr_matrix, b: np.ndarray, x: np.ndarray, rtol: np.ndarray,
        max_iterations: int, r: np.ndarray | None = None, gram: np.ndarray | None = None,
        spectrum: tuple[np.ndarray, np.ndarray, float] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, int, float, bool]:
        """Block PCG from ``x`` (residual ``r`` = B − K x if known): (X, B − K X,
        iterations, max relative residual, converged)."""
        bnorm = np.linalg.norm(b, axis=0)
        bnorm[bnorm == 0] = 1.0
        tol2 = (rtol * bnorm) ** 2
        if r is None:
            r = b - matrix @ x

        def pending(x: np.ndarray, r: np.ndarray, r2: np.ndarray) -> np.ndarray:
            """Columns not converged: residual test, or the energy bound for gram columns."""
            todo = r2 > tol2
            if gram is not None and spectrum is not None:
                modes, inv_lambda, inv_tail = spectrum
                c2 = (modes.T @ r) ** 2  # (m, k): r's components on the lowest modes
                energy = inv_lambda @ c2 + np.maximum(r2 - c2.sum(axis=0), 0.0) * inv_tail
                g = np.einsum("ij,ij->j", b, x) + np.einsum("ij,ij->j", x, r)  # Ĝ_jj
                todo = np.where(gram, energy > self.gram_rtol * np.abs(g), todo)
            return todo

        r2 = np.einsum("ij,ij->j", r, r)
        active = pending(x, r, r2)
        if not active.any():
            return x, r, 0, float((np.sqrt(r2) / bnorm).max()), True
        with self._lock:
            direct = self.direct
        z = direct.solve(r).reshape(r.shape)
        p = z.copy()
        rz = np.einsum("ij,ij->j", r, z)
        for it in range(1, max_iterations + 1):
            q = matrix @ p
            pq = np.einsum("ij,ij->j", p, q)
            if np.any(pq[active] <= 0) or not np.all(np.isfinite(pq)):
                return x, r, it, float("inf"), False
            alpha = np.where(active, rz / np.where(pq > 0, pq, 1.0), 0.0)
            x += p * alpha
            r -= q * alpha
            r2 = np.einsum("ij,ij->j", r, r)
            active = pending(x, r, r2)
            if not active.any():
                return x, r, it, float((np.sqrt(r2) / bnorm).max()), True
            z = direct.solve(r).reshape(r.shape)
            rz_new = np.einsum("ij,ij->j", r, z)
            beta = np.where(active, rz_new / np.where(rz != 0, rz, 1.0), 0.0)
            rz = rz_new
            p = z + p * beta
        return x, r, max_iterations, float((np.sqrt(r2) / bnorm).max()), False

    def _spectrum(self, matrix: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, float] | None:
        """(lowest modes (n, m), 1/λ_i (m,), 1/λ_{m+1}) of the energy bound, the eigenvalues
        lowered by the safety factor and the drift; None: no estimate."""
        fresh = self._ritz is None or self._modes.shape[0] != matrix.shape[0]
        if fresh and not self._estimate_lowest_modes(matrix):
            return None
        # K softening along the estimate's lowest mode v (|v| = 1) lowers the spectrum with it
        v = self._modes[:, 0]
        ratio = float(v @ (matrix @ v)) / self._ritz[0]
        if not fresh and not ratio > 1.0 / self.GRAM_DRIFT:
            if not self._estimate_lowest_modes(matrix):
                return None
            ratio = 1.0
        lowered = self.GRAM_SAFETY * min(1.0, ratio) * self._ritz
        if not lowered[0] > 0.0:
            return None
        return self._modes[:, :-1], 1.0 / lowered[:-1], 1.0 / lowered[-1]

    def _estimate_lowest_modes(self, matrix: sp.csr_matrix) -> bool:
        """The GRAM_MODES + 1 lowest eigenpairs of K by LOBPCG (preconditioned by the
        reference factor, started from the last estimate's modes); False (and no estimate)
        unless all converge."""
        import warnings

        from scipy.sparse.linalg import LinearOperator, lobpcg

        self._ritz = None
        n = matrix.shape[0]
        m = self.GRAM_MODES + 1
        if n < 5 * m:  # LOBPCG needs n ≫ block size; a dense eigensolve is exact here
            values, vectors = np.linalg.eigh(matrix.toarray())
            if n <= m or not values[0] > 0.0:
                return False
            self._modes, self._ritz = np.ascontiguousarray(vectors[:, :m]), values[:m].copy()
            return True
        with self._lock:
            direct = self.direct
        start = self._modes if self._modes is not None and self._modes.shape == (n, m) else (
            np.random.default_rng(0).standard_normal((n, m)))
        precondition = LinearOperator((n, n), matvec=lambda v: direct.solve(v).reshape(v.shape),
                                      matmat=lambda v: direct.solve(v).reshape(v.shape),
                                      dtype=float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a non-converged run is detected below
            try:
                values, vectors = lobpcg(matrix, start, M=precondition, largest=False, tol=1e-6,
                                         maxiter=40)
            except (np.linalg.LinAlgError, ValueError):
                return False
        order = np.argsort(values)
        values, vectors = np.asarray(values)[order], np.asarray(vectors)[:, order]
        vectors, _ = np.linalg.qr(vectors)
        values = np.einsum("ij,ij->j", vectors, matrix @ vectors)
        residual = np.linalg.norm(matrix @ vectors - vectors * values, axis=0)
        if not (values[0] > 0.0 and np.all(residual <= 1e-3 * values)):
            return False
        self._modes, self._ritz = np.ascontiguousarray(vectors), values
        return True


def gram_from_columns(b: np.ndarray, x: np.ndarray, residual: np.ndarray | None) -> np.ndarray:
    """G ≈ Bᵀ K⁻¹ B from approximate columns X ≈ K⁻¹ B and their residual R = B − K X.

    Ĝ = Bᵀ X + Xᵀ R (= Bᵀ X + Xᵀ B − Xᵀ K X, symmetric), whose error Eᵀ K E (E = K⁻¹ R) is
    second order in the residual; Bᵀ X when ``residual`` is None (X exact).
    """
    g = b.T @ x
    if residual is not None:
        g = g + x.T @ residual
    return 0.5 * (g + g.T)


def solve_linear(
    solver: "DirectSolver | FactorReuseSolver",
    matrix: sp.csr_matrix,
    rhs: np.ndarray,
    x0: np.ndarray | None = None,
    *,
    rtol: float | np.ndarray | None = None,
    gram: np.ndarray | None = None,
    residual0: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:
    """K⁻¹ B with either kind of solver: (X shaped like B, PCG iterations).

    A :class:`FactorReuseSolver` solves by PCG with its reused factor (warm start ``x0``
    when it has B's shape, with its residual ``residual0`` if known; tolerance ``rtol``;
    ``gram`` columns by their energy bound, the residual then in its ``residual_block``)
    or refactorizes as it decides; a direct solver factorizes ``matrix`` and solves (0
    iterations).
    """
    rhs = np.asarray(rhs, dtype=float)
    if isinstance(solver, FactorReuseSolver):
        x0 = x0 if x0 is None or np.shape(x0) == rhs.shape else None
        x = solver.solve(matrix, rhs, x0, rtol=rtol, gram=gram, residual0=residual0)
        return np.asarray(x).reshape(rhs.shape), solver.stats.last_iterations
    solver.factorize(matrix)
    return np.asarray(solver.solve(rhs)).reshape(rhs.shape), 0
