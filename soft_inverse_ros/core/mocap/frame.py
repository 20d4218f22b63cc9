"""One motion-capture frame: rigid-body poses, labeled markers and unlabeled markers.

Sources produce :class:`MocapFrame` objects in the mocap system's own frame
(``frame_id="mocap"``); :meth:`MocapFrame.transformed` re-expresses them in the robot
frame (REP-103, metres) with the registration transform. Positions are metres once the
source applied its unit scale; orientations are unit quaternions (x, y, z, w) as in
``geometry_msgs/Quaternion``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from soft_inverse_ros.core.mocap.rigid_transform import RigidTransform

MOCAP_FRAME_ID = "mocap"


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class BodyPose:
    """Pose of one tracked rigid body.

    Attributes:
        position: (3,) origin of the body [m].
        orientation: (4,) unit quaternion (x, y, z, w).
    """

    position: np.ndarray
    orientation: np.ndarray

    def __post_init__(self) -> None:
        p = np.array(self.position, dtype=float).reshape(-1)
        q = np.array(self.orientation, dtype=float).reshape(-1)
        if p.shape != (3,):
            raise ValueError(f"body position must have 3 components, got {p.shape}")
        if q.shape != (4,):
            raise ValueError(f"body orientation must be a (x, y, z, w) quaternion, got {q.shape}")
        p.setflags(write=False)
        q.setflags(write=False)
        object.__setattr__(self, "position", p)
        object.__setattr__(self, "orientation", q)

    def is_finite(self) -> bool:
        """True when position and orientation are finite and the quaternion is non-zero."""
        return bool(
            np.all(np.isfinite(self.position))
            and np.all(np.isfinite(self.orientation))
            and np.linalg.norm(self.orientation) > 1e-9
        )


def _empty_points() -> np.ndarray:
    return np.zeros((0, 3))


def _frozen_point(value: object) -> bool:
    """True for a read-only float (3,) array whose memory no one can write (its base, if
    any, read-only too): a labeled marker a frame can hold without copying."""
    return (isinstance(value, np.ndarray) and value.dtype == np.float64 and value.shape == (3,)
            and not value.flags.writeable and (value.base is None or not value.base.flags.writeable))


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class MocapFrame:
    """Everything a mocap system reported for one capture instant.

    Attributes:
        stamp: Capture time [s] (the time the measurement describes, on the node's clock).
        bodies: Rigid-body poses by name.
        labeled_markers: Labeled marker positions (3,) [m] by name.
        markers: (n, 3) unlabeled marker positions [m].
        frame_id: Frame the coordinates are expressed in (``"mocap"`` or the robot frame).
    """

    stamp: float
    bodies: dict[str, BodyPose] = field(default_factory=dict)
    labeled_markers: dict[str, np.ndarray] = field(default_factory=dict)
    markers: np.ndarray = field(default_factory=_empty_points)
    frame_id: str = MOCAP_FRAME_ID

    def __post_init__(self) -> None:
        m = np.array(self.markers, dtype=float)
        if m.size == 0:
            m = _empty_points()
        if m.ndim != 2 or m.shape[1] != 3:
            raise ValueError(f"unlabeled markers must be an (n, 3) array, got shape {m.shape}")
        m.setflags(write=False)
        object.__setattr__(self, "markers", m)
        labeled = {}
        for name, value in self.labeled_markers.items():
            if _frozen_point(value):  # already checked and immutable (a frame's own): shared
                labeled[name] = value
                continue
            v = np.array(value, dtype=float).reshape(-1)
            if v.shape != (3,):
                raise ValueError(f"labeled marker {name!r} must have 3 components, got {v.shape}")
            v.setflags(write=False)
            labeled[name] = v
        object.__setattr__(self, "labeled_markers", labeled)
        object.__setattr__(self, "bodies", dict(self.bodies))
        object.__setattr__(self, "stamp", float(self.stamp))

    @property
    def is_empty(self) -> bool:
        return not self.bodies and not self.labeled_markers and len(self.markers) == 0

    def transformed(self, transform: RigidTransform, frame_id: str) -> "MocapFrame":
        """This frame re-expressed through ``transform`` (child = this frame's frame_id)."""
        bodies = {}
        if self.bodies:
            names = list(self.bodies)
            pos = transform.apply_points(np.stack([self.bodies[n].position for n in names]))
            quat = transform.apply_quaternions(
                np.stack([self.bodies[n].orientation for n in names])
            )
            bodies = {n: BodyPose(p, q) for n, p, q in zip(names, pos, quat)}
        labeled = {}
        if self.labeled_markers:
            names = list(self.labeled_markers)
            pos = transform.apply_points(np.stack([self.labeled_markers[n] for n in names]))
            pos.setflags(write=False)  # its rows are then taken as they are
            labeled = dict(zip(names, pos))
        return MocapFrame(
            stamp=self.stamp,
            bodies=bodies,
            labeled_markers=labeled,
            markers=transform.apply_points(self.markers),
            frame_id=frame_id,
        )

    def scaled(self, scale: float) -> "MocapFrame":
        """Positions multiplied by ``scale`` (unit conversion, e.g. 1e-3 for mm → m)."""
        if scale == 1.0:
            return self
        return MocapFrame(
            stamp=self.stamp,
            bodies={n: BodyPose(b.position * scale, b.orientation) for n, b in self.bodies.items()},
            labeled_markers={n: v * scale for n, v in self.labeled_markers.items()},
            markers=self.markers * scale,
            frame_id=self.frame_id,
        )
