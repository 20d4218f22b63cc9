"""The node graph is defined once: ros2 launch files and the wheel launcher must agree."""

from __future__ import annotations

import runpy
import sys
import types
from pathlib import Path

import pytest

from soft_inverse_ros.graph import GRAPHS, build_graph, resolve_params_file
from soft_inverse_ros.process_launcher import format_parameter, node_command

REPO = Path(__file__).resolve().parents[2]


class _Recorder:
    """Stand-ins for launch / launch_ros that record what a launch file asks for."""

    def __init__(self):
        self.nodes: list[dict] = []
        self.declared: dict[str, str] = {}
        self.warnings: list[str] = []


def _fake_launch_modules(rec: _Recorder, values: dict[str, str]) -> dict[str, types.ModuleType]:
    launch = types.ModuleType("launch")
    actions = types.ModuleType("launch.actions")
    substitutions = types.ModuleType("launch.substitutions")
    event_handlers = types.ModuleType("launch.event_handlers")
    logging_ = types.ModuleType("launch.logging")
    logging_.get_logger = lambda name: types.SimpleNamespace(warning=rec.warnings.append)
    launch_ros = types.ModuleType("launch_ros")
    ros_actions = types.ModuleType("launch_ros.actions")

    class LaunchDescription(list):
        pass

    class DeclareLaunchArgument:
        def __init__(self, name, default_value, description):
            rec.declared[name] = default_value

    class OpaqueFunction:
        def __init__(self, function):
            self.function = function

    class Shutdown:
        def __init__(self, reason):
            self.reason = reason

    class ExecuteProcess:
        def __init__(self, cmd, name, **kwargs):
            self.cmd, self.name = cmd, name

    class RegisterEventHandler:
        def __init__(self, handler):
            self.handler = handler

    class OnProcessExit:
        def __init__(self, target_action, on_exit):
            self.target_action, self.on_exit = target_action, on_exit

    class LaunchConfiguration:
        def __init__(self, name):
            self.name = name

        def perform(self, context):
            return values.get(self.name, rec.declared[self.name])

    class Node:
        def __init__(self, **kwargs):
            rec.nodes.append(kwargs)

    launch.LaunchDescription = LaunchDescription
    actions.DeclareLaunchArgument = DeclareLaunchArgument
    actions.OpaqueFunction = OpaqueFunction
    actions.Shutdown = Shutdown
    actions.ExecuteProcess = ExecuteProcess
    actions.RegisterEventHandler = RegisterEventHandler
    event_handlers.OnProcessExit = OnProcessExit
    substitutions.LaunchConfiguration = LaunchConfiguration
    ros_actions.Node = Node
    launch.logging = logging_
    return {"launch": launch, "launch.logging": logging_, "launch.actions": actions,
            "launch.substitutions": substitutions,
            "launch.event_handlers": event_handlers, "launch_ros": launch_ros,
            "launch_ros.actions": ros_actions}


def _run_launch_file(graph: str, values: dict[str, str], monkeypatch,
                     rec: _Recorder | None = None) -> tuple[list[dict], list]:
    """The nodes a launch file creates and what its OpaqueFunction returns (the input
    checks recorded, not run: test_launch_command tests them; these graphs name files that
    need not exist)."""
    rec = rec or _Recorder()
    for name, module in _fake_launch_modules(rec, values).items():
        monkeypatch.setitem(sys.modules, name, module)
    rec.checked = []
    monkeypatch.setattr("soft_inverse_ros.launch_support.check_graph_inputs", rec.checked.append)
    namespace = runpy.run_path(str(REPO / "launch" / f"{graph}.launch.py"))
    description = namespace["generate_launch_description"]()
    returned = []
    for action in description:
        if hasattr(action, "function"):
            returned = action.function(context=types.SimpleNamespace(launch_configurations=dict(values)))
    return rec.nodes, returned


