"""Actuators and effectors as constraint rows over the mesh node DOFs.

Each constraint is a function of its points, which are mapped barycentrically into the
mesh (:mod:`soft_inverse_ros.core.model.mapping`). It provides, at the current geometry x:

- ``values(points)``: its rows (actuator stroke δ_a, or effector coordinates), and
- ``point_gradient(points)``: d(rows)/d(points), shape (n_rows, k, 3).

A :class:`ConstraintSet` stacks constraints, maps all their points at once and turns
the point gradients into Jacobians over the free DOFs, ``J = G Φ`` (dense, n_rows × n_free),
recomputed from the current geometry at every call.

Sign conventions (all SI; efforts λ act on the nodes as ``J_aᵀ λ``):

- cable: stroke ``δ = L0 − L(x)`` [m] (shortening, positive when pulled), ``J = −dL/dx``;
  ``λ ≥ 0`` [N] is the cable tension, pulling the points along the cable towards the pull
  point.
- linear force along a direction d: ``δ = (p − p0) · d`` [m], force ``λ d`` [N] at p.
- point-to-point force: ``δ = D0 − |p1 − p0|`` [m], ``λ > 0`` pulls the points together.
- pressure cavity: ``δ = V(x) − V0`` [m³] (volume growth), ``J = dV/dx`` from area-weighted
  normals, force ``p dV/dx`` for pressure ``p`` [Pa].
- effector: rows are point coordinates [m] (or of their weighted barycentre) in the mesh
  frame.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from soft_inverse_ros.core.model.kernel_choice import compiled_module
from soft_inverse_ros.core.model.mapping import BarycentricMapping
from soft_inverse_ros.core.model.snapshot import ActuatorKind

__all__ = [
    "Constraint",
    "CableActuator",
    "ForceActuator",
    "PressureActuator",
    "Effector",
    "ConstraintSet",
    "AXES",
]

_LOG = logging.getLogger(__name__)
AXES = ("x", "y", "z")


class Constraint(ABC):
    """Rows defined on k mapped points.

    Attributes:
        name: constraint name.
        mapping: where its k points sit in the mesh.
        row_names: one name per row.
    """

    name: str
    mapping: BarycentricMapping
    row_names: tuple[str, ...]
    #: rows are linear in the point positions (constant Jacobian)
    linear: bool = False

    @property
    def n_rows(self) -> int:
        return len(self.row_names)

    @abstractmethod
    def values(self, points: np.ndarray) -> np.ndarray:
        """Row values (n_rows,) for mapped point positions (k, 3) [m]."""

    @abstractmethod
    def point_gradient(self, points: np.ndarray) -> np.ndarray:
        """d(values)/d(points) as (n_rows, k, 3)."""

    def point_hessian(self, points: np.ndarray) -> np.ndarray | None:
        """d²(value)/d(points)² (3k, 3k) of a one-row constraint, or None if zero/unmodelled."""
        return None


class Actuator(Constraint):
    """One actuator: a single row whose value is the stroke δ_a."""

    kind: ActuatorKind

    def __init__(self, name: str, mapping: BarycentricMapping) -> None:
        self.name = name
        self.mapping = mapping
        self.row_names = (name,)
        self.rest_value = 0.0

    def stroke(self, points: np.ndarray) -> float:
        return float(self.values(points)[0])


class CableActuator(Actuator):
    """A cable through mapped points, pulled from a point fixed in space (or its first point).

    Length ``L = |p_0 − pull| + Σ |p_{i+1} − p_i|`` (without the first term when no pull
    point is given); stroke ``δ = L0 − L`` [m]; effort: tension [N] (≥ 0 pulls).
    """

    kind = ActuatorKind.CABLE

    def __init__(
        self, name: str, mapping: BarycentricMapping, rest_points: np.ndarray,
        pull_point: np.ndarray | None = None,
    ) -> None:
        super().__init__(name, mapping)
        self.pull_point = None if pull_point is None else np.asarray(pull_point, float).reshape(3)
        if mapping.n_points + (self.pull_point is not None) < 2:
            raise ValueError(f"cable {name!r} needs at least two points (with the pull point)")
        self.rest_length = self.length(rest_points)
        if not self.rest_length > 0:
            raise ValueError(f"cable {name!r} has zero rest length")

    def _path(self, points: np.ndarray) -> np.ndarray:
        if self.pull_point is None:
            return points
        return np.vstack((self.pull_point[None, :], points))

    def length(self, points: np.ndarray) -> float:
        """Current cable length L [m]."""
        return float(np.linalg.norm(np.diff(self._path(points), axis=0), axis=1).sum())

    def values(self, points: np.ndarray) -> np.ndarray:
        return np.array([self.rest_length - self.length(points)])

    def point_gradient(self, points: np.ndarray) -> np.ndarray:
        seg = np.diff(self._path(points), axis=0)
        norm = np.linalg.norm(seg, axis=1)
        unit = seg / np.where(norm > 0, norm, 1.0)[:, None]
        unit[norm == 0] = 0.0
        # dL/dp_j = u_{j-1} − u_j over the path (segment j-1 ends at p_j, segment j starts).
        grad_path = np.zeros((len(seg) + 1, 3))
        grad_path[1:] += unit
        grad_path[:-1] -= unit
        grad = grad_path[1:] if self.pull_point is not None else grad_path
        return -grad[None, :, :]

    def point_hessian(self, points: np.ndarray) -> np.ndarray:
        """d²δ/dp² = −d²L/dp²: each segment adds ∓(I − u uᵀ)/l on its end points."""
        path = self._path(points)
        seg = np.diff(path, axis=0)
        length = np.linalg.norm(seg, axis=1)
        n = len(path)
        h = np.zeros((3 * n, 3 * n))
        for s_idx in range(len(seg)):  # few segments per cable
            if length[s_idx] <= 0:
                continue
            u = seg[s_idx] / length[s_idx]
            block = (np.eye(3) - np.outer(u, u)) / length[s_idx]
            a, b = 3 * s_idx, 3 * (s_idx + 1)
            h[a:a + 3, a:a + 3] -= block
            h[b:b + 3, b:b + 3] -= block
            h[a:a + 3, b:b + 3] += block
            h[b:b + 3, a:a + 3] += block
        return h[3:, 3:] if self.pull_point is not None else h


class ForceActuator(Actuator):
    """A linear force at a mapped point along a fixed direction, or between two mapped points.

    With a direction d (unit): stroke ``δ = (p − p_rest) · d`` [m], force ``λ d`` [N].
    With two points: stroke ``δ = D0 − |p1 − p0|`` [m] (shortening); λ > 0 pulls together.
    """

    kind = ActuatorKind.FORCE

    def __init__(
        self, name: str, mapping: BarycentricMapping, rest_points: np.ndarray,
        direction: np.ndarray | None = None,
    ) -> None:
        super().__init__(name, mapping)
        rest_points = np.asarray(rest_points, float).reshape(-1, 3)
        if direction is not None:
            if mapping.n_points != 1:
                raise ValueError(f"force {name!r} with a direction takes exactly one point")
            d = np.asarray(direction, float).reshape(3)
            n = np.linalg.norm(d)
            if not n > 0:
                raise ValueError(f"force {name!r}: direction must be non-zero")
            self.direction = d / n
            self.rest_point = rest_points[0].copy()
            self.linear = True
        else:
            if mapping.n_points != 2:
                raise ValueError(f"force {name!r} needs a direction or a second point")
            self.direction = None
            self.rest_distance = float(np.linalg.norm(rest_points[1] - rest_points[0]))
            if not self.rest_distance > 0:
                raise ValueError(f"force {name!r}: its two points coincide")

    def values(self, points: np.ndarray) -> np.ndarray:
        if self.direction is not None:
            return np.array([float((points[0] - self.rest_point) @ self.direction)])
        return np.array([self.rest_distance - float(np.linalg.norm(points[1] - points[0]))])

    def point_gradient(self, points: np.ndarray) -> np.ndarray:
        if self.direction is not None:
            return self.direction.reshape(1, 1, 3).copy()
        u = points[1] - points[0]
        u = u / np.linalg.norm(u)
        return np.stack((u, -u))[None, :, :]

    def point_hessian(self, points: np.ndarray) -> np.ndarray | None:
        if self.direction is not None:
            return None  # linear in the positions
        d = points[1] - points[0]
        dist = np.linalg.norm(d)
        u = d / dist
        block = (np.eye(3) - np.outer(u, u)) / dist
        return -np.block([[block, -block], [-block, block]])


class PressureActuator(Actuator):
    """A closed triangle surface (cavity wall) mapped into the volume.

    Volume ``V = Σ_t p_a · (p_b × p_c) / 6`` with triangles oriented so that V0 > 0;
    stroke ``δ = V − V0`` [m³]; gradient ``dV/dp`` from the area-weighted triangle normals
    (each vertex gets a third of ``(p_b − p_a) × (p_c − p_a) / 2`` of every incident triangle,
    exact for a closed surface); effort: pressure [Pa].
    """

    kind = ActuatorKind.PRESSURE

    def __init__(
        self, name: str, mapping: BarycentricMapping, rest_points: np.ndarray,
        triangles: np.ndarray,
    ) -> None:
        super().__init__(name, mapping)
        tri = np.asarray(triangles, dtype=np.int64)
        if tri.ndim != 2 or tri.shape[1] != 3 or len(tri) == 0:
            raise ValueError(f"cavity {name!r}: triangles must be (T, 3)")
        if tri.min() < 0 or tri.max() >= mapping.n_points:
            raise ValueError(f"cavity {name!r}: triangles reference missing vertices")
        self.triangles = tri
        rest_points = np.asarray(rest_points, float).reshape(-1, 3)
        v0 = self.volume(rest_points)
        if v0 < 0:
            _LOG.info("cavity %s: triangles point inwards, flipping them", name)
            self.triangles = tri[:, [0, 2, 1]].copy()
            v0 = -v0
        if not v0 > 0:
            raise ValueError(f"cavity {name!r} encloses no volume (is the surface closed?)")
        self.rest_volume = v0
        self._scatter = sp.csr_matrix(
            (np.ones(3 * len(tri)), (self.triangles.ravel(), np.arange(3 * len(tri)))),
            shape=(mapping.n_points, 3 * len(tri)),
        )

    def volume(self, points: np.ndarray) -> float:
        """Enclosed volume [m³] for vertex positions (k, 3) [m]."""
        p = points[self.triangles]
        return float(np.einsum("ta,ta->", p[:, 0], np.cross(p[:, 1], p[:, 2])) / 6.0)

    def values(self, points: np.ndarray) -> np.ndarray:
        return np.array([self.volume(points) - self.rest_volume])

    def point_gradient(self, points: np.ndarray) -> np.ndarray:
        p = points[self.triangles]
        area_normal = 0.5 * np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])  # (T, 3)
        per_corner = np.repeat(area_normal / 3.0, 3, axis=0)  # (3T, 3)
        return (self._scatter @ per_corner)[None, :, :]


class Effector(Constraint):
    """Effector rows: coordinates [m] of points, or of their weighted barycentre.

    Args:
        mode: ``"points"`` (rows per point and axis) or ``"barycenter"``.
        axes: subset of ``"x"``, ``"y"``, ``"z"`` kept, in order.

    Row names: ``tip.x`` (one point, or the barycentre) or ``tip[2].x`` (several points).
    """

    def __init__(
        self, name: str, mapping: BarycentricMapping, *, weights: np.ndarray | None = None,
        mode: str = "points", axes: Sequence[str] = AXES,
    ) -> None:
        self.name = name
        self.mapping = mapping
        self.linear = True
        axes = tuple(axes)
        bad = [a for a in axes if a not in AXES]
        if bad or not axes or len(set(axes)) != len(axes):
            raise ValueError(f"effector {name!r}: axes must be distinct of x, y, z, got {axes}")
        self.axes = np.array([AXES.index(a) for a in axes])
        k = mapping.n_points
        if mode not in ("points", "barycenter"):
            raise ValueError(f"effector {name!r}: mode must be 'points' or 'barycenter'")
        self.mode = mode
        w = np.ones(k) if weights is None else np.asarray(weights, float).reshape(-1)
        if len(w) != k or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError(f"effector {name!r}: need {k} finite non-negative weights, sum > 0")
        self.weights = w / w.sum()
        if mode == "barycenter" or k == 1:
            self.row_names = tuple(f"{name}.{a}" for a in axes)
            self._grad = np.zeros((len(axes), k, 3))
            for r, a in enumerate(self.axes):
                self._grad[r, :, a] = self.weights
        else:
            self.row_names = tuple(f"{name}[{i}].{a}" for i in range(k) for a in axes)
            self._grad = np.zeros((k * len(axes), k, 3))
            for i in range(k):
                for r, a in enumerate(self.axes):
                    self._grad[i * len(axes) + r, i, a] = 1.0

    def values(self, points: np.ndarray) -> np.ndarray:
        return np.einsum("rka,ka->r", self._grad, points)

    def point_gradient(self, points: np.ndarray) -> np.ndarray:
        return self._grad


def _cable_kernel():
    """The compiled :func:`.cable_kernels.strokes_and_gradient`, or None for the numpy path
    (``SOFT_INVERSE_ROS_FEM_KERNELS=numpy``, or no numba)."""
    module = compiled_module("cable_kernels")
    return None if module is None else module.strokes_and_gradient


class _CablePaths:
    """All the cables of a :class:`ConstraintSet` evaluated at once (one pass of array
    operations instead of a few small ones per cable): the same lengths, strokes and point
    gradients as :meth:`CableActuator.values` and :meth:`CableActuator.point_gradient`.

    Each cable's path (its pull point if any, then its points) is a run of segments; a
    segment joins two entries of the stacked array (mapped points, then the pull points).
    A point ends at most one segment and starts at most one, so the gradient is two
    scatters without repeated indices.

    With numba (unless ``SOFT_INVERSE_ROS_FEM_KERNELS=numpy``, as for the FEM's kernels)
    both run as one compiled loop over the segments (:mod:`.cable_kernels`); ``kernels``
    says which path runs.
    """

    def __init__(self, cables: list[tuple[int, CableActuator, slice]], n_points: int) -> None:
        self._kernel = _cable_kernel()
        #: "numba" (compiled) or "numpy" (the reference path)
        self.kernels = "numpy" if self._kernel is None else "numba"
        self._no_gradient = np.zeros((0, 0))
        self.rows = np.array([row for row, _, _ in cables], dtype=np.int64)
        pulls = [c.pull_point for _, c, _ in cables if c.pull_point is not None]
        self._pulls = np.array(pulls, float).reshape(-1, 3)
        start, end, owner = [], [], []
        n_pull = 0
        for i, (_, c, s) in enumerate(cables):
            path = list(range(s.start, s.stop))
            if c.pull_point is not None:
                path.insert(0, n_points + n_pull)  # the pull point sits after the mapped points
                n_pull += 1
            start += path[:-1]
            end += path[1:]
            owner += [i] * (len(path) - 1)
        self._start = np.array(start, dtype=np.int64)
        self._end = np.array(end, dtype=np.int64)
        self._owner = np.array(owner, dtype=np.int64)
        self._rest = np.array([c.rest_length for _, c, _ in cables])
        # the segments whose end (start) is a mapped point, not a pull point: the gradient's entries
        self._end_seg = np.flatnonzero(self._end < n_points)
        self._start_seg = np.flatnonzero(self._start < n_points)

    def _segments(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        stacked = np.vstack((points, self._pulls)) if self._pulls.size else points
        seg = stacked[self._end] - stacked[self._start]
        return seg, np.sqrt(np.einsum("sa,sa->s", seg, seg))

    def strokes(self, points: np.ndarray) -> np.ndarray:
        """Strokes δ = L0 − L (n_cables,) [m] at the mapped points (K, 3) [m]."""
        if self._kernel is not None:
            out = np.empty(self._rest.size)
            self._kernel(np.ascontiguousarray(points, dtype=float), self._pulls, self._start, self._end,
                         self._owner, self.rows, self._rest, self._no_gradient, out)
            return out
        _, norm = self._segments(points)
        return self._rest - np.bincount(self._owner, norm, minlength=self._rest.size)

    def strokes_and_gradient(self, points: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Strokes (n_cables,) [m]; writes ∂δ/∂points into the cables' rows of ``g``
        (n_rows, 3K), which must hold zeros there."""
        if self._kernel is not None and g.flags.c_contiguous and g.dtype == np.float64:
            out = np.empty(self._rest.size)
            self._kernel(np.ascontiguousarray(points, dtype=float), self._pulls, self._start, self._end,
                         self._owner, self.rows, self._rest, g, out)
            return out
        seg, norm = self._segments(points)
        unit = seg / np.where(norm > 0, norm, 1.0)[:, None]  # a zero-length segment: seg = 0, unit = 0
        rows = self.rows[self._owner]
        axes = np.arange(3)
        e = self._end_seg  # δ = L0 − L: dδ/dp_end = −u, dδ/dp_start = +u
        g[rows[e, None], 3 * self._end[e, None] + axes] -= unit[e]
        s = self._start_seg
        g[rows[s, None], 3 * self._start[s, None] + axes] += unit[s]
        return self._rest - np.bincount(self._owner, norm, minlength=self._rest.size)


class ConstraintSet:
    """Constraints stacked into rows over the free DOFs of one mesh.

    Args:
        constraints: the constraints, rows in order.
        free_dofs: retained DOF indices into the flattened (3N,) positions.
    """

    def __init__(self, constraints: Sequence[Constraint], free_dofs: np.ndarray) -> None:
        self.constraints = tuple(constraints)
        names = [c.name for c in self.constraints]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate constraint names in {names}")
        self.free_dofs = np.asarray(free_dofs, dtype=np.int64)
        self.row_names = tuple(n for c in self.constraints for n in c.row_names)
        self.n_rows = len(self.row_names)
        counts = [c.mapping.n_points for c in self.constraints]
        self._point_slices = []
        start = 0
        for n in counts:
            self._point_slices.append(slice(start, start + n))
            start += n
        self.n_points = start
        self._constant_jt: np.ndarray | None = None  # cached Jᵀ when every row is linear
        rows = np.cumsum([0] + [c.n_rows for c in self.constraints])[:-1]
        placed = list(zip(rows.tolist(), self.constraints, self._point_slices))
        # the cables in one batched pass; the other constraints one by one
        cables = [item for item in placed if type(item[1]) is CableActuator]
        self._cables = _CablePaths(cables, self.n_points) if cables else None
        self._others = [item for item in placed if type(item[1]) is not CableActuator]
        if self.constraints:
            phi = sp.vstack([c.mapping.matrix() for c in self.constraints]).tocsr()
            self._phi = phi  # (3K, 3N)
            self._phi_free_t = phi[:, self.free_dofs].T.tocsr()  # (n_free, 3K)
        else:
            self._phi = None
            self._phi_free_t = None

    def __len__(self) -> int:
        return len(self.constraints)

    def points(self, positions: np.ndarray) -> np.ndarray:
        """All mapped points (K, 3) [m] at node positions (N, 3)."""
        if self._phi is None:
            return np.zeros((0, 3))
        return (self._phi @ np.asarray(positions, float).reshape(-1)).reshape(-1, 3)

    def values(self, positions: np.ndarray) -> np.ndarray:
        """Stacked row values (n_rows,) at node positions (N, 3) [m]."""
        pts = self.points(positions)
        if not self.constraints:
            return np.zeros(0)
        values = np.empty(self.n_rows)
        if self._cables is not None:
            values[self._cables.rows] = self._cables.strokes(pts)
        for row, c, s in self._others:
            values[row:row + c.n_rows] = c.values(pts[s])
        return values

    def values_and_jacobian_t(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values (n_rows,), Jᵀ (n_free, n_rows)) at the current geometry."""
        n_free = len(self.free_dofs)
        if not self.constraints:
            return np.zeros(0), np.zeros((n_free, 0))
        if self._constant_jt is not None:
            return self.values(positions), self._constant_jt
        values, g = self.values_and_point_gradient(positions)
        jt = np.asarray(self._phi_free_t @ g.T)
        if all(c.linear for c in self.constraints):
            jt.setflags(write=False)
            self._constant_jt = jt
        return values, jt

    def values_and_point_gradient(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values (n_rows,), ∂values/∂points (n_rows, 3K)) at node positions (N, 3) [m]:
        the gradient with respect to the K mapped points (x, y, z interleaved), before the
        mapping to the nodes (Jᵀ = points_map_t · gradientᵀ)."""
        if not self.constraints:
            return np.zeros(0), np.zeros((0, 0))
        pts = self.points(positions)
        values = np.empty(self.n_rows)
        g = np.zeros((self.n_rows, 3 * self.n_points))
        if self._cables is not None:
            values[self._cables.rows] = self._cables.strokes_and_gradient(pts, g)
        for row, c, s in self._others:
            p = pts[s]
            values[row:row + c.n_rows] = c.values(p)
            g[row : row + c.n_rows, 3 * s.start : 3 * s.stop] = c.point_gradient(p).reshape(c.n_rows, -1)
        return values, g

    def points_basis(self, basis: np.ndarray) -> np.ndarray:
        """The mapped points' displacements (3K, r) [m per unit coordinate] under the
        free-DOF displacements ``basis`` (n_free, r): a reduced model's Jacobian is then
        Φᵀ Jᵀ = points_basisᵀ · gradientᵀ (:meth:`values_and_point_gradient`), r × n_rows
        work instead of n_free × n_rows."""
        if self._phi_free_t is None:
            return np.zeros((0, basis.shape[1]))
        return np.asarray(self._phi_free_t.T @ basis)

    def jacobian_t(self, positions: np.ndarray) -> np.ndarray:
        """Jᵀ (n_free, n_rows) over the free DOFs at the current geometry."""
        return self.values_and_jacobian_t(positions)[1]

    def load_stiffness(self, positions: np.ndarray, efforts: np.ndarray) -> sp.csr_matrix | None:
        """Hessian of −λ·δ(x) over the free DOFs (n_free, n_free), e.g. cable geometric
        stiffness (one-row constraints only; cavities' term is not modelled); None if zero."""
        efforts = np.asarray(efforts, float).reshape(-1)
        if efforts.shape != (self.n_rows,):
            raise ValueError(f"expected {self.n_rows} efforts (one per row), got {efforts.size}")
        pts = self.points(positions)
        blocks = []
        any_term = False
        row = 0
        for c, s_ in zip(self.constraints, self._point_slices):
            lam = efforts[row]
            row += c.n_rows
            h = c.point_hessian(pts[s_]) if c.n_rows == 1 and lam != 0.0 else None
            if h is None:
                blocks.append(sp.csr_matrix((3 * c.mapping.n_points, 3 * c.mapping.n_points)))
            else:
                blocks.append(sp.csr_matrix(-lam * h))
                any_term = True
        if not any_term:
            return None
        h_all = sp.block_diag(blocks, format="csr")
        return (self._phi_free_t @ h_all @ self._phi_free_t.T).tocsr()
