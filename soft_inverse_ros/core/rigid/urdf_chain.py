"""A rigid serial chain loaded from a URDF with Pinocchio: joint limits, forward kinematics
of a named frame and its frame Jacobian.

Units are SI (m, rad, N·m). World quantities are expressed in the URDF root ("universe")
frame. Only 1-DOF joints with nq == nv (revolute, prismatic) are accepted, so q and q̇ have
the same size.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin


class UrdfChain:
    """Kinematics of a fixed-base URDF chain.

    Attributes:
        path: The URDF file.
        model: The Pinocchio model (read-only use).
        joint_names: Names of the n_q actuated joints, in q order.
        lower, upper: (n_q,) position limits from the URDF [rad or m].
        effort: (n_q,) effort limits [N·m or N]; velocity: (n_q,) velocity limits [rad/s or m/s].
    """

    def __init__(self, urdf_path: str | Path) -> None:
        path = Path(urdf_path)
        if not path.is_file():
            raise ValueError(f"URDF file not found: {path}")
        try:
            model = pin.buildModelFromUrdf(str(path))
        except (RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ValueError(f"cannot load URDF {path}: {first}") from None
        if model.nq != model.nv or model.nq == 0:
            raise ValueError(
                f"URDF {path}: only revolute/prismatic joints are supported "
                f"(nq={model.nq}, nv={model.nv})"
            )
        self.path = path
        self.model = model
        self._data = model.createData()
        self.n_q = int(model.nq)
        self.joint_names: list[str] = [str(n) for n in list(model.names)[1:]]
        self.lower = np.array(model.lowerPositionLimit, dtype=float)
        self.upper = np.array(model.upperPositionLimit, dtype=float)
        self.effort = np.array(model.effortLimit, dtype=float)
        self.velocity = np.array(model.velocityLimit, dtype=float)

    def frame_id(self, frame: str) -> int:
        """Pinocchio index of a named frame (link, joint or fixed-joint frame)."""
        if not self.model.existFrame(frame):
            names = sorted({f.name for f in self.model.frames} - {"universe"})
            raise ValueError(f"frame {frame!r} not in URDF {self.path.name}; frames: {', '.join(names)}")
        return int(self.model.getFrameId(frame))

    def _check_q(self, q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, dtype=float).reshape(-1)
        if q.shape != (self.n_q,) or not np.all(np.isfinite(q)):
            raise ValueError(f"q must be {self.n_q} finite joint positions, got shape {q.shape}")
        return q

    def within_limits(self, q: np.ndarray) -> bool:
        """Whether every joint position lies within its URDF limits."""
        q = self._check_q(q)
        return bool(np.all(q >= self.lower) and np.all(q <= self.upper))

    def frame_placement(self, q: np.ndarray, frame: str) -> tuple[np.ndarray, np.ndarray]:
        """World placement of ``frame`` at q: rotation R (3, 3) and origin p (3,) [m]."""
        q = self._check_q(q)
        fid = self.frame_id(frame)
        pin.forwardKinematics(self.model, self._data, q)
        placement = pin.updateFramePlacement(self.model, self._data, fid)
        return np.array(placement.rotation), np.array(placement.translation)

    def frame_jacobian(self, q: np.ndarray, frame: str) -> np.ndarray:
        """(6, n_q) Jacobian of ``frame`` in LOCAL_WORLD_ALIGNED: rows [v; ω].

        v is the velocity of the frame origin and ω the angular velocity, both in world
        axes [m/s, rad/s per unit q̇].
        """
        q = self._check_q(q)
        fid = self.frame_id(frame)
        jac = pin.computeFrameJacobian(self.model, self._data, q, fid, pin.LOCAL_WORLD_ALIGNED)
        return np.array(jac).reshape(6, self.n_q)  # eigenpy returns a 1-D array when n_q == 1
