"""Mocap sources: the motioncapture mock, CSV and MCAP replay, through the pipeline."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.mocap.effector import EffectorConfig
from soft_inverse_ros.core.mocap.frame import BodyPose, MocapFrame
from soft_inverse_ros.core.mocap.motioncapture_source import (
    MotionCaptureConfig,
    MotionCaptureSource,
    mock_rigid_bodies_option,
)
from soft_inverse_ros.core.mocap.pipeline import MocapPipeline
from soft_inverse_ros.core.mocap.registration import FrameRegistration
from soft_inverse_ros.core.mocap.replay_source import (
    CsvReplaySource,
    ReplayError,
    RosbagReplaySource,
    default_item_name,
    write_frames_csv,
)
from soft_inverse_ros.core.mocap.rigid_transform import (
    RigidTransform,
    quaternion_angle,
    rotation_vector_to_quaternion,
)
from soft_inverse_ros.core.mocap.sample_filter import SampleFilterConfig

# Mocap frame: z up at the room corner; robot base 1.2 m away, rotated 90° about z.
ROBOT_FROM_MOCAP = RigidTransform.from_quaternion(
    rotation_vector_to_quaternion([0.0, 0.0, np.pi / 2]), [0.3, -1.2, 0.05]
)
REGISTRATION = FrameRegistration(ROBOT_FROM_MOCAP, parent_frame="base_link")


def mocap_bodies() -> dict[str, BodyPose]:
    return {
        "tip": BodyPose([1.25, 0.40, 0.31], rotation_vector_to_quaternion([0.1, 0.2, -0.3])),
        "base": BodyPose([1.10, 0.35, 0.02], [0.0, 0.0, 0.0, 1.0]),
    }


class CloudClient:
    """A connected motioncapture client with a point cloud, as newer bindings expose.

    The installed binding (1.1) has no ``pointCloud`` accessor, so the point cloud path
    is exercised by adding one to the real mock client.
    """

    def __init__(self, client, cloud):
        self._client = client
        self.pointCloud = np.asarray(cloud, dtype=np.float32)

    def waitForNextFrame(self):
        self._client.waitForNextFrame()

    @property
    def rigidBodies(self):
        return self._client.rigidBodies


def test_motioncapture_mock_poses_come_out_in_robot_frame():
    pytest.importorskip("motioncapture")
    bodies = mocap_bodies()
    config = MotionCaptureConfig(
        system="mock", options={"rigid_bodies": mock_rigid_bodies_option(bodies)}, latency=0.004
    )
    clock = iter(np.arange(10.0, 11.0, 0.01))
    source = MotionCaptureSource(config, clock=lambda: float(next(clock)))
    pipeline = MocapPipeline(
        REGISTRATION, SampleFilterConfig(confirm_first=1),
        EffectorConfig(mode="rigid_body", name="tip"),
    )
    for k in range(3):
        frame = source.next_frame()
        assert frame.stamp == pytest.approx(10.0 + 0.01 * k - 0.004)
        est = pipeline.process(frame)
    assert set(est.frame.bodies) == {"tip", "base"}
    assert est.frame.frame_id == "base_link"
    for name, body in bodies.items():
        got = est.frame.bodies[name]
        # The mock stores float32: compare at that precision.
        assert np.allclose(got.position, ROBOT_FROM_MOCAP.apply_points(body.position), atol=1e-6)
        expected_q = ROBOT_FROM_MOCAP.apply_quaternions(body.orientation)
        assert quaternion_angle(got.orientation, expected_q) < 1e-5
    assert np.allclose(est.effector.position, est.frame.bodies["tip"].position)
    assert not est.effector.stale and est.effector.fresh
    assert pipeline.statistics()["total"]["accepted"] == 3 * 2 + 3


def test_motioncapture_point_cloud_comes_out_in_robot_frame():
    motioncapture = pytest.importorskip("motioncapture")
    cloud = np.array([[1.0, 0.5, 0.3], [1.1, 0.45, 0.32], [0.9, 0.6, 0.28]])
    client = motioncapture.connect("mock", {})
    source = MotionCaptureSource(MotionCaptureConfig(system="mock"), clock=lambda: 1.0,
                                 client=CloudClient(client, cloud))
    initial = ROBOT_FROM_MOCAP.apply_points(cloud[1]) + 0.002
    pipeline = MocapPipeline(
        REGISTRATION, SampleFilterConfig(confirm_first=1),
        EffectorConfig(mode="nearest_marker", initial_position=tuple(initial), gate_radius=0.01),
    )
    est = pipeline.process(source.next_frame())
    assert np.allclose(est.frame.markers, ROBOT_FROM_MOCAP.apply_points(cloud), atol=1e-6)
    assert np.allclose(est.effector.position, ROBOT_FROM_MOCAP.apply_points(cloud[1]), atol=1e-6)


def test_motioncapture_unknown_system_is_a_clear_error():
    pytest.importorskip("motioncapture")
    with pytest.raises(ConnectionError, match="no_such_system"):
        MotionCaptureSource(MotionCaptureConfig(system="no_such_system"))


def sample_frames() -> list[MocapFrame]:
    rng = np.random.default_rng(0)
    frames = []
    for k in range(5):
        q = rotation_vector_to_quaternion(0.1 * rng.standard_normal(3))
        frames.append(
            MocapFrame(
                stamp=100.0 + 0.01 * k,
                bodies={"tip": BodyPose(rng.standard_normal(3), q)},
                labeled_markers={"m1": rng.standard_normal(3), "m2": rng.standard_normal(3)},
                markers=rng.standard_normal((k % 3, 3)),
            )
        )
    return frames


def assert_frames_equal(a: MocapFrame, b: MocapFrame, atol=0.0):
    assert a.stamp == pytest.approx(b.stamp, abs=1e-9)
    assert a.frame_id == b.frame_id
    assert set(a.bodies) == set(b.bodies)
    for name in a.bodies:
        assert np.allclose(a.bodies[name].position, b.bodies[name].position, atol=atol, rtol=0)
        assert np.allclose(a.bodies[name].orientation, b.bodies[name].orientation, atol=atol,
                           rtol=0)
    assert set(a.labeled_markers) == set(b.labeled_markers)
    for name in a.labeled_markers:
        assert np.allclose(a.labeled_markers[name], b.labeled_markers[name], atol=atol, rtol=0)
    assert np.allclose(a.markers, b.markers, atol=atol, rtol=0)


def test_csv_round_trip(tmp_path):
    frames = sample_frames()
    path = tmp_path / "run.csv"
    write_frames_csv(path, frames)
    back = list(CsvReplaySource(path))
    assert len(back) == len(frames)
    for a, b in zip(frames, back):
        assert_frames_equal(a, b)


def test_csv_errors_name_the_row(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("stamp,kind,name,x,y,z\n0.0,body,tip,1,2,3\n")
    with pytest.raises(ReplayError, match="qx"):
        list(CsvReplaySource(path))
    path.write_text("stamp,kind,name,x,y,z\n0.0,blob,tip,1,2,3\n")
    with pytest.raises(ReplayError, match="kind"):
        list(CsvReplaySource(path))
    path.write_text("stamp,name,x,y,z\n")
    with pytest.raises(ReplayError, match="kind"):
        list(CsvReplaySource(path))


def write_mcap(path, frames, frame_id="world", marker_stamps=True):
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.LATEST)
    t = ts.types
    header = lambda stamp: t["std_msgs/msg/Header"](  # noqa: E731
        t["builtin_interfaces/msg/Time"](int(stamp), int(round((stamp % 1) * 1e9))), frame_id
    )
    point = lambda p: t["geometry_msgs/msg/Point"](*map(float, p))  # noqa: E731
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        pose_conn = writer.add_connection(
            "/mocap/tip/pose", "geometry_msgs/msg/PoseStamped", typestore=ts
        )
        marker_conns = {
            name: writer.add_connection(f"/mocap/{name}", "geometry_msgs/msg/PointStamped",
                                        typestore=ts)
            for name in ("m1", "m2")
        }
        other = writer.add_connection("/chatter", "std_msgs/msg/String", typestore=ts)
        for frame in frames:
            log_ns = int(round(frame.stamp * 1e9)) + 1000
            body = frame.bodies["tip"]
            msg = t["geometry_msgs/msg/PoseStamped"](
                header(frame.stamp),
                t["geometry_msgs/msg/Pose"](
                    point(body.position),
                    t["geometry_msgs/msg/Quaternion"](*map(float, body.orientation)),
                ),
            )
            writer.write(pose_conn, log_ns,
                         ts.serialize_cdr(msg, "geometry_msgs/msg/PoseStamped"))
            for name, conn in marker_conns.items():
                msg = t["geometry_msgs/msg/PointStamped"](
                    header(frame.stamp if marker_stamps else 0.0), point(frame.labeled_markers[name])
                )
                writer.write(conn, log_ns, ts.serialize_cdr(msg, "geometry_msgs/msg/PointStamped"))
            writer.write(other, log_ns, ts.serialize_cdr(t["std_msgs/msg/String"]("x"),
                                                         "std_msgs/msg/String"))


def test_mcap_round_trip_through_replay_source(tmp_path):
    frames = sample_frames()
    bag = tmp_path / "run"
    write_mcap(bag, frames)
    mcap_file = bag / "run.mcap"
    assert mcap_file.is_file()
    for path in (bag, mcap_file):  # bag directory and bare .mcap file
        back = list(RosbagReplaySource(path))
        assert len(back) == len(frames)
        for a, b in zip(frames, back):
            expected = MocapFrame(a.stamp, a.bodies, a.labeled_markers, frame_id="world")
            assert_frames_equal(expected, b, atol=1e-12)
    # An explicit topic map renames items and skips the other topics.
    back = list(RosbagReplaySource(bag, topics={"/mocap/tip/pose": "effector_plate"}))
    assert set(back[0].bodies) == {"effector_plate"} and not back[0].labeled_markers


def test_mcap_replay_through_pipeline_applies_registration(tmp_path):
    frames = sample_frames()
    write_mcap(tmp_path / "run", frames)
    pipeline = MocapPipeline(
        REGISTRATION, SampleFilterConfig(max_jump=np.inf, confirm_first=1),
        EffectorConfig(mode="marker_centroid", markers=("m1", "m2")),
    )
    for frame, replayed in zip(frames, RosbagReplaySource(tmp_path / "run")):
        est = pipeline.process(replayed)
        centroid = ROBOT_FROM_MOCAP.apply_points(
            (frame.labeled_markers["m1"] + frame.labeled_markers["m2"]) / 2
        )
        assert np.allclose(est.effector.position, centroid, atol=1e-12)


def test_mcap_bad_topics_are_clear_errors(tmp_path):
    write_mcap(tmp_path / "run", sample_frames())
    with pytest.raises(ReplayError, match="not in bag"):
        RosbagReplaySource(tmp_path / "run", topics={"/nope": "x"})
    with pytest.raises(ReplayError, match="std_msgs/msg/String"):
        RosbagReplaySource(tmp_path / "run", topics={"/chatter": "x"})


def test_a_bag_mixing_header_stamps_and_recording_times_is_refused(tmp_path):
    """The markers without stamps were timed by the recording (1.7e9 s) against the poses'
    stamps: the replay played the poses, then waited for decades."""
    write_mcap(tmp_path / "run", sample_frames(), marker_stamps=False)
    with pytest.raises(ReplayError, match="two time bases cannot be replayed together"):
        RosbagReplaySource(tmp_path / "run")


def test_default_item_names():
    assert default_item_name("/vrpn_client_node/tip/pose") == "tip"
    assert default_item_name("/mocap/marker3") == "marker3"


def test_motioncapture_connect_gives_up_after_its_timeout(monkeypatch):
    import sys
    import time
    import types

    from soft_inverse_ros.core.mocap.motioncapture_source import (
        MotionCaptureConfig,
        MotionCaptureSource,
    )

    from soft_inverse_ros.core.mocap import motioncapture_source

    hanging = types.ModuleType("motioncapture")
    hanging.connect = lambda system, options: time.sleep(30)  # a server that never answers
    monkeypatch.setitem(sys.modules, "motioncapture", hanging)
    # (the child-process probe runs the real binding: tested below; here the in-process part)
    monkeypatch.setattr(motioncapture_source, "_probe_connection", lambda config: None)
    start = time.monotonic()
    with pytest.raises(ConnectionError, match="no answer .* within 0.3 s"):
        MotionCaptureSource(MotionCaptureConfig(system="vicon", connect_timeout=0.3))
    assert time.monotonic() - start < 5.0

    def refuse(system, options):
        raise RuntimeError("connection refused")

    hanging.connect = refuse
    with pytest.raises(ConnectionError, match="connection refused"):
        MotionCaptureSource(MotionCaptureConfig(system="vicon", connect_timeout=0.3))


def test_a_frame_never_shares_a_marker_array_someone_can_still_write():
    """Labeled markers are copied unless immutable (read-only, over read-only memory): a
    frame's own arrays, e.g. the rows of a transformed frame, are taken as they are."""
    mine = np.array([0.1, 0.2, 0.3])
    view = mine.view()
    view.setflags(write=False)  # read-only, but its memory is still writable through ``mine``
    frame = MocapFrame(1.0, labeled_markers={"a": mine, "b": view})
    mine[:] = 9.0
    np.testing.assert_array_equal(frame.labeled_markers["a"], [0.1, 0.2, 0.3])
    np.testing.assert_array_equal(frame.labeled_markers["b"], [0.1, 0.2, 0.3])
    assert not frame.labeled_markers["a"].flags.writeable
    moved = frame.transformed(RigidTransform(np.eye(3), np.array([1.0, 0.0, 0.0])), "base_link")
    np.testing.assert_allclose(moved.labeled_markers["a"], [1.1, 0.2, 0.3])
    again = MocapFrame(2.0, labeled_markers=moved.labeled_markers)
    assert again.labeled_markers["a"] is moved.labeled_markers["a"]  # immutable: shared


