"""Rigid transforms and unit quaternions in the ROS convention (x, y, z, w).

A :class:`RigidTransform` maps points of a child frame into a parent frame,
``p_parent = R p_child + t``, like a ROS ``geometry_msgs/Transform`` from parent to child
(``header.frame_id`` = parent, ``child_frame_id`` = child). Translations are in metres.

Quaternions are stored as ``(x, y, z, w)`` arrays, matching ``geometry_msgs/Quaternion``
(transforms3d and Eigen's constructor use ``(w, x, y, z)``: convert at the boundary).
All functions are vectorized over leading axes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

#: Rotation matrices must satisfy |RᵀR − I| and |det R − 1| below this.
_ORTHONORMAL_TOL = 1e-6


def quaternion_to_matrix(q_xyzw: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) from quaternions (..., 4) in (x, y, z, w) order.

    The quaternions are normalized first; a zero-norm quaternion raises ``ValueError``.
    """
    q = np.asarray(q_xyzw, dtype=float)
    if q.shape[-1] != 4:
        raise ValueError(f"quaternion must have 4 components (x, y, z, w), got shape {q.shape}")
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    if np.any(~(norm > 1e-12)):
        raise ValueError("quaternion has zero or non-finite norm")
    x, y, z, w = np.moveaxis(q / norm, -1, 0)
    r = np.empty(q.shape[:-1] + (3, 3))
    r[..., 0, 0] = 1 - 2 * (y * y + z * z)
    r[..., 0, 1] = 2 * (x * y - z * w)
    r[..., 0, 2] = 2 * (x * z + y * w)
    r[..., 1, 0] = 2 * (x * y + z * w)
    r[..., 1, 1] = 1 - 2 * (x * x + z * z)
    r[..., 1, 2] = 2 * (y * z - x * w)
    r[..., 2, 0] = 2 * (x * z - y * w)
    r[..., 2, 1] = 2 * (y * z + x * w)
    r[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return r


def matrix_to_quaternion(rotation: np.ndarray) -> np.ndarray:
    """Unit quaternions (..., 4) in (x, y, z, w) order with w ≥ 0 from rotation matrices.

    Uses the largest-pivot branch (Shepperd's method) element-wise, so it is accurate for
    every rotation angle including 180°.
    """
    m = np.asarray(rotation, dtype=float)
    if m.shape[-2:] != (3, 3):
        raise ValueError(f"rotation matrix must be 3x3, got shape {m.shape}")
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    trace = m00 + m11 + m22
    # Four candidate (unnormalized) quaternions; pick per matrix the best-conditioned one.
    cand = np.stack(
        [
            np.stack(
                [m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                 m[..., 1, 0] - m[..., 0, 1], 1 + trace], axis=-1),
            np.stack(
                [1 + m00 - m11 - m22, m[..., 0, 1] + m[..., 1, 0],
                 m[..., 0, 2] + m[..., 2, 0], m[..., 2, 1] - m[..., 1, 2]], axis=-1),
            np.stack(
                [m[..., 0, 1] + m[..., 1, 0], 1 - m00 + m11 - m22,
                 m[..., 1, 2] + m[..., 2, 1], m[..., 0, 2] - m[..., 2, 0]], axis=-1),
            np.stack(
                [m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1],
                 1 - m00 - m11 + m22, m[..., 1, 0] - m[..., 0, 1]], axis=-1),
        ],
        axis=-2,
    )  # (..., 4 candidates, 4 components)
    pivot = np.stack([trace, m00, m11, m22], axis=-1)
    best = np.argmax(pivot, axis=-1)
    q = np.take_along_axis(cand, best[..., None, None], axis=-2)[..., 0, :]
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., 3:4] < 0, -q, q)


def quaternion_multiply(a_xyzw: np.ndarray, b_xyzw: np.ndarray) -> np.ndarray:
    """Hamilton product a ⊗ b of (x, y, z, w) quaternions (rotation b first, then a)."""
    a = np.asarray(a_xyzw, dtype=float)
    b = np.asarray(b_xyzw, dtype=float)
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ],
        axis=-1,
    )


