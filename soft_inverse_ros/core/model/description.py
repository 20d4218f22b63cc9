"""Robot descriptions: a YAML file → frozen, validated dataclasses (SI units, robot frame).

The schema (every key below; unknown keys are errors, with a "did you mean" hint)::

    name: diamond              # optional, defaults to the file name
    length_unit: mm            # unit of every bare length number in this file (default: m)
    frame_id: base_link        # TF frame of the mesh / points (REP-103, z up)
    mesh:
      file: diamond.vtk        # relative paths are relative to this YAML's folder;
                               # ${VAR} and ${VAR:-default} are expanded from the environment
      unit: mm                 # file unit (metres per file unit); default: length_unit
      rotation_deg: [90, 0, 0] # about x, then y, then z (SOFA's rx, ry, rz)
      translation: [0, 0, 35]  # applied after the rotation (SOFA's dx, dy, dz)
      on_inverted: error       # or "fix": swap the vertices of (a mix of) inverted tets
      # -- or, instead of file: --
      builtin: diamond         # built-in generated mesh
      params: {cell_size: 7}   # its parameters (lengths)
    material:
      young_modulus: 180 kPa
      poisson_ratio: 0.45
      total_mass: 0.5 kg       # or density: 1070 kg/m^3 (exactly one of the two)
      rayleigh_mass: 0.0       # [1/s], dynamic plant damping (optional)
      rayleigh_stiffness: 0.0  # [s]
    gravity: "[0, 0, -9810] mm/s^2"   # or [0, 0, -9.81] (bare numbers are m/s^2)
    fixed:                     # nodes clamped to their rest position (at least one)
      boxes:
        - {lower: [-15, -15, -40], upper: [15, 15, 10]}
      indices: []              # extra node indices (after loading the mesh)
    actuators:
      - name: cable_north
        type: cable            # the path is pull_point (if any) then points
        pull_point: [0, 10, 30]
        points: [[0, 97, 45]]  # mapped barycentrically into the mesh
        min_force: 0 N         # cables only pull: min_force >= 0
        max_force: 20 N
        max_stroke: 20 mm      # cable shortening bounds (min_stroke defaults to -max_stroke)
        max_force_step: inf    # per-command change limits (optional)
        max_stroke_step: inf
      - name: push
        type: force            # point force along direction, or between point and second_point
        point: [0, 0, 100]
        direction: [1, 0, 0]   # or second_point: [...]
        min_force: -5 N
        max_force: 5 N
      - name: cavity
        type: cavity           # pressure on a closed surface (normals out of the cavity)
        surface: cavity.stl
        surface_unit: mm       # default: length_unit; surface_rotation_deg, surface_translation too
        min_pressure: 0 kPa
        max_pressure: 30 kPa
        max_volume_growth: 2000 mm^3   # bare volumes are in length_unit^3
    effectors:
      - name: tip
        points: [[0, 0, 125]]
        weights: [1]           # optional (barycenter mode)
        mode: points           # "points": every point gives rows; "barycenter": their weighted mean
        axes: [x, y, z]        # controlled coordinates

Quantities are numbers (SI; bare lengths in ``length_unit``, bare volumes in its cube)
or strings with units (see :mod:`soft_inverse_ros.core.model.units`). Every error names the
file and the key.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Union

import numpy as np

from soft_inverse_ros.core.model import units
from soft_inverse_ros.core.model.mesh import MeshError, TetMesh, load_mesh, load_surface
from soft_inverse_ros.core.model.snapshot import ActuatorKind
from soft_inverse_ros.core.yaml_files import load_yaml, yaml_problem

AXES = ("x", "y", "z")

#: Relative tolerance [m] on box bounds when selecting nodes.
BOX_TOLERANCE = 1e-9


class DescriptionError(ValueError):
    """An invalid robot description; the message names the file and the key."""


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


# --------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class Material:
    """Linear elastic material (co-rotational FEM).

    Attributes:
        young_modulus: [Pa] > 0.
        poisson_ratio: in (-1, 0.5).
        density: [kg/m^3], or None when ``total_mass`` is given (exactly one of the two).
        total_mass: [kg] spread uniformly over the mesh volume, or None.
        rayleigh_mass: Rayleigh damping mass coefficient [1/s] (dynamic plant).
        rayleigh_stiffness: Rayleigh damping stiffness coefficient [s].
    """

    young_modulus: float
    poisson_ratio: float
    density: float | None = None
    total_mass: float | None = None
    rayleigh_mass: float = 0.0
    rayleigh_stiffness: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.young_modulus) and self.young_modulus > 0):
            raise ValueError(f"young_modulus must be > 0 Pa, got {self.young_modulus}")
        if not (-1.0 < self.poisson_ratio < 0.5):
            raise ValueError(f"poisson_ratio must be in (-1, 0.5), got {self.poisson_ratio}")
        if (self.density is None) == (self.total_mass is None):
            raise ValueError("give exactly one of density and total_mass")
        for name in ("density", "total_mass"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be > 0, got {v}")
        for name in ("rayleigh_mass", "rayleigh_stiffness"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be >= 0, got {v}")

    def mass_density(self, volume: float) -> float:
        """Density [kg/m^3] for a mesh of ``volume`` [m^3] (from total_mass if given)."""
        if self.density is not None:
            return self.density
        if not volume > 0:
            raise ValueError(f"mesh volume must be > 0 m^3, got {volume}")
        assert self.total_mass is not None
        return self.total_mass / volume


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class Box:
    """Axis-aligned box [m], bounds inclusive."""

    lower: np.ndarray
    upper: np.ndarray

    def __post_init__(self) -> None:
        lo, hi = _ro(self.lower), _ro(self.upper)
        if lo.shape != (3,) or hi.shape != (3,):
            raise ValueError("box bounds must be 3-vectors")
        if np.any(lo > hi):
            raise ValueError(f"box lower {lo.tolist()} must be <= upper {hi.tolist()} on every axis")
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)

    def contains(self, points: np.ndarray) -> np.ndarray:
        """(N,) bool: points [m] inside the box (with a 1e-9 m tolerance)."""
        p = np.asarray(points)
        return np.all((p >= self.lower - BOX_TOLERANCE) & (p <= self.upper + BOX_TOLERANCE), axis=1)


@dataclass(frozen=True)
class FixedSpec:
    """Clamped nodes: those inside any of ``boxes`` plus explicit ``indices``."""

    boxes: tuple[Box, ...] = ()
    indices: tuple[int, ...] = ()

    def node_indices(self, points: np.ndarray) -> np.ndarray:
        """Sorted unique int64 indices of the fixed nodes of a mesh with ``points`` [m].

        Raises:
            ValueError: an explicit index out of range.
        """
        p = np.asarray(points)
        mask = np.zeros(len(p), dtype=bool)
        for box in self.boxes:
            mask |= box.contains(p)
        idx = np.asarray(self.indices, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= len(p)):
            raise ValueError(f"fixed.indices out of range [0, {len(p)}): {idx.tolist()}")
        mask[idx] = True
        return np.flatnonzero(mask).astype(np.int64)


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class CableSpec:
    """A cable: unilateral (pull-only) force along a polyline mapped into the mesh.

    Attributes:
        name: Unique actuator name.
        points: (k, 3) points [m] the cable passes through (attached in the mesh).
        pull_point: (3,) fixed point [m] the cable is pulled from (e.g. the motor), or None
            (then the first of ``points`` is where it is pulled).
        min_force, max_force: Tension bounds [N], 0 <= min <= max.
        min_stroke, max_stroke: Cable shortening bounds [m] (positive when pulled).
        max_force_step, max_stroke_step: Limits on the change per command [N], [m].
    """

    name: str
    points: np.ndarray
    pull_point: np.ndarray | None = None
    min_force: float = 0.0
    max_force: float = math.inf
    min_stroke: float = -math.inf
    max_stroke: float = math.inf
    max_force_step: float = math.inf
    max_stroke_step: float = math.inf

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", _ro(np.atleast_2d(self.points)))
        if self.pull_point is not None:
            object.__setattr__(self, "pull_point", _ro(self.pull_point))
        if self.points.ndim != 2 or self.points.shape[1] != 3 or len(self.points) == 0:
            raise ValueError("cable points must be a (k, 3) array with k >= 1")
        if len(self.path) < 2:
            raise ValueError(
                "a cable with one point has no direction: give a pull_point or at least two points"
            )
        path = self.path
        segments = np.linalg.norm(np.diff(path, axis=0), axis=1)
        span = float(np.linalg.norm(path.max(axis=0) - path.min(axis=0)))
        if np.any(segments <= 1e-9 * max(span, 1e-12)):
            k = int(np.argmax(segments <= 1e-9 * max(span, 1e-12)))
            raise ValueError(f"cable path points {k} and {k + 1} (the pull point is point 0 when given) "
                             f"coincide at {np.round(path[k], 6).tolist()} m: a segment of no length has no "
                             "direction; remove one of them")
        if self.min_force < 0:
            raise ValueError(f"min_force must be >= 0 N (cables only pull), got {self.min_force}")
        _check_bounds(self, "force", "stroke")

    @property
    def path(self) -> np.ndarray:
        """(k', 3) cable polyline [m]: pull_point (if any) then points."""
        if self.pull_point is None:
            return self.points
        return np.vstack([self.pull_point[None, :], self.points])


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class ForceSpec:
    """A bilateral linear force on one mesh point.

    Either along a fixed unit ``direction``, or between ``point`` and ``second_point``
    (positive effort pulls them together; stroke is the shortening of their distance).

    Attributes:
        name: Unique actuator name.
        point: (3,) application point [m].
        direction: (3,) unit vector, or None.
        second_point: (3,) second mesh point [m], or None (exactly one of the two).
        min_force, max_force: [N]. min_stroke, max_stroke: displacement along the
            direction (or shortening) [m]. max_force_step, max_stroke_step: per command.
    """

    name: str
    point: np.ndarray
    direction: np.ndarray | None = None
    second_point: np.ndarray | None = None
    min_force: float = -math.inf
    max_force: float = math.inf
    min_stroke: float = -math.inf
    max_stroke: float = math.inf
    max_force_step: float = math.inf
    max_stroke_step: float = math.inf

    def __post_init__(self) -> None:
        object.__setattr__(self, "point", _ro(self.point))
        if (self.direction is None) == (self.second_point is None):
            raise ValueError("give exactly one of direction and second_point")
        if self.direction is not None:
            d = np.asarray(self.direction, dtype=np.float64)
            n = float(np.linalg.norm(d))
            if not n > 0:
                raise ValueError("direction must be a non-zero vector")
            object.__setattr__(self, "direction", _ro(d / n))
        if self.second_point is not None:
            object.__setattr__(self, "second_point", _ro(self.second_point))
            if np.allclose(self.second_point, self.point):
                raise ValueError("second_point must differ from point")
        _check_bounds(self, "force", "stroke")


@dataclass(frozen=True)
class CavitySpec:
    """A pressure cavity: a closed triangle surface mapped into the mesh.

    Attributes:
        name: Unique actuator name.
        surface_file: Surface mesh (STL...), outward normals fixed on loading.
        surface_unit_scale: Metres per surface file unit.
        surface_rotation_deg, surface_translation: Transform (as for the volume mesh;
            translation in surface file units).
        min_pressure, max_pressure: [Pa].
        min_volume_growth, max_volume_growth: Cavity volume change bounds [m^3].
        max_pressure_step: Limit on the change per command [Pa].
    """

    name: str
    surface_file: Path
    surface_unit_scale: float = 1.0
    surface_rotation_deg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    surface_translation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    min_pressure: float = 0.0
    max_pressure: float = math.inf
    min_volume_growth: float = -math.inf
    max_volume_growth: float = math.inf
    max_pressure_step: float = math.inf

    def __post_init__(self) -> None:
        if not (self.min_pressure <= self.max_pressure):
            raise ValueError(f"min_pressure {self.min_pressure} must be <= max_pressure {self.max_pressure}")
        if not (self.min_volume_growth <= self.max_volume_growth):
            raise ValueError("min_volume_growth must be <= max_volume_growth")
        if not self.max_pressure_step > 0:
            raise ValueError("max_pressure_step must be > 0")

    def load_surface(self) -> tuple[np.ndarray, np.ndarray]:
        """(points (P, 3) [m], triangles (T, 3) int64), normals out of the cavity."""
        return load_surface(
            self.surface_file,
            unit_scale=self.surface_unit_scale,
            rotation_deg=self.surface_rotation_deg,
            translation=self.surface_translation,
        )


Actuator = Union[CableSpec, ForceSpec, CavitySpec]


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class EffectorSpec:
    """Controlled points.

    Attributes:
        name: Unique effector name.
        points: (k, 3) points [m] mapped barycentrically into the mesh.
        weights: (k,) non-negative weights (barycenter mode), default ones.
        mode: ``"points"`` (each point gives one row per axis) or ``"barycenter"`` (the
            weighted mean of the points gives one row per axis).
        axes: Controlled coordinates, a subset of ("x", "y", "z") in that order.
    """

    name: str
    points: np.ndarray
    weights: np.ndarray | None = None
    mode: str = "points"
    axes: tuple[str, ...] = AXES

    def __post_init__(self) -> None:
        pts = _ro(np.atleast_2d(self.points))
        if pts.ndim != 2 or pts.shape[1] != 3 or len(pts) == 0:
            raise ValueError("effector points must be a (k, 3) array with k >= 1")
        object.__setattr__(self, "points", pts)
        w = np.ones(len(pts)) if self.weights is None else np.asarray(self.weights, dtype=np.float64)
        if w.shape != (len(pts),):
            raise ValueError(f"weights must have one value per point ({len(pts)}), got {w.size}")
        if np.any(w < 0) or not w.sum() > 0:
            raise ValueError("weights must be >= 0 with a positive sum")
        object.__setattr__(self, "weights", _ro(w))
        if self.mode not in ("points", "barycenter"):
            raise ValueError(f"mode must be 'points' or 'barycenter', got {self.mode!r}")
        axes = tuple(self.axes)
        bad = [a for a in axes if a not in AXES]
        if bad or not axes or len(set(axes)) != len(axes):
            raise ValueError(f"axes must be a non-empty subset of {list(AXES)} without repeats, got {list(axes)}")
        object.__setattr__(self, "axes", tuple(a for a in AXES if a in axes))

    @property
    def axis_indices(self) -> tuple[int, ...]:
        return tuple(AXES.index(a) for a in self.axes)

    @property
    def n_rows(self) -> int:
        """Number of effector rows this effector contributes."""
        return len(self.axes) * (1 if self.mode == "barycenter" or len(self.points) == 1 else len(self.points))

    def row_names(self) -> tuple[str, ...]:
        """Row names: ``tip.x`` (one point or barycenter), ``tip[2].x`` (several points)."""
        if self.mode == "barycenter" or len(self.points) == 1:
            return tuple(f"{self.name}.{a}" for a in self.axes)
        return tuple(f"{self.name}[{i}].{a}" for i in range(len(self.points)) for a in self.axes)


@dataclass(frozen=True)
class MeshSpec:
    """Where the volume mesh comes from: a file (with its transform) or a built-in.

    Attributes:
        file: Mesh file, or None for a built-in.
        builtin: Built-in mesh name (see :data:`BUILTIN_MESHES`), or None.
        builtin_params: Its parameters (SI).
        unit_scale: Metres per file unit.
        rotation_deg: About x, then y, then z [deg].
        translation: After the rotation [file units].
        on_inverted: "error" or "fix" for a mix of inverted tets.
    """

    file: Path | None = None
    builtin: str | None = None
    builtin_params: Mapping[str, float] = field(default_factory=dict)
    unit_scale: float = 1.0
    rotation_deg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    translation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    on_inverted: str = "error"

    def __post_init__(self) -> None:
        if (self.file is None) == (self.builtin is None):
            raise ValueError("give exactly one of mesh.file and mesh.builtin")
        if self.builtin is not None and self.builtin not in BUILTIN_MESHES:
            raise ValueError(f"unknown built-in mesh {self.builtin!r}; known: {sorted(BUILTIN_MESHES)}")
        if self.on_inverted not in ("error", "fix"):
            raise ValueError(f"on_inverted must be 'error' or 'fix', got {self.on_inverted!r}")

    def load(self) -> TetMesh:
        """The tet mesh in metres, robot frame.

        Raises:
            MeshError: unreadable or invalid mesh (see :func:`~soft_inverse_ros.core.model.mesh.load_mesh`).
        """
        if self.builtin is not None:
            params = dict(self.builtin_params)
            try:
                return BUILTIN_MESHES[self.builtin][0](**params)
            except MeshError as exc:  # e.g. a cell as large as the robot: a length unit off by 1000
                shown = ", ".join(f"{k} {v:g} m" for k, v in params.items())
                raise MeshError(f"mesh: builtin {self.builtin!r} with {shown or 'its defaults'}: {exc} "
                                "(cells as large as the robot? check the params' length_unit and cell size)") from None
        assert self.file is not None
        return load_mesh(
            self.file,
            unit_scale=self.unit_scale,
            rotation_deg=self.rotation_deg,
            translation=self.translation,
            on_inverted=self.on_inverted,  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class ObstacleSpec:
    """A rigid obstacle of the world [m]: ``kind`` plane (point, normal, optional friction
    tangent t1), sphere (centre, radius), box (lower, upper) or mesh (a closed triangle
    surface ``file`` read by meshio, with ``unit_scale`` m per file unit, ``rotation_deg``
    and ``translation`` [m] applied in that order); ``motion``: a prescribed translation
    over time (core/contact/obstacle_motion.py), or None for a fixed obstacle."""

    kind: str
    params: tuple[tuple[str, Any], ...]  # (name, value) pairs, SI, vectors as tuples
    motion: Any = None  # ObstacleMotion | None

    def get(self, name: str, default: Any = None) -> Any:
        return dict(self.params).get(name, default)


@dataclass(frozen=True)
class CollisionSpec:
    """Contact of the robot (see core/contact/): its boundary surface against itself
    (``self_collision``) and against ``obstacles``; contacts are created below
    ``alarm_distance`` [m]; Coulomb ``friction`` μ or (μ_t1, μ_t2) (obstacles only);
    a surface vertex ignores the triangles within ``exclude_rings`` edge rings.

    ``reduced_basis``: a reduced contact basis file (``soft-inverse-ros reduce-contacts``,
    core/contact/basis_file.py), loaded into ``basis``: the contact forces are λ = Ψ β
    (Goury 2021, eq. 18–22) in the simulated robot and the controller's model, whose
    snapshot then carries k generalized contacts; frictionless only. The basis must have
    been built on this mesh (checked when the mesh is loaded).

    ``surface``: a collision surface file (STL/OBJ/... read by meshio; path resolved like
    ``mesh.file``; coordinates in ``surface_unit``, default the mesh's ``unit``, and moved by
    the mesh's ``rotation_deg``/``translation``), mapped barycentrically into the tet mesh
    (core/contact/mapped_surface.py): detection runs at its vertices and contacts carry
    surface vertex ids. Absent: the mesh's boundary triangles (node ids)."""

    self_collision: bool = False
    obstacles: tuple[ObstacleSpec, ...] = ()
    alarm_distance: float = 1e-3
    friction: tuple[float, ...] = (0.0,)
    exclude_rings: int = 2
    reduced_basis: Path | None = None
    basis: Any = field(default=None, compare=False, repr=False)  # BasisFile of reduced_basis
    surface: Path | None = None
    surface_unit_scale: float | None = None  # metres per surface file unit (None: the mesh's)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.alarm_distance) and self.alarm_distance > 0):
            raise ValueError(f"alarm_distance must be > 0 m, got {self.alarm_distance}")
        if len(self.friction) not in (1, 2) or not all(math.isfinite(m) and m >= 0 for m in self.friction):
            raise ValueError(f"friction must be μ >= 0 or [μ_t1, μ_t2], got {list(self.friction)}")
        if not (isinstance(self.exclude_rings, int) and self.exclude_rings >= 1):
            raise ValueError(f"exclude_rings must be an integer >= 1, got {self.exclude_rings!r}")
        if not self.self_collision and not self.obstacles:
            raise ValueError("give self_collision: true or at least one obstacle (or leave 'collision' out)")
        if (self.reduced_basis is None) != (self.basis is None):
            raise ValueError("reduced_basis: give the file and its loaded basis together")
        if self.basis is not None and self.surface is not None:
            raise ValueError("reduced_basis and surface: a reduced basis over a mapped collision surface is not supported")
        if self.basis is not None and any(m > 0 for m in self.friction):
            raise ValueError("reduced_basis: the reduced contact basis is frictionless (friction must be 0)")
        if any(o.motion is not None for o in self.obstacles) and any(m > 0 for m in self.friction):
            raise ValueError("a moving obstacle (motion) needs friction 0: the Coulomb law here takes the "
                             "robot's slip against a fixed obstacle")
        if not self.obstacles and any(m > 0 for m in self.friction):
            raise ValueError("friction acts on obstacle contacts only: with self_collision alone it would "
                             "do nothing (set it to 0)")
        if len(self.friction) == 2 and self.friction[0] != self.friction[1]:
            undirected = [o.kind for o in self.obstacles if not (o.kind == "plane" and o.get("t1") is not None)]
            if undirected:
                raise ValueError(f"anisotropic friction [μ_t1, μ_t2] needs each obstacle to be a plane with its "
                                 f"tangent t1 (the direction μ_t1 acts along); {undirected} have none")


#: ActuatorKind of each actuator spec type (the kinds the snapshot and commands carry).
_ACTUATOR_KINDS = {CableSpec: ActuatorKind.CABLE, ForceSpec: ActuatorKind.FORCE,
                   CavitySpec: ActuatorKind.PRESSURE}


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class RobotDescription:
    """A soft robot: mesh, material, boundary conditions, actuators and effectors (SI)."""

    name: str
    source: Path | None
    mesh: MeshSpec
    material: Material
    gravity: np.ndarray
    fixed: FixedSpec
    actuators: tuple[Actuator, ...]
    effectors: tuple[EffectorSpec, ...]
    frame_id: str = "base_link"
    #: contact (self-collision, obstacles); None: the robot touches nothing
    collision: CollisionSpec | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "gravity", _ro(self.gravity))
        for kind, items in (("actuator", self.actuators), ("effector", self.effectors)):
            names = [x.name for x in items]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"{kind} names must be unique, repeated: {dup}")
        if not self.actuators:
            raise ValueError("a robot needs at least one actuator")
        if not self.effectors:
            raise ValueError("a robot needs at least one effector")
        if not self.fixed.boxes and not self.fixed.indices:
            raise ValueError("fixed: give at least one box or node index (an unclamped robot has no equilibrium)")

    @property
    def actuator_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.actuators)

    @property
    def actuator_kinds(self) -> tuple[ActuatorKind, ...]:
        """Cable, linear force or pressure cavity, per actuator."""
        return tuple(_ACTUATOR_KINDS[type(a)] for a in self.actuators)

    @property
    def effector_row_names(self) -> tuple[str, ...]:
        return tuple(n for e in self.effectors for n in e.row_names())

    def mapped_points(self) -> dict[str, np.ndarray]:
        """Points that must be mapped into the mesh, by owner name (cable points, force
        points, effector points) [m]."""
        out: dict[str, np.ndarray] = {}
        for a in self.actuators:
            if isinstance(a, CableSpec):
                out[a.name] = a.points
            elif isinstance(a, ForceSpec):
                out[a.name] = a.point[None] if a.second_point is None else np.vstack([a.point, a.second_point])
        for e in self.effectors:
            out[e.name] = e.points
        return out

    def plausibility_warnings(self, mesh: TetMesh) -> list[str]:
        """Warnings (empty when plausible) for this robot on ``mesh``: its size, mass and
        Young's modulus (:func:`plausibility_warnings`; a bare ``young_modulus: 1`` is 1 Pa,
        and the equilibrium then takes minutes or fails), and a cable pulled from more than
        ten robot sizes away (a pull point in the wrong unit), a cavity under a hundredth of the
        robot's size across or over ten times it (its surface in the wrong unit)."""
        lo, hi = mesh.bounding_box()
        size = float(np.linalg.norm(hi - lo))
        out = plausibility_warnings(size, self.material.mass_density(mesh.total_volume) * mesh.total_volume,
                                    self.material.young_modulus)
        for actuator in self.actuators:
            pull = getattr(actuator, "pull_point", None)
            if pull is not None:
                distance = float(np.linalg.norm(np.maximum(np.maximum(lo - pull, pull - hi), 0.0)))
                if distance > 10.0 * size:
                    out.append(f"cable {actuator.name}: its pull point {np.round(pull, 4).tolist()} m lies "
                               f"{distance:.3g} m from a robot {size:.3g} m across: check its unit")
            if isinstance(actuator, CavitySpec):
                cavity = actuator.load_surface()[0]
                across = float(np.linalg.norm(cavity.max(axis=0) - cavity.min(axis=0)))
                if not 1e-2 * size <= across <= 10.0 * size:
                    out.append(f"cavity {actuator.name}: its surface is {across:.3g} m across, in a robot "
                               f"{size:.3g} m across: check its unit")
        for i, o in enumerate(self.collision.obstacles if self.collision is not None else ()):
            corners = _obstacle_extent(o)
            if corners is None:  # a plane: unbounded
                continue
            extent = float(np.linalg.norm(corners[1] - corners[0]))
            gap = float(np.linalg.norm(np.maximum(np.maximum(lo - corners[1], corners[0] - hi), 0.0)))
            if extent > 100.0 * size or gap > 10.0 * size:
                out.append(f"obstacle {i} ({o.kind}): {extent:.3g} m across, {gap:.3g} m from a robot "
                           f"{size:.3g} m across: check its unit")
        return out

    def load_mesh(self) -> TetMesh:
        """Load the mesh and check it against the description.

        Raises:
            MeshError: invalid mesh.
            DescriptionError: the fixed boxes/indices select no node, or a mapped point
                lies far outside the mesh (more than 5 % of its size: usually a unit error).
        """
        where = str(self.source) if self.source else f"robot {self.name!r}"
        try:
            mesh = self.mesh.load()
        except MeshError as exc:
            if self.mesh.builtin is None:  # a file's error names the file
                raise
            raise MeshError(f"{where}: {exc}") from None
        try:
            fixed = self.fixed.node_indices(mesh.points)
        except ValueError as exc:
            raise DescriptionError(f"{where}: {exc}") from None
        if fixed.size == 0:
            lo, hi = mesh.bounding_box()
            raise DescriptionError(
                f"{where}: fixed: no mesh node lies in the fixed boxes (mesh bounding box "
                f"{np.round(lo, 6).tolist()} .. {np.round(hi, 6).tolist()} m)"
            )
        lo, hi = mesh.bounding_box()
        slack = 0.05 * float(np.linalg.norm(hi - lo))
        for owner, pts in self.mapped_points().items():
            outside = np.any((pts < lo - slack) | (pts > hi + slack), axis=1)
            if outside.any():
                raise DescriptionError(
                    f"{where}: {owner}: point {np.round(pts[outside][0], 6).tolist()} m is outside the mesh "
                    f"bounding box {np.round(lo, 6).tolist()} .. {np.round(hi, 6).tolist()} m (check length_unit)"
                )
        if self.collision is not None and self.collision.basis is not None:
            from soft_inverse_ros.core.contact.basis_file import BasisFileError

            try:
                self.collision.basis.check_mesh(
                    mesh.points, where=f"collision.reduced_basis {self.collision.reduced_basis}")
            except BasisFileError as exc:
                raise DescriptionError(f"{where}: {exc}") from None
        return mesh


