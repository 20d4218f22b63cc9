"""rosbag2 (MCAP) recording without rclpy: a typestore with the ROS 2 standard messages and
ours, a bag writer and a bag reader built on the ``rosbags`` library.

The recorder node (:mod:`soft_inverse_ros.nodes.recorder_node`) and the analysis tools
(:mod:`soft_inverse_ros.analysis`) use these; neither module imports rclpy.
"""
