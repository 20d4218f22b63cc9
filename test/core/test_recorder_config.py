"""Recorder node configuration and topic matching (no ROS needed)."""

from __future__ import annotations

import pytest

from soft_inverse_ros import topics as T
from soft_inverse_ros.nodes.recorder_node import (
    DEFAULT_TOPICS,
    RecorderConfig,
    expand_name,
    wanted,
)


def test_default_topics_cover_the_graph():
    for name in (T.TARGET, T.ACTUATOR_COMMAND, T.COMPLIANCE, T.INVERSE_STATUS,
                 T.PLANT_EFFECTOR_TRUE, T.MOCAP_EFFECTOR, T.DIAGNOSTICS, T.ROBOT_MARKERS):
        assert name in DEFAULT_TOPICS


def test_names_resolve_in_the_namespace_and_patterns_match():
    patterns = [expand_name(t, "/robot1") for t in DEFAULT_TOPICS]
    assert "/robot1/target" in patterns and "/diagnostics" in patterns
    assert wanted("/robot1/mocap/tool/pose", patterns)
    assert wanted("/robot1/actuator_command", patterns)
    assert not wanted("/robot2/actuator_command", patterns)
    assert not wanted("/robot1/mocap/tool/twist", patterns)
    assert expand_name("target", "/") == "/target"
    with pytest.raises(ValueError, match="private"):
        expand_name("~/x", "/")


@pytest.mark.parametrize("kwargs,key", [
    ({"topics": ()}, "topics"),
    ({"topics": ("",)}, "topics"),
    ({"discovery_period": 0.0}, "discovery_period"),
    ({"qos_depth": 0}, "qos_depth"),
    ({"storage": "rosbag1"}, "storage"),
    ({"executor": "multi"}, "executor"),
    ({"poll_period": 0.0}, "poll_period"),
    ({"report_period": -1.0}, "report_period"),
    ({"drain_timeout": -1.0}, "drain_timeout"),
])
def test_bad_parameters_are_rejected_naming_the_key(kwargs, key):
    with pytest.raises(ValueError, match=key):
        RecorderConfig(**kwargs)


def test_all_topics_needs_no_list_and_output_defaults_to_a_timestamped_folder():
    config = RecorderConfig(topics=(), all_topics=True)
    assert config.bag_path().name.startswith("soft_inverse_ros_")
    assert str(RecorderConfig(output="runs/a").bag_path()) == "runs/a"