def _check_bounds(spec: Any, effort: str, stroke: str) -> None:
    for kind in (effort, stroke):
        lo, hi = getattr(spec, f"min_{kind}"), getattr(spec, f"max_{kind}")
        if math.isnan(lo) or math.isnan(hi) or lo > hi:
            raise ValueError(f"min_{kind} ({lo}) must be <= max_{kind} ({hi})")
        step = getattr(spec, f"max_{kind}_step")
        if not step > 0:
            raise ValueError(f"max_{kind}_step must be > 0, got {step}")


def _builtin_diamond(**params: float) -> TetMesh:
    from soft_inverse_ros.core.model.mesh_generation import diamond_robot_mesh

    return diamond_robot_mesh(**params)


def _diamond_param_names() -> tuple[str, ...]:
    from soft_inverse_ros.core.model.mesh_generation import DIAMOND_DEFAULTS

    return tuple(DIAMOND_DEFAULTS)


#: Built-in meshes: name → (generator(**params [m]), parameter names).
BUILTIN_MESHES: dict[str, tuple[Callable[..., TetMesh], Callable[[], tuple[str, ...]]]] = {
    "diamond": (_builtin_diamond, _diamond_param_names),
}


# --------------------------------------------------------------------------- YAML parsing

_MISSING = object()
_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class _Reader:
    """Reads one YAML mapping, tracking which keys were asked for."""

    def __init__(self, data: Any, key: str, ctx: "_Context") -> None:
        if not isinstance(data, Mapping):
            raise ctx.error(key or "(top level)", f"expected a mapping of keys, got {type(data).__name__}")
        self.data = data
        self.key = key
        self.ctx = ctx
        self.asked: list[str] = []

    def path(self, name: str) -> str:
        return f"{self.key}.{name}" if self.key else name

    def has(self, name: str) -> bool:
        self.asked.append(name)
        self._refuse_null(name)
        return name in self.data

    def raw(self, name: str, default: Any = _MISSING) -> Any:
        self.asked.append(name)
        self._refuse_null(name)
        if name in self.data:
            return self.data[name]
        if default is _MISSING:
            raise self.missing(name)
        return default

    def _refuse_null(self, name: str) -> None:
        """A key written without a value (``max_stroke:`` or ``null``) is an error, not the
        default: for a limit the default is none at all."""
        if name in self.data and self.data[name] is None:
            raise self.ctx.error(self.path(name), "given without a value: write one, or leave the key "
                                                  "out for the default")

    def missing(self, name: str) -> DescriptionError:
        """Error for a missing required key; a close unknown key is reported as the typo."""
        close = difflib.get_close_matches(name, [str(k) for k in self.data], n=1, cutoff=0.6)
        if close and close[0] != name:
            return self.ctx.error(self.path(close[0]), f"unknown key (did you mean {name!r}?)")
        return self.ctx.error(self.path(name), "missing required key")

    def quantity(self, name: str, dim: units.Dim, default: Any = _MISSING) -> float:
        """A scalar quantity; an absent key gives ``default`` (already SI)."""
        if not self.has(name):
            if default is _MISSING:
                raise self.missing(name)
            return float(default)
        return self.ctx.convert(units.quantity, self.data[name], dim, key=self.path(name))

    def vector(self, name: str, dim: units.Dim, default: Any = _MISSING) -> np.ndarray:
        """A 3-vector quantity; an absent key gives ``default`` (already SI)."""
        if not self.has(name):
            if default is _MISSING:
                raise self.missing(name)
            return np.asarray(default, dtype=np.float64)
        return self.ctx.convert(units.vector, self.data[name], dim, key=self.path(name))

    def points(self, name: str) -> np.ndarray:
        value = self.raw(name)
        try:
            return units.points(value, key=self.path(name), length_scale=self.ctx.length_scale)
        except units.UnitError as exc:
            raise self.ctx.error(None, str(exc)) from None

    def string(self, name: str, default: Any = _MISSING) -> str:
        value = self.raw(name, default)
        if not isinstance(value, str) or not value.strip():
            raise self.ctx.error(self.path(name), f"expected a non-empty string, got {value!r}")
        return value.strip()

    def finish(self) -> None:
        """Raise on keys that were never asked for (typos)."""
        known = list(dict.fromkeys(self.asked))
        for k in self.data:
            if str(k) not in known:
                close = difflib.get_close_matches(str(k), known, n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(known)})"
                raise self.ctx.error(self.path(str(k)), f"unknown key{hint}")


