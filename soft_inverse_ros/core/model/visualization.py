"""What the robot looks like: deformed surface, effector/target, cables, pressure colours.

Pure numpy (no ROS): the nodes turn a :class:`Scene` into a
``visualization_msgs/MarkerArray`` (:mod:`soft_inverse_ros.nodes.markers`) and the report
renders the same :class:`Scene` offscreen to PNG (:func:`render_scene_png`, matplotlib Agg).

Positions are in metres in the robot base frame (REP-103); colours are RGBA in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

#: Colour of the robot surface where no pressure colouring applies (light grey-blue).
SURFACE_RGBA = (0.72, 0.78, 0.86, 1.0)
EFFECTOR_RGBA = (0.10, 0.45, 0.95, 1.0)
TARGET_RGBA = (0.95, 0.20, 0.15, 1.0)
CABLE_RGBA = (0.15, 0.15, 0.15, 1.0)

# Colormap anchors (RGB, evenly spaced in [0, 1]), sampled from matplotlib's maps.
_COLORMAPS = {
    "viridis": np.array([
        [0.267, 0.005, 0.329], [0.283, 0.141, 0.458], [0.254, 0.265, 0.530],
        [0.207, 0.372, 0.553], [0.164, 0.471, 0.558], [0.128, 0.567, 0.551],
        [0.135, 0.659, 0.518], [0.267, 0.749, 0.441], [0.478, 0.821, 0.318],
        [0.741, 0.873, 0.150], [0.993, 0.906, 0.144],
    ]),
    "coolwarm": np.array([
        [0.230, 0.299, 0.754], [0.400, 0.529, 0.941], [0.602, 0.731, 1.000],
        [0.788, 0.846, 0.939], [0.867, 0.867, 0.867], [0.959, 0.768, 0.678],
        [0.958, 0.604, 0.483], [0.870, 0.392, 0.310], [0.706, 0.016, 0.150],
    ]),
}


def colormap(values: np.ndarray | float, vmin: float, vmax: float, name: str = "viridis") -> np.ndarray:
    """RGBA (…, 4) of ``values`` mapped linearly from [vmin, vmax] (clipped) through ``name``.

    NaN values get transparent grey. Raises ValueError for an unknown map or vmax <= vmin.
    """
    if name not in _COLORMAPS:
        raise ValueError(f"unknown colormap {name!r}; known: {sorted(_COLORMAPS)}")
    if not vmax > vmin:
        raise ValueError(f"colour range needs vmax > vmin, got [{vmin}, {vmax}]")
    anchors = _COLORMAPS[name]
    v = np.asarray(values, dtype=float)
    s = np.clip((v - vmin) / (vmax - vmin), 0.0, 1.0)
    pos = np.nan_to_num(s) * (len(anchors) - 1)
    i = np.minimum(pos.astype(int), len(anchors) - 2)
    w = (pos - i)[..., None]
    rgb = anchors[i] * (1.0 - w) + anchors[i + 1] * w
    rgba = np.concatenate([rgb, np.ones(v.shape + (1,))], axis=-1)
    rgba[np.isnan(v)] = (0.5, 0.5, 0.5, 0.0)
    return rgba


def boundary_faces(tets: np.ndarray, positions: np.ndarray | None = None) -> np.ndarray:
    """Triangles (F, 3) of the tetrahedral mesh boundary (faces used by exactly one tet).

    With ``positions`` (N, 3) the faces are oriented with outward normals
    (counter-clockwise seen from outside), as RViz needs for lighting.
    """
    tets = np.asarray(tets, dtype=np.int64)
    if tets.ndim != 2 or tets.shape[1] != 4:
        raise ValueError(f"tets must be (T, 4), got {tets.shape}")
    local = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]])
    faces = tets[:, local].reshape(-1, 3)
    apex = tets.reshape(-1)  # local face k is opposite vertex k
    key = np.sort(faces, axis=1)
    _, inverse, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    once = counts[inverse.reshape(-1)] == 1
    faces, apex = faces[once], apex[once]
    if positions is not None:
        p = np.asarray(positions, dtype=float)
        normal = np.cross(p[faces[:, 1]] - p[faces[:, 0]], p[faces[:, 2]] - p[faces[:, 0]])
        inward = np.einsum("ij,ij->i", normal, p[apex] - p[faces[:, 0]]) > 0
        faces[inward] = faces[inward][:, [0, 2, 1]]
    return faces


@dataclass(frozen=True)
class SurfaceMesh:
    """A triangle list: every 3 consecutive vertices form one triangle."""

    vertices: np.ndarray  # (3F, 3) [m]
    colors: np.ndarray  # (3F, 4) RGBA per vertex

    def __post_init__(self) -> None:
        if self.vertices.ndim != 2 or self.vertices.shape[1] != 3 or len(self.vertices) % 3:
            raise ValueError(f"triangle-list vertices must be (3F, 3), got {self.vertices.shape}")
        if self.colors.shape != (len(self.vertices), 4):
            raise ValueError(
                f"colors must be ({len(self.vertices)}, 4) like the vertices, got {self.colors.shape}"
            )

    @property
    def n_triangles(self) -> int:
        return len(self.vertices) // 3


@dataclass(frozen=True)
class Sphere:
    name: str  # e.g. "effector", "target"
    center: np.ndarray  # (3,) [m]
    radius: float  # [m]
    rgba: tuple[float, float, float, float]


@dataclass(frozen=True)
class Polyline:
    name: str  # e.g. cable name
    points: np.ndarray  # (k, 3) [m], k >= 2
    width: float  # [m]
    rgba: tuple[float, float, float, float]


@dataclass(frozen=True)
class Segments:
    name: str  # e.g. "contact_forces"
    starts: np.ndarray  # (k, 3) [m]
    ends: np.ndarray  # (k, 3) [m]
    width: float  # [m]
    rgba: tuple[float, float, float, float]


@dataclass(frozen=True)
class PointSet:
    name: str  # e.g. "contacts"
    points: np.ndarray  # (k, 3) [m]
    radius: float  # [m]
    rgba: tuple[float, float, float, float]


CONTACT_RGBA = (0.95, 0.15, 0.1, 1.0)
CONTACT_FORCE_RGBA = (1.0, 0.6, 0.0, 1.0)
OBSTACLE_RGBA = (0.45, 0.40, 0.35, 0.6)


def contact_items(
    points: np.ndarray, normals: np.ndarray, forces: np.ndarray, *, radius: float, newton_length: float
) -> tuple[PointSet, Segments]:
    """Contact points and their forces as segments along the normals (``newton_length``
    [m/N]); both present (maybe empty) so a drawing with fewer contacts replaces the last.

    Args:
        points: (m, 3) contact points [m]; normals: (m, 3) unit normals; forces: (m,) [N].
    """
    p = np.asarray(points, dtype=float).reshape(-1, 3)
    n = np.asarray(normals, dtype=float).reshape(-1, 3)
    f = np.asarray(forces, dtype=float).reshape(-1)
    loaded = f > 0
    ends = p[loaded] + newton_length * f[loaded, None] * n[loaded]
    return (PointSet("contacts", p, radius, CONTACT_RGBA),
            Segments("contact_forces", p[loaded], ends, 0.5 * radius, CONTACT_FORCE_RGBA))


@dataclass(frozen=True)
class Scene:
    """Everything drawn for one robot state, in ``frame_id``."""

    surface: SurfaceMesh | None = None
    spheres: tuple[Sphere, ...] = ()
    polylines: tuple[Polyline, ...] = ()
    frame_id: str = "base_link"
    segments: tuple[Segments, ...] = ()
    point_sets: tuple[PointSet, ...] = ()
    #: Legend of the pressure colouring: (label, vmin, vmax, colormap) or None.
    color_scale: tuple[str, float, float, str] | None = None
    #: rigid obstacles of the collision section, one triangle list each (markers only:
    #: they are not part of :meth:`bounds` nor of the rendered snapshots)
    obstacles: tuple[SurfaceMesh, ...] = ()

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned (min, max) corners of all drawn points [m]."""
        pts = [np.zeros((0, 3))]
        if self.surface is not None:
            pts.append(self.surface.vertices)
        pts += [s.center[None, :] for s in self.spheres] + [p.points for p in self.polylines]
        pts += [a.starts for a in self.segments] + [a.ends for a in self.segments]
        pts += [q.points for q in self.point_sets]
        allp = np.concatenate(pts)
        if not len(allp):
            raise ValueError("empty scene has no bounds")
        return allp.min(axis=0), allp.max(axis=0)


