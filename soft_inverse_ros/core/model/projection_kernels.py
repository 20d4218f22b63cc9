"""Compiled (numba) product of a 3 × 3-block-structured CSR stiffness with a dense basis.

A reduced model's tangent is K_r = Φᵀ K Φ (core/model/reduced_model.py); on a 50k-node mesh
K Φ is the largest part of it (6 M non-zeros times r ≈ 50 columns). scipy's CSR product reads
each row of Φ once per scalar row, three times per node block; this loop takes the stiffness
one 3 × 3 node block at a time, reads the block's three rows of Φ once and updates the
three output rows together (the output block stays in cache over the row of blocks).

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
def block_times_dense(indptr, indices, data, basis, out) -> None:
    """out = K basis for K in CSR (``indptr``, ``indices``, ``data``; block structured,
    :func:`block_structured`), ``basis`` (n, r) C-contiguous, ``out`` (n, r) overwritten."""
    n, r = basis.shape
    for b in range(n // 3):
        p0, p1, p2 = indptr[3 * b], indptr[3 * b + 1], indptr[3 * b + 2]
        length = p1 - p0
        o0, o1, o2 = out[3 * b], out[3 * b + 1], out[3 * b + 2]
        for c in range(r):
            o0[c] = 0.0
            o1[c] = 0.0
            o2[c] = 0.0
        for t in range(0, length, 3):
            j = indices[p0 + t]
            x0, x1, x2 = basis[j], basis[j + 1], basis[j + 2]
            a00, a01, a02 = data[p0 + t], data[p0 + t + 1], data[p0 + t + 2]
            a10, a11, a12 = data[p1 + t], data[p1 + t + 1], data[p1 + t + 2]
            a20, a21, a22 = data[p2 + t], data[p2 + t + 1], data[p2 + t + 2]
            for c in range(r):
                v0, v1, v2 = x0[c], x1[c], x2[c]
                o0[c] += a00 * v0 + a01 * v1 + a02 * v2
                o1[c] += a10 * v0 + a11 * v1 + a12 * v2
                o2[c] += a20 * v0 + a21 * v1 + a22 * v2
