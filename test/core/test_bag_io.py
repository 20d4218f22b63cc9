"""rosbag2 MCAP writing/reading, checked with an independent reader (mcap + mcap_ros2)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from mcap.reader import make_reader
from mcap.writer import Writer as McapWriter
from mcap_ros2.decoder import DecoderFactory
from mcap_ros2._dynamic import serialize_dynamic

from soft_inverse_ros import topics
from soft_inverse_ros.recording.bag_reader import BagReader
from soft_inverse_ros.recording.bag_writer import BagWriter, qos_profile
from soft_inverse_ros.recording.typestore import (
    MSG_PACKAGE,
    build_typestore,
    find_msg_dir,
    register_from_share,
)

ACT = f"{MSG_PACKAGE}/msg/ActuatorCommand"
POINT = "geometry_msgs/msg/PointStamped"


@pytest.fixture(scope="module")
def store():
    return build_typestore()


def _header(store, t_ns: int, frame: str = topics.BASE_FRAME):
    T = store.types["builtin_interfaces/msg/Time"]
    H = store.types["std_msgs/msg/Header"]
    return H(stamp=T(sec=t_ns // 10**9, nanosec=t_ns % 10**9), frame_id=frame)


def _point(store, t_ns: int, xyz):
    P = store.types[POINT]
    Pt = store.types["geometry_msgs/msg/Point"]
    return P(header=_header(store, t_ns), point=Pt(x=xyz[0], y=xyz[1], z=xyz[2]))


def _command(store, i: int, t_ns: int):
    A = store.types[ACT]
    T = store.types["builtin_interfaces/msg/Time"]
    return A(
        header=_header(store, t_ns),
        target_stamp=T(sec=t_ns // 10**9, nanosec=(t_ns % 10**9) // 2),
        seq=i,
        snapshot_seq=i // 3,
        names=["c0", "c1", "cavity"],
        modes=np.array([0, 0, 2], dtype=np.uint8),
        values=np.array([0.001 * i, -0.002, 1000.0 + i]),
        efforts=np.array([1.5, 0.0, 2.5e3]),
        strokes=np.array([1e-3, 2e-3, 3e-6]),
        status=A.STATUS_OK if i % 2 == 0 else A.STATUS_HELD,
        status_text="ok" if i % 2 == 0 else "held",
    )


def _write_sample_bag(path: Path, store, n_cmd: int = 7, n_pt: int = 5, **kw) -> Path:
    with BagWriter(path, store, **kw) as bag:
        bag.add_topic("/actuator_command", ACT, [qos_profile(depth=5)])
        bag.add_topic("/target", POINT, [qos_profile(reliable=False, depth=1)])
        for i in range(n_cmd):
            bag.write_message("/actuator_command", 2 * 10**9 + i * 10**7, _command(store, i, 10**9 + i))
        for i in range(n_pt):
            bag.write_message("/target", 2 * 10**9 + i * 2 * 10**7, _point(store, 10**9 + i, (0.01 * i, 0.02, -0.03)))
    return path


def _mcap_file(bag: Path) -> Path:
    (file,) = bag.glob("*.mcap")
    return file


def test_independent_reader_sees_types_counts_and_values(tmp_path, store):
    bag = _write_sample_bag(tmp_path / "bag", store)
    with _mcap_file(bag).open("rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        header = reader.get_header()
        summary = reader.get_summary()
        assert header.profile == "ros2"
        schemas = {s.name: s for s in summary.schemas.values()}
        assert set(schemas) == {ACT, POINT}
        for schema in schemas.values():
            assert schema.encoding == "ros2msg"
        # the schema carries the dependencies' definitions, as ros2 bag record writes them
        act_def = schemas[ACT].data.decode()
        assert "MSG: std_msgs/Header" in act_def and "MSG: builtin_interfaces/Time" in act_def
        channels = {c.topic: c for c in summary.channels.values()}
        assert {c.message_encoding for c in channels.values()} == {"cdr"}
        # MCAP ros2 profile: every channel carries offered_qos_profiles; rosbag2's own
        # metadata record is there too
        assert all("offered_qos_profiles" in c.metadata for c in channels.values())
        assert [m.name for m in reader.iter_metadata()] == ["rosbag2"]
        qos = yaml.safe_load(channels["/target"].metadata["offered_qos_profiles"])
        assert qos[0]["reliability"] == "best_effort" and qos[0]["depth"] == 1
        counts = summary.statistics.channel_message_counts
        assert counts[channels["/actuator_command"].id] == 7
        assert counts[channels["/target"].id] == 5

        got: dict[str, list] = {"/actuator_command": [], "/target": []}
        for _schema, channel, message, decoded in reader.iter_decoded_messages():
            got[channel.topic].append((message.log_time, decoded))
    assert [t for t, _ in got["/actuator_command"]] == [2 * 10**9 + i * 10**7 for i in range(7)]
    cmd = got["/actuator_command"][3][1]
    assert cmd.seq == 3 and cmd.snapshot_seq == 1
    assert list(cmd.names) == ["c0", "c1", "cavity"]
    assert list(cmd.modes) == [0, 0, 2]
    assert np.allclose(cmd.values, [0.003, -0.002, 1003.0])
    assert np.allclose(cmd.strokes, [1e-3, 2e-3, 3e-6])
    assert cmd.status == 1 and cmd.status_text == "held"
    assert cmd.header.stamp.sec == 1 and cmd.header.stamp.nanosec == 3
    assert cmd.header.frame_id == topics.BASE_FRAME
    assert cmd.target_stamp.nanosec == 1
    pt = got["/target"][4][1]
    assert (pt.point.x, pt.point.y, pt.point.z) == pytest.approx((0.04, 0.02, -0.03))


def test_metadata_yaml_lists_topics_counts_qos_and_type_hashes(tmp_path, store):
    bag = _write_sample_bag(tmp_path / "bag", store)
    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["version"] == 9
    assert info["storage_identifier"] == "mcap"
    assert info["relative_file_paths"] == [_mcap_file(bag).name]
    assert info["message_count"] == 12
    topics_meta = {t["topic_metadata"]["name"]: t for t in info["topics_with_message_count"]}
    assert topics_meta["/actuator_command"]["message_count"] == 7
    meta = topics_meta["/actuator_command"]["topic_metadata"]
    assert meta["type"] == ACT and meta["serialization_format"] == "cdr"
    assert meta["offered_qos_profiles"][0]["reliability"] == "reliable"
    assert meta["type_description_hash"] == store.hash_rihs01(ACT)


def test_type_hashes_match_the_rosidl_generated_ones(store):
    """Our typestore hashes equal what rosidl computed when building soft_inverse_ros_msgs."""
    share = Path(sys.prefix) / "share" / MSG_PACKAGE / "msg"
    jsons = sorted(share.glob("*.json"))
    if not jsons:
        pytest.skip(f"soft_inverse_ros_msgs is not built into {sys.prefix}")
    for path in jsons:
        description = json.loads(path.read_text())
        rosidl = description["type_hashes"][0]
        assert rosidl["type_name"] == f"{MSG_PACKAGE}/msg/{path.stem}"
        assert store.hash_rihs01(rosidl["type_name"]) == rosidl["hash_string"]


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_bag_reader_round_trip(tmp_path, store, storage):
    bag = _write_sample_bag(tmp_path / "bag", store, storage=storage, compress=True)
    with BagReader(bag) as reader:
        assert not reader.type_warnings
        info = reader.topics
        assert info["/actuator_command"].msgtype == ACT and info["/actuator_command"].count == 7
        assert info["/target"].count == 5 and info["/target"].has_definition
        assert reader.message_count == 12
        assert reader.start_ns == 2 * 10**9
        cmds = reader.read_topic("/actuator_command")
        assert [m.seq for _, m in cmds] == list(range(7))
        assert np.allclose(cmds[6][1].values, [0.006, -0.002, 1006.0])
        assert reader.read_topic("/absent") == []
        order = [m.timestamp_ns for m in reader.messages()]
        assert order == sorted(order) and len(order) == 12


def test_writer_refuses_bad_use(tmp_path, store):
    path = tmp_path / "bag"
    bag = BagWriter(path, store)
    bag.add_topic("/t", POINT)
    bag.add_topic("/t", POINT)  # same type again: no-op
    with pytest.raises(ValueError, match="already recorded"):
        bag.add_topic("/t", ACT)
    with pytest.raises(ValueError, match="unknown"):
        bag.add_topic("/u", "nope_msgs/msg/Nope")
    with pytest.raises(KeyError, match="/v"):
        bag.write("/v", 1, b"")
    bag.write_message("/t", 5, _point(store, 5, (1.0, 2.0, 3.0)))
    with pytest.raises(TypeError, match="ActuatorCommand message written"):
        bag.write_message("/t", 6, _command(store, 0, 6))
    with pytest.raises(TypeError, match="cannot serialize dict"):
        bag.write_message("/t", 6, {"x": 1.0})
    assert [(s.topic, s.count) for s in bag.stats()] == [("/t", 1)]
    bag.close()
    bag.close()
    with pytest.raises(RuntimeError, match="closed"):
        bag.write("/t", 6, b"")
    with pytest.raises(FileExistsError):
        BagWriter(path, store)


def test_reader_uses_the_definitions_embedded_in_the_bag(tmp_path, store):
    """A type the default typestore does not know is decoded from the bag's own schema."""
    from rosbags.typesys import get_types_from_msg

    extra = build_typestore()
    extra.register(get_types_from_msg("float64[] samples\nstring label", "other_msgs/msg/Trace"))
    path = tmp_path / "bag"
    with BagWriter(path, extra) as bag:
        bag.add_topic("/trace", "other_msgs/msg/Trace")
        T = extra.types["other_msgs/msg/Trace"]
        bag.write_message("/trace", 7, T(samples=np.array([1.0, 2.0]), label="x"))
    with BagReader(path) as reader:  # default typestore: no other_msgs
        ((t, msg),) = reader.read_topic("/trace")
    assert t == 7 and msg.label == "x" and list(msg.samples) == [1.0, 2.0]


