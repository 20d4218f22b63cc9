"""``ros2 launch`` adapter: turns a graph of :mod:`soft_inverse_ros.graph` into a
LaunchDescription. ``launch/*.launch.py`` are one-line wrappers around
:func:`generate_launch_description_for`, so ``ros2 launch`` and ``soft-inverse-ros launch``
start exactly the same nodes with the same parameters and remappings.

Needs the ``launch`` and ``launch_ros`` packages of a ROS 2 install (not on PyPI).
"""

from __future__ import annotations

from soft_inverse_ros.graph import (
    PACKAGE,
    NodeSpec,
    build_graph,
    graph_arguments,
    resolve_params_file,
)
from soft_inverse_ros.graph_checks import check_graph_inputs


def node_action(spec: NodeSpec):
    """A launch_ros Node action for one NodeSpec."""
    from launch.actions import Shutdown
    from launch_ros.actions import Node

    return Node(
        package=PACKAGE,
        executable=spec.executable,
        name=spec.name if spec.renames_node else None,
        parameters=[*(str(resolve_params_file(f)) for f in spec.params_files),
                    dict(spec.parameters)],
        remappings=list(spec.remappings),
        output="screen",
        emulate_tty=True,
        on_exit=[Shutdown(reason=f"required node {spec.name} exited")] if spec.required else None,
    )


def generate_launch_description_for(graph: str):
    """LaunchDescription declaring the graph's arguments and starting its nodes; a graph
    with a simulated robot first prepares it (:func:`plant_preparation`)."""
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration

    arguments = graph_arguments(graph)

    def _nodes(context, *_, **__):
        import launch.logging

        values = {name: LaunchConfiguration(name).perform(context) for name in arguments}
        # launch ignores an argument no file declares; a parent launch file's own arguments
        # are visible here too, so this is said, not refused
        ignored = sorted(set(context.launch_configurations) - set(arguments))
        if ignored:
            launch.logging.get_logger("launch").warning(
                f"{graph}.launch.py ignores argument(s) {ignored}: not its own (known: {sorted(arguments)})")
        specs = build_graph(graph, values)
        check_graph_inputs(specs)  # what the nodes would refuse once started, as `soft-inverse-ros launch`
        nodes = [node_action(spec) for spec in specs]
        return plant_preparation(graph, values, specs, nodes)

    return LaunchDescription(
        [
            *(DeclareLaunchArgument(name, default_value=default, description=help_text)
              for name, (default, help_text) in arguments.items()),
            OpaqueFunction(function=_nodes),
        ]
    )


def plant_preparation(graph: str, values: dict[str, str], specs, nodes: list) -> list:
    """The graph's nodes, started after a process that builds (or loads) its simulated robot
    into the plant build cache at normal priority (``python -m
    soft_inverse_ros.core.jit_warm_up --plant-of GRAPH name:=value ...``), as ``soft-inverse-ros
    launch`` does in its own process: built by ``plant_sim_node`` at SCHED_FIFO inside the
    starting graph, a new robot's or a changed code's reduction (~16 s) starved ``fem_node``
    until the controller went SAFE (core/jit_warm_up.py). The nodes as they are when the
    graph has no such plant; none, and the launch shut down, when the preparation was
    interrupted (Ctrl-C)."""
    import sys

    from launch.actions import ExecuteProcess, RegisterEventHandler, Shutdown
    from launch.event_handlers import OnProcessExit

    from soft_inverse_ros.core.jit_warm_up import PREBUILD_INTERRUPTED, graph_prebuilds_a_plant

    if not graph_prebuilds_a_plant(specs):
        return nodes
    preparation = ExecuteProcess(
        cmd=[sys.executable, "-m", "soft_inverse_ros.core.jit_warm_up", "--plant-of", graph,
             *(f"{name}:={value}" for name, value in values.items())],
        name="plant_preparation", output="screen", emulate_tty=True)

    def _after(event, context):
        if context.is_shutdown:
            return None
        if event.returncode == PREBUILD_INTERRUPTED or event.returncode < 0:  # Ctrl-C or a signal
            return [Shutdown(reason="interrupted while preparing the simulated robot")]
        return nodes  # prepared, or left to plant_sim_node, which reports what is wrong

    return [preparation, RegisterEventHandler(OnProcessExit(target_action=preparation, on_exit=_after))]