def triangle_list(
    positions: np.ndarray,
    faces: np.ndarray,
    face_rgba: np.ndarray | None = None,
    base_rgba: Sequence[float] = SURFACE_RGBA,
) -> SurfaceMesh:
    """Triangle list of ``faces`` (F, 3) over deformed node ``positions`` (N, 3) [m].

    ``face_rgba`` (F, 4) colours each face (all three vertices); default ``base_rgba``.
    """
    p = np.asarray(positions, dtype=float)
    f = np.asarray(faces, dtype=np.int64)
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f"positions must be (N, 3), got {p.shape}")
    if f.ndim != 2 or f.shape[1] != 3:
        raise ValueError(f"faces must be (F, 3), got {f.shape}")
    if f.size and (f.min() < 0 or f.max() >= len(p)):
        raise ValueError(f"face indices out of range [0, {len(p)})")
    if face_rgba is None:
        face_rgba = np.broadcast_to(np.asarray(base_rgba, dtype=float), (len(f), 4))
    face_rgba = np.asarray(face_rgba, dtype=float)
    if face_rgba.shape != (len(f), 4):
        raise ValueError(f"face_rgba must be ({len(f)}, 4), got {face_rgba.shape}")
    return SurfaceMesh(p[f].reshape(-1, 3), np.repeat(face_rgba, 3, axis=0))


