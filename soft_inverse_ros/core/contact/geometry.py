"""Collision detection: contact points, normals, gaps δ and constraint rows H.

A contact pairs a surface node of the robot with either an obstacle of the world or a
triangle of the robot's own surface (self-collision). Its gap is linear in the node
positions for a fixed normal and fixed barycentric weights (the linearization the
contact solve uses, Goury et al. 2021 eq. 11)::

    δ = n · (x_v − Σ_k w_k x_k) − offset        (self-collision: vertex v, triangle k)
    δ = n · x_v − offset                         (obstacle: a fixed plane through the
                                                  closest obstacle point)

so each contact is one row of H (over the 3 N node coordinates) and ``δ = H x − offset``.
With friction two tangent rows per contact (t1, t2 ⟂ n) measure the tangential
displacement.

- :class:`Plane`, :class:`Sphere`, :class:`Box`: rigid obstacles (signed distance and
  outward normal at query points), fixed or moved by the caller (``moved``).
- :class:`SelfCollision`: the boundary surface of the tetrahedral mesh against itself.
  Candidate vertex–triangle pairs come from ipctk's broad phase (``ipctk.Candidates``,
  MIT, on PyPI) within the alarm distance (small surfaces: a compiled sweep over the
  vertices sorted along one axis, testing each triangle's grown bounding box,
  core/contact/narrow_phase.py); a pair counts when the vertex projects inside
  the triangle (barycentric coordinates ≥ 0) at a signed distance along the triangle's
  outward normal within (−depth, alarm). A vertex never collides with a triangle of its
  own 2-ring (adjacent triangles and the surface's own neighbourhood), only surfaces
  facing each other count (vertex normal against triangle normal), and each vertex keeps
  its closest triangle.

Units: metres; positions in the robot base frame.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from soft_inverse_ros.core.contact.narrow_phase import box_candidates, narrow_phase
from soft_inverse_ros.core.contact.step_bound import candidate_radius, pair_step_bound, surface_step_bound

#: surfaces with at most this many vertex × triangle pairs take the compiled sweep broad
#: phase (narrow_phase.box_candidates) instead of ipctk's: on the finger (155 vertices,
#: 306 triangles) 0.08 ms (0.45–0.51 ms when it tested every pair) against 1.25 ms for
#: ipctk's and its Python list of pairs; on its 614-point refinement the every-pair test
#: took 4.4 ms against 19 ms (BENCHMARKS.md)
BRUTE_FORCE_PAIRS = 4_000_000


@dataclass(frozen=True)
class ContactSet:
    """The contacts detected at one configuration.

    Attributes:
        kind: (m,) 0 = obstacle, 1 = self-collision.
        vertex: (m,) the robot node of each contact.
        other: (m, 3) triangle nodes (self-collision) or -1 (obstacle).
        weights: (m, 3) barycentric weights of the closest point on the triangle (0 for obstacles).
        points: (m, 3) contact points (on the other surface) [m].
        normals: (m, 3) unit normals, pointing from the other surface towards the vertex.
        gaps: (m,) signed gaps [m] (< 0: interpenetration).
        rows: (m, 3N) sparse H: δ = H x − offsets for node positions x (N, 3) flattened.
        offsets: (m,) [m].
        tangents: (m, 2, 3) unit tangents t1, t2 (n, t1, t2 right-handed).
        obstacle: (m,) index of the obstacle (-1 for self-collision).
        surface_map: None when ``vertex``/``other`` are FEM node ids (the mesh boundary);
            with a mapped collision surface (core/contact/mapped_surface.py) the sparse
            barycentric map M (3S × 3N): ``vertex``/``other`` are then SURFACE vertex ids
            (0..S-1, positions M x), and ``rows`` are already composed with M (over the 3N
            node coordinates).
    """

    kind: np.ndarray
    vertex: np.ndarray
    other: np.ndarray
    weights: np.ndarray
    points: np.ndarray
    normals: np.ndarray
    gaps: np.ndarray
    rows: sp.csr_matrix
    offsets: np.ndarray
    tangents: np.ndarray
    obstacle: np.ndarray
    surface_map: sp.csr_matrix | None = None

    @property
    def size(self) -> int:
        return int(self.gaps.shape[0])

    def subset(self, keep: np.ndarray) -> "ContactSet":
        """The contacts selected by the boolean mask or indices ``keep``."""
        return ContactSet(self.kind[keep], self.vertex[keep], self.other[keep], self.weights[keep],
                          self.points[keep], self.normals[keep], self.gaps[keep], self.rows[keep],
                          self.offsets[keep], self.tangents[keep], self.obstacle[keep], self.surface_map)

    def gaps_at(self, positions: np.ndarray) -> np.ndarray:
        """The linearized gaps H x − offset at other node positions (N, 3) [m]."""
        return self.rows @ np.asarray(positions, dtype=float).reshape(-1) - self.offsets

    def tangent_rows(self) -> sp.csr_matrix:
        """(2m, 3N) rows measuring the tangential displacement, ordered [t1_1, t2_1, t1_2, ...]."""
        m, n_cols = self.size, self.rows.shape[1]
        smap = self.surface_map
        n_pts = n_cols // 3 if smap is None else smap.shape[0] // 3
        t1 = _rows(self.vertex, self.other, self.weights, self.tangents[:, 0], n_pts)
        t2 = _rows(self.vertex, self.other, self.weights, self.tangents[:, 1], n_pts)
        order = np.argsort(np.concatenate((2 * np.arange(m), 2 * np.arange(m) + 1)), kind="stable")
        rows = sp.vstack([t1, t2], format="csr")[order]
        return rows if smap is None else sp.csr_matrix(rows @ smap)


def _tangents(normals: np.ndarray, hint: np.ndarray | None = None) -> np.ndarray:
    """(m, 2, 3) orthonormal t1, t2 with (n, t1, t2) right-handed; t1 along the projection
    of ``hint`` (3,) on the tangent plane when given (anisotropic friction directions)."""
    if hint is not None:
        t1 = np.asarray(hint, dtype=float)[None, :] - np.einsum("ij,j->i", normals, hint)[:, None] * normals
        bad = np.linalg.norm(t1, axis=1) < 1e-9
        if bad.any():
            raise ValueError("contact: the tangent direction is along a contact normal")
    else:
        helper = np.where(np.abs(normals[:, [0]]) < 0.9, np.array([[1.0, 0.0, 0.0]]), np.array([[0.0, 1.0, 0.0]]))
        t1 = np.cross(normals, helper)
    t1 /= np.linalg.norm(t1, axis=1, keepdims=True)
    t2 = np.cross(normals, t1)
    return np.stack((t1, t2), axis=1)


def _rows(vertex: np.ndarray, other: np.ndarray, weights: np.ndarray, normals: np.ndarray, n_nodes: int) -> sp.csr_matrix:
    """H: per contact n over the vertex's coordinates and −w_k n over each triangle
    corner's (``other`` −1: none), CSR (m × 3 N) with sorted column indices."""
    m = vertex.shape[0]
    has = other >= 0
    if m and (has.all() or not has.any()):  # every row alike (self-contacts, or obstacle contacts)
        cols = 3 * vertex[:, None] + np.arange(3)
        vals = normals
        if has.all():
            cols = np.hstack((cols, (3 * other[:, :, None] + np.arange(3)).reshape(m, 9)))
            vals = np.hstack((vals, (-weights[:, :, None] * normals[:, None, :]).reshape(m, 9)))
        order = np.argsort(cols, axis=1, kind="stable")
        cols = np.take_along_axis(cols, order, axis=1)
        if (cols[:, 1:] == cols[:, :-1]).any():  # a vertex of its own triangle: add up below
            return _rows_coo(vertex, other, weights, normals, n_nodes)
        vals = np.take_along_axis(vals, order, axis=1)
        width = cols.shape[1]
        return sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(m + 1) * width), shape=(m, 3 * n_nodes))
    return _rows_coo(vertex, other, weights, normals, n_nodes)


