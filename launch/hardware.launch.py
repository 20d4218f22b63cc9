"""Real robot: the two-rate pipeline with servo and/or valve drivers and motion capture.

    ros2 launch soft_inverse_ros hardware.launch.py servos:=config/drivers/servos.yaml \
        mocap:=config/mocap.yaml

The node graph is defined once in soft_inverse_ros/graph.py (shared with
`soft-inverse-ros launch hardware`); `--show-args` lists the arguments.
"""

from soft_inverse_ros.launch_support import generate_launch_description_for


def generate_launch_description():
    return generate_launch_description_for("hardware")
