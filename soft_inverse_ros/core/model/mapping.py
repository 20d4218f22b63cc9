"""Barycentric mapping of material points into a tetrahedral mesh.

A point p is located (at rest) in the tetrahedron that contains it and is then carried by
the mesh: ``p(x) = Σ_i w_i x_{n_i}`` with its four barycentric weights ``w``. Points
slightly outside the mesh (on a curved boundary, rounding) map to the nearest tetrahedron
with clamped weights and a logged warning; points farther than ``tolerance`` raise.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["BarycentricMapping", "MappingError", "map_points"]

_LOG = logging.getLogger(__name__)
#: barycentric weights down to −_INSIDE_EPS count as inside (points on faces/edges)
_INSIDE_EPS = 1e-9


class MappingError(ValueError):
    """A point could not be mapped into the mesh (too far outside)."""


@dataclass(frozen=True)
class BarycentricMapping:
    """Points (k,) carried by a tetrahedral mesh of N nodes.

    Attributes:
        tets: (k,) containing tetrahedron of each point.
        nodes: (k, 4) node indices of those tetrahedra.
        weights: (k, 4) barycentric weights (sum to 1, ≥ 0 after clamping).
        n_nodes: N, number of mesh nodes.
        distances: (k,) distance from each point to its mapped position at rest [m]
            (0 inside the mesh).
    """

    tets: np.ndarray
    nodes: np.ndarray
    weights: np.ndarray
    n_nodes: int
    distances: np.ndarray

    @property
    def n_points(self) -> int:
        return len(self.tets)

    def apply(self, positions: np.ndarray) -> np.ndarray:
        """Mapped point positions (k, 3) [m] for node positions (N, 3) [m]."""
        return np.einsum("ki,kia->ka", self.weights, np.asarray(positions)[self.nodes])

    def matrix(self) -> sp.csr_matrix:
        """Interpolation matrix Φ (3k × 3N) with ``p.ravel() = Φ @ x.ravel()``."""
        k = self.n_points
        rows = (3 * np.arange(k)[:, None, None] + np.arange(3)[None, None, :]).repeat(4, axis=1)
        cols = 3 * self.nodes[:, :, None] + np.arange(3)[None, None, :]
        vals = np.broadcast_to(self.weights[:, :, None], (k, 4, 3))
        return sp.csr_matrix(
            (vals.ravel(), (rows.ravel(), cols.ravel())), shape=(3 * k, 3 * self.n_nodes)
        )

    def transpose_apply(self, point_vectors: np.ndarray) -> np.ndarray:
        """Nodal vectors (N, 3) Σ w_i v_p of point vectors (k, 3) (forces, gradients)."""
        v = np.asarray(point_vectors, dtype=float).reshape(self.n_points, 3)
        out = np.zeros((self.n_nodes, 3))
        contrib = self.weights[:, :, None] * v[:, None, :]
        for c in range(3):
            out[:, c] = np.bincount(self.nodes.ravel(), contrib[:, :, c].ravel(), self.n_nodes)
        return out


def _barycentric(points: np.ndarray, corners: np.ndarray) -> np.ndarray:
    """Barycentric coordinates (…, 4) of points (…, 3) in tets with corners (…, 4, 3)."""
    d = np.stack(
        (corners[..., 1, :] - corners[..., 0, :], corners[..., 2, :] - corners[..., 0, :],
         corners[..., 3, :] - corners[..., 0, :]),
        axis=-1,
    )
    rhs = points - corners[..., 0, :]
    lam = np.linalg.solve(d, rhs[..., None])[..., 0]
    return np.concatenate((1.0 - lam.sum(axis=-1, keepdims=True), lam), axis=-1)


def _closest_in_tets(points: np.ndarray, corners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Clamped barycentric weights (…, 4) and distance (…) of points to tets (…, 4, 3).

    Negative weights are clamped to 0 and renormalized: an inexpensive projection that is
    exact inside and a close upper bound of the true distance near a face.
    """
    w = _barycentric(points, corners)
    w = np.clip(w, 0.0, None)
    w /= w.sum(axis=-1, keepdims=True)
    proj = np.einsum("...i,...ia->...a", w, corners)
    return w, np.linalg.norm(proj - points, axis=-1)