def _rows_coo(vertex: np.ndarray, other: np.ndarray, weights: np.ndarray, normals: np.ndarray,
              n_nodes: int) -> sp.csr_matrix:
    """:func:`_rows` for mixed rows (and repeated columns), through COO."""
    m = vertex.shape[0]
    r = [np.repeat(np.arange(m), 3)]
    c = [(3 * vertex[:, None] + np.arange(3)).ravel()]
    v = [normals.ravel()]
    for k in range(3):
        has = other[:, k] >= 0
        idx = np.nonzero(has)[0]
        r.append(np.repeat(idx, 3))
        c.append((3 * other[idx, k][:, None] + np.arange(3)).ravel())
        v.append((-weights[idx, k][:, None] * normals[idx]).ravel())
    return sp.csr_matrix((np.concatenate(v), (np.concatenate(r), np.concatenate(c))), shape=(m, 3 * n_nodes))


def empty_contact_set(n_nodes: int) -> ContactSet:
    z = np.zeros
    return ContactSet(z(0, np.int8), z(0, np.int64), z((0, 3), np.int64), z((0, 3)), z((0, 3)), z((0, 3)), z(0),
                      sp.csr_matrix((0, 3 * n_nodes)), z(0), z((0, 2, 3)), z(0, np.int64))


