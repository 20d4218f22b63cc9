"""How far a step may go before a contact could be passed unseen: a clearance bound.

The low-rate update with contact detects contacts at x_k and takes a step x_k + s·d. A
contact that is not detected at x_k (farther than the alarm distance) can still be closed,
or passed through, by a long step. The bound here gives the longest fraction s ∈ [0, 1]
of the step such that every pair of features that can touch moves, relative to each
other, by at most

    b(D) = max(near, 0.9 D)

where D is the pair's distance at x_k [m] and ``near`` is the approach allowed to pairs
already close (the caller passes twice the alarm distance: what the older bound, each
node moving at most the alarm distance, allowed any two nodes).

Why relative motion: the Euclidean distance from a point to a triangle is 1-Lipschitz in
each of the four vertices, and it does not change when all of them move by the same
vector. With vertex v moving by d_v and the triangle's corners by d_u, the distance
changes by at most max_u |d_u − d_v| along the whole straight-line step, so a pair with
s · max_u |d_u − d_v| ≤ 0.9 D keeps at least 0.1 D of clearance at every point of the step:
it cannot be crossed. A rigid motion of a whole region (a finger's tip swinging) costs
nothing; only the approach of two surfaces does. For an obstacle (fixed during the
step) the node's own displacement |d_v| plays the role.

So pairs farther than ``near`` / 0.9 are never crossed in one update; pairs closer than
that (mostly the detected contacts, whose linearized gaps the contact solve keeps ≥ 0)
approach by at most ``near``. Adjacent pairs (the self-collision's excluded rings) are
not pairs that can touch and do not count.

:data:`pair_step_bound` (candidate pairs from a broad phase) and
:data:`surface_step_bound` (every pair of a small surface, pruned by bounding spheres) are
the numba-compiled kernels (with numba), else the Python loops ``*_py`` (slow; the
reference in the tests).

Units: metres; local surface vertex indices for the self-collision arrays.
"""

from __future__ import annotations

import os

import numpy as np

from soft_inverse_ros.core.contact import narrow_phase as _np_mod

__all__ = ["CLEARANCE_FRACTION", "pair_step_bound", "pair_step_bound_py", "point_triangle_distance_py",
           "surface_step_bound", "surface_step_bound_py",
           "obstacle_step_bound", "candidate_radius"]

#: the share of a pair's distance one step may close
CLEARANCE_FRACTION = 0.9


def candidate_radius(displacement: np.ndarray, near: float) -> float:
    """The broad-phase radius [m] beyond which no pair can bind the step: pairs farther
    than 2 max|d| / 0.9 move relative to each other by less than 0.9 D at s = 1 (and by
    less than ``near`` when that is larger)."""
    largest = float(np.sqrt((np.asarray(displacement) ** 2).sum(axis=1).max(initial=0.0)))
    return max(2.0 * largest / CLEARANCE_FRACTION, near / CLEARANCE_FRACTION)


