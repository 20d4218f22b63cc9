"""Compiled (numba) product of a 3 × 3-block-structured symmetric CSR stiffness with a
dense basis, for a reduced model's tangent K_r = Φᵀ K Φ (core/model/reduced_model.py).

On a 50k-node mesh scipy's CSR product reads each row of Φ once per scalar row, three
times per node block (K Φ: 77 ms at r = 51); this loop takes the stiffness one 3 × 3 node
block at a time and reads the block's three rows of Φ once (55 ms). It takes only the upper
half of the blocks (K = K_U + D + K_Uᵀ, so Φᵀ K Φ = M + Mᵀ with M = Φᵀ (K_U + D/2) Φ), and
a range of block rows at a time, so the caller multiplies each chunk by Φᵀ while it is in
cache: both products 78 ms at r = 77, against 123 ms for all the blocks and one dense
Φᵀ(KΦ) (BENCHMARKS.md, twenty-ninth session).

It needs the layout :class:`~soft_inverse_ros.core.model.fem.CorotationalFEM` assembles:
every node's three rows have the same sorted columns, in whole node triples (checked by
:func:`block_structured`). Importing this module needs numba; the reduced model keeps
scipy's product without it or with ``SOFT_INVERSE_ROS_FEM_KERNELS=numpy``.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def block_structured(indptr, indices) -> bool:
    """Whether every node block row's three rows share sorted columns in node triples."""
    n = indptr.size - 1
    if n % 3:
        return False
    for b in range(n // 3):
        p0, p1, p2, p3 = indptr[3 * b], indptr[3 * b + 1], indptr[3 * b + 2], indptr[3 * b + 3]
        length = p1 - p0
        if length % 3 or p2 - p1 != length or p3 - p2 != length:
            return False
        for t in range(0, length, 3):
            j = indices[p0 + t]
            if j % 3:
                return False
            for s in range(3):
                if (indices[p0 + t + s] != j + s or indices[p1 + t + s] != j + s
                        or indices[p2 + t + s] != j + s):
                    return False
    return True


@njit(cache=True)
def upper_times_dense(indptr, indices, data, basis, b0, b1, out) -> None:
    """Rows 3 b0 … 3 b1 − 1 of (K_U + D / 2) basis into ``out`` (3 (b1 − b0), r), overwritten,
    for a symmetric K in CSR (block structured, full storage; :func:`block_structured`),
    K_U its strictly upper node blocks and D its diagonal node blocks; ``basis`` (n, r)
    C-contiguous. Summed over all block rows, M = basisᵀ out gives
    basisᵀ K basis = M + Mᵀ from half the blocks of K."""
    r = basis.shape[1]
    for b in range(b0, b1):
        p0, p1, p2 = indptr[3 * b], indptr[3 * b + 1], indptr[3 * b + 2]
        length = p1 - p0
        row = 3 * (b - b0)
        o0, o1, o2 = out[row], out[row + 1], out[row + 2]
        for c in range(r):
            o0[c] = 0.0
            o1[c] = 0.0
            o2[c] = 0.0
        for t in range(0, length, 3):
            j = indices[p0 + t]
            if j < 3 * b:
                continue
            w = 0.5 if j == 3 * b else 1.0
            x0, x1, x2 = basis[j], basis[j + 1], basis[j + 2]
            a00, a01, a02 = w * data[p0 + t], w * data[p0 + t + 1], w * data[p0 + t + 2]
            a10, a11, a12 = w * data[p1 + t], w * data[p1 + t + 1], w * data[p1 + t + 2]
            a20, a21, a22 = w * data[p2 + t], w * data[p2 + t + 1], w * data[p2 + t + 2]
            for c in range(r):
                v0, v1, v2 = x0[c], x1[c], x2[c]
                o0[c] += a00 * v0 + a01 * v1 + a02 * v2
                o1[c] += a10 * v0 + a11 * v1 + a12 * v2
                o2[c] += a20 * v0 + a21 * v1 + a22 * v2
