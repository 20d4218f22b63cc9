"""Compiled (numba) product of a symmetric stiffness, given as its upper 3 × 3 node
blocks, with a dense basis: a reduced model's tangent K_r = Φᵀ K Φ
(core/model/reduced_model.py).

K = K_U + D + K_Uᵀ (K_U the strictly upper node blocks, D the diagonal ones), so
Φᵀ K Φ = M + Mᵀ with M = Φᵀ (K_U + D/2) Φ: the loop reads each upper block once with the
three rows of Φ it multiplies, and takes a range of block rows at a time, so the caller
multiplies each chunk by Φᵀ while it is in cache. The blocks come from
:meth:`~soft_inverse_ros.core.model.fem.CorotationalFEM.upper_block_stiffness` (half the
values of the full CSR, one write per element entry). Timings: BENCHMARKS.md, twenty-ninth
and thirtieth sessions. Importing this module needs numba; the reduced model keeps
scipy's CSR product without it or with ``SOFT_INVERSE_ROS_FEM_KERNELS=numpy``.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def upper_blocks_times_dense(block_ptr, block_cols, blocks, basis, b0, b1, out) -> None:
    """Rows 3 b0 … 3 b1 − 1 of (K_U + D / 2) basis into ``out`` (3 (b1 − b0), r), overwritten.

    Args:
        block_ptr, block_cols, blocks: K's upper node blocks (``UpperBlockStiffness``).
        basis: (n, r) C-contiguous, n = 3 × the number of block rows.
        b0, b1: the block rows (free nodes) of this chunk.
    Summed over all block rows, M = basisᵀ out gives basisᵀ K basis = M + Mᵀ.
    """
    r = basis.shape[1]
    for b in range(b0, b1):
        row = 3 * (b - b0)
        o0, o1, o2 = out[row], out[row + 1], out[row + 2]
        for c in range(r):
            o0[c] = 0.0
            o1[c] = 0.0
            o2[c] = 0.0
        for t in range(block_ptr[b], block_ptr[b + 1]):
            node = block_cols[t]
            w = 0.5 if node == b else 1.0
            j = 3 * node
            x0, x1, x2 = basis[j], basis[j + 1], basis[j + 2]
            d = blocks[t]
            a00, a01, a02 = w * d[0, 0], w * d[0, 1], w * d[0, 2]
            a10, a11, a12 = w * d[1, 0], w * d[1, 1], w * d[1, 2]
            a20, a21, a22 = w * d[2, 0], w * d[2, 1], w * d[2, 2]
            for c in range(r):
                v0, v1, v2 = x0[c], x1[c], x2[c]
                o0[c] += a00 * v0 + a01 * v1 + a02 * v2
                o1[c] += a10 * v0 + a11 * v1 + a12 * v2
                o2[c] += a20 * v0 + a21 * v1 + a22 * v2


@njit(cache=True)
def basis_times(basis, q, out) -> None:
    """out (n,) = basis (n, r) @ q (r,): one pass over the basis rows (numpy's matrix-vector
    product took 8 ms at 50k nodes, r = 77; this 5.7 ms)."""
    n, r = basis.shape
    for i in range(n):
        s = 0.0
        for c in range(r):
            s += basis[i, c] * q[c]
        out[i] = s


@njit(cache=True)
def basis_transpose_times(basis, f, out) -> None:
    """out (r,) = basisᵀ (r, n) @ f (n,), accumulated row by row of the C-contiguous basis
    (numpy's transposed product strides across rows: 8.5 ms at 50k nodes, r = 77; this 3.5 ms)."""
    n, r = basis.shape
    out[:] = 0.0
    for i in range(n):
        fi = f[i]
        for c in range(r):
            out[c] += basis[i, c] * fi