def pressure_face_colors(
    n_faces: int,
    cavity_faces: Mapping[str, np.ndarray],
    pressures: Mapping[str, float],
    vmin: float,
    vmax: float,
    cmap: str = "viridis",
    base_rgba: Sequence[float] = SURFACE_RGBA,
) -> np.ndarray:
    """(F, 4) face colours: faces of each cavity coloured by its pressure [Pa], others base.

    ``cavity_faces[name]`` are indices into the surface faces of the faces bounding (or
    lying on the wall of) cavity ``name``; ``pressures[name]`` its pressure.
    """
    rgba = np.tile(np.asarray(base_rgba, dtype=float), (n_faces, 1))
    for name, idx in cavity_faces.items():
        if name not in pressures:
            raise KeyError(f"no pressure given for cavity {name!r}")
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= n_faces):
            raise ValueError(f"cavity {name!r} face indices out of range [0, {n_faces})")
        rgba[idx] = colormap(float(pressures[name]), vmin, vmax, cmap)
    return rgba


def node_value_colors(
    faces: np.ndarray, node_values: np.ndarray, vmin: float, vmax: float, cmap: str = "viridis"
) -> np.ndarray:
    """(F, 4) face colours from a per-node scalar (face mean), e.g. displacement norm."""
    v = np.asarray(node_values, dtype=float)
    return colormap(v[np.asarray(faces)].mean(axis=1), vmin, vmax, cmap)


def cable_polyline(
    name: str,
    path_points: np.ndarray,
    width: float = 1e-3,
    rgba: Sequence[float] = CABLE_RGBA,
) -> Polyline:
    """Polyline of a cable through its (deformed) path points (k, 3) [m], k >= 2."""
    pts = np.asarray(path_points, dtype=float)
    if pts.ndim != 2 or pts.shape[1] != 3 or len(pts) < 2:
        raise ValueError(f"cable {name!r} path must be (k>=2, 3), got {pts.shape}")
    if not width > 0:
        raise ValueError(f"cable {name!r} width must be > 0 m, got {width}")
    return Polyline(name, pts, float(width), tuple(float(c) for c in rgba))  # type: ignore[arg-type]