@dataclass
class _Context:
    source: Path | None
    base_dir: Path
    length_scale: float = 1.0

    def error(self, key: str | None, message: str) -> DescriptionError:
        where = str(self.source) if self.source is not None else "robot description"
        return DescriptionError(f"{where}: {key}: {message}" if key else f"{where}: {message}")

    def convert(self, fn: Callable[..., Any], value: Any, dim: units.Dim, *, key: str) -> Any:
        try:
            return fn(value, dim, key=key, length_scale=self.length_scale)
        except units.UnitError as exc:
            raise self.error(None, str(exc)) from None

    def path(self, value: Any, key: str) -> Path:
        """A file path: ${VAR} / ${VAR:-default} expanded, relative to the YAML folder."""
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"expected a file path, got {value!r}")

        def expand(m: re.Match[str]) -> str:
            env = os.environ.get(m.group(1))
            if env:
                return env
            if m.group(2) is not None:
                return m.group(2)
            raise self.error(key, f"environment variable {m.group(1)} is not set (used in {value!r})")

        text = _ENV_RE.sub(expand, value.strip())
        p = Path(text).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()


def _as_list(value: Any, key: str, ctx: _Context) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ctx.error(key, f"expected a list, got {type(value).__name__}")
    return value


def _wrap(ctx: _Context, key: str, build: Callable[[], Any]) -> Any:
    """Run a dataclass constructor, turning its ValueError into a DescriptionError at key."""
    try:
        return build()
    except DescriptionError:
        raise
    except ValueError as exc:
        raise ctx.error(key, str(exc)) from None


