"""Rigid bodies from labeled markers: what a mocap system's rigid-body solver does.

A body is a set of labeled markers (the soft snake's plates carry four each, paper §VI).
Its layout is defined the first time at least three of its markers are seen together, as
when a rigid body is created in Vicon/Motive: the body frame's origin is the centroid of
the markers seen then and its axes are those of the mocap frame at that moment. Every
later frame's pose is the least-squares rigid fit (:func:`fit_rigid_transforms`) of
that layout onto the markers visible in the frame (at least three, not collinear);
otherwise the body is not reported in that frame (occluded).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np

from soft_inverse_ros.core.mocap.frame import BodyPose, MocapFrame
from soft_inverse_ros.core.mocap.registration import fit_rigid_transforms
from soft_inverse_ros.core.mocap.rigid_transform import matrix_to_quaternion


class MarkerRigidBodies:
    """Poses of marker-defined rigid bodies (see the module docstring); all bodies of a
    frame are fitted in one batched call (:func:`fit_rigid_transforms`).

    Args:
        bodies: body name → the names of its markers (at least 3 each).

    Raises:
        ValueError: a body with fewer than 3 markers, or a marker in two bodies.
    """

    def __init__(self, bodies: Mapping[str, Sequence[str]]) -> None:
        seen: set[str] = set()
        for name, markers in bodies.items():
            if len(markers) < 3:
                raise ValueError(f"rigid body {name!r} needs at least 3 markers, got {list(markers)}")
            if seen & set(markers):
                raise ValueError(f"rigid body {name!r} shares markers {sorted(seen & set(markers))}")
            seen |= set(markers)
        self.bodies = {name: tuple(m) for name, m in bodies.items()}
        self._names = tuple(self.bodies)
        width = max((len(m) for m in self.bodies.values()), default=0)
        #: (B, k, 3) each body's layout in its body frame [m], rows of its markers in order
        #: (NaN where a marker was not seen when the body was defined, and padding)
        self._layouts = np.full((len(self._names), width, 3), np.nan)
        self._defined = np.zeros(len(self._names), dtype=bool)
        #: frames in which a body could not be solved (occluded / degenerate), by body
        self.unsolved = {name: 0 for name in self.bodies}

    @staticmethod
    def grouped(names: Sequence[str], markers_per_body: int) -> dict[str, tuple[str, ...]]:
        """Bodies ``names`` with markers ``<body>_m0 … <body>_m<k-1>``."""
        return {b: tuple(f"{b}_m{j}" for j in range(markers_per_body)) for b in names}

    def solve(self, frame: MocapFrame) -> MocapFrame:
        """``frame`` with the bodies solved from its labeled markers added (same frame and
        units as the markers)."""
        seen_points = np.full(self._layouts.shape, np.nan)
        labeled = frame.labeled_markers
        for b, name in enumerate(self._names):
            for j, marker in enumerate(self.bodies[name]):
                p = labeled.get(marker)
                if p is not None:
                    seen_points[b, j] = p
        seen = np.all(np.isfinite(seen_points), axis=-1)
        new = ~self._defined & (seen.sum(axis=1) >= 3)
        for b in np.flatnonzero(new):  # first sight: the body frame is the markers' centroid
            pts = seen_points[b, seen[b]]
            self._layouts[b, seen[b]] = pts - pts.mean(axis=0)
            self._defined[b] = True
        common = seen & np.all(np.isfinite(self._layouts), axis=-1)
        solvable = common.sum(axis=1) >= 3
        out = dict(frame.bodies)
        if np.any(solvable):
            fit = fit_rigid_transforms(self._layouts[solvable], seen_points[solvable],
                                       common[solvable].astype(float))
            quaternions = matrix_to_quaternion(fit.rotations)
            for i, b in enumerate(np.flatnonzero(solvable)):
                if fit.valid[i]:
                    out[self._names[b]] = BodyPose(fit.translations[i], quaternions[i])
            solvable[solvable] = fit.valid
        for b in np.flatnonzero(~solvable):
            self.unsolved[self._names[b]] += 1
        return dataclasses.replace(frame, bodies=out)
