"""ROS 2 nodes: thin rclpy wrappers over ``soft_inverse_ros.core``."""