def _file_unit(r: _Reader, name: str, ctx: _Context) -> float:
    value = r.raw(name, None)
    if value is None:
        return ctx.length_scale
    try:
        return units.length_unit_scale(value, key=r.path(name))
    except units.UnitError as exc:
        raise ctx.error(None, str(exc)) from None


def _parse_mesh(data: Any, ctx: _Context, mesh_override: Path | None) -> MeshSpec:
    r = _Reader(data, "mesh", ctx)
    has_file, has_builtin = r.has("file"), r.has("builtin")
    if has_file == has_builtin and mesh_override is None:
        raise ctx.error("mesh", "give exactly one of 'file' and 'builtin'")
    unit_scale = _file_unit(r, "unit", ctx)
    rotation = tuple(float(v) for v in r.vector("rotation_deg", units.DIMENSIONLESS, (0.0, 0.0, 0.0)))
    translation_m = r.vector("translation", units.LENGTH, (0.0, 0.0, 0.0))
    on_inverted = r.string("on_inverted", "error")
    params_raw = r.raw("params", {})
    builtin = r.string("builtin") if has_builtin else None
    file = ctx.path(r.raw("file"), "mesh.file") if has_file else None
    r.finish()
    params: dict[str, float] = {}
    if builtin is not None:
        if builtin not in BUILTIN_MESHES:
            close = difflib.get_close_matches(builtin, list(BUILTIN_MESHES), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ctx.error("mesh.builtin", f"unknown built-in mesh {builtin!r}{hint}; known: {sorted(BUILTIN_MESHES)}")
        pr = _Reader(params_raw, "mesh.params", ctx)
        for name in BUILTIN_MESHES[builtin][1]():
            if pr.has(name):
                params[name] = pr.quantity(name, units.LENGTH)
        pr.finish()
        if any(rotation) or np.any(translation_m):
            raise ctx.error("mesh", "rotation_deg/translation apply to mesh files, not to a built-in mesh")
    elif params_raw:
        raise ctx.error("mesh.params", "parameters apply to a built-in mesh only")
    if mesh_override is not None:
        file, builtin, params = Path(mesh_override), None, {}
    if file is not None and not file.is_file():
        hint = ""
        variables = sorted({m[0] for m in _ENV_RE.findall(str(r.data.get("file", "")))})
        if variables and mesh_override is None:
            hint = f" (set {', '.join(variables)} to the folder holding it, or pass a mesh override)"
        raise ctx.error("mesh.file", f"mesh file {file} " + ("is not a file (a folder?)" if file.exists()
                                                            else f"not found{hint}"))
    return _wrap(
        ctx,
        "mesh",
        lambda: MeshSpec(
            file=file,
            builtin=builtin,
            builtin_params=params,
            unit_scale=unit_scale,
            rotation_deg=rotation,  # type: ignore[arg-type]
            translation=tuple(float(v) for v in translation_m / unit_scale),  # type: ignore[arg-type]
            on_inverted=on_inverted,
        ),
    )


def _parse_material(data: Any, ctx: _Context) -> Material:
    r = _Reader(data, "material", ctx)
    young = r.quantity("young_modulus", units.PRESSURE)
    nu = r.quantity("poisson_ratio", units.DIMENSIONLESS)
    density = r.quantity("density", units.DENSITY) if r.has("density") else None
    total_mass = r.quantity("total_mass", units.MASS) if r.has("total_mass") else None
    rm = r.quantity("rayleigh_mass", units.FREQUENCY, 0.0)
    rs = r.quantity("rayleigh_stiffness", units.TIME, 0.0)
    r.finish()
    if (density is None) == (total_mass is None):
        raise ctx.error("material", "give exactly one of 'density' and 'total_mass'")
    return _wrap(ctx, "material", lambda: Material(young, nu, density, total_mass, rm, rs))


def _parse_box(data: Any, key: str, ctx: _Context) -> Box:
    if isinstance(data, list) and len(data) == 2:
        lo = ctx.convert(units.vector, data[0], units.LENGTH, key=f"{key}[0]")
        hi = ctx.convert(units.vector, data[1], units.LENGTH, key=f"{key}[1]")
    else:
        r = _Reader(data, key, ctx)
        lo = r.vector("lower", units.LENGTH)
        hi = r.vector("upper", units.LENGTH)
        r.finish()
    return _wrap(ctx, key, lambda: Box(lo, hi))


def _parse_fixed(data: Any, ctx: _Context) -> FixedSpec:
    r = _Reader(data, "fixed", ctx)
    boxes = tuple(
        _parse_box(b, f"fixed.boxes[{i}]", ctx) for i, b in enumerate(_as_list(r.raw("boxes", None), "fixed.boxes", ctx))
    )
    raw_idx = _as_list(r.raw("indices", None), "fixed.indices", ctx)
    r.finish()
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in raw_idx):
        raise ctx.error("fixed.indices", f"expected non-negative integers, got {raw_idx}")
    if not boxes and not raw_idx:
        raise ctx.error("fixed", "give at least one box or node index (an unclamped robot has no equilibrium)")
    return FixedSpec(boxes=boxes, indices=tuple(raw_idx))


