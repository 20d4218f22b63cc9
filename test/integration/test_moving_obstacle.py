"""A moving obstacle over real DDS: plant_sim_node moves a mesh plate down onto the robot
and publishes its pose; fem_node, which does not know the motion, detects contacts
against the received pose and puts them in its snapshots."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import yaml

try:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseArray
    from rclpy.node import Node
    from soft_inverse_ros_msgs.msg import ComplianceSnapshot

    from soft_inverse_ros.nodes import qos
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.core.model.description import load_robot_description
from soft_inverse_ros.graph import NodeSpec
from soft_inverse_ros.process_launcher import GraphProcesses

pytestmark = pytest.mark.integration


def _plate_robot(tmp_path: Path) -> Path:
    """The built-in robot (coarse mesh, no gravity) under a 40 × 40 × 20 mm plate declared
    2 mm above its top and moving down at 10 mm/s for 0.5 s.

    The plate is thick on purpose: when fem_node starts late (a loaded machine) the plate
    is already 3 mm into the robot's rest top, and a thinner plate's nearest face would be
    its top (normal +z); with 20 mm the nearest face is the bottom whatever the timing."""
    import meshio

    lo, hi = np.array([-20.0, -20.0, 0.0]), np.array([20.0, 20.0, 20.0])
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    # the 12 outward triangles of the box (corner index = 4x + 2y + z)
    faces = np.array([[0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3], [0, 4, 5], [0, 5, 1],
                      [2, 3, 7], [2, 7, 6], [0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5]])
    meshio.write(str(tmp_path / "plate.stl"), meshio.Mesh(corners, [("triangle", faces)]),
                 file_format="stl", binary=True)
    data = yaml.safe_load(find_config("robots/builtin_diamond.yaml").read_text(encoding="utf-8"))
    data["mesh"]["params"]["cell_size"] = 11
    data["gravity"] = [0, 0, 0]
    path = tmp_path / "plate_robot.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    top_mm = 1e3 * float(load_robot_description(path).load_mesh().points[:, 2].max())
    data["collision"] = {"alarm_distance": "1.5 mm", "obstacles": [{
        "type": "mesh", "file": "plate.stl", "translation": [0, 0, top_mm + 2.0],
        "motion": {"velocity": "[0, 0, -10] mm/s", "stop_after": "0.5 s"}}]}
    path = tmp_path / "plate_robot.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture
def graph(graph_env, tmp_path):
    robot = str(_plate_robot(tmp_path))
    specs = [
        NodeSpec("plant_sim_node", "plant_sim_node", (), {
            "robot": robot, "model": "fem", "input": "command", "dt": 0.01, "rayleigh_mass": 5.0,
            "visualization_rate_hz": 0.0, "start": "rest", "marker_points": [0.0, 0.0, 0.12]},
            required=True),
        NodeSpec("fem_node", "fem_node", (), {"robot": robot, "fused_compliance": True, "rate_hz": 10.0},
                 required=True),
    ]
    rclpy.init()
    processes = GraphProcesses(specs, output=None).start()
    node = Node("moving_obstacle_probe")
    try:
        yield processes, node
    finally:
        node.destroy_node()
        processes.shutdown()
        rclpy.try_shutdown()


def test_fem_node_detects_contacts_against_the_plates_received_pose(graph):
    processes, node = graph
    poses, snapshots, diags = [], [], {}
    node.create_subscription(PoseArray, "obstacles/poses", poses.append, qos.HIGH_RATE)
    node.create_subscription(ComplianceSnapshot, "compliance", snapshots.append, qos.LATCHED)
    node.create_subscription(DiagnosticArray, "/diagnostics",
                             lambda m: diags.update({s.name: s for s in m.status}), 10)

    def in_contact() -> bool:
        return bool(snapshots) and len(snapshots[-1].contact_ids) > 0

    end = time.monotonic() + 120.0
    while time.monotonic() < end and not (poses and poses[-1].poses[0].position.z < -5e-3 + 1e-9 and in_contact()):
        assert not processes.poll(), "a node exited"
        rclpy.spin_once(node, timeout_sec=0.05)
    assert poses, "no obstacle poses from plant_sim_node"
    z = poses[-1].poses[0].position.z
    assert z == pytest.approx(-5e-3, abs=1e-6)  # 0.5 s at 10 mm/s, then held
    assert in_contact(), "fem_node's snapshots carry no contact after the plate came down 5 mm"
    # the plate's bottom is 3 mm below the robot's rest top: the model's contacts are
    # against the moved plate (normals down, -z), not the declared one (2 mm above the
    # top, beyond the 1.5 mm alarm distance: no contact)
    normals = np.asarray(snapshots[-1].contact_normals, dtype=float).reshape(-1, 3)
    assert np.all(normals[:, 2] < -0.9), normals
    diags.pop("fem_node: FEM", None)  # one published before fem_node had the poses
    end = time.monotonic() + 10.0
    while time.monotonic() < end and "fem_node: FEM" not in diags:
        rclpy.spin_once(node, timeout_sec=0.05)
    values = {kv.key: kv.value for kv in diags["fem_node: FEM"].values} if "fem_node: FEM" in diags else {}
    assert "obstacle_pose_age_s" in values and float(values["obstacle_pose_age_s"]) < 1.0, values
    assert values.get("bad_obstacle_poses") == "0", values
    assert 0.0 < float(values["last_step_fraction"]) <= 1.0, values  # the contact step bound's share