def _ros2_bag_record_like_mcap(path: Path, *, with_schema: bool) -> None:
    """An MCAP file as ``ros2 bag record`` writes it (raw .msg text with comments), made with
    the mcap library only; ``with_schema=False`` imitates a bag without definitions (rosbag2
    then writes a schema with the type name and an empty encoding and body)."""
    msg_dir = find_msg_dir()
    text = (msg_dir / "ActuatorCommand.msg").read_text()
    full = (
        text
        + "\n" + "=" * 80 + "\nMSG: std_msgs/Header\n"
        + "# Standard metadata\nbuiltin_interfaces/Time stamp\nstring frame_id\n"
        + "=" * 80 + "\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n"
    )
    encode = serialize_dynamic(ACT, full)[ACT]
    with path.open("wb") as f:
        writer = McapWriter(f)
        writer.start(profile="ros2", library="rosbag2")
        schema_id = (
            writer.register_schema(ACT, "ros2msg", full.encode())
            if with_schema
            else writer.register_schema(ACT, "", b"")
        )
        channel = writer.register_channel(
            "/actuator_command", "cdr", schema_id,
            metadata={"offered_qos_profiles": ""},
        )
        for i in range(4):
            data = encode({
                "header": {"stamp": {"sec": 3, "nanosec": i}, "frame_id": "base_link"},
                "target_stamp": {"sec": 3, "nanosec": 0},
                "seq": i, "snapshot_seq": 0, "names": ["a"], "modes": [1],
                "values": [float(i)], "efforts": [float(i)], "strokes": [0.0],
                "status": 0, "status_text": "",
            })
            writer.add_message(channel, log_time=100 + i, publish_time=100 + i, data=data)
        writer.finish()