_OBSTACLE_KEYS = {
    "plane": (("point", "vector"), ("normal", "direction"), ("t1", "direction?")),
    "sphere": (("centre", "vector"), ("radius", "length")),
    "box": (("lower", "vector"), ("upper", "vector")),
    "mesh": (),  # file, unit, rotation_deg, translation: parsed by _parse_mesh_obstacle
}

#: m/s
_VELOCITY: units.Dim = (1, 0, -1, 0)


def _parse_motion(data: Any, key: str, ctx: _Context):
    """An obstacle's ``motion`` mapping (velocity, amplitude, frequency, phase, stop_after)."""
    from soft_inverse_ros.core.contact.obstacle_motion import ObstacleMotion

    r = _Reader(data, key, ctx)
    velocity = tuple(float(v) for v in r.vector("velocity", _VELOCITY, (0.0, 0.0, 0.0)))
    amplitude = tuple(float(v) for v in r.vector("amplitude", units.LENGTH, (0.0, 0.0, 0.0)))
    frequency = r.quantity("frequency", units.FREQUENCY, 0.0)
    phase = r.quantity("phase", units.ANGLE, 0.0)
    stop_after = r.quantity("stop_after", units.TIME, math.inf)
    r.finish()
    return _wrap(ctx, key, lambda: ObstacleMotion(velocity, amplitude, frequency, phase, stop_after))


