"""The set-up and the commands that start a graph build the simulated robot into the plant
build cache before the graph starts (core/jit_warm_up.warm_up_plant from a graph's
parameter file, core/jit_warm_up.prebuild_graph_plant from the graph's own
``plant_sim_node`` spec); ``plant_sim_node`` must then ask for the same build: its
PlantConfig, declared by a real node from the same file and parameters, has the same
``repr`` (the cache key's configuration part)."""

from __future__ import annotations

import pytest

try:
    import rclpy
    from rclpy.parameter import Parameter

    from soft_inverse_ros.core.sim.plant import PlantConfig
    from soft_inverse_ros.nodes.node_runtime import declare_config
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy not importable: {err}", allow_module_level=True)

from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.core.jit_warm_up import plant_config_from_params, plant_config_of_spec
from soft_inverse_ros.graph import build_graph

pytestmark = pytest.mark.integration


def _declared(path, **overrides) -> PlantConfig:
    rclpy.init(args=["--ros-args", "--params-file", str(path)])
    node = rclpy.create_node("plant_sim_node", parameter_overrides=[
        Parameter(name, value=value) for name, value in overrides.items()])
    try:
        return declare_config(node, PlantConfig)
    finally:
        node.destroy_node()
        rclpy.shutdown()


@pytest.mark.parametrize("overrides", [{}, {"robot": "diamond"}, {"robot": "diamond", "model": "modal"}],
                         ids=["setup", "demo --robot diamond", "demo --plant-model modal"])
def test_the_prebuilt_plant_is_the_one_the_node_asks_for(graph_env, overrides):
    path = find_config("sim.yaml")
    warm = plant_config_from_params("sim.yaml", **overrides)  # a name in config/, as the demo passes it
    assert warm.hyper_reduction_tolerance > 0 and warm.mesh_cell_size > 0  # sim.yaml's, not defaults
    declared = _declared(path, **overrides)
    assert repr(declared) == repr(warm)
    graph = {"plant_model" if k == "model" else k: v for k, v in overrides.items()}
    spec = next(s for s in build_graph("sim", graph) if s.name == "plant_sim_node")
    from_spec = plant_config_of_spec(spec.params_files, spec.parameters)
    assert repr(from_spec) == repr(declared)  # clock (a node parameter, not the plant's) aside
