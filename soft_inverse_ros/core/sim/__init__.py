"""The simulated robot: a dynamic FEM plant that is not the controller's model."""
