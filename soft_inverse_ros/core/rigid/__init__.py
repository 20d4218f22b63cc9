"""Rigid serial chains (URDF, Pinocchio) and their coupling to soft FEM bodies (issue 15,
soft–rigid hybrid robots; Coevoet et al. §III). Pure numpy/scipy/pinocchio, no ROS."""