def point_triangle_distance_py(px, py, pz, ax, ay, az, bx, by, bz, cx, cy, cz):
    """Euclidean distance [m] from point p to the triangle abc (closest-point regions,
    Ericson, Real-Time Collision Detection §5.1.5). Degenerate triangles fall back to
    their corners' and edges' regions."""
    abx, aby, abz = bx - ax, by - ay, bz - az
    acx, acy, acz = cx - ax, cy - ay, cz - az
    apx, apy, apz = px - ax, py - ay, pz - az
    d1 = abx * apx + aby * apy + abz * apz
    d2 = acx * apx + acy * apy + acz * apz
    if d1 <= 0.0 and d2 <= 0.0:  # vertex a
        return np.sqrt(apx * apx + apy * apy + apz * apz)
    bpx, bpy, bpz = px - bx, py - by, pz - bz
    d3 = abx * bpx + aby * bpy + abz * bpz
    d4 = acx * bpx + acy * bpy + acz * bpz
    if d3 >= 0.0 and d4 <= d3:  # vertex b
        return np.sqrt(bpx * bpx + bpy * bpy + bpz * bpz)
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:  # edge ab
        t = d1 / (d1 - d3) if d1 != d3 else 0.0
        qx, qy, qz = apx - t * abx, apy - t * aby, apz - t * abz
        return np.sqrt(qx * qx + qy * qy + qz * qz)
    cpx, cpy, cpz = px - cx, py - cy, pz - cz
    d5 = abx * cpx + aby * cpy + abz * cpz
    d6 = acx * cpx + acy * cpy + acz * cpz
    if d6 >= 0.0 and d5 <= d6:  # vertex c
        return np.sqrt(cpx * cpx + cpy * cpy + cpz * cpz)
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:  # edge ac
        t = d2 / (d2 - d6) if d2 != d6 else 0.0
        qx, qy, qz = apx - t * acx, apy - t * acy, apz - t * acz
        return np.sqrt(qx * qx + qy * qy + qz * qz)
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:  # edge bc
        den = (d4 - d3) + (d5 - d6)
        t = (d4 - d3) / den if den != 0.0 else 0.0
        qx, qy, qz = bpx - t * (cx - bx), bpy - t * (cy - by), bpz - t * (cz - bz)
        return np.sqrt(qx * qx + qy * qy + qz * qz)
    den = va + vb + vc
    if den == 0.0:  # degenerate (zero-area) triangle: the nearest of its three edges
        best = np.inf
        for (ux, uy, uz, wx, wy, wz) in ((ax, ay, az, bx, by, bz), (bx, by, bz, cx, cy, cz),
                                         (cx, cy, cz, ax, ay, az)):
            ex, ey, ez = wx - ux, wy - uy, wz - uz
            ee = ex * ex + ey * ey + ez * ez
            t = 0.0 if ee == 0.0 else min(1.0, max(0.0, ((px - ux) * ex + (py - uy) * ey + (pz - uz) * ez) / ee))
            qx, qy, qz = px - ux - t * ex, py - uy - t * ey, pz - uz - t * ez
            best = min(best, np.sqrt(qx * qx + qy * qy + qz * qz))
        return best
    v = vb / den
    w = vc / den
    qx = apx - abx * v - acx * w  # p − (a + ab v + ac w): inside the face
    qy = apy - aby * v - acy * w
    qz = apz - abz * v - acz * w
    return np.sqrt(qx * qx + qy * qy + qz * qz)


def _pair_fraction_py(x, d, v, t0, t1, t2, excl_indptr, excl_indices, near, s):
    """One (vertex v, triangle t0 t1 t2) pair's bound on the step fraction: ``s`` itself
    when the pair does not bind it (its approach within ``near``, or an excluded pair),
    else allowed / approach with allowed = max(near, 0.9 D)."""
    rel = 0.0
    for u in (t0, t1, t2):
        rx, ry, rz = d[u, 0] - d[v, 0], d[u, 1] - d[v, 1], d[u, 2] - d[v, 2]
        rel = max(rel, np.sqrt(rx * rx + ry * ry + rz * rz))
    if s * rel <= near:  # within the close pairs' allowance whatever the distance
        return s
    if (_excluded(excl_indptr, excl_indices, v, t0) or _excluded(excl_indptr, excl_indices, v, t1)
            or _excluded(excl_indptr, excl_indices, v, t2)):
        return s
    dist = _point_triangle_distance(x[v, 0], x[v, 1], x[v, 2], x[t0, 0], x[t0, 1], x[t0, 2],
                                    x[t1, 0], x[t1, 1], x[t1, 2], x[t2, 0], x[t2, 1], x[t2, 2])
    allowed = max(near, CLEARANCE_FRACTION * dist)
    return allowed / rel if s * rel > allowed else s


def pair_step_bound_py(x, d, faces, cand_v, cand_f, excl_indptr, excl_indices, near, s):
    """The step fraction ≤ ``s`` that keeps every candidate (vertex, triangle) pair within
    its allowed approach b(D) = max(near, 0.9 D) (module docstring).

    Args:
        x: (S, 3) surface vertex positions [m].
        d: (S, 3) their displacements over the full step [m].
        faces: (F, 3) triangles over the S vertices.
        cand_v, cand_f: (K,) candidate pairs (every pair closer than the broad phase's radius).
        excl_indptr, excl_indices: CSR (sorted) of each vertex's excluded vertices (adjacent
            pairs: skipped).
        near: approach allowed to close pairs [m].
        s: the fraction to start from (≤ 1).

    Returns:
        The largest fraction in [0, s] meeting every pair's bound.
    """
    for i in range(cand_v.shape[0]):
        f = cand_f[i]
        s = _pair_fraction(x, d, cand_v[i], faces[f, 0], faces[f, 1], faces[f, 2], excl_indptr, excl_indices,
                           near, s)
    return s


