"""A serial rigid chain read from a URDF with Pinocchio (BSD; ``pin`` on PyPI).

Kinematics and Jacobians come from Pinocchio, not hand-written code. Frames: positions in m
in the URDF root (world) frame; joint coordinates q in rad (revolute) or m (prismatic).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

from soft_inverse_ros.core.config_files import ConfigNotFoundError, find_config


@dataclass(frozen=True)
class JointLimits:
    """Per-joint limits from the URDF: position (rad or m), velocity (rad/s or m/s), effort (N m or N)."""

    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


class RigidChain:
    """Forward kinematics and frame Jacobians of a fixed-base URDF chain (Pinocchio model)."""

    def __init__(self, model: pin.Model) -> None:
        self.model = model
        self.data = model.createData()

    @classmethod
    def from_urdf(cls, path: str | Path) -> "RigidChain":
        """Load a URDF file; a missing or malformed file is a one-line ``SystemExit``."""
        p = Path(path)
        if not p.is_file():
            try:
                p = find_config(Path("robots") / p.name if p.suffix == ".urdf" else f"robots/{p}.urdf")
            except ConfigNotFoundError as exc:
                raise SystemExit(f"URDF not found: {path} ({exc})") from None
        try:
            return cls(pin.buildModelFromUrdf(str(p)))
        except (ValueError, RuntimeError) as exc:
            raise SystemExit(f"cannot read URDF {p}: {exc}") from None

    @property
    def nq(self) -> int:
        """Number of joint coordinates (revolute/prismatic joints only: nq == nv)."""
        return int(self.model.nq)

    @property
    def joint_names(self) -> list[str]:
        """Actuated joint names in q order."""
        return list(self.model.names)[1:]

    def limits(self) -> JointLimits:
        """Joint limits as read from the URDF ``<limit>`` tags."""
        m = self.model
        return JointLimits(np.array(m.lowerPositionLimit), np.array(m.upperPositionLimit),
                           np.array(m.velocityLimit), np.array(m.effortLimit))

    def frame_id(self, name: str) -> int:
        """Pinocchio id of a link/frame name; unknown names are a one-line ``SystemExit``."""
        if not self.model.existFrame(name):
            raise SystemExit(f"frame {name!r} not in the URDF (frames: {[f.name for f in self.model.frames]})")
        return int(self.model.getFrameId(name))

    def frame_pose(self, q: np.ndarray, frame: int) -> tuple[np.ndarray, np.ndarray]:
        """World position (3,) in m and rotation (3, 3) of ``frame`` at joint coordinates q."""
        pin.framesForwardKinematics(self.model, self.data, np.asarray(q, float))
        oMf = self.data.oMf[frame]
        return oMf.translation.copy(), oMf.rotation.copy()

    def frame_jacobian(self, q: np.ndarray, frame: int) -> np.ndarray:
        """(6, nq) Jacobian of ``frame``: rows 0-2 linear velocity of its origin (m/s per unit q̇),
        rows 3-5 angular velocity (rad/s), both expressed in the world frame."""
        q = np.asarray(q, float)
        pin.computeJointJacobians(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        return pin.getFrameJacobian(self.model, self.data, frame, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED).copy()
