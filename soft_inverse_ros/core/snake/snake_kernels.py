"""Compiled (numba) kernels of the snake's implicit step (:class:`~soft_inverse_ros.core.snake.snake.Snake`).

Same mathematics as the snake's numpy/scipy reference path (``Snake(kernels="numpy")``,
which the tests compare against), fused so one Newton iteration makes no sparse-matrix
objects and no Python loop:

- :func:`contact_damping`: the wheels' lagged anisotropic friction blocks (W, 3, 3);
- :func:`fem_forces_and_stiffness`: the co-rotational FEM's forces and tangent blocks in
  one pass, written straight into the Jacobian's layout;
- :func:`newton_system`: residual r and Jacobian data of (M/h + C + h·K) on a block-sparse (BSR) pattern
  built once (the union of the FEM's, the springs' and the wheels' node blocks), adding the
  FEM's stiffness data, the springs' exact tangents, the ground penalty and the friction;
- :func:`minres`: a fixed number of Jacobi-preconditioned MINRES iterations from zero, the
  algorithm of scipy's ``scipy.sparse.linalg.minres`` (Paige & Saunders; BSD-3-Clause
  scipy, ported statement by statement, with its stopping tests) on the BSR arrays.

Units as in :mod:`.snake` (SI). Importing this module needs numba; ``snake.py`` falls back
to the reference path without it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from soft_inverse_ros.core.model.fem_kernels import BATCH, _batch_rotations, _element_forces, _unbatch


@njit(cache=True)
def contact_damping(x, v, wheels, mu_along, mu_across, stiffness, eps, blocks):
    """Friction damping blocks of every wheel contact, lagged at (x, v).

    Args:
        x, v: positions (N, 3) [m] and velocities (N, 3) [m/s].
        wheels: (P, 2) node ids of each plate's (left, right) contact.
        stiffness: ground penalty [N/m]; eps: slip regularization [m/s].
        blocks: out (2P, 3, 3) [N·s/m], contact order ``wheels.ravel()``: c_along·a aᵀ +
            c_across·c cᵀ with c = μN/√(|v_t|² + ε²), v_t the contact's ground-plane slip
            velocity (one regularized slip speed for both axes).
    """
    for p in range(wheels.shape[0]):
        ax = x[wheels[p, 1], 0] - x[wheels[p, 0], 0]
        ay = x[wheels[p, 1], 1] - x[wheels[p, 0], 1]
        nrm = max(np.sqrt(ax * ax + ay * ay), 1e-12)
        cx, cy = ax / nrm, ay / nrm  # across the body (the axle)
        lx, ly = -cy, cx  # along the body
        for k in range(2):
            w = wheels[p, k]
            normal = stiffness * max(-x[w, 2], 0.0)
            slip = np.sqrt(v[w, 0] * v[w, 0] + v[w, 1] * v[w, 1] + eps * eps)
            c_along = mu_along * normal / slip
            c_across = mu_across * normal / slip
            b = blocks[2 * p + k]
            b[:, :] = 0.0
            b[0, 0] = c_along * lx * lx + c_across * cx * cx
            b[0, 1] = c_along * lx * ly + c_across * cx * cy
            b[1, 0] = c_along * ly * lx + c_across * cy * cx
            b[1, 1] = c_along * ly * ly + c_across * cy * cy


@njit(cache=True)
def fem_forces_and_stiffness(positions, tets, grads, volumes, gram, lam, mu, pair_i, pair_j, block_up,
                             block_lo, forces, data):
    """The FEM's internal forces and co-rotational stiffness in one pass over the elements.

    The arithmetic of :func:`~soft_inverse_ros.core.model.fem_kernels.element_state` (its
    forces) and :func:`~soft_inverse_ros.core.model.fem_kernels.stiffness_data`, fused: each
    element's rotated gradients stay local instead of an (M, 4, 3) array read back by a
    second pass, and a block's 9 entries are contiguous (one slot per 3×3 block, not per
    entry).

    Args:
        positions: (N, 3) [m]; tets (M, 4); grads: shape gradients (M, 4, 3) [1/m];
        volumes (M,) [m³]; gram (M, 10); lam, mu: Lamé parameters [Pa];
        block_up: (M, 10) block of each element's upper node pair (i, j) (``fem._PAIR_I/J``);
            block_lo: (M, 10) block of (j, i) (−1 for the diagonal pairs).
        forces: out (N, 3) [N] (zeroed here); data: out block-major stiffness (zeroed here).
    Returns:
        the number of elements that took the SVD (inverted/degenerate) path.
    """
    forces[:, :] = 0.0
    data[:] = 0.0
    n_fallback = 0
    fb = np.empty((9, BATCH))
    xb = np.empty((9, BATCH))
    rb = np.empty((9, BATCH))
    change = np.empty(BATCH)
    fallback = np.empty(BATCH, dtype=np.bool_)
    f = np.empty((3, 3))
    r = np.empty((3, 3))
    rg = np.empty((4, 3))
    m = tets.shape[0]
    for b0 in range(0, m, BATCH):
        n = min(BATCH, m - b0)
        n_fallback += _batch_rotations(positions, tets, grads, b0, n, f, fb, xb, rb, change, fallback)
        for k in range(n):
            e = b0 + k
            g = grads[e]
            _unbatch(fb, rb, k, f, r)
            v = volumes[e]
            _element_forces(tets, e, g, r, f, v, lam, mu, forces, rg)
            vl = v * lam
            vm = v * mu
            for p in range(10):
                i = pair_i[p]
                j = pair_j[p]
                dg = vm * gram[e, p]
                up = 9 * block_up[e, p]
                lo = 9 * block_lo[e, p]
                for a in range(3):
                    gia = rg[i, a]
                    gja = rg[j, a]
                    for b in range(3):
                        val = vl * gia * rg[j, b] + vm * gja * rg[i, b]
                        if a == b:
                            val += dg
                        data[up + 3 * a + b] += val
                        if lo >= 0:
                            data[lo + 3 * b + a] += val
    return n_fallback


@njit(cache=True)
def newton_system(x, v, v0, h, mass3, fem_forces, fem_data, pairs, rest, stiff, spring_slots, grav,
                  contacts, ground_k, damping, contact_slots, diag_slots, force, r, jac, k_spring):
    """Residual and Jacobian of one implicit-Euler Newton iteration.

    r = M (v − v0)/h − f(x) + C v and J = M/h + C + h (K_fem + K_springs + K_ground), with
    f = f_fem + f_springs + gravity + ground penalty, x = x0 + h v.

    Args:
        x, v, v0: (N, 3) positions [m], velocities, start-of-step velocities [m/s].
        h: dt [s]; mass3: (3N,) lumped mass per DOF [kg].
        fem_forces: (N, 3) FEM internal forces [N]; fem_data: FEM stiffness in the union
            block layout (zero where the FEM has no entry) [N/m].
        pairs, rest, stiff: springs (S, 2), rest lengths [m], stiffness [N/m].
        spring_slots: (4, S, 9) data slots of the blocks (a a), (b b), (a b), (b a).
        grav: (N, 3) gravity forces [N]; contacts: (W,) wheel contact node ids;
        ground_k: penalty [N/m]; damping: (W, 3, 3) friction blocks [N·s/m];
        contact_slots: (W, 9) data slots of the contact nodes' diagonal blocks;
        diag_slots: (3N,) slot of each diagonal entry.
        force: out (N, 3) [N]; r: out (3N,); jac: out data; k_spring: work (nnz,).
    """
    n = x.shape[0]
    s_count = pairs.shape[0]
    k_spring[:] = 0.0
    fs = np.zeros((n, 3))
    f_pair = np.empty((s_count, 3))
    for s in range(s_count):
        a, b = pairs[s, 0], pairs[s, 1]
        d0 = x[b, 0] - x[a, 0]
        d1 = x[b, 1] - x[a, 1]
        d2 = x[b, 2] - x[a, 2]
        length = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        c = stiff[s] * (length - rest[s]) / max(length, 1e-15)
        f_pair[s, 0], f_pair[s, 1], f_pair[s, 2] = c * d0, c * d1, c * d2
        ln = max(length, 1e-15)
        nv0, nv1, nv2 = d0 / ln, d1 / ln, d2 / ln
        geo = 1.0 - rest[s] / ln
        k = stiff[s]
        nv = (nv0, nv1, nv2)
        for i in range(3):
            for j in range(3):
                val = k * ((1.0 - geo) * (nv[i] * nv[j]) + (geo if i == j else 0.0))
                q = 3 * i + j
                k_spring[spring_slots[0, s, q]] += val
                k_spring[spring_slots[1, s, q]] += val
                k_spring[spring_slots[2, s, q]] -= val
                k_spring[spring_slots[3, s, q]] -= val
    for s in range(s_count):
        a = pairs[s, 0]
        for i in range(3):
            fs[a, i] += f_pair[s, i]
    for s in range(s_count):
        b = pairs[s, 1]
        for i in range(3):
            fs[b, i] -= f_pair[s, i]
    for node in range(n):
        for i in range(3):
            force[node, i] = fem_forces[node, i] + fs[node, i] + grav[node, i]
    kn = np.zeros(3 * n)
    for c in range(contacts.shape[0]):
        w = contacts[c]
        pen = max(-x[w, 2], 0.0)
        force[w, 2] += ground_k * pen
        if pen > 0.0:
            kn[3 * w + 2] = ground_k
    for i in range(3 * n):
        node, a = i // 3, i % 3
        r[i] = mass3[i] * (v[node, a] - v0[node, a]) / h - force[node, a]
    for c in range(contacts.shape[0]):
        w = contacts[c]
        for a in range(3):
            r[3 * w + a] += damping[c, a, 0] * v[w, 0] + damping[c, a, 1] * v[w, 1] + damping[c, a, 2] * v[w, 2]
    for q in range(jac.shape[0]):
        jac[q] = h * (fem_data[q] + k_spring[q])
    for i in range(3 * n):
        q = diag_slots[i]
        jac[q] += h * kn[i] + mass3[i] / h
    for c in range(contacts.shape[0]):
        for q in range(9):
            jac[contact_slots[c, q]] += damping[c, q // 3, q % 3]


@njit(cache=True)
def _matvec(indptr, indices, data, x, y):
    """y = A x for A in 3×3 block rows (BSR: ``data`` block-major, 9 per block)."""
    for i in range(indptr.shape[0] - 1):
        y0 = 0.0
        y1 = 0.0
        y2 = 0.0
        for jj in range(indptr[i], indptr[i + 1]):
            j = 3 * indices[jj]
            x0, x1, x2 = x[j], x[j + 1], x[j + 2]
            d = 9 * jj
            y0 += data[d] * x0 + data[d + 1] * x1 + data[d + 2] * x2
            y1 += data[d + 3] * x0 + data[d + 4] * x1 + data[d + 5] * x2
            y2 += data[d + 6] * x0 + data[d + 7] * x1 + data[d + 8] * x2
        y[3 * i] = y0
        y[3 * i + 1] = y1
        y[3 * i + 2] = y2


@njit(cache=True)
def _dot(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    return s


@njit(cache=True)
def minres(indptr, indices, data, diag_slots, b, maxiter):
    """x ≈ A⁻¹ b by ``maxiter`` Jacobi-preconditioned MINRES iterations from x = 0 (rtol 0:
    stops early only on scipy's machine-precision tests), A symmetric in 3×3 block rows
    (BSR arrays, see :func:`_matvec`); ``diag_slots`` (n,) the data slot of each diagonal entry."""
    n = b.shape[0]
    eps = np.finfo(np.float64).eps
    inv_d = np.empty(n)
    for i in range(n):
        inv_d[i] = 1.0 / data[diag_slots[i]]
    x = np.zeros(n)
    r1 = b.copy()
    y = inv_d * r1
    beta1 = _dot(r1, y)
    if beta1 <= 0.0:  # scipy: < 0 raises (indefinite preconditioner); == 0: x0 is exact
        return x
    if np.sqrt(_dot(b, b)) == 0.0:
        return x
    beta1 = np.sqrt(beta1)
    oldb = 0.0
    beta = beta1
    dbar = 0.0
    epsln = 0.0
    phibar = beta1
    rhs1 = beta1
    rhs2 = 0.0
    tnorm2 = 0.0
    gmax = 0.0
    gmin = np.finfo(np.float64).max
    cs = -1.0
    sn = 0.0
    w = np.zeros(n)
    w2 = np.zeros(n)
    w1 = np.zeros(n)
    r2 = r1.copy()
    v = np.empty(n)
    av = np.empty(n)
    istop = 0
    itn = 0
    while itn < maxiter:
        itn += 1
        s = 1.0 / beta
        for i in range(n):
            v[i] = s * y[i]
        _matvec(indptr, indices, data, v, av)
        if itn >= 2:
            c = beta / oldb
            for i in range(n):
                av[i] = av[i] - c * r1[i]
        alfa = _dot(v, av)
        c = alfa / beta
        for i in range(n):
            av[i] = av[i] - c * r2[i]
        r1, r2 = r2, r1
        for i in range(n):
            r2[i] = av[i]
            y[i] = inv_d[i] * av[i]
        oldb = beta
        beta = _dot(r2, y)
        if beta < 0.0:
            break  # scipy raises (non-symmetric matrix); keep the iterate
        beta = np.sqrt(beta)
        tnorm2 += alfa**2 + oldb**2 + beta**2
        if itn == 1 and beta / beta1 <= 10 * eps:
            istop = -1
        oldeps = epsln
        delta = cs * dbar + sn * alfa
        gbar = sn * dbar - cs * alfa
        epsln = sn * beta
        dbar = -cs * beta
        root = np.sqrt(gbar * gbar + dbar * dbar)
        gamma = max(np.sqrt(gbar * gbar + beta * beta), eps)
        cs = gbar / gamma
        sn = beta / gamma
        phi = cs * phibar
        phibar = sn * phibar
        denom = 1.0 / gamma
        w1, w2, w = w2, w, w1
        for i in range(n):
            w[i] = (v[i] - oldeps * w1[i] - delta * w2[i]) * denom
            x[i] = x[i] + phi * w[i]
        gmax = max(gmax, gamma)
        gmin = min(gmin, gamma)
        z = rhs1 / gamma
        rhs1 = rhs2 - delta * z
        rhs2 = -epsln * z
        anorm = np.sqrt(tnorm2)
        ynorm = np.sqrt(_dot(x, x))
        epsx = anorm * ynorm * eps
        rnorm = phibar
        test1 = np.inf if (ynorm == 0 or anorm == 0) else rnorm / (anorm * ynorm)
        test2 = np.inf if anorm == 0 else root / anorm
        acond = gmax / gmin
        if istop == 0:
            if 1 + test2 <= 1:
                istop = 2
            if 1 + test1 <= 1:
                istop = 1
            if itn >= maxiter:
                istop = 6
            if acond >= 0.1 / eps:
                istop = 4
            if epsx >= beta1:
                istop = 3
            if test2 <= 0.0:
                istop = 2
            if test1 <= 0.0:
                istop = 1
        if istop != 0:
            break
    return x
