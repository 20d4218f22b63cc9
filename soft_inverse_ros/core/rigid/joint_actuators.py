"""Joint-position actuators for the inverse QP (Coevoet eq. 13's l_min/l_max): bounds on the
per-tick joint increment dq from the URDF position limits and velocity limits.
"""

from __future__ import annotations

import numpy as np

from soft_inverse_ros.core.rigid.chain import JointLimits


def joint_increment_bounds(q: np.ndarray, limits: JointLimits, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bounds on dq (rad) for one tick of ``dt`` s from joint angles ``q`` (rad):
    the position range [lower - q, upper - q] intersected with [-v dt, v dt] (v in rad/s).
    A q already outside its range may stay or move back, never further away, so dq = 0 is
    always feasible."""
    if not (np.isfinite(dt) and dt > 0):
        raise SystemExit(f"tick period must be a positive finite time [s], got {dt!r}")
    q = np.asarray(q, float)
    if q.shape != limits.lower.shape:
        raise SystemExit(f"q must have {limits.lower.size} joint angles, got shape {q.shape}")
    step = limits.velocity * dt
    lo = np.maximum(np.minimum(limits.lower - q, 0.0), -step)
    hi = np.minimum(np.maximum(limits.upper - q, 0.0), step)
    return lo, hi
