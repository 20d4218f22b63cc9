"""The simulated robot of the experiments (a light module: no numpy at import time, so the
command line's ``--help`` can show the defaults)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlantSpec:
    """The simulated robot of the experiments: a dynamic FEM plant deliberately unlike
    the controller's model (see :class:`~soft_inverse_ros.core.sim.plant.PlantConfig`; the
    fields not listed keep the plant's defaults: implicit Euler at ``dt``, Newton to
    convergence with a lagged tangent).

    Defaults: the built-in robot regenerated with a finer mesh (cell 6.5 mm: 2390 nodes
    against the controller's 1691; the generated geometry changes slightly with the cell
    size) and a 10 % softer silicone, Rayleigh stiffness damping 0.01 s (the undamped plant
    overshoots a stroke step by ~60 %), cables as 5 kN/m springs, steps of 10 ms (the servo
    period; on the square at 25 mm/s the effector stays within 5 µm of 5 ms steps at
    half the cost).
    """

    robot: str = "builtin_diamond"
    young_modulus_scale: float = 0.9
    mesh_cell_size: float = 0.0065
    dt: float = 0.01
    rayleigh_mass: float = 0.0
    rayleigh_stiffness: float = 0.01
    cable_stiffness: float = 5000.0

    def config(self):
        from soft_inverse_ros.core.sim.plant import PlantConfig

        return PlantConfig(robot=self.robot, young_modulus_scale=self.young_modulus_scale,
                           mesh_cell_size=self.mesh_cell_size, dt=self.dt,
                           rayleigh_mass=self.rayleigh_mass, rayleigh_stiffness=self.rayleigh_stiffness,
                           cable_stiffness=self.cable_stiffness)

    def as_dict(self) -> dict:
        from dataclasses import asdict, fields

        config = self.config()
        return {**asdict(self), **{f.name: getattr(config, f.name) for f in fields(config)}}
