"""Tetrahedral volume meshes and triangle surfaces: loading, validation, geometry.

Everything returned is in metres, in the robot frame (REP-103), after the SOFA-style
transform of the file: rotate about x, then y, then z (degrees, extrinsic axes, i.e.
``R = Rz @ Ry @ Rx``), then translate (file units), then scale file units to metres.

The file format is detected from the file's content, never its extension (SOFA's
``diamond.vtk`` is VTK XML, i.e. ``vtu``). Mixed-cell files keep only their tetrahedra;
nodes no tetrahedron references are dropped and counted in the :class:`MeshReport`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Sequence

import numpy as np

OnInverted = Literal["error", "fix"]

#: |volume| at or below this fraction of the mean |volume| is a degenerate tetrahedron.
DEGENERATE_RELATIVE_VOLUME = 1e-12

#: Outward faces of a positively oriented tet (p0, p1, p2, p3): face k is opposite vertex k.
TET_FACES = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]], dtype=np.int64)


class MeshError(ValueError):
    """A mesh file or array that cannot be used for the FEM (message names the source)."""


@dataclass(frozen=True)
class MeshReport:
    """What loading a mesh kept, dropped and changed.

    Attributes:
        source: File the mesh came from (None for meshes built from arrays).
        file_format: Format detected from the content (meshio name: vtu, vtk, gmsh, stl...)
            or ``"arrays"`` / ``"generated:<name>"``.
        file_points: Number of points in the file.
        kept_tets: Tetrahedra kept.
        dropped_cells: Cells of other types dropped, by meshio cell type.
        dropped_nodes: Nodes referenced by no tetrahedron, dropped.
        reoriented_tets: Tetrahedra whose vertex order was swapped to make them positive.
        orientation_flipped: True when the whole file used the opposite (negative)
            orientation convention and every tetrahedron was reoriented.
        unit_scale: Metres per file unit.
        rotation_deg: Rotation applied about x, y, z [deg].
        translation: Translation applied after the rotation [file units].
    """

    source: Path | None
    file_format: str
    file_points: int
    kept_tets: int
    dropped_cells: dict[str, int] = field(default_factory=dict)
    dropped_nodes: int = 0
    reoriented_tets: int = 0
    orientation_flipped: bool = False
    unit_scale: float = 1.0
    rotation_deg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    translation: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def summary_lines(self) -> list[str]:
        """Human-readable lines of what was dropped or changed."""
        lines = []
        if self.dropped_cells:
            parts = ", ".join(f"{n} {t}" for t, n in sorted(self.dropped_cells.items()))
            lines.append(f"dropped non-tetrahedral cells: {parts}")
        if self.dropped_nodes:
            lines.append(f"dropped {self.dropped_nodes} nodes referenced by no tetrahedron")
        if self.orientation_flipped:
            lines.append(f"all {self.reoriented_tets} tetrahedra used the negative orientation: reoriented")
        elif self.reoriented_tets:
            lines.append(f"fixed {self.reoriented_tets} inverted tetrahedra (vertex swap)")
        return lines


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _signed_volumes(points: np.ndarray, tets: np.ndarray) -> np.ndarray:
    p = points[tets]
    d1 = p[:, 1] - p[:, 0]
    d2 = p[:, 2] - p[:, 0]
    d3 = p[:, 3] - p[:, 0]
    return np.einsum("ij,ij->i", np.cross(d1, d2), d3) / 6.0


def _validated_arrays(points: np.ndarray, tets: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Copies of ``points`` as (N, 3) float64 [m] and ``tets`` as (M, 4) int64, after
    checking shapes, a non-empty integer index array in range and finite coordinates.

    Raises:
        MeshError: naming ``where``.
    """
    pts = np.array(points, dtype=np.float64, copy=True)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise MeshError(f"{where}: points must have shape (N, 3), got {pts.shape}")
    t = np.asarray(tets)
    if t.ndim != 2 or t.shape[1] != 4:
        raise MeshError(f"{where}: tetrahedra must have shape (M, 4), got {t.shape}")
    if t.shape[0] == 0:
        raise MeshError(f"{where}: the mesh has no tetrahedra")
    if not np.issubdtype(t.dtype, np.integer):
        raise MeshError(f"{where}: tetrahedron indices must be integers, got {t.dtype}")
    t = t.astype(np.int64, copy=True)
    if t.min() < 0 or t.max() >= len(pts):
        raise MeshError(f"{where}: tetrahedron indices out of range [0, {len(pts)})")
    bad = ~np.isfinite(pts).all(axis=1)
    if bad.any():
        raise MeshError(
            f"{where}: {int(bad.sum())} nodes have NaN/inf coordinates, first: {np.flatnonzero(bad)[:5].tolist()}"
        )
    return pts, t


