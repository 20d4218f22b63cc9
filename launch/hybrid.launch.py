"""Simulated hybrid robot: arm + soft rod + soft block, the 1 kHz inverse QP with joints and
contacts, simulated joint servos, plant and motion capture.

    ros2 launch soft_inverse_ros hybrid.launch.py [record:=/tmp/run1] [clock:=sim]

The node graph is defined once in soft_inverse_ros/graph.py (shared with
`soft-inverse-ros launch hybrid`); `ros2 launch soft_inverse_ros hybrid.launch.py --show-args`
lists the arguments.
"""

from soft_inverse_ros.launch_support import generate_launch_description_for


def generate_launch_description():
    return generate_launch_description_for("hybrid")
