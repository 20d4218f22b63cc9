"""Effector target trajectories: hold, line, square (the ICRA 2015 experiment), circle,
and waypoints from a CSV file, traversed at a constant speed.

Every trajectory is a polyline (or a circle) in the robot base frame [m] parametrized by
arc length, so the target moves at ``speed`` [m/s] and the time to complete one lap is
``length / speed``. A trajectory starts at ``center`` and first moves to its first
waypoint (the approach is part of the path). With ``loop`` the closed shapes repeat;
otherwise the target holds the last point.

CSV waypoints: one point per row, columns ``x,y,z`` (a header line is allowed), in the
unit given by ``csv_unit_scale`` [m per file unit]; optional fourth column ``t`` [s]
makes the waypoints timed (linear interpolation in time, speed ignored; a point repeated at
two times is held between them). Blank lines and ``#`` comments are skipped; the first other
line may be a header.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SHAPES = ("hold", "line", "square", "circle", "csv")


@dataclass(frozen=True)
class TrajectoryConfig:
    """Trajectory parameters (SI, robot base frame).

    Attributes:
        shape: one of :data:`SHAPES`.
        center: (3,) centre of the shape and start point [m] (a ``csv`` path starts at its
            first waypoint instead).
        size: side of the square, diameter of the circle, length of the line [m].
        speed: target speed along the path [m/s].
        plane_normal: (3,) normal of the plane of the square/circle (default z: the
            horizontal xy plane); the line goes along the plane's first in-plane axis.
        loop: repeat the closed shapes (line goes back and forth; a ``csv`` path whose last
            waypoint is its first).
        csv_file: waypoint file for ``shape == "csv"``.
        csv_unit_scale: metres per unit of the CSV coordinates.
    """

    shape: str = "square"
    center: tuple[float, float, float] = (0.0, 0.0, 0.0)
    size: float = 0.02
    speed: float = 0.005
    plane_normal: tuple[float, float, float] = (0.0, 0.0, 1.0)
    loop: bool = True
    csv_file: str = ""
    csv_unit_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"trajectory shape '{self.shape}' unknown; expected one of {SHAPES}")
        if len(self.center) != 3 or not all(math.isfinite(c) for c in self.center):
            raise ValueError(f"trajectory center must be 3 finite numbers, got {self.center}")
        if not (math.isfinite(self.speed) and self.speed > 0):
            raise ValueError(f"trajectory speed must be > 0 m/s, got {self.speed}")
        if self.shape in ("line", "square", "circle") and not (
            math.isfinite(self.size) and self.size > 0
        ):
            raise ValueError(f"trajectory size must be > 0 m for '{self.shape}', got {self.size}")
        normal = np.asarray(self.plane_normal, dtype=float)
        if normal.shape != (3,) or not np.all(np.isfinite(normal)) or not np.linalg.norm(normal) > 0:
            raise ValueError(f"plane_normal must be a finite non-zero 3-vector, got {self.plane_normal}")
        if self.shape == "csv" and not self.csv_file:
            raise ValueError("trajectory shape 'csv' needs csv_file")
        if not (math.isfinite(self.csv_unit_scale) and self.csv_unit_scale > 0):
            raise ValueError(f"csv_unit_scale must be > 0, got {self.csv_unit_scale}")


def _plane_axes(normal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two orthonormal in-plane axes; for the z normal they are x and y."""
    n = normal / np.linalg.norm(normal)
    seed = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    u = seed - n * (seed @ n)
    u /= np.linalg.norm(u)
    return u, np.cross(n, u)


