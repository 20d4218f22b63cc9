"""Pneumatic soft snake (issue 16): gait, simulated valves, snake plant and plate mocap.

    ros2 launch soft_inverse_ros snake.launch.py [clock:=sim] [record:=/tmp/snake1]

The node graph is defined once in soft_inverse_ros/graph.py (shared with
`soft-inverse-ros launch snake`); `ros2 launch soft_inverse_ros snake.launch.py --show-args`
lists the arguments.
"""

from soft_inverse_ros.launch_support import generate_launch_description_for


def generate_launch_description():
    return generate_launch_description_for("snake")
