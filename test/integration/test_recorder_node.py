"""The real recorder node as a separate process, fed over DDS, stopped by a signal; the bag
is verified with an independent reader (mcap + mcap_ros2)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

try:
    import rclpy
    from geometry_msgs.msg import PointStamped
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from soft_inverse_ros_msgs.msg import ActuatorCommand
    from std_msgs.msg import String
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
N_COMMANDS = 60
N_TARGETS = 40
N_MOCAP = 20
N_BURST = 30  # last commands published back to back just before the stop signal


@pytest.fixture(scope="module")
def ros_env():
    """Environment of the graph: localhost only, a random domain unless one is set."""
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.setdefault("ROS_DOMAIN_ID", str(random.randint(10, 99)))
    saved = {k: os.environ.get(k) for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID")}
    os.environ.update({k: env[k] for k in saved})
    yield env
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _wait_for_subscribers(publishers, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(p.get_subscription_count() > 0 for p in publishers):
            return
        if proc.poll() is not None:
            raise AssertionError(f"the recorder exited early with code {proc.returncode}")
        time.sleep(0.05)
    missing = [p.topic_name for p in publishers if p.get_subscription_count() == 0]
    raise AssertionError(f"the recorder did not subscribe to {missing} within {timeout} s")


def _command(i: int) -> ActuatorCommand:
    msg = ActuatorCommand()
    msg.header.stamp.sec = 100 + i
    msg.header.stamp.nanosec = 7 * i
    msg.header.frame_id = "base_link"
    msg.target_stamp.sec = 100 + i
    msg.seq = i
    msg.snapshot_seq = i // 10
    msg.names = ["cable0", "cable1", "cable2"]
    msg.modes = [0, 0, 1]
    msg.values = [0.001 * i, 0.002 * i, -0.5]
    msg.efforts = [float(i), 2.0, 3.0]
    msg.strokes = [1e-3, 2e-3, 3e-3 * i]
    msg.status = ActuatorCommand.STATUS_OK
    msg.status_text = f"tick {i}"
    return msg


def _point(i: int, scale: float) -> PointStamped:
    msg = PointStamped()
    msg.header.stamp.sec = 200 + i
    msg.header.frame_id = "base_link"
    msg.point.x, msg.point.y, msg.point.z = scale * i, -scale, 0.5
    return msg


@pytest.mark.parametrize("executor,stop_signal", [("poll", signal.SIGINT), ("events", signal.SIGINT),
                                                  ("single", signal.SIGTERM)])
def test_recorder_records_every_message_until_stopped(tmp_path, ros_env, executor, stop_signal):
    bag = tmp_path / "bag"
    log = (tmp_path / "recorder.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "soft_inverse_ros.nodes.recorder_node", "--ros-args",
         "-p", f"output:={bag}", "-p", "discovery_period:=0.1", "-p", "report_period:=0.0",
         "-p", f"executor:={executor}"],
        cwd=REPO, env=ros_env, stdout=log, stderr=subprocess.STDOUT,
    )
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("recorder_test_publisher", context=context)
        reliable = QoSProfile(depth=200)
        best_effort = QoSProfile(depth=200, reliability=ReliabilityPolicy.BEST_EFFORT)
        pub_cmd = node.create_publisher(ActuatorCommand, "actuator_command", reliable)
        pub_target = node.create_publisher(PointStamped, "target", reliable)
        pub_mocap = node.create_publisher(PointStamped, "mocap/effector", best_effort)
        pub_other = node.create_publisher(String, "not_in_the_topic_list", reliable)
        _wait_for_subscribers([pub_cmd, pub_target, pub_mocap], proc, timeout=30.0)
        for i in range(N_COMMANDS):
            pub_cmd.publish(_command(i))
            if i < N_TARGETS:
                pub_target.publish(_point(i, 0.01))
            if i < N_MOCAP:
                pub_mocap.publish(_point(i, 0.001))
            pub_other.publish(String(data="ignored"))
            if i < N_COMMANDS - N_BURST:
                time.sleep(0.002)
        # a burst then the signal at once: the recorder must drain what is in flight
        proc.send_signal(stop_signal)
        returncode = proc.wait(timeout=30)
        node.destroy_node()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        rclpy.shutdown(context=context)
        log.seek(0)
        output = log.read()
        log.close()
    assert returncode == 0 and "closed" in output, output

    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    meta = {t["topic_metadata"]["name"]: t for t in info["topics_with_message_count"]}
    assert set(meta) == {"/actuator_command", "/target", "/mocap/effector"}, output
    assert meta["/mocap/effector"]["topic_metadata"]["offered_qos_profiles"][0]["reliability"] == "best_effort"
    assert meta["/target"]["topic_metadata"]["offered_qos_profiles"][0]["reliability"] == "reliable"

    (mcap_file,) = bag.glob("*.mcap")
    received: dict[str, list] = {}
    with mcap_file.open("rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        schemas = {s.name for s in reader.get_summary().schemas.values()}
        assert schemas == {"soft_inverse_ros_msgs/msg/ActuatorCommand", "geometry_msgs/msg/PointStamped"}
        for schema, channel, message, decoded in reader.iter_decoded_messages():
            received.setdefault(channel.topic, []).append((message.log_time, decoded))
    cmds = received["/actuator_command"]
    assert [m.seq for _, m in cmds] == list(range(N_COMMANDS)), output
    assert [round(m.point.x / 0.01) for _, m in received["/target"]] == list(range(N_TARGETS))
    assert [round(m.point.x / 0.001) for _, m in received["/mocap/effector"]] == list(range(N_MOCAP))
    last = cmds[-1][1]
    i = N_COMMANDS - 1
    assert (last.header.stamp.sec, last.header.stamp.nanosec) == (100 + i, 7 * i)
    assert list(last.names) == ["cable0", "cable1", "cable2"] and list(last.modes) == [0, 0, 1]
    assert list(last.values) == pytest.approx([0.001 * i, 0.002 * i, -0.5])
    assert list(last.strokes) == pytest.approx([1e-3, 2e-3, 3e-3 * i])
    assert last.status_text == f"tick {i}"
    # bag time is the receive time: wall clock now-ish, non-decreasing per topic
    times = [t for t, _ in cmds]
    assert times == sorted(times)
    assert abs(times[-1] - time.time_ns()) < 120 * 10**9


def _record_one_publisher(ros_env, params: list[str], topic: str, messages: int) -> tuple[int, str]:
    """A recorder process with ``params`` (``name:=value``) while this process publishes
    ``messages`` strings on ``topic`` once the recorder subscribed (or, with 0 messages,
    once it had time to discover it); SIGINT; (its exit status, its output)."""
    command = [sys.executable, "-m", "soft_inverse_ros.nodes.recorder_node", "--ros-args",
               "-p", "discovery_period:=0.1", "-p", "report_period:=0.0"]
    for param in params:
        command += ["-p", param]
    proc = subprocess.Popen(command, cwd=REPO, env=ros_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("recorder_test_publisher", context=context)
        pub = node.create_publisher(String, topic, QoSProfile(depth=50))
        _wait_for_subscribers([pub], proc, timeout=30.0)
        for i in range(messages):
            pub.publish(String(data=f"m{i}"))
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
        node.destroy_node()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        rclpy.shutdown(context=context)
    return proc.returncode, output


def test_recorder_all_topics_discovers_any_topic(tmp_path, ros_env):
    bag = tmp_path / "bag"
    code, output = _record_one_publisher(ros_env, [f"output:={bag}", "all_topics:=true"],
                                         "some/unlisted_topic", 10)
    assert code == 0, output
    with (next(bag.glob("*.mcap"))).open("rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        got = [d.data for _, c, _, d in reader.iter_decoded_messages() if c.topic == "/some/unlisted_topic"]
    assert got == [f"m{i}" for i in range(10)], output


def test_a_topic_pattern_that_matched_nothing_is_said_at_close(tmp_path, ros_env):
    """``topics:=['/targt']`` (a typo) closed an empty bag with exit 0 and no word."""
    code, output = _record_one_publisher(
        ros_env, [f"output:={tmp_path / 'bag'}", "topics:=['/targt', '/some/listed_topic']"],
        "some/listed_topic", 0)
    assert code == 0, output
    assert "no topic matched ['/targt'] while recording (topics seen: [" in output, output
    # the default list covers every graph (valves, snake plates, ...): not a typo, not said
    code, output = _record_one_publisher(ros_env, [f"output:={tmp_path / 'bag2'}"], "target", 0)
    assert code == 0 and "no topic matched" not in output, output


def test_a_bag_folder_it_cannot_create_is_one_line(tmp_path, ros_env):
    (tmp_path / "file").write_text("not a folder")
    run = subprocess.run(
        [sys.executable, "-m", "soft_inverse_ros.nodes.recorder_node", "--ros-args",
         "-p", f"output:={tmp_path / 'file' / 'bag'}"],
        cwd=REPO, env=ros_env, capture_output=True, text=True, timeout=60)
    out = run.stdout + run.stderr
    assert run.returncode == 2 and "Traceback" not in out, out
    assert f"recorder_node: cannot create the bag's folder {tmp_path / 'file'}" in out, out
