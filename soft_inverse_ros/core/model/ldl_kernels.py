"""Compiled (numba) block solve with an LDLᵀ factor (optional, see :class:`QDLDLSolver`
and :class:`SuperLUNDSolver`).

QDLDL factorizes K = P (I + L) D (I + L)ᵀ Pᵀ well, but its Python binding solves one
right-hand side per call (0.3 ms per column on SOFA's Diamond, 2.4 ms for the 8 columns
a compliance update needs). :func:`ldl_block_solve` runs the two triangular sweeps over
L once for all columns (the right-hand sides stored row-major, so the inner loop is over
contiguous columns): ~0.3 ms for the same 8 columns. Importing this module needs numba;
without it the solvers use their own per-column solves.
"""

from __future__ import annotations

import numpy as np
from numba import njit


_warm = False


def warm_up() -> None:
    """Compile :func:`ldl_block_solve` (or load it from numba's cache) for the argument
    types the solvers pass (int32 indices), once per process: at a node's start-up, not at
    its first block solve inside a running loop (a 1–2 s stall on a cold cache)."""
    global _warm
    if not _warm:
        _warm = True
        ldl_block_solve(np.array([0, 1, 1], np.int32), np.array([1], np.int32), np.array([0.5]),
                        np.array([2.0, 1.5]), np.array([0, 1], np.int64), np.eye(2))


@njit(cache=True, boundscheck=False)
def ldl_block_solve(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, d: np.ndarray, perm: np.ndarray, rhs: np.ndarray
) -> np.ndarray:
    """X with K X = B for K = P (I + L) D (I + L)ᵀ Pᵀ.

    Args:
        indptr, indices, data: strictly lower-triangular L in CSC (column j holds L[i, j], i > j).
        d: (n,) the diagonal D.
        perm: (n,) the permutation: P[perm[j], j] = 1.
        rhs: (n, k) B, C-contiguous.

    Returns:
        (n, k) X, C-contiguous.
    """
    n, k = rhs.shape
    y = np.empty((n, k))
    for j in range(n):  # y = Pᵀ B
        y[j, :] = rhs[perm[j], :]
    for j in range(n):  # (I + L) z = y, column-oriented
        yj = y[j]
        for q in range(indptr[j], indptr[j + 1]):
            yi = y[indices[q]]
            v = data[q]
            for c in range(k):
                yi[c] -= v * yj[c]
    for j in range(n):  # D w = z
        inv = 1.0 / d[j]
        for c in range(k):
            y[j, c] *= inv
    for j in range(n - 1, -1, -1):  # (I + L)ᵀ u = w
        yj = y[j]
        for q in range(indptr[j], indptr[j + 1]):
            yi = y[indices[q]]
            v = data[q]
            for c in range(k):
                yj[c] -= v * yi[c]
    x = np.empty((n, k))
    for j in range(n):  # X = P u
        x[perm[j], :] = y[j, :]
    return x
