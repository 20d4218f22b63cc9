"""Numerical core: meshes, FEM, constraints, compliance, inverse QP, device protocols.

Nothing under this package may import rclpy (enforced by a test), so the core can be
tested and benchmarked without ROS 2.
"""
