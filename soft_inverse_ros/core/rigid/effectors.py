"""Effector errors beyond a point (Coevoet et al., §IV-C): frame orientation in SO(3) and the
alignment of a probe axis with a target point. Each returns the error and its Jacobian with
respect to the quantities it depends on, for the QP's effector rows.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from soft_inverse_ros.core.rigid.chain import RigidChain


def orientation_error(chain: RigidChain, q: np.ndarray, frame: int,
                      target_rotation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SO(3) error ``e = log3(R_t^T R(q))`` (rad, 3, in the frame's local axes) and de/dq (3, nq).

    Pinocchio's ``log3``/``Jlog3`` and the LOCAL frame Jacobian: de/dq = Jlog3(R_t^T R) J_ω^local.
    """
    q = np.asarray(q, float)
    _, rot = chain.frame_pose(q, frame)
    rel = np.asarray(target_rotation, float).T @ rot
    pin.computeJointJacobians(chain.model, chain.data, q)
    pin.updateFramePlacements(chain.model, chain.data)
    jw = pin.getFrameJacobian(chain.model, chain.data, frame, pin.ReferenceFrame.LOCAL)[3:]
    return pin.log3(rel), pin.Jlog3(rel) @ jw


def alignment_error(tip: np.ndarray, back: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distance vector from ``target`` to the probe axis through ``back`` → ``tip`` (all m, world).

    ``e = (I - u u^T)(t - a)``, u = (a - b)/|a - b|, a = tip, b = back: |e| is the paper's
    alignment distance (zero when the target lies on the axis). Returns e (3,) and
    de/d[a, b] (3, 6).
    """
    a, b, t = (np.asarray(v, float) for v in (tip, back, target))
    d = a - b
    length = float(np.linalg.norm(d))
    if length <= 0.0:
        raise SystemExit("probe axis undefined: tip and back points coincide")
    u = d / length
    r = t - a
    p = np.eye(3) - np.outer(u, u)
    e = p @ r
    # de/du = -(u.r) I - u r^T ;  du/dd = P / |d|
    de_du = -(u @ r) * np.eye(3) - np.outer(u, r)
    de_dd = de_du @ p / length
    return e, np.hstack([-p + de_dd, -de_dd])
