"""Rigid bodies and articulated chains mapped onto the FEM (Coevoet et al., hybrid soft-rigid arms).

``chain.py`` reads a URDF with Pinocchio (kinematics, frame Jacobians); ``mapping.py`` maps the
joint coordinates q onto rigidified FEM nodes (eq. 1-6: x = M(q), J = dM/dq, tau = J^T f,
K_q = J^T K J).
"""