CASES = [
    ("sim", {}),
    ("sim", {"combined": "true", "record": "/tmp/bag", "robot": "diamond"}),
    ("hardware", {"servos": "drivers/servos.yaml", "mocap": "mocap.yaml"}),
    ("snake", {}),
    ("snake", {"record": "/tmp/bag", "clock": "wall"}),
    ("hybrid", {}),
    ("hybrid", {"clock": "sim", "record": "/tmp/bag"}),
]


@pytest.mark.parametrize("graph,values", CASES)
def test_launch_file_matches_wheel_launcher(graph, values, monkeypatch, tmp_path):
    monkeypatch.setenv("SOFT_INVERSE_ROS_CACHE_DIR", str(tmp_path))  # a build cache (not "off")
    launched, returned = _run_launch_file(graph, values, monkeypatch)
    specs = build_graph(graph, values)
    if graph == "sim":  # its simulated robot is prepared first, then the nodes start
        preparation, handler = returned
        assert preparation.cmd[1:4] == ["-m", "soft_inverse_ros.core.jit_warm_up", "--plant-of"]
        assert preparation.cmd[4] == "sim" and preparation.name == "plant_preparation"
        for key, value in values.items():
            assert f"{key}:={value}" in preparation.cmd
        after = handler.handler.on_exit
        assert handler.handler.target_action is preparation
        running, shutting_down = types.SimpleNamespace(is_shutdown=False), types.SimpleNamespace(is_shutdown=True)
        assert len(after(types.SimpleNamespace(returncode=0), running)) == len(specs)
        assert after(types.SimpleNamespace(returncode=0), shutting_down) is None
        (stop,) = after(types.SimpleNamespace(returncode=130), running)
        assert "interrupted" in stop.reason
    else:  # no simulated robot to prepare: the nodes themselves
        assert len(returned) == len(specs)
    assert [n["executable"] for n in launched] == [s.executable for s in specs]
    for node, spec in zip(launched, specs):
        assert node["package"] == "soft_inverse_ros"
        assert node["name"] == (spec.name if spec.renames_node else None)
        *files, overrides = node["parameters"]
        assert files == [str(resolve_params_file(f)) for f in spec.params_files]
        assert overrides == dict(spec.parameters)
        assert node["remappings"] == list(spec.remappings)
        assert (node["on_exit"] is not None) == spec.required
        argv = node_command(spec)
        assert argv[argv.index("-m") + 1] == f"soft_inverse_ros.nodes.{node['executable']}"
        for f in files:
            assert f in argv
        for key, value in overrides.items():
            assert f"{key}:={format_parameter(value)}" in argv


def test_the_launch_files_check_the_inputs_and_say_which_arguments_they_ignore(monkeypatch, tmp_path):
    """``ros2 launch`` ran trajectory:=zigzag until target_node died (the graph ran on), and
    ignored use_sim_time:=maybe and namespace:=... without a word."""
    monkeypatch.setenv("SOFT_INVERSE_ROS_CACHE_DIR", str(tmp_path))
    rec = _Recorder()
    _run_launch_file("sim", {"combined": "true", "use_sim_time": "maybe"}, monkeypatch, rec)
    assert [s.name for s in rec.checked[0]] == [s.name for s in build_graph("sim", {"combined": "true"})]
    assert rec.warnings == ["sim.launch.py ignores argument(s) ['use_sim_time']: not its own (known: "
                            f"{sorted(GRAPHS['sim'].arguments)})"]


def test_every_node_of_a_graph_is_required():
    """A dead target node, servo driver, mocap or recorder left the rest running, exit 0
    (the controller SAFE, or a run unrecorded)."""
    for graph, values in CASES:
        assert all(spec.required for spec in build_graph(graph, values)), graph


@pytest.mark.parametrize("graph,values,fem", [
    ("sim", {}, ["fem_node", "compliance_node"]),
    ("sim", {"combined": "true"}, ["fem_node"]),
    ("hardware", {"servos": "drivers/servos.yaml"}, ["fem_node", "compliance_node"]),
    ("hybrid", {}, ["hybrid_model_node"]),
])
def test_side_splits_a_graph_for_two_computers(graph, values, fem):
    everything = [s.name for s in build_graph(graph, values)]
    assert [s.name for s in build_graph(graph, {**values, "side": "fem"})] == fem
    robot = [s.name for s in build_graph(graph, {**values, "side": "robot"})]
    assert robot == [n for n in everything if n not in fem] and "inverse_controller_node" in robot
    with pytest.raises(ValueError, match=r"side must be one of \['all', 'fem', 'robot'\], got 'both'"):
        build_graph(graph, {**values, "side": "both"})


