"""Tetrahedral meshes generated in pure numpy (no gmsh): boxes and the built-in robot.

Both use a structured grid of hexahedra split into 6 tetrahedra each (the Kuhn /
Freudenthal split: one tet per permutation of the axes, all sharing the hex diagonal
from its lowest to its highest corner). The split is the same in every hex, so the
face diagonals of neighbouring hexes match and the mesh is conforming.

All lengths are metres in the robot frame (REP-103: z up).
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np

from soft_inverse_ros.core.model.mesh import TetMesh

# Kuhn split: for each permutation (a, b, c) of the axes, the path 000 → +a → +a+b → 111.
_CORNER_BITS = np.array(
    [
        [
            (0, 0, 0),
            tuple(int(ax == perm[0]) for ax in range(3)),
            tuple(int(ax in perm[:2]) for ax in range(3)),
            (1, 1, 1),
        ]
        for perm in itertools.permutations(range(3))
    ],
    dtype=np.int64,
)  # (6, 4, 3): corner offsets (i, j, k) of each tet's vertices


def _kuhn_tets(hex_ijk: np.ndarray, node_id: np.ndarray) -> np.ndarray:
    """(6·H, 4) tets of hexes with lowest corners ``hex_ijk`` (H, 3), via a node-id grid."""
    corners = hex_ijk[:, None, None, :] + _CORNER_BITS[None]  # (H, 6, 4, 3)
    return node_id[corners[..., 0], corners[..., 1], corners[..., 2]].reshape(-1, 4)


def _grid_mesh(origin: np.ndarray, step: np.ndarray, keep: np.ndarray, file_format: str) -> TetMesh:
    """Mesh of the kept hexes of a grid: ``keep`` (nx, ny, nz) bool, hex (i,j,k) spans
    origin + step·[i, i+1] × ... Nodes of no kept hex are not created."""
    nx, ny, nz = keep.shape
    hexes = np.argwhere(keep)
    used = np.zeros((nx + 1, ny + 1, nz + 1), dtype=bool)
    for bits in itertools.product((0, 1), repeat=3):
        used[hexes[:, 0] + bits[0], hexes[:, 1] + bits[1], hexes[:, 2] + bits[2]] = True
    node_id = np.full(used.shape, -1, dtype=np.int64)
    node_id[used] = np.arange(int(used.sum()))
    points = origin + np.argwhere(used) * step  # argwhere is C-ordered like node_id
    tets = _kuhn_tets(hexes, node_id)
    # odd permutations give negatively oriented tets: swap two vertices of those
    vol_sign = np.sign(np.linalg.det(_CORNER_BITS[:, 1:] - _CORNER_BITS[:, :1]))  # (6,)
    negative = np.tile(vol_sign < 0, len(hexes))
    tets[negative] = tets[negative][:, [0, 2, 1, 3]]
    return TetMesh.from_arrays(points, tets, file_format=file_format, drop_unreferenced=False)


def box_mesh(
    size_xyz: Sequence[float],
    divisions: Sequence[int],
    origin: Sequence[float] = (0.0, 0.0, 0.0),
) -> TetMesh:
    """Conforming tet mesh of the box [origin, origin + size] [m].

    Args:
        size_xyz: Box edge lengths (x, y, z) [m], > 0.
        divisions: Hexes per axis (nx, ny, nz) ≥ 1; the mesh has (nx+1)(ny+1)(nz+1)
            nodes and 6·nx·ny·nz tetrahedra.
        origin: Lowest corner [m].
    """
    size = np.asarray(size_xyz, dtype=np.float64)
    div = np.asarray(divisions)
    if size.shape != (3,) or not np.all(np.isfinite(size)) or np.any(size <= 0):
        raise ValueError(f"box size must be 3 positive lengths [m], got {size_xyz!r}")
    if div.shape != (3,) or not np.issubdtype(div.dtype, np.integer) or np.any(div < 1):
        raise ValueError(f"box divisions must be 3 integers >= 1, got {divisions!r}")
    keep = np.ones(tuple(int(d) for d in div), dtype=bool)
    return _grid_mesh(np.asarray(origin, dtype=np.float64), size / div, keep, "generated:box")


# --------------------------------------------------------------------------- built-in robot


def _segment_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance from points p (N, 3) to the segment [a, b]."""
    ab = b - a
    t = np.clip(((p - a) @ ab) / (ab @ ab), 0.0, 1.0)
    return np.linalg.norm(p - (a + t[:, None] * ab), axis=1)


