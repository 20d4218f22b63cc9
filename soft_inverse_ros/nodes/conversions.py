"""Conversions between ROS messages and the core's data (no logic beyond packing).

Times: ROS ``builtin_interfaces/Time`` <-> float seconds.
"""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Time
from soft_inverse_ros_msgs.msg import ComplianceSnapshot as SnapshotMsg
from soft_inverse_ros_msgs.msg import FemState

from soft_inverse_ros.core.model.snapshot import ActuatorKind, ComplianceSnapshot, ContactBlock


def to_seconds(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def now_seconds(node) -> float:
    """The node's clock now, in seconds (without building a Time message)."""
    return node.get_clock().now().nanoseconds * 1e-9


def to_time(seconds: float) -> Time:
    sec = int(np.floor(seconds))
    nanosec = min(int(round((seconds - sec) * 1e9)), 999_999_999)
    return Time(sec=sec, nanosec=nanosec)


def _floats(values: np.ndarray) -> np.ndarray:
    """Contiguous float64 1-D array (what rosidl's float64[] setter takes fastest)."""
    return np.ascontiguousarray(values, dtype=np.float64).reshape(-1)


def snapshot_to_msg(snap: ComplianceSnapshot, *, frame_id: str, state_seq: int) -> SnapshotMsg:
    msg = SnapshotMsg()
    msg.header.stamp = to_time(snap.stamp)
    msg.header.frame_id = frame_id
    msg.seq = int(snap.seq)
    msg.state_seq = int(state_seq)
    msg.actuator_names = list(snap.actuator_names)
    msg.actuator_kinds = [int(k) for k in snap.actuator_kinds]
    msg.effector_names = list(snap.effector_names)
    msg.w_ea = _floats(snap.w_ea)
    msg.w_aa = _floats(snap.w_aa)
    msg.w_ee = _floats(snap.w_ee)
    msg.effector_position = _floats(snap.effector_position)
    msg.actuator_stroke = _floats(snap.actuator_stroke)
    msg.lambda0 = _floats(snap.lambda0)
    msg.fem_step_time = float(snap.fem_step_time)
    msg.compliance_time = float(snap.compliance_time)
    c = snap.contacts
    if c is not None:
        msg.contact_ids = np.ascontiguousarray(c.ids, dtype=np.int64)
        msg.contact_points = _floats(c.points)
        msg.contact_normals = _floats(c.normals)
        msg.contact_gap = _floats(c.gap)
        msg.contact_force = _floats(c.force)
        msg.w_cc = _floats(c.w_cc)
        msg.w_ca = _floats(c.w_ca)
        msg.w_ec = _floats(c.w_ec)
        msg.contact_source = np.ascontiguousarray(c.source, dtype=np.int32)
        msg.contact_force_weight = _floats(c.force_weight)
        msg.contact_reduced = bool(c.reduced)
    return msg


def snapshot_from_msg(msg: SnapshotMsg) -> ComplianceSnapshot:
    """The core snapshot of a message.

    Raises:
        ValueError: inconsistent dimensions or unknown actuator kinds (a malformed
            message must be rejected, not used).
    """
    n_a, n_e = len(msg.actuator_names), len(msg.effector_names)

    def matrix(values, rows: int, cols: int, name: str) -> np.ndarray:
        array = np.asarray(values, dtype=float)
        if array.size != rows * cols:
            raise ValueError(f"snapshot {name} has {array.size} values, expected {rows}x{cols}")
        return array.reshape(rows, cols)

    m = len(msg.contact_gap)
    contacts = None
    if m or len(msg.contact_ids) or len(msg.w_cc):
        contacts = ContactBlock(
            ids=np.asarray(msg.contact_ids, dtype=np.int64),
            points=matrix(msg.contact_points, m, 3, "contact_points"),
            normals=matrix(msg.contact_normals, m, 3, "contact_normals"),
            gap=np.asarray(msg.contact_gap, dtype=float),
            force=np.asarray(msg.contact_force, dtype=float),
            w_cc=matrix(msg.w_cc, m, m, "w_cc"),
            w_ca=matrix(msg.w_ca, m, n_a, "w_ca"),
            w_ec=matrix(msg.w_ec, n_e, m, "w_ec"),
            source=np.asarray(msg.contact_source, dtype=np.int64) if len(msg.contact_source) else None,
            force_weight=(np.asarray(msg.contact_force_weight, dtype=float)
                          if len(msg.contact_force_weight) else None),
            reduced=bool(msg.contact_reduced),
        )
    return ComplianceSnapshot(
        seq=int(msg.seq),
        stamp=to_seconds(msg.header.stamp),
        actuator_names=tuple(msg.actuator_names),
        actuator_kinds=tuple(ActuatorKind(int(k)) for k in msg.actuator_kinds),
        effector_names=tuple(msg.effector_names),
        w_ea=matrix(msg.w_ea, n_e, n_a, "w_ea"),
        w_aa=matrix(msg.w_aa, n_a, n_a, "w_aa"),
        w_ee=matrix(msg.w_ee, n_e, n_e, "w_ee"),
        effector_position=np.asarray(msg.effector_position, dtype=float),
        actuator_stroke=np.asarray(msg.actuator_stroke, dtype=float),
        lambda0=np.asarray(msg.lambda0, dtype=float),
        fem_step_time=float(msg.fem_step_time),
        compliance_time=float(msg.compliance_time),
        contacts=contacts,
    )


def fem_state_msg(
    *,
    stamp: float,
    frame_id: str,
    seq: int,
    command_seq: int,
    positions: np.ndarray,
    efforts: np.ndarray,
    strokes: np.ndarray,
    effector_position: np.ndarray,
    newton_iterations: int,
    residual_norm: float,
    step_time: float,
) -> FemState:
    msg = FemState()
    msg.header.stamp = to_time(stamp)
    msg.header.frame_id = frame_id
    msg.seq = int(seq)
    msg.command_seq = int(command_seq)
    msg.positions = _floats(positions)
    msg.lambda_a = _floats(efforts)
    msg.actuator_stroke = _floats(strokes)
    msg.effector_position = _floats(effector_position)
    msg.newton_iterations = int(newton_iterations)
    msg.residual_norm = float(residual_norm)
    msg.step_time = float(step_time)
    return msg


def efforts_by_name(names, efforts, order: tuple[str, ...]) -> np.ndarray:
    """Efforts reordered to ``order`` (the model's actuator order) by actuator name.

    Raises:
        ValueError: a name of ``order`` is missing, or a value is not finite.
    """
    lookup = dict(zip(names, efforts))
    missing = [n for n in order if n not in lookup]
    if missing:
        raise ValueError(f"command lacks actuator(s) {missing} (has {list(names)})")
    out = np.array([lookup[n] for n in order], dtype=float)
    if not np.all(np.isfinite(out)):
        raise ValueError(f"command has non-finite efforts {out.tolist()}")
    return out


def obstacle_poses_msg(offsets: np.ndarray, frame_id: str, stamp):
    """geometry_msgs/PoseArray of obstacle translations (n, 3) [m] (identity orientations)."""
    from geometry_msgs.msg import Pose, PoseArray

    msg = PoseArray()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    for x, y, z in np.asarray(offsets, dtype=float):
        pose = Pose()
        pose.position.x, pose.position.y, pose.position.z = float(x), float(y), float(z)
        msg.poses.append(pose)
    return msg


def obstacle_offsets_from_msg(msg, n_obstacles: int, frame_id: str) -> np.ndarray:
    """Obstacle translations (n, 3) [m] from a PoseArray of :func:`obstacle_poses_msg`.

    Raises:
        ValueError: another frame, another number of poses, a rotation (obstacles only
            translate), or non-finite values.
    """
    if msg.header.frame_id and msg.header.frame_id != frame_id:
        raise ValueError(f"obstacle poses in frame {msg.header.frame_id!r}, expected {frame_id!r}")
    if len(msg.poses) != n_obstacles:
        raise ValueError(f"{len(msg.poses)} obstacle poses for {n_obstacles} obstacles")
    out = np.array([[p.position.x, p.position.y, p.position.z] for p in msg.poses], dtype=float)
    rot = np.array([[p.orientation.x, p.orientation.y, p.orientation.z] for p in msg.poses], dtype=float)
    if not np.isfinite(out).all():
        raise ValueError("non-finite obstacle position")
    if n_obstacles and np.abs(rot).max() > 1e-9:
        raise ValueError("obstacle poses carry a rotation; obstacles only translate here")
    return out.reshape(n_obstacles, 3)
