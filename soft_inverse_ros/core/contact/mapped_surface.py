"""A collision surface carried barycentrically by the tetrahedral mesh.

The surface (any triangle file meshio reads: STL, OBJ, ...) has S vertices; each is located
at rest in the tet mesh (``core.model.mapping.map_points``), so its positions are
``s = M x`` with the sparse barycentric map M (3S × 3N) over the N node positions x.
Contacts detected on the surface have rows h_s over the 3S surface coordinates; the row over
the FEM node coordinates is ``h = h_s M`` (chain rule: δ = h_s s = h_s M x), so W = H K⁻¹ Hᵀ
keeps its meaning for the plant and the controller's model.

STL stores each triangle separately: vertices closer than ``merge_tol`` are merged first; the
merged surface must be a closed, edge-manifold, consistently oriented triangle surface with
outward normals (positive enclosed volume), which is what vertex–triangle self-collision and
the outward contact normals assume.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from soft_inverse_ros.core.model.mapping import BarycentricMapping, MappingError, map_points

__all__ = ["MappedSurface", "load_surface", "map_surface", "merge_vertices", "check_closed_oriented",
           "subdivide", "surface_from_description"]


@dataclass(frozen=True)
class MappedSurface:
    """A triangle surface whose vertices are carried by the mesh.

    Attributes:
        faces: (F, 3) outward-oriented triangles over the S surface vertices.
        rest: (S, 3) surface vertex positions at rest [m].
        mapping: the barycentric mapping of the S vertices into the N-node mesh.
    """

    faces: np.ndarray
    rest: np.ndarray
    mapping: BarycentricMapping

    @property
    def n_vertices(self) -> int:
        return int(self.rest.shape[0])

    def matrix(self) -> sp.csr_matrix:
        """M (3S × 3N): surface coordinates ``s.ravel() = M @ x.ravel()``."""
        return self.mapping.matrix()

    def positions(self, node_positions: np.ndarray) -> np.ndarray:
        """Surface vertex positions (S, 3) [m] for node positions (N, 3) [m]."""
        return self.mapping.apply(node_positions)

    def compose_rows(self, surface_rows: sp.spmatrix) -> sp.csr_matrix:
        """Rows over the 3N node coordinates of rows (m × 3S) over the surface coordinates."""
        return sp.csr_matrix(surface_rows @ self.matrix())


def merge_vertices(points: np.ndarray, faces: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Merge vertices closer than ``tol`` [m]; drop triangles that collapse; drop unused vertices."""
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    pairs = cKDTree(points).query_pairs(tol, output_type="ndarray")
    n = len(points)
    graph = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, label = connected_components(graph, directed=False)
    faces = label[faces]
    faces = faces[(faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])]
    used, faces = np.unique(faces, return_inverse=True)
    counts = np.bincount(label, minlength=label.max() + 1)
    sums = np.stack([np.bincount(label, points[:, c], minlength=label.max() + 1) for c in range(3)], axis=1)
    merged = sums / counts[:, None]
    return merged[used], faces.reshape(-1, 3)


def check_closed_oriented(points: np.ndarray, faces: np.ndarray, name: str) -> np.ndarray:
    """Check that the triangles form a closed, consistently oriented edge-manifold surface;
    return the faces flipped if the enclosed volume is negative (inward normals).

    Raises:
        ValueError: one line naming the first defect found.
    """
    directed = faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2)
    und = np.sort(directed, axis=1)
    _, inv, count = np.unique(und, axis=0, return_inverse=True, return_counts=True)
    if np.any(count != 2):
        bad = int(np.sum(count == 1)), int(np.sum(count > 2))
        raise ValueError(f"{name}: not a closed manifold surface ({bad[0]} open edges, {bad[1]} edges "
                         "shared by more than two triangles)")
    _, dcount = np.unique(directed, axis=0, return_counts=True)
    if np.any(dcount != 1):
        raise ValueError(f"{name}: triangles are not consistently oriented ({int(np.sum(dcount > 1))} "
                         "edges run the same way in both of their triangles)")
    p = points[faces]
    volume = np.einsum("ij,ij->i", p[:, 0], np.cross(p[:, 1], p[:, 2])).sum() / 6.0
    return faces[:, ::-1].copy() if volume < 0 else faces