def merge(sets: list[ContactSet], n_nodes: int) -> ContactSet:
    """One contact set from several (obstacles and self-collision)."""
    sets = [s for s in sets if s.size]
    if not sets:
        return empty_contact_set(n_nodes)
    cat = np.concatenate
    return ContactSet(
        cat([s.kind for s in sets]), cat([s.vertex for s in sets]), cat([s.other for s in sets]),
        cat([s.weights for s in sets]), cat([s.points for s in sets]), cat([s.normals for s in sets]),
        cat([s.gaps for s in sets]), sp.vstack([s.rows for s in sets], format="csr"),
        cat([s.offsets for s in sets]), cat([s.tangents for s in sets]), cat([s.obstacle for s in sets]),
    )


# --------------------------------------------------------------------------- obstacles
class Obstacle:
    """A rigid obstacle: signed distance and outward normal at query points."""

    kind = "?"
    #: direction of the first friction tangent t1 (projected on each contact's tangent
    #: plane), for anisotropic friction; None: any
    tangent_hint: np.ndarray | None = None

    def distance(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(signed distance (k,) [m], outward unit normal at the closest point (k, 3))."""
        raise NotImplementedError

    def moved(self, translation) -> "Obstacle":
        """The same obstacle translated by ``translation`` (3,) [m]."""
        raise NotImplementedError

    def clearance(self, points: np.ndarray, reach: float) -> np.ndarray:
        """A lower bound (k,) [m] of each point's signed distance, exact within ``reach`` [m]
        (the step bound needs no more)."""
        return self.distance(points)[0]

    def contacts(self, positions: np.ndarray, nodes: np.ndarray, alarm: float, index: int = 0) -> ContactSet:
        """Contacts of the robot ``nodes`` (indices into ``positions`` (N, 3)) closer than ``alarm`` [m]."""
        n_nodes = positions.shape[0]
        p = positions[nodes]
        dist, normal = self.distance(p)
        near = dist < alarm
        if not near.any():
            return empty_contact_set(n_nodes)
        v, d, n = nodes[near], dist[near], normal[near]
        points = p[near] - d[:, None] * n
        m = v.shape[0]
        other = np.full((m, 3), -1, dtype=np.int64)
        weights = np.zeros((m, 3))
        rows = _rows(v, other, weights, n, n_nodes)
        offsets = np.einsum("ij,ij->i", n, points)  # δ = n·x_v − n·p_c
        return ContactSet(np.zeros(m, np.int8), v, other, weights, points, n, d, rows, offsets,
                          _tangents(n, self.tangent_hint), np.full(m, index, dtype=np.int64))


@dataclass(frozen=True)
class Plane(Obstacle):
    """The half-space below a plane: ``point`` on it, ``normal`` pointing to the free side;
    ``t1``: optional direction of the first friction tangent (anisotropic friction)."""

    point: tuple[float, float, float]
    normal: tuple[float, float, float]
    t1: tuple[float, float, float] | None = None
    kind = "plane"

    @property
    def tangent_hint(self):
        return None if self.t1 is None else np.asarray(self.t1, dtype=float)

    def distance(self, points):
        n = np.asarray(self.normal, dtype=float)
        n = n / np.linalg.norm(n)
        d = (np.asarray(points) - np.asarray(self.point, dtype=float)) @ n
        return d, np.broadcast_to(n, (len(d), 3)).copy()

    def moved(self, translation) -> "Plane":
        return Plane(tuple(np.asarray(self.point) + np.asarray(translation, dtype=float)), self.normal, self.t1)


@dataclass(frozen=True)
class Sphere(Obstacle):
    """A rigid ball: ``centre`` [m], ``radius`` [m]."""

    centre: tuple[float, float, float]
    radius: float
    kind = "sphere"

    def distance(self, points):
        rel = np.asarray(points, dtype=float) - np.asarray(self.centre, dtype=float)
        r = np.linalg.norm(rel, axis=1)
        n = rel / np.maximum(r, 1e-300)[:, None]
        n[r == 0.0] = (0.0, 0.0, 1.0)
        return r - self.radius, n

    def moved(self, translation) -> "Sphere":
        return Sphere(tuple(np.asarray(self.centre) + np.asarray(translation, dtype=float)), self.radius)


@dataclass(frozen=True)
class Box(Obstacle):
    """An axis-aligned rigid box [lower, upper] [m]."""

    lower: tuple[float, float, float]
    upper: tuple[float, float, float]
    kind = "box"

    def distance(self, points):
        p = np.asarray(points, dtype=float)
        lo, hi = np.asarray(self.lower, dtype=float), np.asarray(self.upper, dtype=float)
        centre, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
        q = np.abs(p - centre) - half
        outside = np.linalg.norm(np.maximum(q, 0.0), axis=1)
        inside = np.minimum(q.max(axis=1), 0.0)
        d = outside + inside
        # normal: outside, towards the point from its clamp; inside, along the nearest face
        clamp = np.clip(p, lo, hi)
        rel = p - clamp
        n = rel / np.maximum(np.linalg.norm(rel, axis=1), 1e-300)[:, None]
        inner = d <= 0.0
        if inner.any():
            axis = np.argmax(q[inner], axis=1)
            sign = np.sign((p[inner] - centre)[np.arange(inner.sum()), axis])
            sign[sign == 0] = 1.0
            n_in = np.zeros((inner.sum(), 3))
            n_in[np.arange(inner.sum()), axis] = sign
            n[inner] = n_in
        return d, n

    def moved(self, translation) -> "Box":
        t = np.asarray(translation, dtype=float)
        return Box(tuple(np.asarray(self.lower) + t), tuple(np.asarray(self.upper) + t))


# --------------------------------------------------------------------------- self-collision
#: worker threads of ipctk's broad phase (TBB) when set: the node processes and the
#: experiments set 1 (soft_inverse_ros/nodes/__init__.py, experiments.limit_threads), one
#: compute thread per process as for BLAS. With ipctk's default (a thread per core) the
#: finger's detection took 3.2-3.9 ms of CPU for 1.7-2.3 ms of wall time, the second
#: thread waiting on the first, on cores the graph's other processes needed (BENCHMARKS.md,
#: eighteenth session).
CONTACT_THREADS_ENV = "SOFT_INVERSE_ROS_CONTACT_THREADS"


def _limit_ipctk_threads(ipctk) -> None:
    value = os.environ.get(CONTACT_THREADS_ENV, "").strip()
    if not value:
        return
    try:
        threads = int(value)
    except ValueError:
        raise ValueError(f"{CONTACT_THREADS_ENV} must be a positive integer, got {value!r}") from None
    if threads < 1:
        raise ValueError(f"{CONTACT_THREADS_ENV} must be a positive integer, got {value!r}")
    if ipctk.get_num_threads() != threads:
        ipctk.set_num_threads(threads)


class SelfCollision:
    """Vertex–triangle self-contacts of a closed triangle surface over the mesh nodes.

    Args:
        faces: (F, 3) outward-oriented boundary triangles (node indices of the volume mesh).
        rest_positions: (N, 3) node positions at rest [m].
        exclude_rings: a vertex ignores the triangles within this many edge rings of it
            (2: its own triangles and their neighbours — the surface's own neighbourhood).
    """

    def __init__(self, faces: np.ndarray, rest_positions: np.ndarray, exclude_rings: int = 2) -> None:
        import ipctk

        _limit_ipctk_threads(ipctk)
        self._ipctk = ipctk
        faces = np.asarray(faces, dtype=np.int64)
        self.surface_nodes = np.unique(faces)
        n_full = rest_positions.shape[0]
        local = np.full(n_full, -1, dtype=np.int64)
        local[self.surface_nodes] = np.arange(self.surface_nodes.size)
        self.faces_local = local[faces]
        self.faces = faces
        self.n_nodes = n_full
        edges = np.unique(np.sort(self.faces_local[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1), axis=0)
        rest = np.asfortranarray(rest_positions[self.surface_nodes], dtype=float)
        self._mesh = ipctk.CollisionMesh(rest, np.asfortranarray(edges.astype(np.int32)),
                                         np.asfortranarray(self.faces_local.astype(np.int32)))
        n_s = self.surface_nodes.size
        adj = sp.csr_matrix((np.ones(2 * len(edges)), (edges.ravel(), edges[:, ::-1].ravel())), shape=(n_s, n_s))
        reach = sp.eye(n_s, format="csr")
        for _ in range(max(exclude_rings, 1)):
            reach = ((reach + reach @ adj) > 0).astype(float)
        self._reach = reach.tocsr()  # vertices within exclude_rings rings (including itself)
        self._reach.eliminate_zeros()
        self._reach.sort_indices()
        self._excl_indptr = self._reach.indptr.astype(np.int64)
        self._excl_indices = self._reach.indices.astype(np.int64)
        self._faces_local_c = np.ascontiguousarray(self.faces_local, dtype=np.int64)
        #: the compiled sweep broad phase (small surfaces, numba) instead of ipctk's
        self.brute_force = (box_candidates is not None
                            and self.surface_nodes.size * len(self.faces_local) <= BRUTE_FORCE_PAIRS)
        if narrow_phase is not None:  # compile or load the kernels now, not at the first contact
            none = np.zeros(0, dtype=np.int64)
            rest_c = np.ascontiguousarray(rest)
            narrow_phase(rest_c, self._faces_local_c, none, none, self._excl_indptr, self._excl_indices, 0.0, 0.0)
            if self.brute_force:
                box_candidates(rest_c, self._faces_local_c, 0.0)
                surface_step_bound(rest_c, np.zeros_like(rest_c), self._faces_local_c, self._excl_indptr,
                                   self._excl_indices, 0.0, 1.0)
            else:
                pair_step_bound(rest_c, np.zeros_like(rest_c), self._faces_local_c, none, none, self._excl_indptr,
                                self._excl_indices, 0.0, 1.0)

    def _excluded(self, v: np.ndarray, f: np.ndarray) -> np.ndarray:
        tri = self.faces_local[f]
        out = np.zeros(v.shape[0], dtype=bool)
        for k in range(3):
            out |= np.asarray(self._reach[v, tri[:, k]]).ravel() > 0
        return out

    def contacts(self, positions: np.ndarray, alarm: float, depth: float | None = None) -> ContactSet:
        """Self-contacts at node ``positions`` (N, 3) [m] with gaps in (−depth, alarm) [m]
        (``depth`` default: ``alarm``; a larger one measures deep penetrations)."""
        depth = alarm if depth is None else float(depth)
        x = np.ascontiguousarray(positions[self.surface_nodes], dtype=float)
        radius = float(max(alarm, depth))
        if self.brute_force and narrow_phase is not None:  # compiled (core/contact/narrow_phase.py)
            v, f = box_candidates(x, self._faces_local_c, radius)
        else:  # ipctk's broad phase
            v, f = self._ipctk_candidates(x, radius)
            if not v.size:
                return empty_contact_set(self.n_nodes)
        if narrow_phase is not None:  # the same steps as below, compiled (core/contact/narrow_phase.py)
            v, f, w, n, gaps = narrow_phase(x, self._faces_local_c, v, f, self._excl_indptr, self._excl_indices,
                                            float(alarm), float(depth))
            if not v.size:
                return empty_contact_set(self.n_nodes)
            return self._contact_set(positions, v, self.faces_local[f], w, n, gaps)
        keep = ~self._excluded(v, f)
        f, v = f[keep], v[keep]
        if not f.size:
            return empty_contact_set(self.n_nodes)
        tri = self.faces_local[f]
        a, b, c = x[tri[:, 0]], x[tri[:, 1]], x[tri[:, 2]]
        p = x[v]
        normal = np.cross(b - a, c - a)
        area2 = np.linalg.norm(normal, axis=1)
        ok = area2 > 0
        normal[ok] /= area2[ok, None]
        # barycentric coordinates of the projection of p on the triangle's plane
        e0, e1, ep = b - a, c - a, p - a
        d00 = np.einsum("ij,ij->i", e0, e0)
        d01 = np.einsum("ij,ij->i", e0, e1)
        d11 = np.einsum("ij,ij->i", e1, e1)
        d20 = np.einsum("ij,ij->i", ep, e0)
        d21 = np.einsum("ij,ij->i", ep, e1)
        den = d00 * d11 - d01 * d01
        with np.errstate(divide="ignore", invalid="ignore"):
            w1 = (d11 * d20 - d01 * d21) / den
            w2 = (d00 * d21 - d01 * d20) / den
        w0 = 1.0 - w1 - w2
        inside = ok & (w0 >= 0) & (w1 >= 0) & (w2 >= 0)
        gap = np.einsum("ij,ij->i", ep, normal)
        # the vertex must face the triangle: its own outward normal against the triangle's
        vn = self._vertex_normals(x)[v]
        facing = np.einsum("ij,ij->i", vn, normal) < -0.3
        near = inside & facing & (gap < alarm) & (gap > -depth)
        if not near.any():
            return empty_contact_set(self.n_nodes)
        v, tri, n = v[near], tri[near], normal[near]
        w = np.column_stack((w0[near], w1[near], w2[near]))
        gaps = gap[near]
        # one contact per vertex: the closest triangle (a vertex over a shared edge is found twice)
        order = np.lexsort((np.abs(gaps), v))
        first = np.ones(order.size, dtype=bool)
        first[1:] = v[order][1:] != v[order][:-1]
        sel = order[first]
        return self._contact_set(positions, v[sel], tri[sel], w[sel], n[sel], gaps[sel])

    def step_bound(self, positions: np.ndarray, displacement: np.ndarray, near: float, s: float = 1.0) -> float:
        """The largest fraction (≤ ``s``) of the step ``displacement`` (N, 3) [m] from node
        ``positions`` (N, 3) [m] that moves no vertex–triangle pair of the surface (its
        excluded rings aside) closer by more than max(``near``, 0.9 × its distance)
        (core/contact/step_bound.py): no pair farther than ``near`` / 0.9 is crossed."""
        x = np.ascontiguousarray(positions[self.surface_nodes], dtype=float)
        d = np.ascontiguousarray(displacement[self.surface_nodes], dtype=float)
        if self.brute_force:  # every pair, compiled
            return float(surface_step_bound(x, d, self._faces_local_c, self._excl_indptr, self._excl_indices,
                                            float(near), float(s)))
        v, f = self._ipctk_candidates(x, candidate_radius(d, near))
        return float(pair_step_bound(x, d, self._faces_local_c, v, f, self._excl_indptr, self._excl_indices,
                                     float(near), float(s)))

    def _ipctk_candidates(self, x: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
        """ipctk's broad phase at surface vertex positions ``x`` (S, 3) [m]: the (vertex (K,),
        triangle (K,)) candidate pairs within ``radius`` [m]."""
        cands = self._ipctk.Candidates()
        cands.build(self._mesh, np.asfortranarray(x), radius)
        fv = cands.fv_candidates
        f = np.fromiter((c.face_id for c in fv), dtype=np.int64, count=len(fv))
        v = np.fromiter((c.vertex_id for c in fv), dtype=np.int64, count=len(fv))
        return v, f

    def _contact_set(self, positions: np.ndarray, v: np.ndarray, tri: np.ndarray, w: np.ndarray, n: np.ndarray,
                     gaps: np.ndarray) -> ContactSet:
        """The contact set of the kept pairs (local vertex ``v``, local triangle corners
        ``tri``, barycentric ``w``, normals ``n``, gaps) at node ``positions`` (N, 3)."""
        vg = self.surface_nodes[v]
        other = self.surface_nodes[tri]
        points = np.einsum("ij,ijk->ik", w, positions[other])
        rows = _rows(vg, other, w, n, self.n_nodes)
        offsets = np.zeros(vg.size)
        m = vg.size
        return ContactSet(np.ones(m, np.int8), vg, other, w, points, n, gaps, rows, offsets, _tangents(n),
                          np.full(m, -1, dtype=np.int64))

    def _vertex_normals(self, x: np.ndarray) -> np.ndarray:
        tri = self.faces_local
        fn = np.cross(x[tri[:, 1]] - x[tri[:, 0]], x[tri[:, 2]] - x[tri[:, 0]])
        vn = np.zeros_like(x)
        for k in range(3):
            np.add.at(vn, tri[:, k], fn)
        return vn / np.maximum(np.linalg.norm(vn, axis=1, keepdims=True), 1e-300)
