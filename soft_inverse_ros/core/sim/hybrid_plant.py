"""The simulated hybrid robot: the arm of a hybrid description with its soft rod, pressing a
soft block, in dynamics (core/rigid/hybrid_dynamics.py: implicit Euler in the mixed
coordinates z = [q, x_free], Coevoet eq. 7-9) with unilateral contacts against the block
(:meth:`~soft_inverse_ros.core.rigid.hybrid_dynamics.HybridPlant.step_contacts`, eq. 12: the
block is a quasi-static linear FEM, clamped at its bottom, whose compliance at the contact
pairs enters the step's Signorini LCP).

The joints are position servos (stiffness from the description, torque at most the URDF's
``effort``) driven to setpoints [rad], e.g. the servo driver's measured shaft angles; the soft
force actuators apply their efforts
[N] as given (:meth:`HybridContactPlant.set_soft_efforts`); the servos compensate the arm's own weight
(feed-forward), the soft rod's weight is not compensated (it sags, unlike the controller's
quasi-static model: one deliberate mismatch). Contacts: each node of the rod's tip face
against the nearest block top-surface node (in the horizontal plane), normal +z. The plant
starts from the quasi-static equilibrium at the home posture. SI units, world = base frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.model.hybrid_description import HybridDescription
from soft_inverse_ros.core.rigid.hybrid_dynamics import HybridDynamicsConfig, HybridPlant
from soft_inverse_ros.core.rigid.hybrid_live import DescribedScene
from soft_inverse_ros.core.rigid.hybrid_scene import NORMAL


@dataclass(frozen=True)
class HybridPlantConfig:
    """Time step dt [s], Rayleigh damping α [1/s] and β [s], gravity [m/s²] (world)."""

    dt: float = 0.005
    rayleigh_mass: float = 1.0
    rayleigh_stiffness: float = 0.02
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)

    def __post_init__(self) -> None:
        if not (np.isfinite(self.dt) and 0 < self.dt <= 0.05):
            raise ValueError(f"hybrid plant: dt must be in (0, 0.05] s, got {self.dt!r}")
        if not (self.rayleigh_mass >= 0 and self.rayleigh_stiffness >= 0):
            raise ValueError("hybrid plant: Rayleigh coefficients must be >= 0")


class HybridContactPlant:
    """The simulated hybrid robot (module docstring)."""

    def __init__(self, desc: HybridDescription, config: HybridPlantConfig = HybridPlantConfig()) -> None:
        self.desc, self.config = desc, config
        self.scene = DescribedScene(desc)
        self.scene.settle()
        s = self.scene
        rod = CorotationalFEM(s.rod.rest_points, s.rod.tets, desc.soft_part.young_modulus,
                              desc.soft_part.poisson_ratio, density=desc.soft_part.density)
        self.dynamics = HybridPlant(s.mapping, rod, s.kj, s.q_cmd, HybridDynamicsConfig(
            step=config.dt, rayleigh_mass=config.rayleigh_mass, rayleigh_stiffness=config.rayleigh_stiffness,
            gravity=config.gravity, gravity_compensation=True),
            joint_effort_limit=s.chain.limits().effort)  # the URDF's motors
        self.dynamics.z = s.z.copy()
        self.soft_efforts = np.zeros(len(desc.soft_actuators))  # [N], the soft force actuators
        if len(desc.soft_actuators):
            self.dynamics.external_forces = lambda z: np.asarray(s.soft_rows(z).T @ self.soft_efforts).ravel()
        self.time = 0.0
        self.steps = 0
        self.forces = s.forces.copy()
        self.block_u = s.block_u.copy()
        self.pairs = np.zeros(len(s.tip), dtype=np.int64)
        self._fields: dict[tuple[int, ...], np.ndarray] = {}
        self._surface = s.block.rest_points[s.block_surface]

    @property
    def q(self) -> np.ndarray:
        """Joint angles [rad]."""
        return self.dynamics.z[: self.scene.chain.nq].copy()

    @property
    def q_cmd(self) -> np.ndarray:
        return self.dynamics.q_cmd.copy()

    def set_joint_setpoints(self, q_cmd: np.ndarray) -> None:
        """Servo setpoints [rad] (URDF order); non-finite entries keep their last value."""
        q_cmd = np.asarray(q_cmd, float)
        if q_cmd.shape != self.dynamics.q_cmd.shape:
            raise ValueError(f"expected {self.dynamics.q_cmd.size} joint setpoints, got shape {q_cmd.shape}")
        self.dynamics.q_cmd = np.where(np.isfinite(q_cmd), q_cmd, self.dynamics.q_cmd)

    def set_soft_efforts(self, efforts: np.ndarray) -> None:
        """Efforts [N] of the soft force actuators (description order); non-finite entries
        keep their last value."""
        efforts = np.asarray(efforts, float)
        if efforts.shape != self.soft_efforts.shape:
            raise ValueError(f"expected {self.soft_efforts.size} soft actuator efforts, got shape {efforts.shape}")
        self.soft_efforts = np.where(np.isfinite(efforts), efforts, self.soft_efforts)

    def soft_strokes(self) -> np.ndarray:
        """Soft actuator strokes [m] (anchor-to-node distance change from home)."""
        return self.scene.soft_strokes(self.dynamics.z)

    @property
    def rod_positions(self) -> np.ndarray:
        """Rod node positions (N, 3) [m]."""
        return self.dynamics.positions

    @property
    def block_positions(self) -> np.ndarray:
        """Block node positions (Nb, 3) [m] under the last contact forces."""
        return self.scene.block.rest_points + self.block_u.reshape(-1, 3)

    def probe_points(self) -> tuple[np.ndarray, np.ndarray]:
        """(tip, back) points of the probe axis [m]."""
        return self.scene.probe_points(self.rod_positions)

    def contact_points(self) -> np.ndarray:
        """(m, 3) block surface points paired with the rod's tip nodes [m]."""
        return self.block_positions[self.pairs]

    def _block_fields(self, pairs: np.ndarray) -> np.ndarray:
        key = tuple(int(p) for p in pairs)
        if key not in self._fields:
            if len(self._fields) > 64:
                self._fields.clear()
            self._fields[key] = self.scene._block_fields(pairs)
        return self._fields[key]

    def step(self) -> np.ndarray:
        """One step of dt; returns the contact forces [N] (one per tip node, >= 0)."""
        s, dyn = self.scene, self.dynamics
        x = dyn.positions
        tip = x[s.tip]
        self.pairs = s.block_surface[np.argmin(
            np.linalg.norm(tip[:, None, :2] - self._surface[None, :, :2], axis=-1), axis=1)]
        fields = self._block_fields(self.pairs)
        w_block = -fields[3 * self.pairs + 2]
        jac = dyn.jacobian()  # dense for the built-in arm's rod (HybridPlant.dense)
        rows = jac[3 * s.tip + 2] if np.allclose(NORMAL, [0, 0, 1]) else None
        gap = tip @ NORMAL - s.block.rest_points[self.pairs] @ NORMAL
        self.forces = dyn.step_contacts(rows, gap, w_block, jac=jac)
        self.block_u = fields @ self.forces
        self.time += self.config.dt
        self.steps += 1
        return self.forces
