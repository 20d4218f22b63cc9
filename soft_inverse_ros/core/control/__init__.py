"""The high-rate side: the inverse QP and its backends, actuator limits, closed-loop
feedback and target trajectories."""