def _drop_unreferenced_nodes(
    pts: np.ndarray, t: np.ndarray, where: str, *, allowed: bool
) -> tuple[np.ndarray, np.ndarray, int]:
    """Remove the nodes no tet references: (points, renumbered tets, number dropped).

    Raises:
        MeshError: naming ``where`` when there are such nodes and ``allowed`` is False.
    """
    used = np.zeros(len(pts), dtype=bool)
    used[t.ravel()] = True
    dropped_nodes = int((~used).sum())
    if dropped_nodes:
        if not allowed:
            raise MeshError(
                f"{where}: {dropped_nodes} nodes are referenced by no tetrahedron, first: "
                f"{np.flatnonzero(~used)[:5].tolist()}"
            )
        remap = np.cumsum(used) - 1
        pts = pts[used]
        t = remap[t]
    return pts, t, dropped_nodes


def _check_not_degenerate(vol: np.ndarray, where: str) -> None:
    """Raise MeshError (naming ``where``) if a signed volume ``vol`` [m^3] has |V| ≤
    DEGENERATE_RELATIVE_VOLUME × mean |V| (or the mean is zero)."""
    mean = float(np.abs(vol).mean())
    degenerate = np.abs(vol) <= DEGENERATE_RELATIVE_VOLUME * mean
    if mean == 0.0 or degenerate.any():
        idx = np.flatnonzero(degenerate)
        raise MeshError(
            f"{where}: {idx.size} of {len(vol)} tetrahedra are degenerate (zero volume), "
            f"first: {idx[:10].tolist()}"
        )


