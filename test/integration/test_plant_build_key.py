"""The set-up builds the demo's simulated robot into the plant build cache
(core/jit_warm_up.warm_up_plant) from ``config/sim.yaml``; ``plant_sim_node`` must then ask
for the same build: its PlantConfig, declared from the same parameter file by a real node,
has the same ``repr`` (the cache key's configuration part)."""

from __future__ import annotations

import pytest

try:
    import rclpy

    from soft_inverse_ros.core.sim.plant import PlantConfig
    from soft_inverse_ros.nodes.node_runtime import declare_config
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy not importable: {err}", allow_module_level=True)

from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.core.jit_warm_up import plant_config_from_params

pytestmark = pytest.mark.integration


def test_the_warm_up_builds_the_plant_the_node_asks_for(graph_env):
    path = find_config("sim.yaml")
    rclpy.init(args=["--ros-args", "--params-file", str(path)])
    node = rclpy.create_node("plant_sim_node")
    try:
        declared = declare_config(node, PlantConfig)
    finally:
        node.destroy_node()
        rclpy.shutdown()
    warm = plant_config_from_params(path)
    assert warm.hyper_reduction_tolerance > 0 and warm.mesh_cell_size > 0  # sim.yaml's, not defaults
    assert repr(declared) == repr(warm)
