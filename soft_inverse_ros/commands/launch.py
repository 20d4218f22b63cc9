"""``soft-inverse-ros launch GRAPH [name:=value ...]``: start a node graph as processes.

The same graph as ``ros2 launch soft_inverse_ros GRAPH.launch.py`` (both are built from
soft_inverse_ros/graph.py), for setups without the ROS 2 launch tools (PyPI wheels).
"""

from __future__ import annotations

import argparse
import sys

from soft_inverse_ros.cli_values import positive


def _run(args: argparse.Namespace) -> int:
    from soft_inverse_ros.core.jit_warm_up import prebuild_graph_plant
    from soft_inverse_ros.graph import GRAPHS, build_graph, graph_arguments, parse_graph_arguments
    from soft_inverse_ros.graph_checks import check_graph_inputs
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
        check_graph_inputs(nodes)
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
        help="start a node graph (sim, snake, hybrid, hardware) as separate processes",
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
