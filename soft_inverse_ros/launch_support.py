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
    """LaunchDescription declaring the graph's arguments and starting its nodes."""
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration

    arguments = graph_arguments(graph)

    def _nodes(context, *_, **__):
        values = {name: LaunchConfiguration(name).perform(context) for name in arguments}
        return [node_action(spec) for spec in build_graph(graph, values)]

    return LaunchDescription(
        [
            *(DeclareLaunchArgument(name, default_value=default, description=help_text)
              for name, (default, help_text) in arguments.items()),
            OpaqueFunction(function=_nodes),
        ]
    )
