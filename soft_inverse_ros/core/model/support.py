"""Can a mesh held at its fixed nodes reach an equilibrium? Checks at model build.

A part of the mesh that no fixed node holds (or one node, or nodes on one line: it turns
about them) moves as a rigid body: the stiffness is singular and the first equilibrium
fails after minutes of load stepping. Coincident nodes split a mesh silently (the usual
export mistake: each side of a seam has its own copy of the seam's nodes): the halves then
move independently and the model is wrong, yet it solves. Both are refused here, in one
line, before any solve.
"""

from __future__ import annotations

import numpy as np

from soft_inverse_ros.core.model.mesh import TetMesh

#: nodes closer than this fraction of the mesh's bounding-box diagonal coincide
COINCIDENT_TOLERANCE = 1e-9


def coincident_node_pairs(points: np.ndarray, tolerance: float) -> np.ndarray:
    """(P, 2) index pairs i < j of nodes ``points`` (N, 3) [m] closer than ``tolerance`` [m]."""
    from scipy.spatial import cKDTree

    pairs = cKDTree(points).query_pairs(tolerance, output_type="ndarray")
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))] if len(pairs) else pairs.reshape(0, 2)


def _holds_a_body(points: np.ndarray) -> bool:
    """Whether fixed nodes ``points`` (F, 3) stop every rigid motion: three not on a line."""
    if len(points) < 3:
        return False
    centred = points - points.mean(axis=0)
    s = np.linalg.svd(centred, compute_uv=False)
    return bool(s[1] > 1e-6 * s[0])


def support_problem(mesh: TetMesh, fixed: np.ndarray) -> str | None:
    """Why ``mesh`` held at the node indices ``fixed`` cannot be a robot, or None.

    Refused: coincident nodes (a split mesh), and a face-connected part that its fixed nodes
    do not hold (none, one, or all on one line; a part touching the rest at an edge or a
    vertex only turns about it).
    """
    points = np.asarray(mesh.points, dtype=float)
    lo, hi = points.min(axis=0), points.max(axis=0)
    diagonal = float(np.linalg.norm(hi - lo))
    pairs = coincident_node_pairs(points, COINCIDENT_TOLERANCE * diagonal)
    if len(pairs):
        i, j = pairs[0]
        where = ", ".join(f"{1e3 * v:.4g}" for v in points[i])
        return (f"{len(pairs)} pair(s) of mesh nodes coincide (e.g. nodes {i} and {j} at ({where}) mm): "
                "the mesh is split along them (duplicate nodes from an export), its sides would move "
                "apart; merge duplicate nodes (e.g. gmsh's Coherence, meshio's prune) and load it again")
    n_parts, labels = mesh.face_components()
    fixed_mask = np.zeros(len(points), dtype=bool)
    fixed_mask[np.asarray(fixed, dtype=np.int64)] = True
    loose = []
    for part in range(n_parts):
        nodes = np.unique(mesh.tets[labels == part])
        held = nodes[fixed_mask[nodes]]
        if not _holds_a_body(points[held]):
            centre = ", ".join(f"{1e3 * v:.4g}" for v in points[nodes].mean(axis=0))
            how = ("no fixed node" if held.size == 0 else f"{held.size} fixed node(s)"
                   + (" on one line" if held.size >= 3 else ""))
            loose.append(f"part {part + 1} ({nodes.size} nodes, around ({centre}) mm) has {how}")
    if loose:
        parts = f"of {n_parts} face-connected parts " if n_parts > 1 else ""
        return (f"the mesh can move as a rigid body: {parts}" + "; ".join(loose)
                + " (a part needs three fixed nodes not on one line; one touching the rest at an edge "
                  "or a vertex only turns about it): extend the fixed boxes, or remove the part")
    return None


def immobile(mappings: dict[str, object], fixed: np.ndarray, n_nodes: int) -> list[str]:
    """Names of the ``mappings`` (name → a barycentric mapping with ``nodes`` (k, 4) and
    ``weights`` (k, 4)) whose every point lies on fixed nodes ``fixed``: an effector there
    cannot move (W is zero), an actuator there does nothing."""
    fixed_mask = np.zeros(n_nodes, dtype=bool)
    fixed_mask[np.asarray(fixed, dtype=np.int64)] = True
    names = []
    for name, mapping in mappings.items():
        weights = np.asarray(mapping.weights)
        used = np.asarray(mapping.nodes)[np.abs(weights) > 1e-12]
        if used.size and fixed_mask[used].all():
            names.append(name)
    return names
