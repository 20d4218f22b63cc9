"""The robot model: meshes, robot descriptions and units, the co-rotational FEM,
constraints (cables, cavities, forces, effectors), static solves, sparse solvers and the
compliance snapshot the low-rate loop publishes."""
