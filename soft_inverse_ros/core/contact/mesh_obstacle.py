"""A rigid obstacle given as a closed triangle surface (STL, OBJ, ... through meshio).

Signed distance from query points to the surface: the closest point on the triangles
(projection onto the triangle's plane, else onto its three edges), the sign from the
angle-weighted pseudonormal of the closest feature (face, edge or vertex; Bærentzen &
Aanæs, IEEE TVCG 2005), which is exact for a closed, consistently outward-oriented
surface. The contact normal is the unit vector from the closest point to the query
point (outward when outside, flipped when inside), the feature's pseudonormal when the
point lies on the surface.

Only points near the surface need the closest triangle: the triangles whose centroid
lies within ``reach + circumradius`` of a point (a k-d tree over the centroids) are the
candidates. Points outside the oriented bounding box (principal axes) by more than
``reach`` are far. A point inside it with no candidate is either far outside or deep
inside: an interior point is within half the box's smallest extent of the surface, so
only points that close to a centroid can be inside; for those the generalized winding
number (sum of the triangles' solid angles / 4π) tells which, and a deep point gets its
closest point from all triangles.

Frames and units: vertices and query points in the robot frame [m]; ``offset`` [m]
translates the surface (a moving obstacle, see :mod:`obstacle_motion`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from soft_inverse_ros.core.contact.geometry import Obstacle


class MeshGeometry:
    """The fixed part of a mesh obstacle: triangles, pseudonormals and the search tree.

    Args:
        vertices: (V, 3) vertex positions [m].
        faces: (F, 3) outward-oriented triangles of a closed manifold surface.
    """

    def __init__(self, vertices: np.ndarray, faces: np.ndarray) -> None:
        from scipy.spatial import cKDTree

        v = np.asarray(vertices, dtype=float)
        f = np.asarray(faces, dtype=np.int64)
        if v.ndim != 2 or v.shape[1] != 3 or f.ndim != 2 or f.shape[1] != 3 or len(f) == 0:
            raise ValueError("mesh obstacle: expected vertices (V, 3) and at least one triangle (F, 3)")
        self.vertices, self.faces = v, f
        a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
        cross = np.cross(b - a, c - a)
        area2 = np.linalg.norm(cross, axis=1)
        if np.any(area2 <= 0):
            raise ValueError(f"mesh obstacle: {int(np.sum(area2 <= 0))} degenerate (zero-area) triangles")
        self.face_normals = cross / area2[:, None]
        self.centroids = (a + b + c) / 3.0
        self.circumradius = float(np.max(np.linalg.norm(
            np.stack([a, b, c], axis=1) - self.centroids[:, None, :], axis=2)))
        self.lower, self.upper = v.min(axis=0), v.max(axis=0)
        # oriented bounding box (principal axes of the vertices): a point farther than
        # `reach` outside it is far outside; its smallest half-extent bounds the distance
        # from any interior point to the surface (the segment to the nearest box face
        # crosses the surface)
        self.obb_centre = v.mean(axis=0)
        _, _, axes = np.linalg.svd(v - self.obb_centre, full_matrices=False)
        self.obb_axes = axes  # rows: unit axes
        proj = (v - self.obb_centre) @ axes.T
        self.obb_lower, self.obb_upper = proj.min(axis=0), proj.max(axis=0)
        self.inner_bound = 0.5 * float(np.min(self.obb_upper - self.obb_lower))
        self.tree = cKDTree(self.centroids)
        # edge pseudonormals: the sum of the two adjacent face normals, per (face, local edge k)
        # with local edge k running from corner k to corner k+1
        edges = np.stack([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]], axis=1).reshape(-1, 2)
        key = np.sort(edges, axis=1)
        _, inverse, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
        if np.any(counts != 2):
            raise ValueError("mesh obstacle: the surface is not closed and manifold "
                             f"({int(np.sum(counts != 2))} edges not shared by exactly two triangles)")
        inverse = inverse.ravel()
        sums = np.zeros((counts.size, 3))
        np.add.at(sums, inverse, np.repeat(self.face_normals, 3, axis=0))
        self.edge_normals = sums[inverse].reshape(-1, 3, 3)  # (F, 3 edges, 3)
        # vertex pseudonormals: the face normals weighted by the incident angle
        vn = np.zeros_like(v)
        corners = np.stack([a, b, c], axis=1)
        for k in range(3):
            e1 = corners[:, (k + 1) % 3] - corners[:, k]
            e2 = corners[:, (k + 2) % 3] - corners[:, k]
            cosine = np.einsum("ij,ij->i", e1, e2) / (np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1))
            np.add.at(vn, f[:, k], np.arccos(np.clip(cosine, -1.0, 1.0))[:, None] * self.face_normals)
        self.vertex_normals = vn
        volume = np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0
        if not volume > 0:
            raise ValueError("mesh obstacle: the surface encloses no volume with outward triangles "
                             "(inward-oriented or flat)")

    # ------------------------------------------------------------------ queries
    def closest(self, points: np.ndarray, tri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Closest point on triangle ``tri[i]`` to ``points[i]`` and its feature's pseudonormal.

        Returns:
            (closest points (k, 3) [m], pseudonormals (k, 3), not normalized).
        """
        p = np.asarray(points, dtype=float)
        f = self.faces[tri]
        a, b, c = self.vertices[f[:, 0]], self.vertices[f[:, 1]], self.vertices[f[:, 2]]
        n = self.face_normals[tri]
        # projection onto the plane and its barycentric coordinates
        q = p - np.einsum("ij,ij->i", p - a, n)[:, None] * n
        inside = np.ones(len(p), dtype=bool)
        for u, w in ((a, b), (b, c), (c, a)):
            inside &= np.einsum("ij,ij->i", np.cross(w - u, q - u), n) >= 0.0
        best = q.copy()
        best_d = np.where(inside, 0.0, np.inf)  # distance from q (in-plane) is what is compared
        pseudo = n.copy()
        out = ~inside
        if out.any():
            corners = (a, b, c)
            for k in range(3):
                u, w = corners[k][out], corners[(k + 1) % 3][out]
                e = w - u
                t = np.clip(np.einsum("ij,ij->i", p[out] - u, e) / np.einsum("ij,ij->i", e, e), 0.0, 1.0)
                cand = u + t[:, None] * e
                d = np.linalg.norm(p[out] - cand, axis=1)
                better = d < best_d[out]
                idx = np.flatnonzero(out)[better]
                best[idx] = cand[better]
                best_d[idx] = d[better]
                tb = t[better]
                face_idx = tri[idx]
                normal = self.edge_normals[face_idx, k]
                at_start, at_end = tb <= 0.0, tb >= 1.0
                normal[at_start] = self.vertex_normals[self.faces[face_idx[at_start], k]]
                normal[at_end] = self.vertex_normals[self.faces[face_idx[at_end], (k + 1) % 3]]
                pseudo[idx] = normal
        return best, pseudo

    def winding_number(self, points: np.ndarray) -> np.ndarray:
        """Generalized winding number (≈ 1 inside, ≈ 0 outside) of each point (k, 3)
        (the triangles' solid angles, Van Oosterom & Strackee; chunks of ~1e6 pairs)."""
        p = np.asarray(points, dtype=float).reshape(-1, 3)
        out = np.empty(len(p))
        corners = self.vertices[self.faces]  # (F, 3, 3)
        chunk = max(1, 1_000_000 // len(self.faces))
        for s in range(0, len(p), chunk):
            rel = corners[None, :, :, :] - p[s:s + chunk, None, None, :]  # (c, F, 3, 3)
            a, b, c = rel[:, :, 0], rel[:, :, 1], rel[:, :, 2]
            la, lb, lc = (np.linalg.norm(x, axis=-1) for x in (a, b, c))
            num = np.einsum("pfi,pfi->pf", a, np.cross(b, c))
            den = (la * lb * lc + np.einsum("pfi,pfi->pf", a, b) * lc
                   + np.einsum("pfi,pfi->pf", b, c) * la + np.einsum("pfi,pfi->pf", c, a) * lb)
            out[s:s + chunk] = np.arctan2(num, den).sum(axis=1) / (2.0 * np.pi)
        return out

    def signed_distance(self, points: np.ndarray, reach: float) -> tuple[np.ndarray, np.ndarray]:
        """Signed distance (k,) [m] (negative inside) and outward contact normal (k, 3).

        Points farther than ``reach`` [m] outside get +inf and a zero normal (not computed)."""
        p = np.asarray(points, dtype=float)
        k = len(p)
        dist = np.full(k, np.inf)
        normal = np.zeros((k, 3))
        local = (p - self.obb_centre) @ self.obb_axes.T
        boxed = np.flatnonzero(np.all((local >= self.obb_lower - reach) & (local <= self.obb_upper + reach),
                                      axis=1))
        if boxed.size == 0:
            return dist, normal
        lists = self.tree.query_ball_point(p[boxed], r=reach + self.circumradius)
        counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
        near = counts > 0
        if near.any():
            point_of = np.repeat(boxed[near], counts[near])
            tri = np.concatenate([np.asarray(x, dtype=np.int64) for x, ok in zip(lists, near) if ok])
            self._assign(p, point_of, tri, dist, normal)
        # inside deeper than reach: the true closest triangle may lie beyond the candidate
        # radius; every triangle within |d| + circumradius of the point includes it
        deeper = boxed[dist[boxed] < -reach]
        if deeper.size:
            lists = self.tree.query_ball_point(p[deeper], r=-dist[deeper] + self.circumradius)
            counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
            dist[deeper] = np.inf
            self._assign(p, np.repeat(deeper, counts), np.concatenate([np.asarray(x, dtype=np.int64)
                                                                       for x in lists]), dist, normal)
        # unresolved: no candidate, or the nearest candidate beyond reach. Such a point is
        # far outside, or deeper inside than reach (its closest triangle may then not be a
        # candidate). An interior point lies within inner_bound of the surface, so within
        # inner_bound + circumradius of a centroid: farther ones are outside.
        unresolved = boxed[~(dist[boxed] <= reach)]
        if unresolved.size:
            nearest, _ = self.tree.query(p[unresolved], k=1)
            unresolved = unresolved[nearest <= self.inner_bound + self.circumradius]
        if unresolved.size:
            deep = unresolved[self.winding_number(p[unresolved]) > 0.5]
            if deep.size:  # deep inside: every triangle is a candidate
                dist[deep] = np.inf
                point_of = np.repeat(deep, len(self.faces))
                tri = np.tile(np.arange(len(self.faces)), deep.size)
                self._assign(p, point_of, tri, dist, normal)
        # points outside whose closest candidate is beyond reach stay "far"
        far = dist > reach
        dist[far], normal[far] = np.inf, 0.0
        return dist, normal

    def _assign(self, p: np.ndarray, point_of: np.ndarray, tri: np.ndarray,
                dist: np.ndarray, normal: np.ndarray) -> None:
        """Per point of ``point_of``, the nearest of its candidate triangles ``tri``."""
        cp, pseudo = self.closest(p[point_of], tri)
        rel = p[point_of] - cp
        d = np.linalg.norm(rel, axis=1)
        order = np.lexsort((d, point_of))  # by point, then distance
        first = np.ones(order.size, dtype=bool)
        first[1:] = point_of[order][1:] != point_of[order][:-1]
        pick = order[first]
        idx, d, rel, pseudo = point_of[pick], d[pick], rel[pick], pseudo[pick]
        sign = np.where(np.einsum("ij,ij->i", rel, pseudo) < 0.0, -1.0, 1.0)
        scale = max(float(np.linalg.norm(self.upper - self.lower)), 1e-300)
        on_surface = d <= 1e-12 * scale
        n = np.where(on_surface[:, None], pseudo, sign[:, None] * rel)
        n = n / np.maximum(np.linalg.norm(n, axis=1), 1e-300)[:, None]
        dist[idx] = sign * d
        normal[idx] = n


@dataclass(frozen=True)
class MeshObstacle(Obstacle):
    """A rigid closed triangle surface, translated by ``offset`` [m].

    ``reach`` [m]: distances are computed for points up to this far outside (the contact
    model's alarm distance; set by :func:`~soft_inverse_ros.core.contact.correction.contact_model_from_spec`)."""

    geometry: MeshGeometry = field(repr=False, compare=False)
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    reach: float = 1e-3
    kind = "mesh"

    def distance(self, points, reach: float | None = None):
        """Signed distance and normal (see :meth:`MeshGeometry.signed_distance`); points
        beyond ``reach`` (default: the obstacle's) outside get +inf."""
        local = np.asarray(points, dtype=float) - np.asarray(self.offset, dtype=float)
        return self.geometry.signed_distance(local, self.reach if reach is None else reach)

    def clearance(self, points, reach):
        """Signed distances within ``reach`` [m]; ``reach`` for the points farther out."""
        dist = self.distance(points, reach)[0]
        return np.where(np.isinf(dist), reach, dist)

    def contacts(self, positions, nodes, alarm, index=0):
        """As :meth:`Obstacle.contacts`, searching at least ``alarm`` [m] out."""
        if alarm <= self.reach:
            return super().contacts(positions, nodes, alarm, index)
        return MeshObstacle(self.geometry, self.offset, float(alarm)).contacts(positions, nodes, alarm, index)

    def moved(self, translation) -> "MeshObstacle":
        t = np.asarray(self.offset, dtype=float) + np.asarray(translation, dtype=float)
        return MeshObstacle(self.geometry, tuple(float(x) for x in t), self.reach)


def box_surface(lower, upper, divisions: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """A closed, outward-oriented triangulated box [lower, upper] [m]: (vertices (V, 3),
    faces (F, 3)), each face split into ``divisions`` × ``divisions`` squares of two
    triangles (a mesh obstacle for tests and benchmarks; shared vertices merged)."""
    from soft_inverse_ros.core.contact.mapped_surface import merge_vertices

    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    n = int(divisions)
    if n < 1 or not np.all(hi > lo):
        raise ValueError("box_surface: divisions >= 1 and upper > lower on every axis required")
    ex, ey, ez = np.diag(hi - lo)
    verts, faces = [], []
    steps = np.arange(n + 1) / n
    for origin, u, v in ((lo, ey, ex), (lo + ez, ex, ey), (lo, ex, ez), (lo + ey, ez, ex),
                         (lo, ez, ey), (lo + ex, ey, ez)):
        base = sum(len(x) for x in verts)
        verts.append((origin + steps[:, None, None] * u + steps[None, :, None] * v).reshape(-1, 3))
        i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        a = (base + i * (n + 1) + j).ravel()
        faces.append(np.stack([a, a + n + 1, a + n + 2], axis=1))
        faces.append(np.stack([a, a + n + 2, a + 1], axis=1))
    tol = 1e-9 * float(np.linalg.norm(hi - lo))
    return merge_vertices(np.concatenate(verts), np.concatenate(faces), tol)