def _orient_positively(t: np.ndarray, vol: np.ndarray, where: str, on_inverted: OnInverted) -> tuple[int, bool]:
    """Swap vertices 1 and 2 of the tets with negative volume ``vol``, in place in ``t``.

    Returns (number reoriented, True if all were negative: a file-wide convention).

    Raises:
        MeshError: naming ``where`` when only some are negative and ``on_inverted`` is "error".
    """
    negative = vol < 0
    n_neg = int(negative.sum())
    flipped_all = n_neg == len(t)
    if n_neg and not flipped_all and on_inverted == "error":
        idx = np.flatnonzero(negative)
        raise MeshError(
            f"{where}: {n_neg} of {len(t)} tetrahedra are inverted, first: {idx[:10].tolist()} "
            "(to swap their vertices: `on_inverted: fix` in the description's mesh section, mesh-info --fix-inverted)"
        )
    if n_neg:
        t[negative] = t[negative][:, [0, 2, 1, 3]]
    return n_neg, flipped_all


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class TetMesh:
    """A validated linear tetrahedral mesh (arrays are read-only).

    Attributes:
        points: (N, 3) float64 node positions [m, robot frame].
        tets: (M, 4) int64 node indices, every tet positively oriented
            (det[p1-p0, p2-p0, p3-p0] > 0); every node belongs to a tet.
        report: What loading kept, dropped and changed.
    """

    points: np.ndarray
    tets: np.ndarray
    report: MeshReport

    @property
    def n_points(self) -> int:
        return int(self.points.shape[0])

    @property
    def n_tets(self) -> int:
        return int(self.tets.shape[0])

    def volumes(self) -> np.ndarray:
        """(M,) tetrahedron volumes [m^3], all > 0."""
        return _signed_volumes(self.points, self.tets)

    @property
    def total_volume(self) -> float:
        """Mesh volume [m^3]."""
        return float(self.volumes().sum())

    def bounding_box(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) corners of the axis-aligned bounding box [m]."""
        return self.points.min(axis=0), self.points.max(axis=0)

    def quality(self) -> np.ndarray:
        """(M,) radius ratio 3·r_in/r_circ of each tetrahedron: 1 regular, → 0 degenerate."""
        p = self.points[self.tets]
        vol = np.abs(_signed_volumes(self.points, self.tets))
        faces = p[:, TET_FACES]  # (M, 4, 3, 3)
        area = 0.5 * np.linalg.norm(
            np.cross(faces[:, :, 1] - faces[:, :, 0], faces[:, :, 2] - faces[:, :, 0]), axis=2
        ).sum(axis=1)
        r_in = 3.0 * vol / area
        # products of opposite edge lengths: (01,23), (02,13), (03,12)
        a = np.linalg.norm(p[:, 0] - p[:, 1], axis=1) * np.linalg.norm(p[:, 2] - p[:, 3], axis=1)
        b = np.linalg.norm(p[:, 0] - p[:, 2], axis=1) * np.linalg.norm(p[:, 1] - p[:, 3], axis=1)
        c = np.linalg.norm(p[:, 0] - p[:, 3], axis=1) * np.linalg.norm(p[:, 1] - p[:, 2], axis=1)
        prod = (a + b + c) * (a + b - c) * (a - b + c) * (-a + b + c)
        r_circ = np.sqrt(np.maximum(prod, 0.0)) / (24.0 * vol)
        return 3.0 * r_in / r_circ

    def boundary_faces(self) -> np.ndarray:
        """(F, 3) int64 boundary triangles, ordered so their normals point out of the mesh."""
        faces = self.tets[:, TET_FACES].reshape(-1, 3)
        _, inverse, counts = np.unique(self._face_keys(faces), return_inverse=True, return_counts=True)
        return faces[counts[inverse.ravel()] == 1]

    def _face_keys(self, faces: np.ndarray) -> np.ndarray:
        """One int64 per face, equal for faces with the same three nodes (any order)."""
        f = np.sort(faces, axis=1)
        n = np.int64(self.n_points)
        if self.n_points < 2_000_000:  # n^3 fits in int64
            return (f[:, 0] * n + f[:, 1]) * n + f[:, 2]
        _, keys = np.unique(f, axis=0, return_inverse=True)
        return keys.ravel().astype(np.int64)

    def face_components(self) -> tuple[int, np.ndarray]:
        """Connected components of tets sharing faces: (count, (M,) label per tet)."""
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        keys = self._face_keys(self.tets[:, TET_FACES].reshape(-1, 3))
        owner = np.repeat(np.arange(self.n_tets), 4)
        order = np.argsort(keys, kind="stable")
        ks, ow = keys[order], owner[order]
        same = ks[1:] == ks[:-1]
        i, j = ow[:-1][same], ow[1:][same]
        graph = coo_matrix((np.ones(i.size), (i, j)), shape=(self.n_tets, self.n_tets))
        n, labels = connected_components(graph, directed=False)
        return int(n), labels

    def contains(self, query: np.ndarray, *, tol: float = 1e-9) -> np.ndarray:
        """(Q,) bool: which query points [m] lie inside (or within ``tol`` relative
        barycentric slack of) some tetrahedron. O(Q·M) work in blocks: for checks, not hot paths."""
        q = np.atleast_2d(np.asarray(query, dtype=np.float64))
        p = self.points[self.tets]
        t = np.stack([p[:, 1] - p[:, 0], p[:, 2] - p[:, 0], p[:, 3] - p[:, 0]], axis=2)  # (M,3,3)
        tinv = np.linalg.inv(t)
        inside = np.zeros(len(q), dtype=bool)
        block = max(1, 2_000_000 // max(1, self.n_tets))  # ~50 MB of temporaries per block
        for s in range(0, len(q), block):
            d = q[s : s + block, None, :] - p[None, :, 0, :]  # (B, M, 3)
            lam = np.einsum("mij,bmj->bmi", tinv, d)
            ok = (lam >= -tol).all(axis=2) & (lam.sum(axis=2) <= 1.0 + tol)
            inside[s : s + block] = ok.any(axis=1)
        return inside

    @classmethod
    def from_arrays(
        cls,
        points: np.ndarray,
        tets: np.ndarray,
        *,
        on_inverted: OnInverted = "error",
        drop_unreferenced: bool = True,
        source: Path | None = None,
        file_format: str = "arrays",
        dropped_cells: dict[str, int] | None = None,
        unit_scale: float = 1.0,
        rotation_deg: Sequence[float] = (0.0, 0.0, 0.0),
        translation: Sequence[float] = (0.0, 0.0, 0.0),
    ) -> "TetMesh":
        """Validate arrays into a :class:`TetMesh` (points already in metres).

        Checks shapes, finite coordinates, index range, degenerate tets (|V| ≤ 1e-12 ×
        mean |V|) and orientation: all-negative meshes are reoriented (a convention), a
        mix raises unless ``on_inverted="fix"``. Unreferenced nodes are dropped
        (``drop_unreferenced=False`` makes them an error).

        Raises:
            MeshError: naming ``source`` (or "arrays") and the offending counts/indices.
        """
        where = str(source) if source is not None else "mesh arrays"
        if on_inverted not in ("error", "fix"):
            raise ValueError(f"on_inverted must be 'error' or 'fix', got {on_inverted!r}")
        pts, t = _validated_arrays(points, tets, where)
        pts, t, dropped_nodes = _drop_unreferenced_nodes(pts, t, where, allowed=drop_unreferenced)
        vol = _signed_volumes(pts, t)
        _check_not_degenerate(vol, where)
        n_neg, flipped_all = _orient_positively(t, vol, where, on_inverted)
        report = MeshReport(
            source=source,
            file_format=file_format,
            file_points=int(np.asarray(points).shape[0]),
            kept_tets=int(len(t)),
            dropped_cells=dict(dropped_cells or {}),
            dropped_nodes=dropped_nodes,
            reoriented_tets=n_neg,
            orientation_flipped=flipped_all,
            unit_scale=float(unit_scale),
            rotation_deg=tuple(float(v) for v in rotation_deg),  # type: ignore[arg-type]
            translation=tuple(float(v) for v in translation),  # type: ignore[arg-type]
        )
        return cls(points=_readonly(pts), tets=_readonly(t), report=report)

    def with_report(self, **changes: object) -> "TetMesh":
        """Same mesh, report fields replaced (e.g. ``file_format="generated:diamond"``)."""
        return TetMesh(self.points, self.tets, dataclasses.replace(self.report, **changes))


# --------------------------------------------------------------------------- files


def sniff_format(path: str | os.PathLike[str]) -> str:
    """meshio format name of a mesh file, from its content.

    Returns one of ``"vtu"`` (VTK XML UnstructuredGrid), ``"vtk"`` (legacy VTK, ascii or
    binary), ``"gmsh"``, ``"stl"`` (ascii or binary), ``"obj"``, ``"ply"``, ``"medit"``.

    Raises:
        MeshError: missing/unreadable file or unrecognized content.
    """
    p = Path(path)
    if not p.is_file():
        raise MeshError(f"{p}: mesh file not found")
    try:
        with open(p, "rb") as fh:
            head = fh.read(1024)
    except OSError as exc:
        raise MeshError(f"{p}: cannot read mesh file: {exc}") from exc
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"<"):
        if b"<VTKFile" in head:
            if b"UnstructuredGrid" in head:
                return "vtu"
            raise MeshError(f"{p}: VTK XML file that is not an UnstructuredGrid (only .vtu grids hold tetrahedra)")
        raise MeshError(f"{p}: XML file that is not a VTK UnstructuredGrid")
    if text.startswith(b"# vtk DataFile"):
        return "vtk"
    if text.startswith(b"$MeshFormat"):
        return "gmsh"
    if text.startswith(b"ply"):
        return "ply"
    if text.startswith(b"MeshVersionFormatted"):
        return "medit"
    size = p.stat().st_size
    if size >= 84:
        n_tri = int.from_bytes(head[80:84], "little")
        if size == 84 + 50 * n_tri:
            return "stl"  # binary STL (its header may start with "solid" too)
    if text.startswith(b"solid") and b"facet" in head:
        return "stl"
    lines = [ln.split() for ln in text.splitlines()[:40] if ln.strip() and not ln.startswith(b"#")]
    if lines and all(ln[0] in (b"v", b"vn", b"vt", b"f", b"o", b"g", b"s", b"mtllib", b"usemtl") for ln in lines):
        return "obj"
    raise MeshError(f"{p}: unrecognized mesh format (content is not VTK, VTK XML, Gmsh, STL, OBJ, PLY or Medit)")


def rotation_matrix(rotation_deg: Sequence[float]) -> np.ndarray:
    """3x3 rotation about x, then y, then z (extrinsic, degrees): ``Rz @ Ry @ Rx``."""
    rx, ry, rz = np.radians(np.asarray(rotation_deg, dtype=np.float64))
    cx, sx, cy, sy, cz, sz = np.cos(rx), np.sin(rx), np.cos(ry), np.sin(ry), np.cos(rz), np.sin(rz)
    mx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    my = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    mz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return mz @ my @ mx


def transform_points(
    points: np.ndarray,
    *,
    unit_scale: float,
    rotation_deg: Sequence[float] = (0.0, 0.0, 0.0),
    translation: Sequence[float] = (0.0, 0.0, 0.0),
) -> np.ndarray:
    """File coordinates → metres: rotate (x, y, z order), translate [file units], scale."""
    if not (np.isfinite(unit_scale) and unit_scale > 0):
        raise MeshError(f"unit_scale must be a positive number of metres per file unit, got {unit_scale!r}")
    r = rotation_matrix(rotation_deg)
    return (np.asarray(points, dtype=np.float64) @ r.T + np.asarray(translation, dtype=np.float64)) * unit_scale


def _read(path: Path):
    import meshio

    fmt = sniff_format(path)
    said = io.StringIO()  # what meshio prints before giving up (its VTK reader calls sys.exit)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            # meshio's STL reader tests the binary size with a uint32 that overflows on ascii files
            warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"meshio\.")
            return meshio.read(str(path), file_format=fmt), fmt
    except MeshError:
        raise
    except SystemExit:
        detail = " ".join(said.getvalue().split()) or "the reader gave up"
        raise MeshError(f"{path}: cannot read as {fmt} (a truncated or damaged file?): {detail}") from None
    except Exception as exc:  # meshio raises many types (ReadError, ValueError, KeyError...)
        raise MeshError(f"{path}: cannot read as {fmt}: {type(exc).__name__}: {exc}") from exc


def load_mesh(
    path: str | os.PathLike[str],
    *,
    unit_scale: float,
    rotation_deg: Sequence[float] = (0.0, 0.0, 0.0),
    translation: Sequence[float] = (0.0, 0.0, 0.0),
    on_inverted: OnInverted = "error",
) -> TetMesh:
    """Load a tetrahedral mesh file into the robot frame, in metres.

    Args:
        path: Mesh file (format detected from content).
        unit_scale: Metres per file unit (1e-3 for a mesh in mm).
        rotation_deg: Rotation about x, then y, then z [deg] (SOFA's rx, ry, rz).
        translation: Translation after the rotation [file units] (SOFA's dx, dy, dz).
        on_inverted: ``"error"`` (default) for a mix of inverted tets, ``"fix"`` to swap
            their vertices. A mesh whose tets ALL have negative orientation is reoriented
            silently (noted in the report).

    Raises:
        MeshError: missing file, unknown format, no tetrahedra, NaN coordinates,
            degenerate or (mixed) inverted tetrahedra.
    """
    p = Path(path)
    for name, value, size in (("unit_scale", unit_scale, 1), ("rotation_deg", rotation_deg, 3),
                              ("translation", translation, 3)):
        array = np.asarray(value, dtype=float).reshape(-1)
        if array.size != size or not np.all(np.isfinite(array)):
            raise MeshError(f"{p}: {name} must be {size} finite number(s), got {np.asarray(value).tolist()}")
    if not unit_scale > 0:
        raise MeshError(f"{p}: unit_scale must be > 0 m per file unit, got {unit_scale}")
    mesh, fmt = _read(p)
    tet_blocks = [c.data for c in mesh.cells if c.type == "tetra"]
    dropped: dict[str, int] = {}
    for c in mesh.cells:
        if c.type != "tetra":
            dropped[c.type] = dropped.get(c.type, 0) + len(c.data)
    if not tet_blocks or sum(len(b) for b in tet_blocks) == 0:
        kinds = ", ".join(f"{len(c.data)} {c.type}" for c in mesh.cells) or "no cells"
        raise MeshError(f"{p}: no tetrahedra in the mesh ({kinds}); a volume (tetra) mesh is needed")
    tets = np.concatenate(tet_blocks).astype(np.int64)
    raw = np.asarray(mesh.points, dtype=np.float64)
    if raw.ndim != 2 or raw.shape[1] not in (2, 3):
        raise MeshError(f"{p}: points have shape {raw.shape}, expected (N, 3)")
    if raw.shape[1] == 2:
        raise MeshError(f"{p}: 2D points; a 3D tetrahedral mesh is needed")
    if not np.isfinite(raw).all():
        bad = np.flatnonzero(~np.isfinite(raw).all(axis=1))
        raise MeshError(f"{p}: {bad.size} nodes have NaN/inf coordinates, first: {bad[:5].tolist()}")
    pts = transform_points(raw, unit_scale=unit_scale, rotation_deg=rotation_deg, translation=translation)
    return TetMesh.from_arrays(
        pts,
        tets,
        on_inverted=on_inverted,
        source=p,
        file_format=fmt,
        dropped_cells=dropped,
        unit_scale=unit_scale,
        rotation_deg=rotation_deg,
        translation=translation,
    )


def surface_volume(points: np.ndarray, triangles: np.ndarray) -> float:
    """Signed enclosed volume of a closed triangle surface [units^3] (> 0 if normals point out)."""
    p = points[triangles]
    return float(np.einsum("ij,ij->i", p[:, 0], np.cross(p[:, 1], p[:, 2])).sum() / 6.0)


def load_surface(
    path: str | os.PathLike[str],
    *,
    unit_scale: float,
    rotation_deg: Sequence[float] = (0.0, 0.0, 0.0),
    translation: Sequence[float] = (0.0, 0.0, 0.0),
) -> tuple[np.ndarray, np.ndarray]:
    """Load a closed triangle surface (a pressure cavity wall) in metres, robot frame.

    Duplicate vertices (STL stores each triangle's corners) are merged; the surface must
    be closed and consistently oriented (every edge shared by exactly two triangles, in
    opposite directions). Triangles are globally flipped if needed so normals point out
    of the enclosed volume (positive signed volume).

    Returns:
        points (P, 3) float64 [m], triangles (T, 3) int64.

    Raises:
        MeshError: missing file, no triangles, open or non-manifold or inconsistently
            oriented surface, zero enclosed volume.
    """
    p = Path(path)
    mesh, _fmt = _read(p)
    blocks = [c.data for c in mesh.cells if c.type == "triangle"]
    if not blocks or sum(len(b) for b in blocks) == 0:
        raise MeshError(f"{p}: no triangles in the surface file")
    tris = np.concatenate(blocks).astype(np.int64)
    raw = np.asarray(mesh.points, dtype=np.float64)[:, :3]
    if not np.isfinite(raw).all():
        raise MeshError(f"{p}: surface has NaN/inf coordinates")
    uniq, inverse = np.unique(raw, axis=0, return_inverse=True)
    tris = inverse.ravel()[tris]
    degenerate = (tris[:, 0] == tris[:, 1]) | (tris[:, 1] == tris[:, 2]) | (tris[:, 0] == tris[:, 2])
    tris = tris[~degenerate]
    used = np.zeros(len(uniq), dtype=bool)
    used[tris.ravel()] = True
    remap = np.cumsum(used) - 1
    pts = uniq[used]
    tris = remap[tris]
    edges = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
    undirected = np.sort(edges, axis=1)
    _, counts = np.unique(undirected, axis=0, return_counts=True)
    if np.any(counts != 2):
        n_open = int((counts == 1).sum())
        n_nonmanifold = int((counts > 2).sum())
        raise MeshError(
            f"{p}: the cavity surface is not closed: {n_open} boundary edges and "
            f"{n_nonmanifold} edges shared by more than two triangles (every edge must be shared by exactly two)"
        )
    _, dcounts = np.unique(edges, axis=0, return_counts=True)
    if np.any(dcounts != 1):
        raise MeshError(f"{p}: the cavity surface is not consistently oriented ({int((dcounts > 1).sum())} edges)")
    pts = transform_points(pts, unit_scale=unit_scale, rotation_deg=rotation_deg, translation=translation)
    vol = surface_volume(pts, tris)
    if abs(vol) <= 1e-12 * float(np.ptp(pts, axis=0).prod() or 1.0):
        raise MeshError(f"{p}: the cavity surface encloses no volume")
    if vol < 0:
        tris = tris[:, [0, 2, 1]]
    return pts, np.ascontiguousarray(tris)
