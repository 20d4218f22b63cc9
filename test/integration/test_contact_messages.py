"""The snapshot's contact block through the ROS message and back."""

from __future__ import annotations

import numpy as np
import pytest

try:
    from soft_inverse_ros.nodes.conversions import snapshot_from_msg, snapshot_to_msg
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or the messages are not importable: {err}", allow_module_level=True)

from soft_inverse_ros.core.model.snapshot import ActuatorKind, ComplianceSnapshot, ContactBlock


def _snapshot(m: int, reduced: bool = False) -> ComplianceSnapshot:
    rng = np.random.default_rng(m)
    n_a, n_e = 2, 3
    a = rng.normal(size=(m, m))
    block = None if m == 0 else ContactBlock(
        ids=np.arange(m) + 7, points=rng.normal(size=(m, 3)), normals=np.tile([0.0, 0.0, 1.0], (m, 1)),
        gap=np.abs(rng.normal(size=m)) * 1e-4, force=np.abs(rng.normal(size=m)),
        w_cc=a @ a.T * 1e-3, w_ca=rng.normal(size=(m, n_a)), w_ec=rng.normal(size=(n_e, m)),
        source=np.arange(m) % 3 - 1, force_weight=np.abs(rng.normal(size=m)), reduced=reduced)
    return ComplianceSnapshot(
        seq=3, stamp=12.5, actuator_names=("c0", "c1"), actuator_kinds=(ActuatorKind.CABLE,) * 2,
        effector_names=("tip.x", "tip.y", "tip.z"), w_ea=rng.normal(size=(n_e, n_a)), w_aa=np.eye(n_a),
        w_ee=np.eye(n_e), effector_position=np.zeros(n_e), actuator_stroke=np.zeros(n_a),
        lambda0=np.zeros(n_a), contacts=block)


@pytest.mark.parametrize("m, reduced", [(0, False), (1, False), (5, False), (5, True)])
def test_contact_block_round_trip(m, reduced):
    snap = _snapshot(m, reduced)
    back = snapshot_from_msg(snapshot_to_msg(snap, frame_id="base_link", state_seq=1))
    if m == 0:
        assert back.contacts is None
        return
    for name in ("ids", "points", "normals", "gap", "force", "w_cc", "w_ca", "w_ec", "source", "force_weight"):
        np.testing.assert_array_equal(getattr(back.contacts, name), getattr(snap.contacts, name))
    assert back.contacts.reduced is reduced


def test_a_malformed_contact_block_is_refused():
    msg = snapshot_to_msg(_snapshot(3), frame_id="base_link", state_seq=1)
    msg.w_cc = np.zeros(8)
    with pytest.raises(ValueError, match="w_cc"):
        snapshot_from_msg(msg)
    msg = snapshot_to_msg(_snapshot(3), frame_id="base_link", state_seq=1)
    msg.contact_ids = np.zeros(2, dtype=np.int64)
    with pytest.raises(ValueError, match="contact ids"):
        snapshot_from_msg(msg)


def test_obstacle_poses_round_trip_and_refusals():
    from soft_inverse_ros.nodes.conversions import obstacle_offsets_from_msg, obstacle_poses_msg
    from builtin_interfaces.msg import Time

    offsets = np.array([[0.0, 0.0, -0.003], [0.001, 0.002, 0.0]])
    msg = obstacle_poses_msg(offsets, "base_link", Time(sec=3))
    np.testing.assert_array_equal(obstacle_offsets_from_msg(msg, 2, "base_link"), offsets)
    with pytest.raises(ValueError, match="3 obstacles"):
        obstacle_offsets_from_msg(msg, 3, "base_link")
    with pytest.raises(ValueError, match="frame 'base_link'"):
        obstacle_offsets_from_msg(msg, 2, "world")
    msg.poses[0].orientation.z = 0.5
    with pytest.raises(ValueError, match="rotation"):
        obstacle_offsets_from_msg(msg, 2, "base_link")
    msg = obstacle_poses_msg(offsets, "base_link", Time(sec=3))
    msg.poses[1].position.x = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        obstacle_offsets_from_msg(msg, 2, "base_link")
