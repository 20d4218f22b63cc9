"""The nodes' ``--params-file`` checks (nodes/node_runtime.py), without ROS: files rcl would
refuse in a traceback or read silently, and a section whose name misses the node's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from soft_inverse_ros.nodes.node_runtime import (
    _section_applies,
    params_file_problem,
    params_files,
    unused_params_file,
)


def _argv(*files) -> list[str]:
    out = ["node", "--ros-args", "-r", "__node:=target_node"]
    for f in files:
        out += ["--params-file", str(f)]
    return out


def _node(name: str) -> SimpleNamespace:
    return SimpleNamespace(get_fully_qualified_name=lambda: name)


def test_the_params_files_are_the_ros_arguments_ones(tmp_path):
    argv = ["x", "--params-file", "not_ros.yaml", "--ros-args", "--params-file", "a.yaml", "-p", "k:=1",
            "--params-file", "b.yaml", "--", "--params-file", "after.yaml"]
    assert [p.name for p in params_files(argv)] == ["a.yaml", "b.yaml"]


@pytest.mark.parametrize(("text", "needle"), [
    ("a: [1, 2\n", "is not YAML (expected ',' or ']'"),
    ("", "is empty"),
    ("- 1\n- 2\n", "expected node names at the top level, got list"),
    ("target_node:\n  ros_parameters:\n    speed: 1\n", "(ros__parameters misspelled or missing?)"),
    ("target_node:\n  ros__parameters: 3\n", "section 'target_node' is not NODE"),
])
def test_files_rcl_cannot_read_are_one_line(tmp_path, text, needle):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    problem = params_file_problem(_argv(path))
    assert problem is not None and needle in problem and str(path) in problem
    assert params_file_problem(_argv(tmp_path / "missing.yaml")).endswith("No such file or directory")


def test_good_files_pass(tmp_path):
    shared = tmp_path / "sim.yaml"
    shared.write_text("target_node:\n  ros__parameters:\n    speed: 0.01\n"
                      "/soft:\n  fem_node:\n    ros__parameters:\n      rate_hz: 30.0\n")
    assert params_file_problem(_argv(shared)) is None


@pytest.mark.parametrize(("section", "node", "applies"), [
    ("target_node", "/target_node", True),
    ("/target_node", "/target_node", True),
    ("/**", "/ns/target_node", True),
    ("/**/target_node", "/a/b/target_node", True),
    ("/ns/*", "/ns/target_node", True),
    ("/ns/*", "/other/target_node", False),
    ("/ns/target_node", "/target_node", False),
    ("fem_node", "/target_node", False),
])
def test_which_sections_name_a_node(section, node, applies):
    assert _section_applies(section, node) is applies


def test_a_section_that_misses_the_nodes_name_is_refused_and_a_shared_file_is_not(tmp_path):
    typo = tmp_path / "typo.yaml"
    typo.write_text("target_nod:\n  ros__parameters:\n    speed: 0.01\n")
    problem = unused_params_file(_argv(typo), [_node("/target_node")])
    assert problem is not None and "section 'target_nod' does not name node 'target_node'" in problem
    # the graph's shared file: sections for the other nodes only, the recorder's defaults apply
    shared = tmp_path / "sim.yaml"
    shared.write_text("".join(f"{n}:\n  ros__parameters:\n    a: 1\n" for n in (
        "target_node", "fem_node", "compliance_node", "inverse_controller_node", "servo_driver_node",
        "valve_driver_node", "plant_sim_node", "mocap_node")))
    assert unused_params_file(_argv(shared), [_node("/recorder_node")]) is None
    assert unused_params_file(_argv(shared), [_node("/target_node")]) is None
