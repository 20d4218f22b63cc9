"""Nodes of a soft FEM mesh rigidly attached to a frame of a rigid chain (Coevoet et al.,
§III: the mapping between the rigid DOFs q and the attached soft nodes).

With the offsets r_i of the nodes in the frame (captured once at a reference q):
x_i(q) = p(q) + R(q) r_i, ẋ_i = v + ω × (R r_i) = [I, −[R r_i]×] [v; ω], so the mapping
Jacobian is J = [I, −[R r_i]×] · J_frame (3 n_r × n_q, LOCAL_WORLD_ALIGNED frame Jacobian)
and nodal forces f map back to generalised joint forces τ = Jᵀ f (same virtual work).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.rigid.urdf_chain import UrdfChain


@dataclass(frozen=True)
class RigidAttachment:
    """Soft nodes rigidly attached to ``frame`` of ``chain``.

    Attributes:
        chain: The rigid chain.
        frame: Name of the carrying frame.
        offsets: (n_r, 3) node positions in the frame's axes, relative to its origin [m].
    """

    chain: UrdfChain
    frame: str
    offsets: np.ndarray

    def __post_init__(self) -> None:
        offsets = np.array(self.offsets, dtype=float)
        if offsets.ndim != 2 or offsets.shape[1] != 3 or len(offsets) == 0:
            raise ValueError(f"attachment offsets must be (n, 3) with n > 0, got {offsets.shape}")
        if not np.all(np.isfinite(offsets)):
            raise ValueError("attachment offsets must be finite")
        self.chain.frame_id(self.frame)  # one-line error for an unknown frame
        offsets.setflags(write=False)
        object.__setattr__(self, "offsets", offsets)

    @classmethod
    def capture(
        cls, chain: UrdfChain, frame: str, points_world: np.ndarray, q_ref: np.ndarray
    ) -> "RigidAttachment":
        """Attach world points (n_r, 3) [m] to ``frame`` as they sit at configuration q_ref."""
        rot, origin = chain.frame_placement(q_ref, frame)
        pts = np.asarray(points_world, dtype=float).reshape(-1, 3)
        return cls(chain, frame, (pts - origin) @ rot)  # r_i = Rᵀ (x_i − p)

    @property
    def n_nodes(self) -> int:
        return int(self.offsets.shape[0])

    def positions(self, q: np.ndarray) -> np.ndarray:
        """(n_r, 3) world positions x_i(q) = p + R r_i [m]."""
        rot, origin = self.chain.frame_placement(q, self.frame)
        return origin + self.offsets @ rot.T

    def jacobian(self, q: np.ndarray) -> np.ndarray:
        """(3 n_r, n_q) ∂x/∂q, rows node-major (x0, y0, z0, x1, ...) [m/rad or m/m]."""
        rot, _ = self.chain.frame_placement(q, self.frame)
        jf = self.chain.frame_jacobian(q, self.frame)
        arm = self.offsets @ rot.T  # R r_i (n_r, 3)
        # column k: v_k + ω_k × (R r_i)
        jac = jf[:3].T[None, :, :] + np.cross(jf[3:].T[None, :, :], arm[:, None, :])  # (n_r, n_q, 3)
        return np.ascontiguousarray(jac.transpose(0, 2, 1)).reshape(3 * self.n_nodes, -1)

    def joint_forces(self, q: np.ndarray, forces: np.ndarray) -> np.ndarray:
        """Generalised joint forces τ = Jᵀ f (n_q,) [N·m or N] of nodal forces f (n_r, 3) [N]."""
        f = np.asarray(forces, dtype=float).reshape(-1)
        if f.shape != (3 * self.n_nodes,):
            raise ValueError(f"forces must be ({self.n_nodes}, 3), got {np.shape(forces)}")
        return self.jacobian(q).T @ f
