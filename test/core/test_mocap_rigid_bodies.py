"""Rigid bodies solved from labeled markers (the snake's plates)."""

import numpy as np
import pytest

from soft_inverse_ros.core.mocap.frame import MocapFrame
from soft_inverse_ros.core.mocap.rigid_bodies import MarkerRigidBodies
from soft_inverse_ros.core.mocap.rigid_transform import quaternion_to_matrix, rotation_vector_to_quaternion

LAYOUT = np.array([[0.0, -0.015, 0.0], [0.0, 0.015, 0.0], [0.0, 0.015, 0.024], [0.0, -0.015, 0.024]])


def _frame(t, rotvec, shift, drop=()):
    rot = quaternion_to_matrix(rotation_vector_to_quaternion(np.asarray(rotvec, float)))
    pts = LAYOUT @ rot.T + shift
    return MocapFrame(t, labeled_markers={f"p_m{j}": p for j, p in enumerate(pts) if j not in drop})


def test_the_body_frame_is_the_first_layout_and_later_poses_are_rigid_fits():
    bodies = MarkerRigidBodies(MarkerRigidBodies.grouped(["p"], 4))
    first = bodies.solve(_frame(0.0, [0, 0, 0], [0.1, 0.0, 0.0]))
    assert np.allclose(first.bodies["p"].position, [0.1, 0.0, 0.012])
    assert np.allclose(first.bodies["p"].orientation, [0, 0, 0, 1])
    later = bodies.solve(_frame(0.1, [0, 0, 0.3], [0.05, 0.02, 0.0], drop=(2,)))  # 3 of 4 seen
    q = later.bodies["p"].orientation
    assert 2 * np.arctan2(q[2], q[3]) == pytest.approx(0.3, abs=1e-9)
    rot = quaternion_to_matrix(rotation_vector_to_quaternion(np.array([0, 0, 0.3])))
    assert np.allclose(later.bodies["p"].position, rot @ [0, 0, 0.012] + [0.05, 0.02, 0.0])
    occluded = bodies.solve(_frame(0.2, [0, 0, 0], [0, 0, 0], drop=(0, 1)))
    assert "p" not in occluded.bodies and bodies.unsolved["p"] == 1


def test_bad_body_definitions_are_refused():
    with pytest.raises(ValueError):
        MarkerRigidBodies({"a": ["m0", "m1"]})
    with pytest.raises(ValueError):
        MarkerRigidBodies({"a": ["m0", "m1", "m2"], "b": ["m2", "m3", "m4"]})


def test_bodies_of_one_frame_are_solved_together_each_on_its_own_markers():
    """Two plates in one frame: each pose comes from its own markers; an occluded plate is
    counted unsolved without spoiling the other's pose."""
    bodies = MarkerRigidBodies(MarkerRigidBodies.grouped(["a", "b"], 4))

    def frame(t, shift_a, yaw_b, drop_b=()):
        rot = quaternion_to_matrix(rotation_vector_to_quaternion(np.array([0.0, 0.0, yaw_b])))
        a = LAYOUT + shift_a
        b = LAYOUT @ rot.T + [0.0, 0.2, 0.0]
        return MocapFrame(t, labeled_markers={
            **{f"a_m{j}": p for j, p in enumerate(a)},
            **{f"b_m{j}": p for j, p in enumerate(b) if j not in drop_b}})

    bodies.solve(frame(0.0, [0.0, 0.0, 0.0], 0.0))
    moved = bodies.solve(frame(0.1, [0.03, 0.0, 0.0], 0.2))
    assert np.allclose(moved.bodies["a"].position, [0.03, 0.0, 0.012])
    assert np.allclose(moved.bodies["a"].orientation, [0, 0, 0, 1])
    q = moved.bodies["b"].orientation
    assert 2 * np.arctan2(q[2], q[3]) == pytest.approx(0.2, abs=1e-9)
    half = bodies.solve(frame(0.2, [0.04, 0.0, 0.0], 0.2, drop_b=(0, 1)))
    assert "b" not in half.bodies and bodies.unsolved == {"a": 0, "b": 1}
    assert np.allclose(half.bodies["a"].position, [0.04, 0.0, 0.012])
