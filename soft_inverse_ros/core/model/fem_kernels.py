"""Compiled (numba) element kernels of :mod:`soft_inverse_ros.core.model.fem` (optional).

Same mathematics as the vectorized numpy path of :class:`~soft_inverse_ros.core.model.fem.CorotationalFEM`
(which stays the reference: the tests compare both), fused into single passes over the
elements so no (3, 3, M) temporaries are created:

- :func:`element_state`: deformation gradient, polar rotation (scaled Newton iteration
  run on batches of elements, :func:`_polar_batch`; SVD with the reflection removed for
  inverted/degenerate elements), corotated stress, nodal forces (scattered), strain
  energy and rotated gradients.
- :func:`stiffness_data`: the co-rotational blocks ``R K0 Rᵀ`` of the 10 upper node pairs
  of every element added straight into the CSR data array through precomputed slots.

Importing this module needs numba (``requirements/fast.txt``); ``fem.py`` falls back to
numpy when it is absent. Kernels are compiled on first use and cached on disk.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_TOL_STOP = 1e-13**0.25  # see fem.polar_rotation_components
_TOL_FALLBACK = 1e-13**0.5
#: elements per batch of :func:`_polar_batch` (32–128 time alike on the Diamond)
BATCH = 64


@njit(cache=True, inline="always")
def _det(a00, a01, a02, a10, a11, a12, a20, a21, a22):
    return a00 * (a11 * a22 - a12 * a21) - a01 * (a10 * a22 - a12 * a20) + a02 * (a10 * a21 - a11 * a20)


@njit(cache=True, inline="always")
def _cofactors(x00, x01, x02, x10, x11, x12, x20, x21, x22):
    """The cofactor matrix of X (= det X · X⁻ᵀ), row by row, and det X."""
    c00 = x11 * x22 - x12 * x21
    c01 = x12 * x20 - x10 * x22
    c02 = x10 * x21 - x11 * x20
    c10 = x21 * x02 - x22 * x01
    c11 = x22 * x00 - x20 * x02
    c12 = x20 * x01 - x21 * x00
    c20 = x01 * x12 - x02 * x11
    c21 = x02 * x10 - x00 * x12
    c22 = x00 * x11 - x01 * x10
    return c00, c01, c02, c10, c11, c12, c20, c21, c22, x00 * c00 + x01 * c01 + x02 * c02


@njit(cache=True, inline="always")
def _polar_step(x00, x01, x02, x10, x11, x12, x20, x21, x22):
    """One scaled Newton step of the polar iteration, X ← (ζ X + X⁻ᵀ / ζ) / 2 with
    ζ = (|X⁻¹| / |X|)^½ (Frobenius norms): the new X row by row, then the largest change
    of an entry."""
    c00, c01, c02, c10, c11, c12, c20, c21, c22, d = _cofactors(x00, x01, x02, x10, x11, x12, x20, x21, x22)
    d = 1.0 / d
    c00 *= d
    c01 *= d
    c02 *= d
    c10 *= d
    c11 *= d
    c12 *= d
    c20 *= d
    c21 *= d
    c22 *= d
    ni = (c00 * c00 + c01 * c01 + c02 * c02 + c10 * c10 + c11 * c11 + c12 * c12
          + c20 * c20 + c21 * c21 + c22 * c22)
    nx = (x00 * x00 + x01 * x01 + x02 * x02 + x10 * x10 + x11 * x11 + x12 * x12
          + x20 * x20 + x21 * x21 + x22 * x22)
    z = np.sqrt(np.sqrt(ni / nx))
    a = 0.5 * z
    b = 0.5 / z
    y00, y01, y02 = a * x00 + b * c00, a * x01 + b * c01, a * x02 + b * c02
    y10, y11, y12 = a * x10 + b * c10, a * x11 + b * c11, a * x12 + b * c12
    y20, y21, y22 = a * x20 + b * c20, a * x21 + b * c21, a * x22 + b * c22
    change = max(abs(y00 - x00), abs(y01 - x01), abs(y02 - x02), abs(y10 - x10), abs(y11 - x11),
                 abs(y12 - x12), abs(y20 - x20), abs(y21 - x21), abs(y22 - x22))
    return y00, y01, y02, y10, y11, y12, y20, y21, y22, change


@njit(cache=True, inline="always")
def _polar_refine(x00, x01, x02, x10, x11, x12, x20, x21, x22):
    """The final unscaled step of the polar iteration, (X + X⁻ᵀ) / 2, row by row."""
    c00, c01, c02, c10, c11, c12, c20, c21, c22, d = _cofactors(x00, x01, x02, x10, x11, x12, x20, x21, x22)
    return (0.5 * (x00 + c00 / d), 0.5 * (x01 + c01 / d), 0.5 * (x02 + c02 / d),
            0.5 * (x10 + c10 / d), 0.5 * (x11 + c11 / d), 0.5 * (x12 + c12 / d),
            0.5 * (x20 + c20 / d), 0.5 * (x21 + c21 / d), 0.5 * (x22 + c22 / d))


@njit(cache=True, inline="always")
def _deformation_gradient(positions, tets, e, g, f):
    """F = Σ_k x_k g_kᵀ of element ``e`` (shape gradients ``g`` (4, 3) [1/m]) into ``f`` (3, 3)."""
    for a in range(3):
        for b in range(3):
            s = 0.0
            for k in range(4):
                s += positions[tets[e, k], a] * g[k, b]
            f[a, b] = s


@njit(cache=True, inline="always")
def _corotated_stress(r, f, lam, mu):
    """The corotated stress of F = R S and its energy density: ε = sym(Rᵀ F) − I,
    σ = 2 μ ε + λ tr(ε) I [Pa] as (σ00, σ11, σ22, σ01, σ02, σ12), then
    ψ = μ ε:ε + λ tr(ε)² / 2 [J/m³]."""
    e00 = r[0, 0] * f[0, 0] + r[1, 0] * f[1, 0] + r[2, 0] * f[2, 0] - 1.0
    e11 = r[0, 1] * f[0, 1] + r[1, 1] * f[1, 1] + r[2, 1] * f[2, 1] - 1.0
    e22 = r[0, 2] * f[0, 2] + r[1, 2] * f[1, 2] + r[2, 2] * f[2, 2] - 1.0
    s01 = r[0, 0] * f[0, 1] + r[1, 0] * f[1, 1] + r[2, 0] * f[2, 1]
    s10 = r[0, 1] * f[0, 0] + r[1, 1] * f[1, 0] + r[2, 1] * f[2, 0]
    s02 = r[0, 0] * f[0, 2] + r[1, 0] * f[1, 2] + r[2, 0] * f[2, 2]
    s20 = r[0, 2] * f[0, 0] + r[1, 2] * f[1, 0] + r[2, 2] * f[2, 0]
    s12 = r[0, 1] * f[0, 2] + r[1, 1] * f[1, 2] + r[2, 1] * f[2, 2]
    s21 = r[0, 2] * f[0, 1] + r[1, 2] * f[1, 1] + r[2, 2] * f[2, 1]
    e01 = 0.5 * (s01 + s10)
    e02 = 0.5 * (s02 + s20)
    e12 = 0.5 * (s12 + s21)
    tr = e00 + e11 + e22
    psi = mu * (e00 * e00 + e11 * e11 + e22 * e22 + 2.0 * (e01 * e01 + e02 * e02 + e12 * e12)) + 0.5 * lam * tr * tr
    lt = lam * tr
    return (2.0 * mu * e00 + lt, 2.0 * mu * e11 + lt, 2.0 * mu * e22 + lt,
            2.0 * mu * e01, 2.0 * mu * e02, 2.0 * mu * e12, psi)


@njit(cache=True)
def _polar(f, r):
    """Polar rotation of the 3×3 ``f`` into ``r``; False when the SVD path is needed (one
    element at a time: :func:`consistent_data`; :func:`element_state` and the snake's kernel use
    :func:`_batch_rotations`)."""
    s = 0.0
    for i in range(3):
        for j in range(3):
            s += f[i, j] * f[i, j]
    scale = np.sqrt(s / 3.0)
    if scale == 0.0:
        return False
    x00, x01, x02 = f[0, 0] / scale, f[0, 1] / scale, f[0, 2] / scale
    x10, x11, x12 = f[1, 0] / scale, f[1, 1] / scale, f[1, 2] / scale
    x20, x21, x22 = f[2, 0] / scale, f[2, 1] / scale, f[2, 2] / scale
    if not _det(x00, x01, x02, x10, x11, x12, x20, x21, x22) > 1e-6:
        return False
    converged = False
    for it in range(40):
        x00, x01, x02, x10, x11, x12, x20, x21, x22, ch = _polar_step(x00, x01, x02, x10, x11, x12, x20, x21, x22)
        if ch <= _TOL_STOP:
            converged = True
            break
    if not converged:
        return False
    # final unscaled refinement
    (r[0, 0], r[0, 1], r[0, 2], r[1, 0], r[1, 1], r[1, 2],
     r[2, 0], r[2, 1], r[2, 2]) = _polar_refine(x00, x01, x02, x10, x11, x12, x20, x21, x22)
    return True


@njit(cache=True)
def _polar_svd(f, r):
    u, _, vt = np.linalg.svd(f)
    du = np.linalg.det(u)
    dv = np.linalg.det(vt)
    if du * dv < 0.0:
        u[:, 2] = -u[:, 2]
    r[:, :] = u @ vt


@njit(cache=True, error_model='numpy')
def _polar_batch(f, x, r, change, fallback, n):
    """Polar rotations of the first ``n`` columns of ``f`` (9, B) (entry (a, b) of F in
    row 3 a + b) into ``r`` (9, B): :func:`_polar`'s iteration run on the whole batch at
    once, as the numpy path runs it on all elements (``fem.polar_rotation_components``):
    every element iterates until the batch's largest change is ≤ tol^¼, then one unscaled
    refinement. ``fallback[e]`` is set where the SVD path is needed (det ≤ 1e-6 after
    scaling: inverted, degenerate or not finite; or, after 40 iterations, a last change
    above tol^½, the numpy path's rule); such an element iterates as the identity.

    The loops over the batch have no branch and IEEE division (``error_model='numpy'``:
    no ZeroDivisionError test per division), so they compile to vector instructions: four
    elements per AVX2 instruction instead of one element's latency-bound chain (Diamond,
    4147 elements near equilibrium: the element state from 1.6 to 1.1 ms). ``x``,
    ``change``: work arrays (9, B) and (B,)."""
    for e in range(n):
        s = 0.0
        for k in range(9):
            s += f[k, e] * f[k, e]
        scale = np.sqrt(s / 3.0)
        inv = 1.0 / scale if scale > 0.0 else 0.0
        for k in range(9):
            x[k, e] = f[k, e] * inv
        det = (x[0, e] * (x[4, e] * x[8, e] - x[5, e] * x[7, e])
               - x[1, e] * (x[3, e] * x[8, e] - x[5, e] * x[6, e])
               + x[2, e] * (x[3, e] * x[7, e] - x[4, e] * x[6, e]))
        bad = not det > 1e-6  # inverted, degenerate (or not finite): SVD
        fallback[e] = bad
        if bad:  # a harmless identity in the batch's iterations
            for k in range(9):
                x[k, e] = 0.0
            x[0, e] = 1.0
            x[4, e] = 1.0
            x[8, e] = 1.0
    converged = False
    for it in range(40):
        for e in range(n):  # no branches: one vector loop over the batch
            (x[0, e], x[1, e], x[2, e], x[3, e], x[4, e], x[5, e], x[6, e], x[7, e], x[8, e],
             change[e]) = _polar_step(x[0, e], x[1, e], x[2, e], x[3, e], x[4, e], x[5, e], x[6, e], x[7, e],
                                      x[8, e])
        worst = 0.0
        for e in range(n):
            if not change[e] <= worst:  # NaN counts as not converged
                worst = change[e] if change[e] == change[e] else np.inf
        if worst <= _TOL_STOP:
            converged = True
            break
    for e in range(n):  # final unscaled refinement
        (r[0, e], r[1, e], r[2, e], r[3, e], r[4, e], r[5, e], r[6, e], r[7, e],
         r[8, e]) = _polar_refine(x[0, e], x[1, e], x[2, e], x[3, e], x[4, e], x[5, e], x[6, e], x[7, e], x[8, e])
    if not converged:
        for e in range(n):
            if not change[e] <= _TOL_FALLBACK:
                fallback[e] = True


@njit(cache=True, inline="always")
def _unbatch(fb, rb, i, f, r):
    """Column ``i`` of the batch's deformation gradients ``fb`` and rotations ``rb`` (9, B)
    into ``f`` and ``r`` (3, 3)."""
    for a in range(3):
        for b in range(3):
            f[a, b] = fb[3 * a + b, i]
            r[a, b] = rb[3 * a + b, i]


@njit(cache=True, inline="always")
def _element_forces(tets, e, g, r, f, v, lam, mu, forces, rg_e):
    """Element ``e``'s internal forces −V R σ g_k added into ``forces`` (N, 3) [N] and its
    rotated gradients R g_k into ``rg_e`` (4, 3), from its rotation ``r`` and deformation
    gradient ``f`` (3, 3), shape gradients ``g`` (4, 3) [1/m], weighted volume ``v`` [m³];
    returns its strain energy density ψ [J/m³] (:func:`_corotated_stress`)."""
    sg00, sg11, sg22, sg01, sg02, sg12, psi = _corotated_stress(r, f, lam, mu)
    for a in range(3):
        # row a of -V R sigma
        p0 = -v * (r[a, 0] * sg00 + r[a, 1] * sg01 + r[a, 2] * sg02)
        p1 = -v * (r[a, 0] * sg01 + r[a, 1] * sg11 + r[a, 2] * sg12)
        p2 = -v * (r[a, 0] * sg02 + r[a, 1] * sg12 + r[a, 2] * sg22)
        for k in range(4):
            forces[tets[e, k], a] += p0 * g[k, 0] + p1 * g[k, 1] + p2 * g[k, 2]
            rg_e[k, a] = r[a, 0] * g[k, 0] + r[a, 1] * g[k, 1] + r[a, 2] * g[k, 2]
    return psi


@njit(cache=True, inline="always")
def _batch_rotations(positions, tets, grads, b0, n, f, fb, xb, rb, change, fallback):
    """Deformation gradients (into ``fb``) and polar rotations (into ``rb``) of elements
    ``b0 … b0 + n − 1``, both (9, BATCH) with entry (a, b) in row 3 a + b: the batch
    iteration of :func:`_polar_batch`, and for the elements it flags (``fallback``) the
    SVD with the reflection removed. ``f`` (3, 3), ``xb``, ``change``: work arrays.
    Returns the number of SVD fallbacks."""
    for i in range(n):
        _deformation_gradient(positions, tets, b0 + i, grads[b0 + i], f)
        for a in range(3):
            for b in range(3):
                fb[3 * a + b, i] = f[a, b]
    _polar_batch(fb, xb, rb, change, fallback, n)
    n_fallback = 0
    for i in range(n):
        if fallback[i]:
            for a in range(3):
                for b in range(3):
                    f[a, b] = fb[3 * a + b, i]
            r = np.empty((3, 3))
            _polar_svd(f, r)
            for a in range(3):
                for b in range(3):
                    rb[3 * a + b, i] = r[a, b]
            n_fallback += 1
    return n_fallback


@njit(cache=True)
def element_state(positions, tets, grads, volumes, lam, mu, forces, rot, rg):
    """Fill forces (N, 3) (zeroed here), rotations (M, 3, 3), rotated gradients (M, 4, 3).

    Args:
        grads: shape gradients (M, 4, 3) [1/m].
    Returns:
        (strain energy [J], number of SVD fallbacks).
    """
    m = tets.shape[0]
    forces[:, :] = 0.0
    energy = 0.0
    n_fallback = 0
    fb = np.empty((9, BATCH))  # the batch's deformation gradients, entry 3 a + b of F in row 3 a + b
    xb = np.empty((9, BATCH))
    rb = np.empty((9, BATCH))
    change = np.empty(BATCH)
    fallback = np.empty(BATCH, dtype=np.bool_)
    f = np.empty((3, 3))
    for b0 in range(0, m, BATCH):
        n = min(BATCH, m - b0)
        n_fallback += _batch_rotations(positions, tets, grads, b0, n, f, fb, xb, rb, change, fallback)
        for i in range(n):
            e = b0 + i
            r = rot[e]
            _unbatch(fb, rb, i, f, r)
            v = volumes[e]
            g = grads[e]
            energy += v * _element_forces(tets, e, g, r, f, v, lam, mu, forces, rg[e])
    return energy, n_fallback


@njit(cache=True, inline="always")
def _add_entry(data, slot_up, slot_lo, e, p, q, val):
    """Add ``val`` to entry ``q`` (= 3 a + b) of element ``e``'s node-pair block ``p`` and to
    its transposed twin, through their CSR slots (−1: no slot)."""
    s = slot_up[e, p, q]
    if s >= 0:
        data[s] += val
    s = slot_lo[e, p, q]
    if s >= 0:
        data[s] += val


@njit(cache=True, inline="always")
def _pair_entry(rg, e, i, j, a, b, vl, vm, dg):
    """Entry (a, b) of element ``e``'s stiffness block of node pair (i, j):
    V λ g'_i,a g'_j,b + V μ g'_j,a g'_i,b (+ V μ g_i·g_j on the diagonal, ``dg``) [N/m]."""
    val = vl * rg[e, i, a] * rg[e, j, b] + vm * rg[e, j, a] * rg[e, i, b]
    if a == b:
        val += dg
    return val


@njit(cache=True)
def stiffness_data(rg, volumes, gram, lam, mu, pair_i, pair_j, slot_up, slot_lo, data):
    """Add ``R K0 Rᵀ`` of the upper node pairs into CSR ``data`` (zeroed here).

    Args:
        rg: rotated gradients (M, 4, 3); gram: g_i·g_j per pair (M, 10).
        slot_up: (M, 10, 9) CSR slot of entry (a, b) of block (i, j) of pair p (−1: dropped);
        slot_lo: (M, 10, 9) slot of the transposed twin (−1 for diagonal pairs).
    """
    data[:] = 0.0
    m = rg.shape[0]
    for e in range(m):
        vl = volumes[e] * lam
        vm = volumes[e] * mu
        for p in range(10):
            i = pair_i[p]
            j = pair_j[p]
            dg = vm * gram[e, p]
            for a in range(3):
                for b in range(3):
                    _add_entry(data, slot_up, slot_lo, e, p, 3 * a + b,
                               _pair_entry(rg, e, i, j, a, b, vl, vm, dg))


@njit(cache=True)
def upper_block_data(rg, volumes, gram, lam, mu, pair_i, pair_j, block, flip, data):
    """Add ``R K0 Rᵀ`` of the element node pairs into the upper node blocks ``data``
    (B, 3, 3) (zeroed here): the layout of :meth:`fem.CorotationalFEM.upper_block_stiffness`.

    Args:
        rg: rotated gradients (M, 4, 3); gram: g_i·g_j per pair (M, 10).
        block: (M, 10) the upper block of pair p of element e (−1: a fixed node, dropped);
        flip: (M, 10) whether the pair's global block is (j, i): its transpose is added.
    """
    data[:] = 0.0
    m = rg.shape[0]
    for e in range(m):
        vl = volumes[e] * lam
        vm = volumes[e] * mu
        for p in range(10):
            k = block[e, p]
            if k < 0:
                continue
            i = pair_i[p]
            j = pair_j[p]
            dg = vm * gram[e, p]
            d = data[k]
            for a in range(3):
                for b in range(3):
                    val = _pair_entry(rg, e, i, j, a, b, vl, vm, dg)
                    if flip[e, p]:
                        d[b, a] += val
                    else:
                        d[a, b] += val


@njit(cache=True)
def consistent_data(positions, tets, grads, gram, volumes, lam, mu, pair_i, pair_j, slot_up, slot_lo, data):
    """The exact corotated tangent added into CSR ``data`` (zeroed here) through the
    slots of :func:`stiffness_data`: ``fem.CorotationalFEM.consistent_stiffness``'s numpy
    path (which has the formula and stays the reference) without its SVDs where possible.

    With F = R S (polar), the twist of R for dF = e_b ⊗ g_j is, in the element's frame,
    ω = −(tr(S) I − S)⁻¹ (R[b, :] × g_j) — the numpy path's ω (taken in the SVD's V
    frame, divided by the singular-value pair sums, the eigenvalues of tr(S) I − S)
    turned by V — and the rotation term is R (ω × g_i). An element whose polar rotation
    needs the SVD path, or whose pair sums are not all above 1e-6 (where the numpy path
    clamps them), takes the numpy path's SVD formula itself. The polar rotation is
    :func:`_polar`'s (~0.3 µs) instead of an SVD (~6 µs per compiled call): a 10k-node
    box's tangent (52 728 elements, none inverted) in 42 ms, against 645 ms for the numpy
    path.

    Args:
        grads: shape gradients (M, 4, 3) [1/m]; gram: g_i·g_j per pair (M, 10);
        volumes: the elements' weighted volumes (M,) [m³]; slot_up, slot_lo: as for
        :func:`stiffness_data` (the tangent is symmetric: a value and its transposed twin
        are equal).
    """
    data[:] = 0.0
    m = tets.shape[0]
    f = np.empty((3, 3))
    rot = np.empty((3, 3))
    omega = np.empty((4, 3, 3))  # ω of (node j, axis b), element frame
    rg = np.empty((3, 4))
    q = np.empty((4, 3))
    ps = np.empty(3)
    for e in range(m):
        g = grads[e]
        _deformation_gradient(positions, tets, e, g, f)
        done = False
        if _polar(f, rot):
            # S = Rᵀ F (symmetric), B = tr(S) I − S, eigenvalues the pair sums
            s00 = rot[0, 0] * f[0, 0] + rot[1, 0] * f[1, 0] + rot[2, 0] * f[2, 0]
            s11 = rot[0, 1] * f[0, 1] + rot[1, 1] * f[1, 1] + rot[2, 1] * f[2, 1]
            s22 = rot[0, 2] * f[0, 2] + rot[1, 2] * f[1, 2] + rot[2, 2] * f[2, 2]
            s01 = 0.5 * (rot[0, 0] * f[0, 1] + rot[1, 0] * f[1, 1] + rot[2, 0] * f[2, 1]
                         + rot[0, 1] * f[0, 0] + rot[1, 1] * f[1, 0] + rot[2, 1] * f[2, 0])
            s02 = 0.5 * (rot[0, 0] * f[0, 2] + rot[1, 0] * f[1, 2] + rot[2, 0] * f[2, 2]
                         + rot[0, 2] * f[0, 0] + rot[1, 2] * f[1, 0] + rot[2, 2] * f[2, 0])
            s12 = 0.5 * (rot[0, 1] * f[0, 2] + rot[1, 1] * f[1, 2] + rot[2, 1] * f[2, 2]
                         + rot[0, 2] * f[0, 1] + rot[1, 2] * f[1, 1] + rot[2, 2] * f[2, 1])
            tr = s00 + s11 + s22
            b00, b11, b22, b01, b02, b12 = tr - s00, tr - s11, tr - s22, -s01, -s02, -s12
            # every eigenvalue of B above 1e-6: B − 1e-6 I positive definite (leading minors)
            c00, c11, c22 = b00 - 1e-6, b11 - 1e-6, b22 - 1e-6
            m2 = c00 * c11 - b01 * b01
            m3 = c00 * (c11 * c22 - b12 * b12) - b01 * (b01 * c22 - b12 * b02) + b02 * (b01 * b12 - c11 * b02)
            if c00 > 0.0 and m2 > 0.0 and m3 > 0.0:
                a00 = b11 * b22 - b12 * b12  # A = B⁻¹ (symmetric) by cofactors
                a01 = b02 * b12 - b01 * b22
                a02 = b01 * b12 - b02 * b11
                a11 = b00 * b22 - b02 * b02
                a12 = b01 * b02 - b00 * b12
                a22 = b00 * b11 - b01 * b01
                det = b00 * a00 + b01 * a01 + b02 * a02
                for j in range(4):
                    for b in range(3):
                        # c = R[b, :] × g_j, ω = −A c
                        x0 = rot[b, 1] * g[j, 2] - rot[b, 2] * g[j, 1]
                        x1 = rot[b, 2] * g[j, 0] - rot[b, 0] * g[j, 2]
                        x2 = rot[b, 0] * g[j, 1] - rot[b, 1] * g[j, 0]
                        omega[j, b, 0] = -(a00 * x0 + a01 * x1 + a02 * x2) / det
                        omega[j, b, 1] = -(a01 * x0 + a11 * x1 + a12 * x2) / det
                        omega[j, b, 2] = -(a02 * x0 + a12 * x1 + a22 * x2) / det
                sig_sum = tr
                done = True
        if not done:  # the numpy path's SVD formula, its ω turned into the element's frame
            u, sig, vt = np.linalg.svd(f)
            if np.linalg.det(u) < 0.0:
                for a in range(3):
                    u[a, 2] = -u[a, 2]
                sig[2] = -sig[2]
            if np.linalg.det(vt) < 0.0:
                for b in range(3):
                    vt[2, b] = -vt[2, b]
                sig[2] = -sig[2]
            for a in range(3):
                for b in range(3):
                    rot[a, b] = u[a, 0] * vt[0, b] + u[a, 1] * vt[1, b] + u[a, 2] * vt[2, b]
            ps[0] = max(sig[1] + sig[2], 1e-6)
            ps[1] = max(sig[0] + sig[2], 1e-6)
            ps[2] = max(sig[0] + sig[1], 1e-6)
            for i in range(4):  # q_i = Vᵀ g_i
                for c in range(3):
                    q[i, c] = g[i, 0] * vt[c, 0] + g[i, 1] * vt[c, 1] + g[i, 2] * vt[c, 2]
            for j in range(4):  # ω̃ = −(U[b, :] × q_j) / pair sums; ω = V ω̃
                for b in range(3):
                    w0 = -(u[b, 1] * q[j, 2] - u[b, 2] * q[j, 1]) / ps[0]
                    w1 = -(u[b, 2] * q[j, 0] - u[b, 0] * q[j, 2]) / ps[1]
                    w2 = -(u[b, 0] * q[j, 1] - u[b, 1] * q[j, 0]) / ps[2]
                    for d in range(3):
                        omega[j, b, d] = vt[0, d] * w0 + vt[1, d] * w1 + vt[2, d] * w2
            sig_sum = sig[0] + sig[1] + sig[2]
        coef = lam * (sig_sum - 3.0) - 2.0 * mu  # tr(S) = Σσ
        for i in range(4):  # R g_i
            for c in range(3):
                rg[c, i] = rot[c, 0] * g[i, 0] + rot[c, 1] * g[i, 1] + rot[c, 2] * g[i, 2]
        vl = volumes[e] * lam
        vc = volumes[e] * coef
        for p in range(10):
            i = pair_i[p]
            j = pair_j[p]
            dg = gram[e, p] * volumes[e] * 2.0 * mu
            for b in range(3):
                # t = ω_{j,b} × g_i (element frame); the rotation term R t
                w0, w1, w2 = omega[j, b, 0], omega[j, b, 1], omega[j, b, 2]
                t0 = w1 * g[i, 2] - w2 * g[i, 1]
                t1 = w2 * g[i, 0] - w0 * g[i, 2]
                t2 = w0 * g[i, 1] - w1 * g[i, 0]
                for a in range(3):
                    val = rg[a, i] * rg[b, j] * vl + (rot[a, 0] * t0 + rot[a, 1] * t1 + rot[a, 2] * t2) * vc
                    if a == b:
                        val += dg
                    _add_entry(data, slot_up, slot_lo, e, p, 3 * a + b, val)