@pytest.mark.parametrize("with_schema", [True, False])
def test_reader_opens_foreign_mcap_files_and_unfinished_folders(tmp_path, with_schema):
    folder = tmp_path / "rosbag2_recording"
    folder.mkdir()
    file = folder / "rosbag2_recording_0.mcap"
    _ros2_bag_record_like_mcap(file, with_schema=with_schema)
    for path in (file, folder):  # the .mcap itself, and a folder without metadata.yaml
        with BagReader(path) as reader:
            assert reader.topics["/actuator_command"].has_definition is with_schema
            msgs = reader.read_topic("/actuator_command")
        assert [t for t, _ in msgs] == [100, 101, 102, 103]
        assert [m.efforts[0] for _, m in msgs] == [0.0, 1.0, 2.0, 3.0]
        assert msgs[2][1].header.stamp.nanosec == 2


def test_register_from_share_finds_installed_definitions(tmp_path):
    from rosbags.typesys import Stores, get_typestore

    share = tmp_path / "share" / "demo_msgs" / "msg"
    share.mkdir(parents=True)
    (share / "Inner.msg").write_text("# comment\nfloat64[3] xyz\nuint8 K=3\n")
    (share / "Outer.msg").write_text("std_msgs/Header header\nInner[] items\nstring<=8 tag\n")
    (tmp_path / "share" / "std_msgs" / "msg").mkdir(parents=True)
    (tmp_path / "share" / "std_msgs" / "msg" / "Header.msg").write_text(
        "builtin_interfaces/Time stamp\nstring frame_id\n")
    (tmp_path / "share" / "builtin_interfaces" / "msg").mkdir(parents=True)
    (tmp_path / "share" / "builtin_interfaces" / "msg" / "Time.msg").write_text(
        "int32 sec\nuint32 nanosec\n")
    empty = get_typestore(Stores.EMPTY)
    assert register_from_share(empty, "demo_msgs/msg/Outer", [tmp_path])
    assert {"demo_msgs/msg/Inner", "std_msgs/msg/Header", "builtin_interfaces/msg/Time"} <= set(
        empty.fielddefs)
    assert not register_from_share(empty, "demo_msgs/msg/Missing", [tmp_path])


