"""fem_node with a reduced-order model (the ``reduction`` parameter) over DDS: it publishes
compliance snapshots of the reduction's size-independent update, and refuses a reduction
of another robot with one line and a non-zero exit."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

try:
    import rclpy
    from rclpy.node import Node
    from soft_inverse_ros_msgs.msg import ComplianceSnapshot

    from soft_inverse_ros import topics
    from soft_inverse_ros.nodes import qos
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

from soft_inverse_ros.graph import build_graph
from soft_inverse_ros.process_launcher import GraphProcesses

pytestmark = pytest.mark.integration


def _fem_spec(**overrides):
    spec = next(s for s in build_graph("sim") if s.name == "fem_node")
    return dataclasses.replace(spec, parameters={**spec.parameters, **overrides})


def _reduction_for(spec, path, stiffness_scale: float = 1.0):
    """A reduction of the node's model (its Young's modulus times ``stiffness_scale``: another
    model when not 1)."""
    from soft_inverse_ros.core.model.description import load_robot_description
    from soft_inverse_ros.core.model.reduced_model import build_model_reduction
    from soft_inverse_ros.core.model.robot_model import RobotModel

    desc = load_robot_description(spec.parameters.get("robot", "builtin_diamond"))
    scale = float(spec.parameters.get("young_modulus_scale", 1.0))
    model = RobotModel.from_description(desc, young_modulus_scale=scale * stiffness_scale)
    return build_model_reduction(model, samples=6, mode_tolerance=1e-5).save(path)


def test_fem_node_publishes_snapshots_of_a_reduced_model(graph_env, tmp_path):
    spec = _fem_spec(rate_hz=20.0, fused_compliance=True)
    path = _reduction_for(spec, tmp_path / "diamond.npz")
    spec = dataclasses.replace(spec, parameters={**spec.parameters, "reduction": str(path)})
    graph = GraphProcesses([spec], output=None).start()
    try:
        rclpy.init()
        node = Node("reduced_fem_probe")
        snapshots = []
        node.create_subscription(ComplianceSnapshot, topics.COMPLIANCE, snapshots.append, qos.LATCHED)
        end = time.monotonic() + 120.0
        while time.monotonic() < end and len(snapshots) < 5:
            assert not graph.poll(), graph.exits
            rclpy.spin_once(node, timeout_sec=0.05)
        assert len(snapshots) >= 5, "no snapshots from the reduced model"
        last = snapshots[-1]
        n_a = len(last.actuator_names)
        w_aa = np.asarray(last.w_aa).reshape(n_a, n_a)
        assert n_a == 4 and np.all(np.isfinite(w_aa)) and np.linalg.eigvalsh(w_aa).min() > 0
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
        graph.shutdown()


def test_fem_node_refuses_a_reduction_of_another_model(graph_env, tmp_path):
    spec = _fem_spec()
    path = _reduction_for(spec, tmp_path / "stiffer.npz", stiffness_scale=2.0)
    spec = dataclasses.replace(spec, parameters={**spec.parameters, "reduction": str(path)})
    graph = GraphProcesses([spec], output=None, log_dir=tmp_path / "logs").start()
    try:
        end = time.monotonic() + 120.0
        while time.monotonic() < end and not graph.poll():
            time.sleep(0.1)
        exits = graph.exits
    finally:
        graph.shutdown()
    assert exits and exits[0].returncode != 0, exits
    log = (tmp_path / "logs" / "fem_node.log").read_text()
    assert "another mesh, material" in log and "Traceback" not in log, log[-2000:]
