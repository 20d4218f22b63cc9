"""Offline analysis of recorded runs: bag -> time series (run_data) -> metrics, plots,
3D snapshots -> report folder (report). No rclpy needed."""