def test_a_bag_whose_recorder_was_killed_is_read_up_to_its_last_complete_chunk(tmp_path, store):
    """A SIGKILLed recorder leaves an MCAP file without summary and footer: analyze said
    "File end magic is invalid" and read nothing of a 25 MB recording."""
    bag = _write_sample_bag(tmp_path / "bag", store, n_cmd=12000, n_pt=0)
    data = _mcap_file(bag).read_bytes()
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "killed.mcap").write_bytes(data[: int(0.7 * len(data))])  # mid-chunk, no metadata.yaml
    with pytest.warns(UserWarning, match=r"was not closed \(its recorder killed, or the file cut short\?\): read the \d+ messages"):
        reader = BagReader(killed)
    with reader:
        seqs = [m.seq for _, m in reader.read_topic("/actuator_command")]
        assert 0 < reader.recovered_messages == len(seqs) < 12000
        assert seqs == list(range(len(seqs)))  # every message of the complete chunks, in order
        assert len(seqs) > 0.25 * 12000  # all but the chunk cut short (1 MB chunks)
    with BagReader(killed) as again:  # one copy per file version: not recovered (nor warned) twice
        assert again.recovered_messages == len(seqs)
    # a closed bag's folder (metadata.yaml) whose file was cut short later (an interrupted
    # copy): "File end magic is invalid", no file named, nothing read
    copied = tmp_path / "copied"
    copied.mkdir()
    (copied / "metadata.yaml").write_bytes((bag / "metadata.yaml").read_bytes())
    (copied / _mcap_file(bag).name).write_bytes(data[: int(0.7 * len(data))])
    with pytest.warns(UserWarning, match="was not closed"), BagReader(copied) as cut:
        assert cut.recovered_messages == len(seqs)
    (killed / "killed.mcap").write_bytes(data[:7])  # inside the magic: no MCAP to recover
    with pytest.raises(ValueError, match="no complete MCAP header"):
        BagReader(killed)
    for cut in (60, 300):  # inside a schema or channel record (a traceback: struct.error)
        (killed / "killed.mcap").write_bytes(data[:cut])
        with pytest.warns(UserWarning, match="read the 0 messages"), BagReader(killed) as early:
            assert early.recovered_messages == 0
