"""Simulated robot: the two-rate pipeline with simulated servos, plant and motion capture.

    ros2 launch soft_inverse_ros sim.launch.py [robot:=diamond] [record:=/tmp/run1]

The node graph is defined once in soft_inverse_ros/graph.py (shared with
`soft-inverse-ros launch sim`); `ros2 launch soft_inverse_ros sim.launch.py --show-args`
lists the arguments.
"""

from soft_inverse_ros.launch_support import generate_launch_description_for


def generate_launch_description():
    return generate_launch_description_for("sim")
