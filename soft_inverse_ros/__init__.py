"""soft_inverse_ros: real-time inverse control of soft robots from FEM models (ROS 2).

The numerical core (``soft_inverse_ros.core``) never imports rclpy; ROS 2 nodes live in
``soft_inverse_ros.nodes`` and are thin wrappers over it.
"""

__version__ = "0.1.0"