def map_points(
    points: np.ndarray,
    tets: np.ndarray,
    query: np.ndarray,
    *,
    tolerance: float | None = None,
    candidates: int = 24,
    name: str = "point",
) -> BarycentricMapping:
    """Locate query points (k, 3) [m] in the tetrahedral mesh (points (N, 3), tets (M, 4)).

    Candidates are the tetrahedra whose centroids are nearest to each point (KD-tree), then
    all tetrahedra for the few points not found among them.

    Args:
        tolerance: largest accepted distance outside the mesh [m]; default three times the
            mean edge length.
        candidates: nearest centroids examined first per point.
        name: what the points are (used in warnings and errors).

    Raises:
        MappingError: a point is farther than ``tolerance`` from every tetrahedron.
    """
    from scipy.spatial import cKDTree

    points = np.asarray(points, dtype=float)
    tets = np.asarray(tets, dtype=np.int64)
    query = np.atleast_2d(np.asarray(query, dtype=float))
    if query.shape[-1] != 3:
        raise ValueError(f"{name}: points must be (k, 3), got {query.shape}")
    if not np.all(np.isfinite(query)):
        raise ValueError(f"{name}: points must be finite")
    corners = points[tets]
    if tolerance is None:
        edges = corners[:, [1, 2, 3, 2, 3, 3]] - corners[:, [0, 0, 0, 1, 1, 2]]
        tolerance = 3.0 * float(np.linalg.norm(edges, axis=-1).mean())
    k = len(query)
    n_cand = min(candidates, len(tets))
    tree = cKDTree(corners.mean(axis=1))
    _, cand = tree.query(query, k=n_cand)
    cand = np.asarray(cand).reshape(k, n_cand)
    bary = _barycentric(query[:, None, :], corners[cand])  # (k, c, 4)
    inside = bary.min(axis=-1) >= -_INSIDE_EPS
    found = inside.any(axis=1)
    first = np.argmax(inside, axis=1)
    tet_of = cand[np.arange(k), first]
    weights = bary[np.arange(k), first]
    distances = np.zeros(k)
    for p in np.flatnonzero(~found):  # rare: points outside or in a sliver far from centroids
        w_all = _barycentric(query[p][None, :], corners)
        inside_all = np.flatnonzero(w_all.min(axis=-1) >= -_INSIDE_EPS)
        if len(inside_all):
            tet_of[p] = inside_all[0]
            weights[p] = w_all[inside_all[0]]
            continue
        w_c, dist = _closest_in_tets(np.broadcast_to(query[p], (len(tets), 3)), corners)
        best = int(np.argmin(dist))
        if dist[best] > tolerance:
            raise MappingError(
                f"{name} #{p} at {query[p].tolist()} m is {dist[best]:.4g} m outside the mesh "
                f"(tolerance {tolerance:.4g} m): check its coordinates and units"
            )
        tet_of[p] = best
        weights[p] = w_c[best]
        distances[p] = dist[best]
    outside = np.flatnonzero(distances > 0)
    if outside.size:  # one line for all of them (a surface file's float32 rounding: hundreds)
        worst = int(outside[np.argmax(distances[outside])])
        _LOG.warning(
            "%d %s(s) lie outside the mesh (at most %.3g m, #%d at %s m): mapped to the "
            "nearest tetrahedra", outside.size, name, distances[worst], worst, query[worst].tolist(),
        )
    weights = np.clip(weights, 0.0, None)
    weights /= weights.sum(axis=1, keepdims=True)
    return BarycentricMapping(
        tets=tet_of, nodes=tets[tet_of], weights=weights, n_nodes=len(points), distances=distances
    )