def test_an_unreachable_server_is_given_up_although_the_binding_holds_the_interpreter():
    """libmotioncapture's connect to a Vicon host that does not answer blocks holding the
    GIL: the node hung for good, deaf to SIGINT. The child-process probe gives up in time."""
    import time

    pytest.importorskip("motioncapture")
    start = time.monotonic()
    with pytest.raises(ConnectionError, match="no answer from 'vicon' at '127.0.0.1' within 1 s"):
        MotionCaptureSource(MotionCaptureConfig(system="vicon", hostname="127.0.0.1", connect_timeout=1.0))
    assert time.monotonic() - start < 10.0


def test_a_replay_csv_is_checked_whole_at_start_and_replayed_in_time_order(tmp_path):
    """A missing column or a bad row surfaced only in /diagnostics once the replay reached
    it (the node ran on, exit 0); rows out of order were replayed in file order."""
    from soft_inverse_ros.core.mocap.replay_source import CsvReplaySource, ReplayError, write_frames_csv

    frames = sample_frames()
    path = tmp_path / "run.csv"
    write_frames_csv(path, frames)
    header, *rows = path.read_text().splitlines()
    (tmp_path / "noz.csv").write_text(header.replace(",z", ",w") + "\n" + "\n".join(rows) + "\n")
    with pytest.raises(ReplayError, match="missing CSV columns \\['z'\\]"):
        CsvReplaySource(tmp_path / "noz.csv")
    (tmp_path / "badrow.csv").write_text("\n".join([header, *rows[:3], rows[3].replace("body", "bdy")]) + "\n")
    with pytest.raises(ReplayError, match="kind must be body, marker or point, got 'bdy'"):
        CsvReplaySource(tmp_path / "badrow.csv")
    stamps = sorted({float(r.split(",")[0]) for r in rows})
    late = [r for r in rows if float(r.split(",")[0]) == stamps[1]]
    (tmp_path / "shuffled.csv").write_text("\n".join([header, *[r for r in rows if r not in late], *late]) + "\n")
    source = CsvReplaySource(tmp_path / "shuffled.csv")
    replayed = [f.stamp for f in source]
    assert source.reordered and replayed == sorted(replayed) and len(replayed) == len(frames)
    assert not CsvReplaySource(path).reordered


def test_replay_options_a_csv_does_not_read_are_refused(tmp_path):
    from soft_inverse_ros.core.mocap.config import ReplayConfig

    with pytest.raises(ValueError, match="replay.topics and replay.stamp_tolerance apply to a bag"):
        ReplayConfig(path=tmp_path / "x.csv", stamp_tolerance=0.01)
    with pytest.raises(ValueError, match="replay.rate must be a finite number > 0"):
        ReplayConfig(path=tmp_path / "x.bag", rate=float("inf"))
