"""The node graphs of soft_inverse_ros: the one source of truth for what runs.

``launch/*.launch.py`` (``ros2 launch`` on a ROS 2 install) and ``soft-inverse-ros launch``
(separate processes, for the PyPI-wheel setup) both build their processes from
:func:`build_graph`, so the two cannot drift apart (a test checks it).

A graph is plain data: nodes with their executable, parameter files, parameter overrides
and remappings. Launch arguments (``name:=value``) select the robot, the parameter file,
recording, and so on; see :data:`GRAPHS` for each graph's arguments and defaults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from soft_inverse_ros import topics

PACKAGE = "soft_inverse_ros"


@dataclass(frozen=True)
class NodeSpec:
    """One process of a graph.

    Attributes:
        name: ROS node name (also the key of its section in the parameter files).
        executable: console script in ``lib/soft_inverse_ros`` and module
            ``soft_inverse_ros.nodes.<executable>`` (``python -m`` in the wheel launcher).
        params_files: parameter files, relative to the package's ``config/`` folder.
        parameters: parameter overrides applied after the files.
        remappings: (from, to) topic remappings.
        required: when this process exits, the whole graph shuts down.
        renames_node: pass ``__node:=name`` (False for a process hosting several nodes).
    """

    name: str
    executable: str
    params_files: tuple[str, ...] = ()
    parameters: Mapping[str, object] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    required: bool = False
    renames_node: bool = True

    @property
    def module(self) -> str:
        return f"{PACKAGE}.nodes.{self.executable}"


@dataclass(frozen=True)
class GraphDefinition:
    """A named graph: its launch arguments (name -> (default, help)) and its builder."""

    name: str
    description: str
    arguments: Mapping[str, tuple[str, str]]
    build: Callable[[Mapping[str, str]], tuple[NodeSpec, ...]]


def _is_true(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in {"true", "1", "yes", "on"}:
        return True
    if lowered in {"false", "0", "no", "off", ""}:
        return False
    raise ValueError(f"expected a boolean (true/false), got {value!r}")


#: fem_node reads the controller's throttled copy of the commands, not the 1 kHz stream
#: (topics.ACTUATOR_COMMAND_THROTTLE): one reader fewer on the stream. In the main job an
#: extra 1 kHz reader cost the controller 4-11 % of a core and the compliance rate 3-8 Hz
#: (BENCHMARKS.md, twenty-fourth session).
FEM_COMMAND_REMAP = ((topics.ACTUATOR_COMMAND, topics.ACTUATOR_COMMAND_THROTTLE),)


def _low_rate_loop(args: Mapping[str, str], params: tuple[str, ...]) -> tuple[NodeSpec, ...]:
    """fem_node + compliance_node as two processes (pipelined on two cores), or one
    fem_node that also computes the compliance from the same assembly (``combined:=true``);
    fem_node takes the throttled commands (:data:`FEM_COMMAND_REMAP`)."""
    robot = {"robot": args["robot"]}
    if _is_true(args["combined"]):
        return (NodeSpec("fem_node", "fem_node", params, {**robot, "fused_compliance": True},
                         required=True, remappings=FEM_COMMAND_REMAP),)
    return (
        NodeSpec("fem_node", "fem_node", params, robot, required=True,
                 remappings=FEM_COMMAND_REMAP),
        NodeSpec("compliance_node", "compliance_node", params, robot, required=True),
    )


def _common_nodes(args: Mapping[str, str], params: tuple[str, ...]) -> tuple[NodeSpec, ...]:
    robot = {"robot": args["robot"]}
    nodes = [
        NodeSpec("target_node", "target_node", params,
                 {"trajectory": args["trajectory"]} if args["trajectory"] else {}, required=True),
        *_low_rate_loop(args, params),
        NodeSpec("inverse_controller_node", "inverse_controller_node", params,
                 {**robot, "closed_loop": _is_true(args["closed_loop"])}, required=True),
    ]
    if args["record"]:
        nodes.append(NodeSpec("recorder_node", "recorder_node", params,
                              {"output": args["record"]}, required=True))
    return tuple(nodes)


CLOCKS = ("wall", "sim")


def _build_sim(args: Mapping[str, str]) -> tuple[NodeSpec, ...]:
    """The simulated robot's graph. ``clock:=sim``: the plant publishes /clock and every
    other node runs with ``use_sim_time``."""
    params = (args["params_file"],)
    clock = args["clock"].strip().lower()
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {list(CLOCKS)}, got {args['clock']!r}")
    plant = {"robot": args["plant_robot"] or args["robot"], "clock": clock}
    if args["plant_model"]:
        plant["model"] = args["plant_model"]
    nodes = (
        *_common_nodes(args, params),
        NodeSpec("servo_driver_node", "servo_driver_node", params, {"backend": "sim"}, required=True),
        NodeSpec("mocap_node", "mocap_node", params, {"backend": "sim"}, required=True),
    )
    if clock == "sim":
        nodes = tuple(dataclasses.replace(n, parameters={**n.parameters, "use_sim_time": True})
                      for n in nodes)
    return (*nodes, NodeSpec("plant_sim_node", "plant_sim_node", params, plant, required=True))


def _build_snake(args: Mapping[str, str]) -> tuple[NodeSpec, ...]:
    """The pneumatic soft snake's live graph: gait → valve driver (simulated valves) →
    snake plant → simulated mocap of the plates (→ recorder). ``clock:=sim``: the snake
    plant publishes /clock and every other node runs with ``use_sim_time``."""
    params = (args["params_file"],)
    clock = args["clock"].strip().lower()
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {list(CLOCKS)}, got {args['clock']!r}")
    nodes = [
        NodeSpec("gait_node", "gait_node", params, required=True),
        NodeSpec("valve_driver_node", "valve_driver_node", params, {"backend": "sim"},
                 required=True),
        NodeSpec("mocap_node", "mocap_node", params, {"backend": "sim"}, required=True),
    ]
    if args["record"]:
        nodes.append(NodeSpec("recorder_node", "recorder_node", params, {"output": args["record"]},
                              required=True))
    if clock == "sim":
        nodes = [dataclasses.replace(n, parameters={**n.parameters, "use_sim_time": True})
                 for n in nodes]
    return (*nodes, NodeSpec("snake_plant_node", "snake_plant_node", params, {"clock": clock},
                             required=True))


def _build_hardware(args: Mapping[str, str]) -> tuple[NodeSpec, ...]:
    params = (args["params_file"],)
    nodes = list(_common_nodes(args, params))
    if args["servos"]:
        nodes.append(NodeSpec("servo_driver_node", "servo_driver_node", params,
                              {"backend": "dynamixel", "device_config": args["servos"]},
                              required=True))
    if args["valves"]:
        nodes.append(NodeSpec("valve_driver_node", "valve_driver_node", params,
                              {"backend": "serial", "device_config": args["valves"]},
                              required=True))
    if args["mocap"]:
        nodes.append(NodeSpec("mocap_node", "mocap_node", params,
                              {"backend": "motioncapture", "source_config": args["mocap"]},
                              required=True))
    if not (args["servos"] or args["valves"]):
        raise ValueError("the hardware graph needs servos:=FILE and/or valves:=FILE "
                         "(driver configs, see config/drivers/)")
    return tuple(nodes)


def _build_hybrid(args: Mapping[str, str]) -> tuple[NodeSpec, ...]:
    """The simulated hybrid robot (arm + soft rod + soft block, ``type: hybrid``
    description): hybrid_model_node is the low-rate loop (the hybrid compliance snapshot),
    inverse_controller_node the 1 kHz inverse QP (joints + contacts), whose joint position
    setpoints go to the simulated joint servos of servo_driver_node; hybrid_plant_node is
    the simulated robot (``clock:=sim``: the graph's clock), mocap_node measures its probe."""
    params = (args["params_file"],)
    clock = args["clock"].strip().lower()
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {list(CLOCKS)}, got {args['clock']!r}")
    robot = {"robot": args["robot"]}
    nodes = [
        NodeSpec("target_node", "target_node", params,
                 {"trajectory": args["trajectory"]} if args["trajectory"] else {}, required=True),
        NodeSpec("hybrid_model_node", "hybrid_model_node", params, robot, required=True),
        NodeSpec("inverse_controller_node", "inverse_controller_node", params, robot, required=True),
        NodeSpec("servo_driver_node", "servo_driver_node", params, {"backend": "sim"}, required=True),
        NodeSpec("mocap_node", "mocap_node", params, {"backend": "sim"}, required=True),
    ]
    if args["record"]:
        nodes.append(NodeSpec("recorder_node", "recorder_node", params, {"output": args["record"]},
                              required=True))
    if clock == "sim":
        nodes = [dataclasses.replace(n, parameters={**n.parameters, "use_sim_time": True}) for n in nodes]
    return (*nodes, NodeSpec("hybrid_plant_node", "hybrid_plant_node", params,
                             {**robot, "clock": clock}, required=True))


#: the low-rate loop's nodes: the workstation's side of a two-computer deployment (``side:=fem``)
LOW_RATE_NODES = frozenset({"fem_node", "compliance_node", "hybrid_model_node"})
SIDES = ("all", "fem", "robot")
_SIDE_ARG = ("all", "the nodes of this computer in a two-computer deployment: all; fem: the "
                    "low-rate FEM loop (fem_node, compliance_node / hybrid_model_node); robot: "
                    "the others (controller, drivers, plant, mocap, target, recorder)")

_COMMON_ARGS: dict[str, tuple[str, str]] = {
    "robot": ("builtin_diamond", "robot description: a name in config/robots or a YAML path"),
    "trajectory": ("", "override target_node's trajectory (hold, line, square, circle, csv)"),
    "record": ("", "write an MCAP rosbag2 of the graph's topics to this folder"),
    "combined": ("false", "one fem_node computes the compliance too (no compliance_node)"),
    "closed_loop": ("false", "start the inverse controller with motion-capture feedback on"),
    "side": _SIDE_ARG,
}

GRAPHS: dict[str, GraphDefinition] = {
    "sim": GraphDefinition(
        name="sim",
        description="simulated robot: two-rate pipeline + simulated servos, plant and mocap",
        arguments={
            **_COMMON_ARGS,
            "params_file": ("sim.yaml", "parameter file in config/ (or an absolute path)"),
            "plant_robot": ("", "robot description of the simulated plant (default: robot)"),
            "plant_model": ("", "override plant_sim_node's model: fem (full dynamic FEM), "
                                "reduced (POD-reduced), modal (linear modal) or mujoco (MuJoCo's "
                                "flex, an independent simulator: pip install mujoco)"),
            "clock": ("wall", "wall: real time; sim: the plant publishes /clock and every "
                              "other node uses it (use_sim_time)"),
        },
        build=_build_sim,
    ),
    "snake": GraphDefinition(
        name="snake",
        description="pneumatic soft snake: gait + simulated valves, snake plant and plate mocap",
        arguments={
            "params_file": ("sim_snake.yaml", "parameter file in config/ (or an absolute path)"),
            "record": ("", "write an MCAP rosbag2 of the graph's topics to this folder"),
            "clock": ("wall", "wall (default): real time (the snake plant keeps it at SCHED_FIFO "
                              "10 on 2 cores); sim: the snake plant publishes /clock, in lockstep "
                              "with the valve driver, and every other node uses it (valid "
                              "whatever the load)"),
        },
        build=_build_snake,
    ),
    "hardware": GraphDefinition(
        name="hardware",
        description="real robot: two-rate pipeline + servo/valve drivers + motion capture",
        arguments={
            **_COMMON_ARGS,
            "params_file": ("hardware.yaml", "parameter file in config/ (or an absolute path)"),
            "servos": ("", "servo driver config (config/drivers/*.yaml); empty: no servos"),
            "valves": ("", "valve driver config (config/drivers/*.yaml); empty: no valves"),
            "mocap": ("", "motion-capture source config; empty: no motion capture"),
        },
        build=_build_hardware,
    ),
    "hybrid": GraphDefinition(
        name="hybrid",
        description="simulated hybrid robot (arm + soft part + soft block): hybrid snapshot loop, "
                    "1 kHz inverse QP with joints and contacts, joint servos, plant, mocap",
        arguments={
            "robot": ("hybrid_arm", "hybrid robot description (type: hybrid): a name in config/robots or a path"),
            "trajectory": ("", "override target_node's trajectory (hold, line, square, circle, csv)"),
            "record": ("", "write an MCAP rosbag2 of the graph's topics to this folder"),
            "params_file": ("sim_hybrid.yaml", "parameter file in config/ (or an absolute path)"),
            "clock": ("wall", "wall: real time; sim: the plant publishes /clock and every "
                              "other node uses it (use_sim_time)"),
            "side": _SIDE_ARG,
        },
        build=_build_hybrid,
    ),
}


def graph_arguments(graph: str) -> Mapping[str, tuple[str, str]]:
    """Launch arguments of a graph: name -> (default, help)."""
    return _definition(graph).arguments


def parse_graph_arguments(items: list[str]) -> dict[str, str]:
    """``name:=value`` items (the command line of ``soft-inverse-ros launch`` and of the
    launch files' plant preparation) as a dict.

    Raises:
        ValueError: an item without ``:=`` or without a name.
    """
    values = {}
    for item in items:
        name, sep, value = item.partition(":=")
        if not sep or not name:
            raise ValueError(f"expected name:=value, got {item!r}")
        values[name] = value
    return values


def build_graph(graph: str, overrides: Mapping[str, str] | None = None) -> tuple[NodeSpec, ...]:
    """Nodes of ``graph`` for the given launch-argument overrides (``name -> value``).

    Raises:
        KeyError: unknown graph.
        ValueError: unknown argument or a bad value, naming it.
    """
    definition = _definition(graph)
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(definition.arguments))
    if unknown:
        raise ValueError(
            f"unknown argument(s) {unknown} for graph '{graph}'; "
            f"known: {sorted(definition.arguments)}"
        )
    args = {name: overrides.get(name, default) for name, (default, _) in definition.arguments.items()}
    side = args.get("side", "all").strip().lower()
    if side not in SIDES:
        raise ValueError(f"side must be one of {list(SIDES)}, got {args['side']!r}")
    nodes = definition.build(args)
    if side != "all":
        nodes = tuple(n for n in nodes if (n.name in LOW_RATE_NODES) == (side == "fem"))
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ValueError(f"graph '{graph}' has duplicate node names: {names}")
    return nodes


def resolve_params_file(name: str) -> Path:
    """A parameter file: an existing path as given, else a file of the package's config/."""
    path = Path(name).expanduser()
    if path.is_absolute() or path.exists():
        if not path.is_file():
            raise FileNotFoundError(f"parameter file not found: {path}")
        return path.resolve()
    from soft_inverse_ros.core.config_files import find_config

    return find_config(name)


def _definition(graph: str) -> GraphDefinition:
    try:
        return GRAPHS[graph]
    except KeyError:
        raise KeyError(f"unknown graph '{graph}'; known: {sorted(GRAPHS)}") from None