def _parse_mesh_obstacle(r: "_Reader", key: str, ctx: _Context) -> list:
    """The (name, value) pairs of a mesh obstacle: the file, its unit scale and transform."""
    path = ctx.path(r.raw("file"), f"{key}.file")
    if not path.is_file():
        raise ctx.error(f"{key}.file", f"file not found: {path}")
    scale = _file_unit(r, "unit", ctx)
    rot = tuple(float(v) for v in r.vector("rotation_deg", units.DIMENSIONLESS, (0.0, 0.0, 0.0)))
    trans = tuple(float(v) for v in r.vector("translation", units.LENGTH, (0.0, 0.0, 0.0)))
    from soft_inverse_ros.core.contact.mapped_surface import load_surface
    from soft_inverse_ros.core.contact.mesh_obstacle import MeshGeometry

    try:
        faces, points = load_surface(path, scale, rotation_deg=rot, translation=np.asarray(trans) / scale,
                                     what="obstacle surface")
        geometry = MeshGeometry(points, faces)
    except ValueError as exc:
        raise ctx.error(f"{key}.file", str(exc)) from None
    return [("file", path), ("unit_scale", scale), ("rotation_deg", rot), ("translation", trans),
            ("geometry", geometry)]


def _parse_obstacle(data: Any, key: str, ctx: _Context) -> ObstacleSpec:
    r = _Reader(data, key, ctx)
    kind = r.string("type")
    if kind not in _OBSTACLE_KEYS:
        raise ctx.error(f"{key}.type", f"expected one of {sorted(_OBSTACLE_KEYS)}, got {kind!r}")
    params = _parse_mesh_obstacle(r, key, ctx) if kind == "mesh" else []
    for name, what in _OBSTACLE_KEYS[kind]:
        if what == "length":
            value: Any = r.quantity(name, units.LENGTH)
            if not value > 0:
                raise ctx.error(f"{key}.{name}", f"must be > 0 m, got {value}")
        elif what.startswith("direction"):
            if what.endswith("?") and not r.has(name):
                continue
            raw = r.raw(name)
            try:
                vec = np.asarray(raw, dtype=float).reshape(3)
            except (TypeError, ValueError):
                raise ctx.error(f"{key}.{name}", f"expected a 3-vector direction, got {raw!r}") from None
            if not (np.isfinite(vec).all() and np.linalg.norm(vec) > 0):
                raise ctx.error(f"{key}.{name}", f"expected a non-zero finite direction, got {raw!r}")
            value = tuple(vec / np.linalg.norm(vec))
        else:
            value = tuple(float(v) for v in r.vector(name, units.LENGTH))
        params.append((name, value))
    motion = _parse_motion(r.raw("motion"), f"{key}.motion", ctx) if r.has("motion") else None
    r.finish()
    if kind == "box" and any(lo >= hi for lo, hi in zip(dict(params)["lower"], dict(params)["upper"])):
        raise ctx.error(key, "box lower must be < upper on every axis (a box of no volume)")
    if kind == "plane" and "t1" in dict(params):
        along = abs(float(np.dot(dict(params)["t1"], dict(params)["normal"])))
        if along > 1.0 - 1e-6:
            raise ctx.error(f"{key}.t1", "is along the plane's normal: a tangent lies in the plane")
    return ObstacleSpec(kind, tuple(params), motion)


