"""``soft-inverse-ros launch GRAPH [name:=value ...]``: start a node graph as processes.

The same graph as ``ros2 launch soft_inverse_ros GRAPH.launch.py`` (both are built from
soft_inverse_ros/graph.py), for setups without the ROS 2 launch tools (PyPI wheels).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from soft_inverse_ros.cli_values import positive


def _check_inputs(nodes) -> None:
    """Refuse (ValueError, FileNotFoundError) what the nodes would refuse only once started,
    also for ``--dry-run``: a parameters file rcl cannot read (node_runtime.params_file_problem),
    a robot description that does not exist, a plant model or trajectory that is not one, a
    recording folder that cannot be made, and a driver's or motion capture's configuration
    file (``servos:=``, ``valves:=``, ``mocap:=``) that is missing or invalid (read as the
    node reads it; its device itself is opened only by the node)."""
    from soft_inverse_ros.core.config_files import resolve_robot
    from soft_inverse_ros.core.control.trajectory import SHAPES
    from soft_inverse_ros.core.drivers.config_reader import read_driver_section, resolve_device_config
    from soft_inverse_ros.core.drivers.servo_config import ServoDriverConfig
    from soft_inverse_ros.core.drivers.valve_config import ValveDriverConfig
    from soft_inverse_ros.core.mocap.config import load_mocap_config, resolve_source_config
    from soft_inverse_ros.core.sim.plant import PLANT_MODELS
    from soft_inverse_ros.graph import resolve_params_file
    from soft_inverse_ros.nodes.node_runtime import params_file_problem

    for name in sorted({f for spec in nodes for f in spec.params_files}):
        problem = params_file_problem(["--ros-args", "--params-file", str(resolve_params_file(name))])
        if problem is not None:
            raise ValueError(problem)
    for robot in sorted({str(spec.parameters["robot"]) for spec in nodes if spec.parameters.get("robot")}):
        resolve_robot(robot)
    for spec in nodes:
        given = spec.parameters
        if spec.executable == "plant_sim_node" and given.get("model") and given["model"] not in PLANT_MODELS:
            raise ValueError(f"plant_model {given['model']!r} is not one of {list(PLANT_MODELS)}")
        if spec.executable == "target_node" and given.get("trajectory") and given["trajectory"] not in SHAPES:
            raise ValueError(f"trajectory {given['trajectory']!r} is not one of {list(SHAPES)}")
        driver = {"servo_driver_node": ("servo_driver", ServoDriverConfig),
                  "valve_driver_node": ("valve_driver", ValveDriverConfig)}.get(spec.executable)
        if driver is not None and given.get("device_config"):
            path = resolve_device_config(str(given["device_config"]), "")
            try:
                driver[1].from_mapping(read_driver_section(path, driver[0], given.get("backend") or None))
            except ValueError as exc:
                raise ValueError(f"{spec.name}: device_config {path}: {exc}") from None
        if spec.executable == "mocap_node" and given.get("source_config"):
            path = resolve_source_config(str(given["source_config"]), str(given.get("backend", "")))
            try:
                load_mocap_config(path)
            except ValueError as exc:
                raise ValueError(f"{spec.name}: source_config {path}: {exc}") from None
        if spec.executable == "recorder_node" and given.get("output"):
            parent = Path(str(given["output"])).expanduser().resolve().parent
            existing = next(p for p in (parent, *parent.parents) if p.exists())
            if not existing.is_dir():
                raise ValueError(f"record {given['output']!r}: {existing} is a file, not a folder")


def _run(args: argparse.Namespace) -> int:
    from soft_inverse_ros.core.jit_warm_up import prebuild_graph_plant
    from soft_inverse_ros.graph import GRAPHS, build_graph, graph_arguments, parse_graph_arguments
    from soft_inverse_ros.process_launcher import node_command, run_graph

    if args.list or args.graph is None:
        for name, definition in GRAPHS.items():
            print(f"{name}: {definition.description}")
            for arg, (default, help_text) in definition.arguments.items():
                print(f"    {arg + ':=' + default:<30} {help_text}")
        return 0 if args.list else 2
    try:
        overrides = parse_graph_arguments(args.arguments)
        graph_arguments(args.graph)
        nodes = build_graph(args.graph, overrides)
        _check_inputs(nodes)
        commands = [node_command(spec) for spec in nodes]
    except KeyError as exc:  # an unknown graph: its message without the KeyError's quotes
        print(f"soft-inverse-ros launch: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as exc:
        print(f"soft-inverse-ros launch: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    if args.dry_run:
        for command in commands:
            print(" ".join(command))
        return 0
    try:  # a simulated robot's reduction into the build cache, not at SCHED_FIFO in the graph
        prebuild_graph_plant(nodes, lambda line: print(f"[launch] {line}", file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        print("[launch] interrupted while preparing the simulated robot: nothing was run", file=sys.stderr)
        return 130
    print(f"[launch] starting graph '{args.graph}': {', '.join(n.name for n in nodes)}",
          file=sys.stderr)
    return run_graph(nodes, duration=args.duration)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "launch",
        help="start a node graph (sim, hardware) as separate processes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("graph", nargs="?", help="graph name (see --list)")
    parser.add_argument("arguments", nargs="*", metavar="name:=value",
                        help="launch arguments, as for ros2 launch")
    parser.add_argument("--list", action="store_true", help="list graphs and their arguments")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the command of each process and exit")
    parser.add_argument("--duration", type=positive, default=None,
                        help="stop the graph after this many seconds (default: run until Ctrl-C)")
    # name:=value may also follow the options (launch sim --dry-run robot:=finger): cli.main
    # hands such leftovers to ``arguments``
    parser.set_defaults(func=_run, graph_arguments_anywhere=True)