def surface_step_bound_py(x, d, faces, excl_indptr, excl_indices, near, s):
    """:func:`pair_step_bound_py` over every (vertex, triangle) pair of the surface, for
    small surfaces (no broad phase). Each triangle's bounding sphere (centroid c, radius r)
    and its corners' displacement spread (mean m, radius q) give a pair's distance
    D ≥ |x_v − c| − r and approach max_u |d_u − d_v| ≤ |d_v − m| + q: the exact distance
    and approach are computed only for pairs these bounds do not clear."""
    n_f = faces.shape[0]
    n_s = x.shape[0]
    centre = np.empty((n_f, 3))
    radius = np.empty(n_f)
    mean = np.empty((n_f, 3))
    spread = np.empty(n_f)
    for t in range(n_f):
        r = 0.0
        q = 0.0
        for k in range(3):
            centre[t, k] = (x[faces[t, 0], k] + x[faces[t, 1], k] + x[faces[t, 2], k]) / 3.0
            mean[t, k] = (d[faces[t, 0], k] + d[faces[t, 1], k] + d[faces[t, 2], k]) / 3.0
        for c in range(3):
            u = faces[t, c]
            ex, ey, ez = x[u, 0] - centre[t, 0], x[u, 1] - centre[t, 1], x[u, 2] - centre[t, 2]
            r = max(r, np.sqrt(ex * ex + ey * ey + ez * ez))
            ex, ey, ez = d[u, 0] - mean[t, 0], d[u, 1] - mean[t, 1], d[u, 2] - mean[t, 2]
            q = max(q, np.sqrt(ex * ex + ey * ey + ez * ez))
        radius[t] = r
        spread[t] = q
    for t in range(n_f):
        t0, t1, t2 = faces[t, 0], faces[t, 1], faces[t, 2]
        for v in range(n_s):
            mx, my, mz = d[v, 0] - mean[t, 0], d[v, 1] - mean[t, 1], d[v, 2] - mean[t, 2]
            approach = np.sqrt(mx * mx + my * my + mz * mz) + spread[t]
            if s * approach <= near:
                continue
            cx, cy, cz = x[v, 0] - centre[t, 0], x[v, 1] - centre[t, 1], x[v, 2] - centre[t, 2]
            if s * approach <= CLEARANCE_FRACTION * (np.sqrt(cx * cx + cy * cy + cz * cz) - radius[t]):
                continue
            if v != t0 and v != t1 and v != t2:
                s = _pair_fraction(x, d, v, t0, t1, t2, excl_indptr, excl_indices, near, s)
    return s


def obstacle_step_bound(clearance: np.ndarray, displacement: np.ndarray, near: float, s: float) -> float:
    """The step fraction ≤ ``s`` that moves no node by more than max(near, 0.9 D) towards a
    fixed obstacle, D its clearance [m] (a lower bound of its signed distance; inside: ≤ 0).

    Args:
        clearance: (k,) the nodes' clearances [m].
        displacement: (k, 3) their displacements over the full step [m].
    """
    motion = np.sqrt((np.asarray(displacement) ** 2).sum(axis=1))
    allowed = np.maximum(near, CLEARANCE_FRACTION * np.asarray(clearance, dtype=float))
    moving = motion > 0.0
    if not moving.any():
        return s
    return float(min(s, (allowed[moving] / motion[moving]).min()))


_excluded = _np_mod._excluded  # compiled with the narrow phase when numba is there
_point_triangle_distance = point_triangle_distance_py
_pair_fraction = _pair_fraction_py
#: the compiled kernels (numba), else the Python loops
pair_step_bound = pair_step_bound_py
surface_step_bound = surface_step_bound_py
if _np_mod.NARROW_PHASE_PATH == "numba" and os.environ.get("SOFT_INVERSE_ROS_QP_KERNELS", "auto") != "numpy":
    from numba import njit

    _point_triangle_distance = njit(cache=True)(point_triangle_distance_py)
    _pair_fraction = njit(cache=True)(_pair_fraction_py)
    pair_step_bound = njit(cache=True)(pair_step_bound_py)
    surface_step_bound = njit(cache=True)(surface_step_bound_py)
