"""plant_sim_node and mocap_node as separate processes over real DDS.

* plant_sim_node (``input: command``) moves its true effector when actuator commands pull
  a cable, and (``input: servo_states``) when servo angles do;
* mocap_node (``backend: sim``) reports the plant's effector with noise, never NaN, and
  its hygiene keeps the injected outliers out;
* mocap_node (``backend: motioncapture``, libmotioncapture's ``mock`` system) publishes
  the body pose and the effector in the robot frame through the registration.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

try:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from geometry_msgs.msg import PointStamped, PoseStamped
    from rclpy.node import Node
    from sensor_msgs.msg import JointState, PointCloud2
    from soft_inverse_ros_msgs.msg import ActuatorCommand

    from soft_inverse_ros.nodes import qos
    from soft_inverse_ros.nodes.conversions import to_seconds
    from soft_inverse_ros.nodes.point_cloud import points_from_cloud
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

from soft_inverse_ros.graph import NodeSpec
from soft_inverse_ros.process_launcher import GraphProcesses

pytestmark = pytest.mark.integration

CABLES = ["cable_left", "cable_back", "cable_right", "cable_front"]
#: a coarse plant (695 nodes) so the processes start fast
PLANT = {"mesh_cell_size": 0.011, "dt": 0.01, "rayleigh_mass": 5.0, "visualization_rate_hz": 0.0,
         "marker_points": [0.01, 0.01, 0.125, -0.01, 0.01, 0.125]}
OUTLIER_MAGNITUDE = 0.03


class Probe:
    def __init__(self, name: str) -> None:
        self.node = Node(name)
        self.diagnostics: dict[str, object] = {}
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 10)

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            self.diagnostics[status.name] = status

    def diag_values(self, name: str) -> dict[str, str]:
        status = self.diagnostics.get(name)
        return {} if status is None else {kv.key: kv.value for kv in status.values}

    def collect(self, msg_type, topic: str, profile) -> list:
        out: list = []
        self.node.create_subscription(msg_type, topic, lambda m: out.append((time.monotonic(), m)),
                                      profile)
        return out

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(self.node, timeout_sec=0.01)

    def spin_until(self, predicate, timeout: float, what: str, graph=None) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return
            if graph is not None:
                exits = graph.poll()
                assert not exits, f"a node exited: {exits}"
            rclpy.spin_once(self.node, timeout_sec=0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _xyz(msg: PointStamped) -> np.ndarray:
    return np.array([msg.point.x, msg.point.y, msg.point.z])


@pytest.fixture(scope="module")
def ros(graph_env):
    rclpy.init()
    yield graph_env
    rclpy.try_shutdown()


@pytest.fixture
def plant_and_sim_mocap(ros):
    specs = [
        NodeSpec("plant_sim_node", "plant_sim_node", (), {**PLANT, "input": "command"},
                 required=True),
        NodeSpec("mocap_node", "mocap_node", (), {
            "backend": "sim", "rate": 200.0, "marker_names": ["plate_a", "plate_b"],
            "sim.noise_std": 0.0002, "sim.latency": 0.005, "sim.dropout_probability": 0.02,
            "sim.outlier_probability": 0.03, "sim.outlier_magnitude": OUTLIER_MAGNITUDE,
            "sim.seed": 7,
        }, required=True),
    ]
    graph = GraphProcesses(specs, output=None).start()
    probe = Probe("plant_mocap_probe")
    try:
        yield graph, probe
    finally:
        probe.node.destroy_node()
        graph.shutdown()


def _command(strokes) -> ActuatorCommand:
    msg = ActuatorCommand()
    msg.names = list(CABLES)
    msg.modes = [ActuatorCommand.MODE_DISPLACEMENT] * 4
    msg.values = [float(s) for s in strokes]
    msg.efforts = [0.0] * 4
    msg.strokes = [float(s) for s in strokes]
    return msg


def test_plant_follows_commands_and_mocap_reports_it(plant_and_sim_mocap):
    graph, probe = plant_and_sim_mocap
    truth = probe.collect(PointStamped, "plant/effector_true", qos.HIGH_RATE)
    markers = probe.collect(PointCloud2, "plant/markers_true", qos.HIGH_RATE)
    measured = probe.collect(PointStamped, "mocap/effector", qos.SENSOR_DATA)
    clouds = probe.collect(PointCloud2, "mocap/markers", qos.SENSOR_DATA)
    pub = probe.node.create_publisher(ActuatorCommand, "actuator_command", qos.HIGH_RATE)
    probe.spin_until(lambda: len(truth) > 20 and len(measured) > 20, 90.0,
                     "the plant's true effector and the mocap effector", graph)
    start = _xyz(truth[-1][1])
    assert 0.10 < start[2] < 0.125  # sagged under gravity from 0.125

    # pull the left cable 6 mm (and let the others out): the tip moves away in y
    for _ in range(150):  # 1.5 s of 100 Hz commands
        pub.publish(_command([0.006, -0.01, -0.01, -0.01]))
        probe.spin_for(0.01)
    probe.spin_for(0.5)
    moved = _xyz(truth[-1][1])
    assert np.linalg.norm(moved - start) > 2e-3, (start, moved)
    assert not graph.poll()
    plant = probe.diag_values("plant_sim_node: plant")
    assert int(plant.get("inputs_received", "0")) > 50, plant
    assert float(plant["effort.cable_left"]) > 0.1 and float(plant["effort.cable_back"]) == 0.0

    # plant markers: the configured two points
    pts = points_from_cloud(markers[-1][1])
    assert pts.shape == (2, 3) and np.all(np.isfinite(pts))

    # mocap: each measurement close to the truth at its capture time, never NaN, no outlier
    t_true = np.array([to_seconds(m.header.stamp) for _, m in truth])
    p_true = np.array([_xyz(m) for _, m in truth])
    errors = []
    for _, m in measured[-300:]:
        p = _xyz(m)
        assert np.all(np.isfinite(p))
        t = to_seconds(m.header.stamp)
        k = int(np.searchsorted(t_true, t))
        near = p_true[max(k - 2, 0):k + 2]
        if len(near):
            errors.append(np.linalg.norm(near - p, axis=1).min())
    errors = np.asarray(errors)
    assert len(errors) > 100
    assert errors.max() < 0.3 * OUTLIER_MAGNITUDE, errors.max()  # outliers filtered out
    assert 5e-5 < np.median(errors) < 2e-3, np.median(errors)  # 0.2 mm noise per axis
    cloud = points_from_cloud(clouds[-1][1])
    assert len(cloud) >= 1 and np.all(np.isfinite(cloud))

    probe.spin_until(lambda: "mocap_node: mocap" in probe.diagnostics, 5.0, "mocap diagnostics")
    mocap = probe.diag_values("mocap_node: mocap")
    assert int(mocap["sim.outliers_injected"]) > 0, mocap
    assert int(mocap["total.rejected_jumps"]) > 0, mocap  # ... and rejected


@pytest.fixture
def plant_on_servo_states(ros):
    spec = NodeSpec("plant_servo_node", "plant_sim_node", (), {**PLANT, "input": "servo_states"},
                    required=True)
    graph = GraphProcesses([spec], output=None).start()
    probe = Probe("plant_servo_probe")
    try:
        yield graph, probe
    finally:
        probe.node.destroy_node()
        graph.shutdown()


def test_plant_follows_servo_angles(plant_on_servo_states):
    from soft_inverse_ros.core.config_files import find_config
    from soft_inverse_ros.core.drivers.servo_config import load_servo_config

    graph, probe = plant_on_servo_states
    calibration = load_servo_config(find_config("drivers/servo_sim.yaml")).calibration
    truth = probe.collect(PointStamped, "plant/effector_true", qos.HIGH_RATE)
    pub = probe.node.create_publisher(JointState, "servo/joint_states", qos.HIGH_RATE)
    probe.spin_until(lambda: len(truth) > 20, 90.0, "the plant's true effector", graph)
    start = _xyz(truth[-1][1])
    angles = calibration.position_from_displacement(np.array([-0.01, -0.01, 0.006, -0.01]))
    for i in range(150):
        msg = JointState(name=list(CABLES), position=[float(a) for a in angles])
        if i % 2:
            msg.position[0] = math.nan  # a servo not answering: that cable holds
        pub.publish(msg)
        probe.spin_for(0.01)
    probe.spin_for(0.5)
    moved = _xyz(truth[-1][1])
    assert np.linalg.norm(moved - start) > 2e-3, (start, moved)
    probe.spin_until(lambda: "plant_servo_node: plant" in probe.diagnostics, 5.0, "diagnostics")
    plant = probe.diag_values("plant_servo_node: plant")
    assert float(plant["effort.cable_right"]) > 0.1, plant
    assert float(plant["effort.cable_left"]) == 0.0, plant
    # the inputs stopped (a driver shut down): the plant holds the last ones and says so, not OK
    probe.spin_until(lambda: "no servo_states input for" in probe.diagnostics["plant_servo_node: plant"].message,
                     10.0, "the stale-input warning")
    assert probe.diagnostics["plant_servo_node: plant"].level == DiagnosticStatus.WARN


@pytest.fixture
def mock_mocap(ros, tmp_path_factory):
    folder = tmp_path_factory.mktemp("mocap")
    config = {
        "mocap": {
            "backend": "motioncapture",
            "robot_frame": "base_link",
            "motioncapture": {"system": "mock", "options": {
                "rigid_bodies": "tip(1.0,2.0,0.5,1,0,0,0)"}},
            "filter": {"max_jump": 0.01, "stale_after": 0.5, "confirm_first": 2},
            "effector": {"mode": "rigid_body", "name": "tip", "offset": [0.0, 0.0, 0.01]},
            # mocap frame = robot frame rotated 90 deg about z, origin at (1, 2, 0.4)
            "registration": {
                "parent_frame": "base_link", "child_frame": "mocap",
                "translation": [-2.0, 1.0, -0.4],
                "rotation_xyzw": [0.0, 0.0, -math.sqrt(0.5), math.sqrt(0.5)],
                "mocap_unit_scale": 1.0, "n_points": 4,
            },
        }
    }
    path = Path(folder) / "mock.yaml"
    path.write_text(yaml.safe_dump(config))
    spec = NodeSpec("mocap_mock_node", "mocap_node", (),
                    {"backend": "motioncapture", "source_config": str(path)}, required=True)
    graph = GraphProcesses([spec], output=None).start()
    probe = Probe("mocap_mock_probe")
    try:
        yield graph, probe
    finally:
        probe.node.destroy_node()
        graph.shutdown()


def test_mocap_mock_backend_publishes_robot_frame_poses(mock_mocap):
    from soft_inverse_ros.core.mocap.registration import FrameRegistration

    graph, probe = mock_mocap
    poses = probe.collect(PoseStamped, "mocap/tip/pose", qos.SENSOR_DATA)
    effector = probe.collect(PointStamped, "mocap/effector", qos.SENSOR_DATA)
    probe.spin_until(lambda: len(poses) > 10 and len(effector) > 10, 60.0,
                     "mock poses and effector", graph)
    reg = FrameRegistration.from_dict({
        "parent_frame": "base_link", "child_frame": "mocap", "translation": [-2.0, 1.0, -0.4],
        "rotation_xyzw": [0.0, 0.0, -math.sqrt(0.5), math.sqrt(0.5)], "mocap_unit_scale": 1.0,
        "n_points": 4})
    expected = reg.transform.apply_points(np.array([[1.0, 2.0, 0.5]]))[0]
    msg = poses[-1][1]
    assert msg.header.frame_id == "base_link"
    p = np.array([msg.pose.position.x, msg.pose.position.y, msg.pose.position.z])
    assert np.allclose(p, expected, atol=1e-6), (p, expected)
    q = np.array([msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z,
                  msg.pose.orientation.w])
    assert np.isclose(abs(q @ np.array([0, 0, -math.sqrt(0.5), math.sqrt(0.5)])), 1.0, atol=1e-6)
    # the effector: the body origin plus the 1 cm offset along the body's z (robot z too)
    e = _xyz(effector[-1][1])
    assert np.allclose(e, expected + [0.0, 0.0, 0.01], atol=1e-6), e
    stamp_age = time.time() - to_seconds(msg.header.stamp)
    assert -1.0 < stamp_age < 5.0  # stamped on the node clock at reception
    probe.spin_until(lambda: "mocap_mock_node: mocap" in probe.diagnostics, 5.0, "diagnostics")
    values = probe.diag_values("mocap_mock_node: mocap")
    assert values["backend"] == "motioncapture"
    assert float(values["frame_rate_hz"]) > 10.0, values


@pytest.fixture
def csv_replay(ros, tmp_path_factory):
    from soft_inverse_ros.core.mocap.frame import BodyPose, MocapFrame
    from soft_inverse_ros.core.mocap.replay_source import write_frames_csv

    folder = Path(tmp_path_factory.mktemp("replay"))
    frames = [MocapFrame(100.0 + 0.01 * k, bodies={"tip": BodyPose([0.001 * k, 0.0, 0.1],
                                                                   [0, 0, 0, 1])},
                         markers=[[0.0, 0.0, 0.2 + 0.001 * k]])
              for k in range(150)]
    frames[80] = MocapFrame(100.8, bodies={"tip": BodyPose([0.5, 0.5, 0.5], [0, 0, 0, 1])})
    write_frames_csv(folder / "run.csv", frames)
    config = {"mocap": {
        "backend": "replay_csv", "robot_frame": "base_link",
        "replay": {"path": "run.csv", "rate": 1.0},
        "filter": {"max_jump": 0.01, "stale_after": 0.2, "confirm_first": 2},
        "effector": {"mode": "rigid_body", "name": "tip"},
    }}
    (folder / "replay.yaml").write_text(yaml.safe_dump(config))
    spec = NodeSpec("mocap_replay_node", "mocap_node", (),
                    {"backend": "replay", "source_config": str(folder / "replay.yaml"),
                     "start_delay": 3.0},
                    required=True)
    probe = Probe("mocap_replay_probe")
    effector = probe.collect(PointStamped, "mocap/effector", qos.SENSOR_DATA)
    graph = GraphProcesses([spec], output=None).start()
    try:
        yield graph, probe, effector
    finally:
        probe.node.destroy_node()
        graph.shutdown()


def test_mocap_replay_backend_paces_and_filters_a_recording(csv_replay):
    graph, probe, effector = csv_replay
    probe.spin_until(lambda: len(effector) > 0, 60.0, "replayed effector", graph)
    probe.spin_until(
        lambda: probe.diag_values("mocap_replay_node: mocap").get("frames") == "150", 10.0,
        "the whole replay", graph)
    probe.spin_for(0.2)
    assert len(effector) >= 120  # 149 accepted samples (best effort may lose some under load)
    xs = np.array([_xyz(m)[0] for _, m in effector])
    assert np.all(np.isfinite(xs))
    assert xs.max() < 0.2  # the 0.5 m jump of frame 80 was rejected
    assert np.all(np.diff(xs) > 0)  # in order
    # paced at the recorded 100 Hz (1.5 s), not dumped at once
    assert effector[-1][0] - effector[0][0] > 1.0
    stamps = np.array([to_seconds(m.header.stamp) for _, m in effector])
    gaps = np.diff(stamps)
    assert np.all(gaps > 0.009) and np.median(gaps) == pytest.approx(0.01, abs=1e-6)
    assert abs(stamps[-1] - time.time()) < 10.0  # restamped to the node clock