def load_surface(path: str | Path, scale: float, merge_tol: float | None = None, *,
                 rotation_deg=(0.0, 0.0, 0.0), translation=(0.0, 0.0, 0.0),
                 what: str = "collision surface") -> tuple[np.ndarray, np.ndarray]:
    """Triangles (F, 3) and vertices (S, 3) [m, robot frame] of a surface file in units of
    ``scale`` m, rotated then translated [file units] like the volume mesh.

    Unlike ``core.model.mesh.load_surface`` (a cavity wall: exact duplicates only) vertices
    closer than ``merge_tol`` (default 1e-6 × the median edge) are merged: CAD exports
    round each triangle's corners separately. ``what`` names the surface in errors."""
    from soft_inverse_ros.core.model.mesh import transform_points

    import meshio

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what}: file not found: {path}")
    try:
        with warnings.catch_warnings():  # meshio's STL reader tests a binary size with a uint32
            warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"meshio\.")  # that overflows
            mesh = meshio.read(str(path))
    except Exception as exc:  # meshio raises many types on unreadable input
        raise ValueError(f"{what}: cannot read {path}: {exc}") from None
    tris = [c.data for c in mesh.cells if c.type == "triangle"]
    if not tris or sum(len(t) for t in tris) == 0:
        raise ValueError(f"{what}: {path} has no triangles")
    points = transform_points(np.asarray(mesh.points[:, :3], dtype=float), unit_scale=float(scale),
                              rotation_deg=rotation_deg, translation=translation)
    faces = np.concatenate(tris).astype(np.int64)
    if merge_tol is None:
        edge = np.linalg.norm(points[faces[:, 1]] - points[faces[:, 0]], axis=1)
        merge_tol = 1e-6 * float(np.median(edge))
    points, faces = merge_vertices(points, faces, merge_tol)
    return check_closed_oriented(points, faces, f"{what} {path}"), points


def subdivide(faces: np.ndarray, points: np.ndarray, levels: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Midpoint subdivision of a triangle surface, ``levels`` times: each triangle becomes
    four through its edge midpoints (one shared midpoint per edge, so a closed, oriented
    surface stays closed and oriented). The shape does not change (every new vertex lies on
    an original triangle): only the collision model gets finer, like the "artificially
    fine" 495-point finger model of Goury et al. 2021 (§IV-A, Fig. 6).

    Args:
        faces: (F, 3) triangles over ``points``.
        points: (S, 3) vertex positions [m].
        levels: subdivisions (≥ 0; F·4^levels triangles).

    Returns:
        (faces (F·4^levels, 3), points (S', 3)), the original vertices first, same order.
    """
    if int(levels) != levels or levels < 0:
        raise ValueError(f"subdivision levels must be an integer >= 0, got {levels!r}")
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    points = np.asarray(points, dtype=float).reshape(-1, 3)
    for _ in range(int(levels)):
        edges = np.sort(faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
        unique, inverse = np.unique(edges, axis=0, return_inverse=True)
        mid = points.shape[0] + inverse.reshape(-1, 3)  # the midpoints of edges ab, bc, ca
        a, b, c = faces.T
        ab, bc, ca = mid.T
        faces = np.stack((np.stack((a, ab, ca), 1), np.stack((ab, b, bc), 1), np.stack((ca, bc, c), 1),
                          np.stack((ab, bc, ca), 1)), axis=1).reshape(-1, 3)
        points = np.vstack((points, 0.5 * (points[unique[:, 0]] + points[unique[:, 1]])))
    return faces, points


def map_surface(faces: np.ndarray, surface_points: np.ndarray, mesh_points: np.ndarray,
                tets: np.ndarray, tolerance: float | None = None) -> MappedSurface:
    """Map the surface vertices into the tet mesh (error line if one lies too far outside)."""
    try:
        mapping = map_points(mesh_points, tets, surface_points, tolerance=tolerance,
                             name="collision surface vertex")
    except MappingError as exc:
        raise ValueError(str(exc)) from None
    return MappedSurface(faces=np.asarray(faces, dtype=np.int64), rest=np.asarray(surface_points, float),
                         mapping=mapping)


def surface_from_description(desc, rest_points: np.ndarray, tets: np.ndarray) -> MappedSurface | None:
    """The description's ``collision.surface`` mapped into the mesh (rest_points (N, 3) [m],
    tets (M, 4)), or None without one.

    Raises:
        SystemExit: one line for an unreadable, open or misoriented surface, or a vertex too
            far outside the mesh.
    """
    spec = getattr(desc, "collision", None)
    if spec is None or spec.surface is None:
        return None
    mesh = desc.mesh
    scale = mesh.unit_scale if spec.surface_unit_scale is None else spec.surface_unit_scale
    try:
        faces, points = load_surface(spec.surface, scale, rotation_deg=mesh.rotation_deg,
                                     translation=mesh.translation)
        return map_surface(faces, points, rest_points, tets)
    except ValueError as exc:
        raise SystemExit(f"{desc.name}: collision.surface: {exc}") from None