def _parse_collision(data: Any, ctx: _Context) -> CollisionSpec | None:
    if data is None:
        return None
    r = _Reader(data, "collision", ctx)
    self_collision = r.raw("self_collision", False)
    if not isinstance(self_collision, bool):
        raise ctx.error("collision.self_collision", f"expected true or false, got {self_collision!r}")
    obstacles = tuple(
        _parse_obstacle(o, f"collision.obstacles[{i}]", ctx)
        for i, o in enumerate(_as_list(r.raw("obstacles", None), "collision.obstacles", ctx))
    )
    alarm = r.quantity("alarm_distance", units.LENGTH, 1e-3)
    raw_mu = r.raw("friction", 0.0)
    mu_list = raw_mu if isinstance(raw_mu, list) else [raw_mu]
    if not all(isinstance(m, (int, float)) and not isinstance(m, bool) for m in mu_list):
        raise ctx.error("collision.friction", f"expected μ or [μ_t1, μ_t2] (numbers), got {raw_mu!r}")
    rings = r.raw("exclude_rings", 2)
    basis_path, basis = None, None
    if r.has("reduced_basis"):
        from soft_inverse_ros.core.contact.basis_file import BasisFileError, load_basis

        basis_path = ctx.path(r.raw("reduced_basis"), "collision.reduced_basis")
        try:
            basis = load_basis(basis_path)
        except BasisFileError as exc:
            raise ctx.error("collision.reduced_basis", str(exc)) from None
    surface, surface_scale = None, None
    if r.has("surface"):
        surface = ctx.path(r.raw("surface"), "collision.surface")
        if not surface.is_file():
            raise ctx.error("collision.surface", f"file not found: {surface}")
        if r.has("surface_unit"):
            surface_scale = _file_unit(r, "surface_unit", ctx)
    r.finish()
    spec = _wrap(ctx, "collision", lambda: CollisionSpec(
        self_collision, obstacles, alarm, tuple(float(m) for m in mu_list), rings, basis_path, basis,
        surface, surface_scale))
    if basis is not None:
        try:
            basis.check_collision(spec, where=str(basis_path))
        except BasisFileError as exc:
            raise ctx.error("collision.reduced_basis", str(exc)) from None
    return spec


_BOUND_KEYS = ("min_force", "max_force", "min_stroke", "max_stroke", "max_force_step", "max_stroke_step")


def _bounds(r: _Reader, defaults: dict[str, float], stroke_dim: units.Dim) -> dict[str, float]:
    """Force and stroke bounds; an absent ``min_stroke`` defaults to −``max_stroke`` (every
    actuator with a stroke limit gets a lower one too: an absurd stroke is never commanded)."""
    out = {}
    for k in _BOUND_KEYS:
        if k != "min_stroke":
            dim = units.FORCE if "force" in k else stroke_dim
            out[k] = r.quantity(k, dim, defaults.get(k, math.inf if k.startswith("max") else -math.inf))
    out["min_stroke"] = r.quantity("min_stroke", stroke_dim, -out["max_stroke"])
    return out