def test_every_graph_declares_what_it_builds():
    for name, definition in GRAPHS.items():
        for arg, (default, help_text) in definition.arguments.items():
            assert help_text, f"{name}:{arg} has no help"


def test_unknown_argument_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown argument.*'robto'"):
        build_graph("sim", {"robto": "diamond"})
    with pytest.raises(KeyError, match="unknown graph"):
        build_graph("nope")
    with pytest.raises(ValueError, match="boolean"):
        build_graph("sim", {"combined": "maybe"})
    with pytest.raises(ValueError, match="servos"):
        build_graph("hardware", {})


def test_combined_fuses_compliance_into_fem_node():
    specs = {s.name: s for s in build_graph("sim", {"combined": "true"})}
    assert "compliance_node" not in specs
    assert specs["fem_node"].parameters["fused_compliance"] is True
    separate = {s.name: s for s in build_graph("sim")}
    assert "compliance_node" in separate
    assert "fused_compliance" not in separate["fem_node"].parameters


@pytest.mark.parametrize("graph,overrides", [("sim", {}), ("sim", {"combined": "true"}),
                                              ("hardware", {"servos": "drivers/servo_sim.yaml"})])
def test_fem_node_reads_the_throttled_commands(graph, overrides):
    """The low-rate loop takes the controller's throttled copy of the commands; the drivers
    (and the recorder) keep the 1 kHz stream."""
    from soft_inverse_ros import topics as T

    specs = {s.name: s for s in build_graph(graph, overrides)}
    assert dict(specs["fem_node"].remappings) == {T.ACTUATOR_COMMAND: T.ACTUATOR_COMMAND_THROTTLE}
    for name in ("inverse_controller_node", "servo_driver_node", "recorder_node"):
        if name in specs:
            assert not specs[name].remappings, name


@pytest.mark.parametrize(
    "value,text",
    [(True, "true"), (3, "3"), (0.5, "0.5"), ("diamond", "diamond"), ("true", "'true'"),
     ("", "''"), ("1.5", "'1.5'"), ([1.0, 2.0], "[1.0, 2.0]")],
)
def test_parameter_formatting_survives_yaml(value, text):
    assert format_parameter(value) == text


def test_snake_graph_is_clocked_by_its_plant():
    assert all("use_sim_time" not in n.parameters for n in build_graph("snake"))  # wall by default
    nodes = {n.name: n for n in build_graph("snake", {"record": "/tmp/x", "clock": "sim"})}
    assert set(nodes) == {"gait_node", "valve_driver_node", "mocap_node", "recorder_node",
                          "snake_plant_node"}
    assert nodes["snake_plant_node"].parameters["clock"] == "sim"
    assert all(n.parameters.get("use_sim_time") is True for k, n in nodes.items()
               if k != "snake_plant_node")
    wall = build_graph("snake", {"clock": "wall"})
    assert all("use_sim_time" not in n.parameters for n in wall)
    with pytest.raises(ValueError, match="clock"):
        build_graph("snake", {"clock": "gps"})


def test_hybrid_graph_follows_the_plant_clock_in_sim_time():
    specs = {s.name: s for s in build_graph("hybrid", {"clock": "sim", "record": "/tmp/b"})}
    assert specs["hybrid_plant_node"].parameters == {"robot": "hybrid_arm", "clock": "sim"}
    assert all(s.parameters.get("use_sim_time") is True for n, s in specs.items() if n != "hybrid_plant_node")
    assert specs["servo_driver_node"].parameters["backend"] == "sim"
    assert specs["inverse_controller_node"].parameters["robot"] == "hybrid_arm"
    with pytest.raises(ValueError, match="clock"):
        build_graph("hybrid", {"clock": "sundial"})
