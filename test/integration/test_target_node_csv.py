"""target_node with a CSV trajectory named relative to the package's config folders (the
hybrid graph's four targets in sequence), in-process: where the file is found, and the one
clear error when it is not."""

from __future__ import annotations

import numpy as np
import pytest

try:
    import rclpy
    from rclpy.parameter import Parameter

    from soft_inverse_ros.nodes.target_node import TargetNode, TargetNodeConfig
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy not importable: {err}", allow_module_level=True)

from soft_inverse_ros.core.config_files import ConfigNotFoundError, find_config

pytestmark = pytest.mark.integration

SHIPPED = "trajectories/hybrid_four_targets.csv"


@pytest.fixture()
def ros(graph_env):
    rclpy.init()
    yield
    rclpy.try_shutdown()


def test_a_relative_csv_name_is_found_in_the_config_folders(tmp_path):
    assert TargetNodeConfig(trajectory="csv", csv_file=SHIPPED).csv_path() == str(find_config(SHIPPED))
    own = tmp_path / "mine.csv"
    own.write_text("0,0,0.1\n")
    assert TargetNodeConfig(trajectory="csv", csv_file=str(own)).csv_path() == str(own)  # a path wins
    with pytest.raises(ConfigNotFoundError, match="trajectories/none.csv.*searched"):
        TargetNodeConfig(trajectory="csv", csv_file="trajectories/none.csv").csv_path()
    with pytest.raises(ValueError, match="not found"):
        TargetNodeConfig(trajectory="csv", csv_file=str(tmp_path / "gone.csv")).csv_path()


def test_the_node_follows_the_four_held_targets(ros):
    node = TargetNode(parameter_overrides=[Parameter("trajectory", value="csv"),
                                           Parameter("csv_file", value=SHIPPED)])
    try:
        held = np.array([node.trajectory.position(t) for t in (5.0, 19.0, 33.0, 47.0)])
        assert np.allclose(held[:, 2], 0.037) and len({tuple(p) for p in np.round(held, 6)}) == 4
    finally:
        node.destroy_node()


def test_a_missing_csv_is_one_line_naming_the_node(ros):
    with pytest.raises(ValueError, match=r"^target_node: config file 'trajectories/none.csv' not found"):
        TargetNode(parameter_overrides=[Parameter("trajectory", value="csv"),
                                        Parameter("csv_file", value="trajectories/none.csv")])