def rotation_vector_to_quaternion(rotvec: np.ndarray) -> np.ndarray:
    """(x, y, z, w) quaternions from rotation vectors (axis × angle [rad]), shape (..., 3)."""
    v = np.asarray(rotvec, dtype=float)
    angle = np.linalg.norm(v, axis=-1, keepdims=True)
    half = 0.5 * angle
    # sin(half)/angle → 1/2 as angle → 0.
    scale = np.where(angle > 1e-12, np.sin(half) / np.where(angle > 1e-12, angle, 1.0), 0.5)
    return np.concatenate([v * scale, np.cos(half)], axis=-1)


def quaternion_angle(a_xyzw: np.ndarray, b_xyzw: np.ndarray) -> np.ndarray:
    """Angle [rad] of the rotation between two orientations (sign-invariant)."""
    a = np.asarray(a_xyzw, dtype=float)
    b = np.asarray(b_xyzw, dtype=float)
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    dot = np.clip(np.abs(np.sum(a * b, axis=-1)), 0.0, 1.0)
    return 2.0 * np.arccos(dot)


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class RigidTransform:
    """Proper rigid transform ``p_parent = rotation @ p_child + translation``.

    Attributes:
        rotation: (3, 3) rotation matrix (orthonormal, det +1).
        translation: (3,) translation [m], the child origin expressed in the parent frame.
    """

    rotation: np.ndarray
    translation: np.ndarray

    def __post_init__(self) -> None:
        r = np.array(self.rotation, dtype=float)
        t = np.array(self.translation, dtype=float)
        if r.shape != (3, 3):
            raise ValueError(f"rotation must be 3x3, got shape {r.shape}")
        if t.shape != (3,):
            raise ValueError(f"translation must have 3 components, got shape {t.shape}")
        if not (np.all(np.isfinite(r)) and np.all(np.isfinite(t))):
            raise ValueError("rigid transform has non-finite entries")
        if (
            np.max(np.abs(r.T @ r - np.eye(3))) > _ORTHONORMAL_TOL
            or abs(np.linalg.det(r) - 1.0) > _ORTHONORMAL_TOL
        ):
            raise ValueError("rotation is not a proper rotation matrix (RᵀR ≠ I or det ≠ +1)")
        r.setflags(write=False)
        t.setflags(write=False)
        object.__setattr__(self, "rotation", r)
        object.__setattr__(self, "translation", t)

    @classmethod
    def identity(cls) -> "RigidTransform":
        return cls(np.eye(3), np.zeros(3))

    @classmethod
    def from_quaternion(cls, q_xyzw: np.ndarray, translation: np.ndarray) -> "RigidTransform":
        """From a (x, y, z, w) quaternion (normalized here) and a translation [m]."""
        return cls(quaternion_to_matrix(q_xyzw), translation)

    @functools.cached_property
    def quaternion(self) -> np.ndarray:
        """Rotation as a unit (x, y, z, w) quaternion with w ≥ 0 (read-only; computed once:
        the mocap pipeline maps every frame's bodies through one registration)."""
        q = matrix_to_quaternion(self.rotation)
        q.setflags(write=False)
        return q

    def apply_points(self, points: np.ndarray) -> np.ndarray:
        """Map points (..., 3) from the child to the parent frame."""
        p = np.asarray(points, dtype=float)
        return p @ self.rotation.T + self.translation

    def apply_quaternions(self, q_xyzw: np.ndarray) -> np.ndarray:
        """Map orientations (..., 4) of bodies from the child to the parent frame."""
        return quaternion_multiply(self.quaternion, np.asarray(q_xyzw, dtype=float))

    def inverse(self) -> "RigidTransform":
        """The parent→child transform (computed once: the simulated capture maps every
        frame's true points through one registration's inverse)."""
        return self._inverse

    @functools.cached_property
    def _inverse(self) -> "RigidTransform":
        return RigidTransform(self.rotation.T, -self.rotation.T @ self.translation)

    def compose(self, other: "RigidTransform") -> "RigidTransform":
        """``self ∘ other``: apply ``other`` first, then ``self``."""
        return RigidTransform(
            self.rotation @ other.rotation, self.rotation @ other.translation + self.translation
        )

    def rotation_angle(self) -> float:
        """Angle of the rotation part [rad]."""
        c = (np.trace(self.rotation) - 1.0) / 2.0
        return float(np.arccos(np.clip(c, -1.0, 1.0)))