def _parse_actuator(data: Any, key: str, ctx: _Context) -> Actuator:
    r = _Reader(data, key, ctx)
    name = r.string("name")
    kind = r.string("type")
    key = f"{key} ({name})"
    r.key = key
    if kind == "cable":
        points = r.points("points")
        pull = r.vector("pull_point", units.LENGTH) if r.has("pull_point") else None
        b = _bounds(r, {"min_force": 0.0}, units.LENGTH)
        r.finish()
        return _wrap(ctx, key, lambda: CableSpec(name, points, pull, **b))
    if kind == "force":
        point = r.vector("point", units.LENGTH)
        direction = r.vector("direction", units.DIMENSIONLESS) if r.has("direction") else None
        second = r.vector("second_point", units.LENGTH) if r.has("second_point") else None
        b = _bounds(r, {}, units.LENGTH)
        r.finish()
        return _wrap(ctx, key, lambda: ForceSpec(name, point, direction, second, **b))
    if kind == "cavity":
        surface = ctx.path(r.raw("surface"), f"{key}.surface")
        scale = _file_unit(r, "surface_unit", ctx)
        rot = tuple(float(v) for v in r.vector("surface_rotation_deg", units.DIMENSIONLESS, (0.0, 0.0, 0.0)))
        trans = r.vector("surface_translation", units.LENGTH, (0.0, 0.0, 0.0)) / scale
        vals = {
            "min_pressure": r.quantity("min_pressure", units.PRESSURE, 0.0),
            "max_pressure": r.quantity("max_pressure", units.PRESSURE, math.inf),
            "max_volume_growth": r.quantity("max_volume_growth", units.VOLUME, math.inf),
            "max_pressure_step": r.quantity("max_pressure_step", units.PRESSURE, math.inf),
        }
        # like strokes: an absent lower bound mirrors the upper one
        vals["min_volume_growth"] = r.quantity("min_volume_growth", units.VOLUME, -vals["max_volume_growth"])
        r.finish()
        if not surface.is_file():
            raise ctx.error(f"{key}.surface", f"surface file {surface} not found")
        return _wrap(
            ctx,
            key,
            lambda: CavitySpec(name, surface, scale, rot, tuple(float(v) for v in trans), **vals),  # type: ignore[arg-type]
        )
    close = difflib.get_close_matches(kind, ["cable", "force", "cavity"], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ctx.error(f"{key}.type", f"unknown actuator type {kind!r}{hint}; known: cable, force, cavity")


def _parse_effector(data: Any, key: str, ctx: _Context) -> EffectorSpec:
    r = _Reader(data, key, ctx)
    name = r.string("name")
    key = f"{key} ({name})"
    r.key = key
    points = r.points("points")
    weights = r.raw("weights", None)
    mode = r.string("mode", "points")
    axes_raw = r.raw("axes", list(AXES))
    r.finish()
    if isinstance(axes_raw, str):
        axes_raw = list(axes_raw.replace(",", "").replace(" ", ""))
    if weights is not None:
        if not isinstance(weights, list) or not all(
            isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights
        ):
            raise ctx.error(f"{key}.weights", f"expected a list of numbers, got {weights!r}")
        if mode == "points":
            raise ctx.error(f"{key}.weights", "weights apply to mode: barycenter (in mode: points "
                                              "each point is its own target)")
    return _wrap(ctx, key, lambda: EffectorSpec(name, points, weights, mode, tuple(axes_raw)))


def parse_robot_description(
    data: Any, *, source: Path | None = None, mesh_override: Path | None = None
) -> RobotDescription:
    """Build a :class:`RobotDescription` from parsed YAML ``data``.

    Relative paths resolve against ``source``'s folder (the current directory if None).

    Raises:
        DescriptionError: naming the file and the key.
    """
    base_dir = source.resolve().parent if source is not None else Path.cwd()
    ctx = _Context(source=source, base_dir=base_dir)
    if isinstance(data, Mapping) and data.get("type") == "hybrid":
        raise ctx.error(None, "a hybrid robot (arm + soft part, core/model/hybrid_description.py): it runs "
                              "in the hybrid graph (soft-inverse-ros demo --robot NAME), not in the soft-robot nodes")
    r = _Reader(data, "", ctx)
    if r.has("length_unit"):
        try:
            ctx.length_scale = units.length_unit_scale(r.raw("length_unit"), key="length_unit")
        except units.UnitError as exc:
            raise ctx.error(None, str(exc)) from None
    name = r.string("name", source.stem if source is not None else "robot")
    frame_id = r.string("frame_id", "base_link")
    r.raw("description", None)  # free text, for humans
    registration = r.raw("mocap_registration", None)  # used by the motion-capture node
    if registration is not None:
        from soft_inverse_ros.core.mocap.registration import FrameRegistration

        try:
            FrameRegistration.from_dict(registration, where="mocap_registration")
        except ValueError as exc:
            raise ctx.error("mocap_registration", str(exc)) from None
    mesh = _parse_mesh(r.raw("mesh"), ctx, mesh_override)
    material = _parse_material(r.raw("material"), ctx)
    gravity = r.vector("gravity", units.ACCELERATION, (0.0, 0.0, -9.81))
    if float(np.linalg.norm(gravity)) > 100.0:
        raise ctx.error(
            "gravity",
            f"|gravity| = {np.linalg.norm(gravity):.4g} m/s^2 is implausible; bare numbers are m/s^2 "
            "(write e.g. '[0, 0, -9810] mm/s^2')",
        )
    fixed = _parse_fixed(r.raw("fixed"), ctx)
    actuators = tuple(
        _parse_actuator(a, f"actuators[{i}]", ctx)
        for i, a in enumerate(_as_list(r.raw("actuators"), "actuators", ctx))
    )
    effectors = tuple(
        _parse_effector(e, f"effectors[{i}]", ctx)
        for i, e in enumerate(_as_list(r.raw("effectors"), "effectors", ctx))
    )
    collision = _parse_collision(r.raw("collision", None), ctx)
    r.finish()
    return _wrap(
        ctx,
        None,  # type: ignore[arg-type]
        lambda: RobotDescription(
            name=name,
            source=source,
            mesh=mesh,
            material=material,
            gravity=gravity,
            fixed=fixed,
            actuators=actuators,
            effectors=effectors,
            frame_id=frame_id,
            collision=collision,
        ),
    )


def load_robot_description(
    name_or_path: str | os.PathLike[str], *, mesh_override: Path | None = None
) -> RobotDescription:
    """Read a robot description YAML (a file path, or a name in ``config/robots``).

    Args:
        name_or_path: ``"diamond"``, ``"builtin_diamond"`` or a path to a YAML file.
        mesh_override: Use this mesh file instead of the description's (same unit and
            transform).

    Raises:
        DescriptionError: unreadable YAML or invalid content (names file and key).
        soft_inverse_ros.core.config_files.ConfigNotFoundError: unknown name / missing file.
    """
    path, data = read_description_yaml(name_or_path)
    return parse_robot_description(data, source=path, mesh_override=mesh_override)


def read_description_yaml(name_or_path: str | Path) -> tuple[Path, Any]:
    """(path, parsed YAML) of a robot description: a path, or a name in ``config/robots``.

    Raises:
        DescriptionError: unreadable file or YAML.
        soft_inverse_ros.core.config_files.ConfigNotFoundError: unknown name / missing file.
    """
    import yaml

    from soft_inverse_ros.core.config_files import resolve_robot

    path = resolve_robot(name_or_path)
    try:
        return path, load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DescriptionError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise DescriptionError(f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at {exc.start}): "
                               "a robot description is a YAML text file") from None
    except yaml.YAMLError as exc:
        raise DescriptionError(f"{path}: not YAML ({yaml_problem(exc)})") from None


__all__ = [
    "Actuator",
    "Box",
    "CableSpec",
    "CavitySpec",
    "DescriptionError",
    "EffectorSpec",
    "FixedSpec",
    "ForceSpec",
    "Material",
    "MeshError",
    "MeshSpec",
    "RobotDescription",
    "load_robot_description",
    "parse_robot_description",
]


#: plausible ranges for a soft robot (SI): outside them a unit is most likely wrong
PLAUSIBLE_SIZE_M = (1e-3, 3.0)  # bounding-box diagonal
PLAUSIBLE_MASS_KG = (1e-3, 100.0)
PLAUSIBLE_YOUNG_PA = (1e3, 1e10)


def _obstacle_extent(o: "ObstacleSpec") -> tuple[np.ndarray, np.ndarray] | None:
    """The axis-aligned bounds (lower, upper) [m] of a bounded obstacle (None: a plane)."""
    if o.kind == "sphere":
        c, r = np.asarray(o.get("centre"), float), float(o.get("radius"))
        return c - r, c + r
    if o.kind == "box":
        return np.asarray(o.get("lower"), float), np.asarray(o.get("upper"), float)
    if o.kind == "mesh":
        v = np.asarray(o.get("geometry").vertices, float)
        return v.min(axis=0), v.max(axis=0)
    return None


def plausibility_warnings(size_m: float, mass_kg: float, young_pa: float) -> list[str]:
    """Warnings (empty when plausible) for a robot of bounding-box diagonal ``size_m``,
    mass ``mass_kg`` and Young's modulus ``young_pa``: a mesh in metres read as
    millimetres gives a 1e-14 m³ robot, a millimetre mesh declared in metres a 1e8 kg one."""
    out = []
    checks = (("size (bounding-box diagonal)", size_m, PLAUSIBLE_SIZE_M, "m",
               "check the mesh's length_unit / --unit"),
              ("mass", mass_kg, PLAUSIBLE_MASS_KG, "kg",
               "check the mesh's length unit and the density or total_mass"),
              ("Young's modulus", young_pa, PLAUSIBLE_YOUNG_PA, "Pa",
               "check its unit, e.g. '180 kPa'"))
    for what, value, (lo, hi), unit, hint in checks:
        if not (lo <= value <= hi):
            out.append(f"implausible {what} for a soft robot: {value:.3g} {unit} (expected "
                       f"{lo:g}..{hi:g} {unit}): {hint}")
    return out
