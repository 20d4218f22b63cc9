"""Rigid bodies from labeled markers: what a mocap system's rigid-body solver does.

A body is a set of labeled markers (the soft snake's plates carry four each, paper §VI).
Its layout is defined the first time at least three of its markers are seen together, as
when a rigid body is created in Vicon/Motive: the body frame's origin is the centroid of
the markers seen then and its axes are those of the mocap frame at that moment. Every
later frame's pose is the least-squares rigid fit (:func:`estimate_rigid_transform`) of
that layout onto the markers visible in the frame (at least three, not collinear);
otherwise the body is not reported in that frame (occluded).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np

from soft_inverse_ros.core.mocap.frame import BodyPose, MocapFrame
from soft_inverse_ros.core.mocap.registration import RegistrationError, estimate_rigid_transform


class MarkerRigidBodies:
    """Poses of marker-defined rigid bodies (see the module docstring).

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
        #: body name → (marker names, (k, 3) layout in the body frame) once defined
        self.layouts: dict[str, dict[str, np.ndarray]] = {}
        #: frames in which a body could not be solved (occluded / degenerate), by body
        self.unsolved = {name: 0 for name in self.bodies}

    @staticmethod
    def grouped(names: Sequence[str], markers_per_body: int) -> dict[str, tuple[str, ...]]:
        """Bodies ``names`` with markers ``<body>_m0 … <body>_m<k-1>``."""
        return {b: tuple(f"{b}_m{j}" for j in range(markers_per_body)) for b in names}

    def solve(self, frame: MocapFrame) -> MocapFrame:
        """``frame`` with the bodies solved from its labeled markers added (same frame and
        units as the markers)."""
        out = dict(frame.bodies)
        for name, marker_names in self.bodies.items():
            seen = {m: frame.labeled_markers[m] for m in marker_names
                    if m in frame.labeled_markers and np.all(np.isfinite(frame.labeled_markers[m]))}
            if len(seen) < 3:
                self.unsolved[name] += 1
                continue
            layout = self.layouts.get(name)
            if layout is None:
                pts = np.stack(list(seen.values()))
                layout = dict(zip(seen, pts - pts.mean(axis=0)))
                self.layouts[name] = layout
            common = [m for m in seen if m in layout]
            if len(common) < 3:
                self.unsolved[name] += 1
                continue
            try:
                fit = estimate_rigid_transform(np.stack([layout[m] for m in common]),
                                               np.stack([seen[m] for m in common]))
            except RegistrationError:
                self.unsolved[name] += 1
                continue
            t = fit.registration.transform
            out[name] = BodyPose(t.translation, t.quaternion)
        return dataclasses.replace(frame, bodies=out)