def obstacle_triangles(obstacle, size: float) -> np.ndarray:
    """(3F, 3) triangle list [m] drawing a rigid obstacle (core/contact/geometry.py,
    mesh_obstacle.py): a plane as a ``size`` × ``size`` square around its point, a sphere as
    a 16 × 8 UV sphere, a box by its 12 triangles, a mesh by its own triangles."""
    kind = getattr(obstacle, "kind", "?")
    if kind == "plane":
        n = np.asarray(obstacle.normal, dtype=float)
        n /= np.linalg.norm(n)
        u = np.cross(n, [1.0, 0.0, 0.0] if abs(n[0]) < 0.9 else [0.0, 1.0, 0.0])
        u /= np.linalg.norm(u)
        v = np.cross(n, u)
        c = np.asarray(obstacle.point, dtype=float)
        h = 0.5 * size
        q = [c + h * (a * u + b * v) for a, b in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        return np.array([q[0], q[1], q[2], q[0], q[2], q[3]])
    if kind == "sphere":
        th = np.linspace(0.0, np.pi, 9)
        ph = np.linspace(0.0, 2 * np.pi, 17)
        grid = np.stack(np.meshgrid(th, ph, indexing="ij"), axis=-1)
        pts = np.stack([np.sin(grid[..., 0]) * np.cos(grid[..., 1]), np.sin(grid[..., 0]) * np.sin(grid[..., 1]),
                        np.cos(grid[..., 0])], axis=-1) * float(obstacle.radius) + np.asarray(obstacle.centre)
        a, b, c, d = pts[:-1, :-1], pts[1:, :-1], pts[1:, 1:], pts[:-1, 1:]
        return np.stack([a, b, c, a, c, d], axis=2).reshape(-1, 3)
    if kind == "box":
        lo, hi = np.asarray(obstacle.lower, dtype=float), np.asarray(obstacle.upper, dtype=float)
        corner = np.array([[(hi if (k >> i) & 1 else lo)[i] for i in range(3)] for k in range(8)])
        faces = [[0, 4, 6], [0, 6, 2], [1, 3, 7], [1, 7, 5], [0, 1, 5], [0, 5, 4],
                 [2, 6, 7], [2, 7, 3], [0, 2, 3], [0, 3, 1], [4, 5, 7], [4, 7, 6]]
        return corner[np.asarray(faces)].reshape(-1, 3)
    if kind == "mesh":
        g = obstacle.geometry
        return (g.vertices[g.faces] + np.asarray(obstacle.offset, dtype=float)).reshape(-1, 3)
    raise ValueError(f"cannot draw obstacle of kind {kind!r}")


def robot_scene(
    positions: np.ndarray,
    faces: np.ndarray,
    *,
    effector: np.ndarray | None = None,
    target: np.ndarray | None = None,
    cables: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]] = (),
    cavity_faces: Mapping[str, np.ndarray] | None = None,
    pressures: Mapping[str, float] | None = None,
    pressure_range: tuple[float, float] | None = None,
    sphere_radius: float | None = None,
    cable_width: float | None = None,
    frame_id: str = "base_link",
    contacts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    obstacles: Sequence[Any] = (),
) -> Scene:
    """Scene of the deformed robot (see module doc).

    Args:
        positions: (N, 3) deformed node positions [m].
        faces: (F, 3) boundary triangles (indices into ``positions``).
        effector, target: (3,) points [m] drawn as spheres (skipped when None or NaN).
        cables: name -> (k, 3) cable path points [m].
        cavity_faces, pressures, pressure_range: pressure colouring [Pa] (all three or none).
        sphere_radius, cable_width: [m]; default 2 % / 0.5 % of the mesh bounding-box diagonal.
        contacts: (points (m, 3) [m], unit normals (m, 3), normal forces (m,) [N]): drawn as
            points and force segments (the largest force as long as 10 % of the diagonal);
            give empty arrays (not None) when contact is modelled but nothing touches.
        obstacles: rigid obstacles at their current pose (see :func:`obstacle_triangles`;
            planes drawn 1.5 × the mesh's bounding-box diagonal wide).
    """
    p = np.asarray(positions, dtype=float)
    diag = float(np.linalg.norm(np.ptp(p, axis=0))) if len(p) else 1.0
    diag = diag if diag > 0 else 1.0
    radius = sphere_radius if sphere_radius is not None else 0.02 * diag
    width = cable_width if cable_width is not None else 0.005 * diag
    face_rgba = None
    scale = None
    if cavity_faces:
        if pressures is None or pressure_range is None:
            raise ValueError("pressure colouring needs cavity_faces, pressures and pressure_range")
        vmin, vmax = pressure_range
        face_rgba = pressure_face_colors(len(faces), cavity_faces, pressures, vmin, vmax)
        scale = ("pressure [Pa]", float(vmin), float(vmax), "viridis")
    spheres = []
    for name, point, rgba in (("effector", effector, EFFECTOR_RGBA), ("target", target, TARGET_RGBA)):
        if point is not None and np.all(np.isfinite(point)):
            spheres.append(Sphere(name, np.asarray(point, dtype=float).reshape(3), radius, rgba))
    items = cables.items() if isinstance(cables, Mapping) else cables
    lines = tuple(cable_polyline(n, pts, width) for n, pts in items)
    point_sets: tuple[PointSet, ...] = ()
    segments: tuple[Segments, ...] = ()
    if contacts is not None:
        fmax = float(np.max(contacts[2])) if len(contacts[2]) else 0.0
        per_newton = 0.1 * diag / fmax if fmax > 0 else 0.0
        cloud, forces = contact_items(*contacts, radius=0.5 * radius, newton_length=per_newton)
        point_sets, segments = (cloud,), (forces,)
    return Scene(
        surface=triangle_list(p, faces, face_rgba) if len(faces) else None,
        spheres=tuple(spheres),
        polylines=lines,
        frame_id=frame_id,
        color_scale=scale,
        segments=segments,
        point_sets=point_sets,
        obstacles=tuple(SurfaceMesh(t, np.tile(OBSTACLE_RGBA, (len(t), 1)))
                        for t in (obstacle_triangles(o, 1.5 * diag) for o in obstacles)),
    )