def _box_sdf(p: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Signed distance to an axis-aligned box (negative inside)."""
    c, h = (lo + hi) / 2, (hi - lo) / 2
    q = np.abs(p - c) - h
    return np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(axis=1), 0.0)


#: Default geometry of the built-in Diamond-like robot [m] (mirrors SOFA's Diamond after
#: its transform: base inside the fixed box [-15,-15,-40]..[15,15,10] mm, cable attachment
#: points at the knees (±97, 0, 45) / (0, ±97, 45) mm, effector at (0, 0, 125) mm).
DIAMOND_DEFAULTS: dict[str, float] = {
    "cell_size": 0.007,  # grid step (hex edge)
    "base_half_width": 0.015,  # base block: |x|, |y| <= this ...
    "base_bottom": -0.035,  # ... z from base_bottom ...
    "base_top": 0.0,  # ... to base_top
    "knee_radius": 0.097,  # knee centres (cable attachments) at (±r, 0, h), (0, ±r, h)
    "knee_height": 0.045,
    "leg_start_radius": 0.010,  # lower legs leave the base at this radius ...
    "leg_start_height": -0.020,  # ... and height
    "leg_end_radius": 0.010,  # upper legs join the top block at this radius ...
    "leg_end_height": 0.118,  # ... and height
    "leg_radius": 0.010,  # legs are capsules of this radius
    "top_half_width": 0.015,  # top block: |x|, |y| <= this, ...
    "top_bottom": 0.108,  # ... z from top_bottom ...
    "top_top": 0.132,  # ... to top_top
    "effector_height": 0.125,  # effector (0, 0, h): must lie in the top block
}


def diamond_robot_mesh(**params: float) -> TetMesh:
    """The built-in Diamond-like parallel soft robot (after SOFA's Diamond, ICRA 2015).

    A fixed central base block at the bottom; four legs leave it along ±x and ±y, rise to
    "knees" at (±knee_radius, 0, knee_height) and (0, ±knee_radius, knee_height) (where
    cables attach), then converge to a top block holding the effector at
    (0, 0, top_height). The solid is a union of capsules and boxes (a signed distance),
    voxelized on a grid of ``cell_size`` and split into Kuhn tetrahedra, so every tet is
    positive, quality is uniform (radius ratio ≈ 0.72) and the result is deterministic.
    Hexes whose centre lies inside the solid are kept; the largest face-connected part
    is returned (always the whole robot at the default size).

    With the defaults: 1691 nodes and 4752 tets (SOFA's Diamond: 1628 / 4147), built in a few
    tens of milliseconds.

    Args:
        **params: Any of :data:`DIAMOND_DEFAULTS` [m].
    """
    unknown = sorted(set(params) - set(DIAMOND_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown diamond parameter(s) {unknown}; known: {sorted(DIAMOND_DEFAULTS)}")
    g = {**DIAMOND_DEFAULTS, **{k: float(v) for k, v in params.items()}}
    for k, v in g.items():
        if not math.isfinite(v):
            raise ValueError(f"diamond parameter {k} must be finite, got {v}")
    for k in ("cell_size", "base_half_width", "knee_radius", "top_half_width", "leg_radius"):
        if g[k] <= 0:
            raise ValueError(f"diamond parameter {k} must be > 0, got {g[k]}")
    h = g["cell_size"]
    r = g["leg_radius"]
    base_lo = np.array([-g["base_half_width"], -g["base_half_width"], g["base_bottom"]])
    base_hi = np.array([g["base_half_width"], g["base_half_width"], g["base_top"]])
    top_lo = np.array([-g["top_half_width"], -g["top_half_width"], g["top_bottom"]])
    top_hi = np.array([g["top_half_width"], g["top_half_width"], g["top_top"]])
    if base_hi[2] <= base_lo[2] or top_hi[2] <= top_lo[2]:
        raise ValueError("diamond parameters: base_top/top_top must be above base_bottom/top_bottom")
    if not top_lo[2] < g["effector_height"] < top_hi[2]:
        raise ValueError("diamond parameter effector_height must lie inside the top block")
    legs = []
    for ux, uy in ((1, 0), (0, 1), (-1, 0), (0, -1)):
        u = np.array([ux, uy, 0.0])
        knee = g["knee_radius"] * u + np.array([0.0, 0.0, g["knee_height"]])
        start = g["leg_start_radius"] * u + np.array([0.0, 0.0, g["leg_start_height"]])
        end = g["leg_end_radius"] * u + np.array([0.0, 0.0, g["leg_end_height"]])
        legs += [(start, knee), (knee, end)]
    margin = r + 2 * h
    lo = np.minimum(base_lo, np.array([-g["knee_radius"], -g["knee_radius"], g["base_bottom"]])) - margin
    hi = np.maximum(top_hi, np.array([g["knee_radius"], g["knee_radius"], g["knee_height"]])) + margin
    # snap the grid so that grid planes pass through the origin (symmetric mesh)
    lo = np.floor(lo / h) * h
    n = np.ceil((hi - lo) / h).astype(int)
    ijk = np.stack(np.meshgrid(*[np.arange(k) for k in n], indexing="ij"), axis=-1).reshape(-1, 3)
    centers = lo + (ijk + 0.5) * h
    sdf = np.minimum(_box_sdf(centers, base_lo, base_hi), _box_sdf(centers, top_lo, top_hi))
    for a, b in legs:
        sdf = np.minimum(sdf, _segment_distance(centers, a, b) - r)
    keep = (sdf <= 0.0).reshape(tuple(n))
    mesh = _grid_mesh(lo, np.full(3, h), keep, "generated:diamond")
    count, labels = mesh.face_components()
    if count > 1:
        main = np.argmax(np.bincount(labels))
        mesh = TetMesh.from_arrays(mesh.points, mesh.tets[labels == main], file_format="generated:diamond")
    return mesh
