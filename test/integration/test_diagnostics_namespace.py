"""/diagnostics is global: a node in a ROS namespace prefixes its statuses' names with it,
so that the statuses of two robots on one /diagnostics can be told apart
(``analyze --namespace``)."""

from __future__ import annotations

import time

import pytest

try:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.node import Node

    from soft_inverse_ros import topics
    from soft_inverse_ros.nodes import diagnostics as diag
    from soft_inverse_ros.nodes import qos
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy not importable: {err}", allow_module_level=True)

pytestmark = pytest.mark.integration


def test_a_namespaced_node_prefixes_its_statuses_and_a_root_one_does_not(graph_env):
    rclpy.init()
    try:
        nodes = [Node("plant_sim_node", namespace="/r1"), Node("plant_sim_node")]
        kept = diag.status("plant_sim_node: plant", diag.OK, "ok", {})  # one object, published again
        publishers = [diag.DiagnosticsPublisher(nodes[0], lambda: [kept], period=3600.0),
                      diag.DiagnosticsPublisher(nodes[1], lambda: [diag.status("plant_sim_node: plant", diag.OK,
                                                                               "ok", {})], period=3600.0)]
        probe = Node("diagnostics_probe")
        names: set[str] = set()
        probe.create_subscription(DiagnosticArray, topics.DIAGNOSTICS,
                                  lambda m: names.update(s.name for s in m.status), qos.DIAGNOSTICS)
        end = time.monotonic() + 20.0
        while len(names) < 2 and time.monotonic() < end:
            for p in publishers:
                p.publish()
            for n in (*nodes, probe):
                rclpy.spin_once(n, timeout_sec=0.05)
        assert names == {"r1/plant_sim_node: plant", "plant_sim_node: plant"}
    finally:
        rclpy.try_shutdown()