def render_scene_png(
    scene: Scene,
    path: str | Path,
    *,
    title: str = "",
    elev: float = 25.0,
    azim: float = -60.0,
    size_px: tuple[int, int] = (900, 700),
    dpi: int = 100,
    surface_alpha: float = 0.75,
) -> Path:
    """Render ``scene`` offscreen (matplotlib Agg, flat-shaded) to a PNG; returns the path.

    Axes are in millimetres with equal scale; the surface is drawn with ``surface_alpha``
    opacity so cables routed inside the body stay visible.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    lo, hi = scene.bounds()
    fig = Figure(figsize=(size_px[0] / dpi, size_px[1] / dpi), dpi=dpi)
    ax = fig.add_subplot(projection="3d")
    mm = 1e3
    if scene.surface is not None and scene.surface.n_triangles:
        tris = scene.surface.vertices.reshape(-1, 3, 3) * mm
        rgba = scene.surface.colors.reshape(-1, 3, 4).mean(axis=1)
        normal = np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
        norm = np.linalg.norm(normal, axis=1, keepdims=True)
        normal = np.divide(normal, norm, out=np.zeros_like(normal), where=norm > 0)
        light = np.array([0.3, -0.4, 0.85])
        light /= np.linalg.norm(light)
        shade = 0.55 + 0.45 * np.abs(normal @ light)
        rgba = rgba.copy()
        rgba[:, :3] *= shade[:, None]
        rgba[:, 3] *= surface_alpha
        ax.add_collection3d(Poly3DCollection(tris, facecolors=rgba, edgecolors="none"))
    for line in scene.polylines:
        ax.plot(*(line.points * mm).T, color=line.rgba, linewidth=2.0, label=line.name)
    for sphere in scene.spheres:
        ax.scatter(*(sphere.center * mm), s=80, color=sphere.rgba, depthshade=False,
                   label=sphere.name, edgecolors="k")
    center = (lo + hi) / 2 * mm
    half = max(float(np.max(hi - lo)) * mm / 2, 1e-3) * 1.05
    ax.set_xlim(center[0] - half, center[0] + half)
    ax.set_ylim(center[1] - half, center[1] + half)
    ax.set_zlim(center[2] - half, center[2] + half)
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x [mm]")
    ax.set_ylabel("y [mm]")
    ax.set_zlabel("z [mm]")
    ax.view_init(elev=elev, azim=azim)
    if scene.spheres or scene.polylines:
        ax.legend(loc="upper left", fontsize=8)
    if scene.color_scale is not None:
        label, vmin, vmax, cmap = scene.color_scale
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import ListedColormap, Normalize

        table = colormap(np.linspace(vmin, vmax, 256), vmin, vmax, cmap)
        mappable = ScalarMappable(Normalize(vmin, vmax), ListedColormap(table))
        fig.colorbar(mappable, ax=ax, shrink=0.6, label=label)
    if title:
        ax.set_title(title)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out