#: a waypoint farther than this from the base frame's origin [m] is a unit mistake (a soft
#: robot's workspace is well under a metre: 262 "m" was a file in mm read as metres)
MAX_WAYPOINT_M = 10.0
#: header names of a trajectory CSV's columns
_CSV_COLUMNS = ("x", "y", "z", "t")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_csv_waypoints(path: str | Path, unit_scale: float) -> tuple[np.ndarray, np.ndarray | None]:
    """Waypoints (k,3) [m] and optional times (k,) [s] from a CSV file: rows of numbers
    ``x,y,z`` or ``x,y,z,t`` (file unit × ``unit_scale``), optionally under a header naming
    those columns in any order (``y,x,z`` is read as such; other names are refused: a
    spreadsheet's index column or ``x_mm`` would otherwise be read as coordinates). A first
    line with any number in it is data, never a header (a mistyped ``O.0`` is an error).

    Raises:
        ValueError: one line naming the file (and the line): missing, unreadable, empty, a
            bad header or row, non-finite values, times not increasing, a waypoint beyond
            :data:`MAX_WAYPOINT_M` (set ``csv_unit_scale``).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"trajectory CSV not found: {path}")
    rows: list[list[float]] = []
    order: list[int] | None = None  # file column -> x, y, z, t
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:  # (a BOM from a spreadsheet)
            for lineno, row in enumerate(csv.reader(handle), start=1):
                cells = [c.strip() for c in row]
                while cells and not cells[-1]:  # a trailing comma (spreadsheet exports)
                    cells.pop()
                if not any(cells) or cells[0].startswith("#"):
                    continue
                if not rows and order is None and not any(_is_number(c) for c in cells):
                    names = [c.lower() for c in cells]
                    unknown = [c for c in names if c not in _CSV_COLUMNS]
                    if unknown or len(set(names)) != len(names) or not {"x", "y", "z"} <= set(names):
                        raise ValueError(f"{path}:{lineno}: header {cells}: expected the columns x, y, z "
                                         "and optionally t (in any order; units by csv_unit_scale)")
                    order = [_CSV_COLUMNS.index(c) for c in names]
                    continue
                try:
                    values = [float(c) for c in cells]
                except ValueError:
                    raise ValueError(f"{path}:{lineno}: not numbers: {row}") from None
                if order is not None:
                    if len(values) != len(order):
                        raise ValueError(f"{path}:{lineno}: {len(values)} values under a header of {len(order)}")
                    by_name = [0.0] * len(order)
                    for value, column in zip(values, order):
                        by_name[column] = value
                    values = by_name
                rows.append(values)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not rows:
        raise ValueError(f"{path}: no waypoints")
    widths = {len(r) for r in rows}
    if len(widths) != 1 or widths.pop() not in (3, 4):
        raise ValueError(f"{path}: every row needs x,y,z or x,y,z,t")
    data = np.asarray(rows, dtype=float)
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{path}: non-finite values")
    points = data[:, :3] * unit_scale
    times = data[:, 3] if data.shape[1] == 4 else None
    if times is not None and np.any(np.diff(times) <= 0):
        raise ValueError(f"{path}: times must increase strictly")
    far = float(np.abs(points).max())
    if far > MAX_WAYPOINT_M:
        raise ValueError(f"{path}: a waypoint {far:g} m from the base frame's origin (csv_unit_scale "
                         f"{unit_scale:g}): a file in mm read as metres? (set csv_unit_scale: 0.001)")
    return points, times


class Trajectory:
    """Target position as a function of time since the trajectory started."""

    def __init__(self, config: TrajectoryConfig) -> None:
        self.config = config
        center = np.asarray(config.center, dtype=float)
        u, v = _plane_axes(np.asarray(config.plane_normal, dtype=float))
        half = config.size / 2.0
        self._times: np.ndarray | None = None
        self._circle: tuple[np.ndarray, np.ndarray, np.ndarray, float] | None = None
        closed = False
        approach = True  # the first segment leads from the centre onto the shape
        if config.shape == "hold":
            points = center[None, :]
        elif config.shape == "line":
            # back and forth from the centre: no approach, a lap is the whole out-and-back
            points = np.stack([center, center + config.size * u, center])
            closed = True
            approach = False
        elif config.shape == "square":
            corners = [center + half * (su * u + sv * v) for su, sv in
                       ((1, 1), (-1, 1), (-1, -1), (1, -1), (1, 1))]
            points = np.vstack([center[None, :], np.asarray(corners)])
            closed = True
        elif config.shape == "circle":
            self._circle = (center, u, v, half)
            points = center[None, :]
        else:
            points, times = read_csv_waypoints(config.csv_file, config.csv_unit_scale)
            if times is not None:
                self._times = times - times[0]
            # a path that ends where it starts is closed: ``loop`` repeats it (an open one
            # plays once and holds its last point: looping it would jump the target)
            closed = len(points) > 2 and bool(np.linalg.norm(points[-1] - points[0]) <= 1e-9)
            approach = False
        self._points = points
        seg = np.linalg.norm(np.diff(points, axis=0), axis=1)
        self._arc = np.concatenate([[0.0], np.cumsum(seg)])
        # Closed shapes loop over the part after the approach segment.
        self._loop_start = self._arc[1] if closed and approach else 0.0
        self._closed = closed

    @property
    def lap_time(self) -> float:
        """Time of one pass over the shape (after the approach) [s]."""
        if self._circle is not None:
            return 2 * math.pi * self._circle[3] / self.config.speed
        if self._times is not None:
            return float(self._times[-1])
        return float(self._arc[-1] - self._loop_start) / self.config.speed

    @property
    def duration(self) -> float:
        """Approach + one lap [s] (the time after which a non-looping path holds)."""
        if self._circle is not None:
            return (self._circle[3] + 2 * math.pi * self._circle[3]) / self.config.speed
        if self._times is not None:
            return float(self._times[-1])
        return float(self._arc[-1]) / self.config.speed

    def position(self, t: float) -> np.ndarray:
        """Target (3,) [m] at time ``t`` [s] since start (t < 0 gives the start)."""
        t = max(0.0, float(t))
        if self._times is not None:
            if self.config.loop and self._closed and t > self._times[-1]:
                t = t % self._times[-1]
            return _interp_rows(t, self._times, self._points)
        s = t * self.config.speed
        if self._circle is not None:
            center, u, v, radius = self._circle
            if s < radius:  # approach: centre -> circle start along u
                return center + s * u
            angle = (s - radius) / radius
            if not self.config.loop and angle > 2 * math.pi:
                angle = 2 * math.pi
            return center + radius * (math.cos(angle) * u + math.sin(angle) * v)
        total = self._arc[-1]
        if total <= 0.0:
            return self._points[0].copy()
        if s > total:
            if self.config.loop and self._closed:
                lap = total - self._loop_start
                s = self._loop_start + (s - self._loop_start) % lap
            else:
                s = total
        return _interp_rows(s, self._arc, self._points)


def _interp_rows(x: float, xp: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``rows`` (n, 3) interpolated linearly at ``x`` over the non-decreasing ``xp`` (n,),
    clamped at the ends: :func:`numpy.interp` per column, by one binary search (a million
    waypoints cost microseconds, not numpy's copy of each column per call)."""
    if x <= xp[0]:
        return rows[0].copy()
    if x >= xp[-1]:
        return rows[-1].copy()
    i = int(np.searchsorted(xp, x, side="right"))  # xp[i-1] <= x < xp[i]
    w = (x - xp[i - 1]) / (xp[i] - xp[i - 1])
    return rows[i - 1] + w * (rows[i] - rows[i - 1])


class LineTo:
    """Straight move from ``start`` to ``goal`` (3,) [m] at ``speed`` [m/s], then hold the
    goal (an interactive goal); same ``position(t)`` interface as :class:`Trajectory`."""

    def __init__(self, start: np.ndarray, goal: np.ndarray, speed: float) -> None:
        if not (math.isfinite(speed) and speed > 0):
            raise ValueError(f"speed must be > 0 m/s, got {speed}")
        self._a = np.asarray(start, dtype=float).copy()
        self._b = np.asarray(goal, dtype=float).copy()
        self._duration = float(np.linalg.norm(self._b - self._a)) / speed

    def position(self, t: float) -> np.ndarray:
        if self._duration <= 0:
            return self._b.copy()
        s = min(max(t / self._duration, 0.0), 1.0)
        return self._a + s * (self._b - self._a)
