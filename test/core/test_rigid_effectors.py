"""Effector errors beyond a point: SO(3) orientation rows and the probe-axis alignment rows."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from soft_inverse_ros.core.rigid.chain import RigidChain
from soft_inverse_ros.core.rigid.effectors import alignment_error, orientation_error


def _fd(fun, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = h
        cols.append((fun(x + e) - fun(x - e)) / (2 * h))
    return np.stack(cols, axis=1)


def test_orientation_jacobian_matches_finite_differences() -> None:
    chain = RigidChain.from_urdf("hybrid_arm")
    frame = chain.frame_id("flange")
    rt = pin.exp3(np.array([0.3, -0.2, 0.5]))
    q = np.array([0.4, -0.3, 0.8, -0.2, 0.6])
    e, jac = orientation_error(chain, q, frame, rt)
    fd = _fd(lambda x: orientation_error(chain, x, frame, rt)[0], q)
    assert np.linalg.norm(jac - fd) <= 1e-6 * np.linalg.norm(fd)
    # zero error at the target orientation
    _, rot = chain.frame_pose(q, frame)
    assert np.linalg.norm(orientation_error(chain, q, frame, rot)[0]) < 1e-12
    assert np.linalg.norm(e) > 0.1


def test_alignment_error_and_jacobian() -> None:
    rng = np.random.default_rng(0)
    a, b, t = rng.normal(size=(3, 3))
    e, jac = alignment_error(a, b, t)
    u = (a - b) / np.linalg.norm(a - b)
    assert abs(e @ u) < 1e-12  # perpendicular to the axis
    assert np.linalg.norm(e) == pytest.approx(np.linalg.norm(np.cross(t - a, u)))
    fd = _fd(lambda x: alignment_error(x[:3], x[3:], t)[0], np.concatenate([a, b]))
    assert np.linalg.norm(jac - fd) <= 1e-6 * np.linalg.norm(fd)
    # a target on the axis (beyond the tip) is aligned
    assert np.linalg.norm(alignment_error(a, b, a + 0.7 * (a - b))[0]) < 1e-12
    with pytest.raises(SystemExit, match="probe axis undefined"):
        alignment_error(a, a, t)


def test_joint_increment_bounds() -> None:
    from soft_inverse_ros.core.rigid.joint_actuators import joint_increment_bounds

    lim = RigidChain.from_urdf("hybrid_arm").limits()
    dt = 1e-3
    q = np.zeros(5)
    lo, hi = joint_increment_bounds(q, lim, dt)
    np.testing.assert_allclose(hi, lim.velocity * dt)
    np.testing.assert_allclose(lo, -lim.velocity * dt)
    q = lim.upper - 0.5 * lim.velocity * dt  # near the upper limit: the range binds
    lo, hi = joint_increment_bounds(q, lim, dt)
    np.testing.assert_allclose(hi, lim.upper - q)
    q = lim.upper + 1.0  # outside: may stay or move back only
    lo, hi = joint_increment_bounds(q, lim, dt)
    np.testing.assert_allclose(hi, 0.0)
    np.testing.assert_allclose(lo, -lim.velocity * dt)
    with pytest.raises(SystemExit, match="tick period"):
        joint_increment_bounds(q, lim, 0.0)
