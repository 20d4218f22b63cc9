"""A dynamic FEM plant: the simulated robot the controller does NOT model exactly.

The plant integrates the co-rotational FEM in time with backward (implicit) Euler::

    M (v₊ − v) / h = f_el(x₊) + f_g + J_a(x₊)ᵀ λ(x₊) − C v₊,      x₊ = x + h v₊

over the free DOFs (clamped nodes stay at rest). M is the lumped (or consistent) mass of
the description's material, C = α M + β K Rayleigh damping (K: the co-rotational tangent
at the current state), f_g gravity. Each step solves the nonlinear equation for x₊ by
Newton iterations (at most ``newton_iterations``, stopping at ``newton_rtol``; an Armijo
line search on the incremental potential, whose gradient is the residual, keeps large
load jumps from diverging) with the Jacobian ``A = (1/h² + α/h) M + (1 + β/h) K + Σ_active k_c J_c J_cᵀ``; ``(1/h² + α/h) M +
(1 + β/h) K`` is solved by block PCG preconditioned with a reused factorization
(:class:`~soft_inverse_ros.core.model.linear_solvers.FactorReuseSolver`), and the rank-n_c cable
term by the Woodbury identity, so the factor's sparsity pattern never changes when
cables go slack or taut. K is lagged (re-assembled every ``tangent_every`` sub-steps, or
sooner when an iteration does not halve the residual): the equilibria are exact whatever
the lag, only the convergence rate depends on it.

Accuracy and cost (``soft-inverse-ros bench plant``): with the defaults the trajectory is
within ~0.02 mm of the fully converged implicit Euler solution at the same dt (one Newton
iteration: ~0.4 mm, about half the CPU); backward Euler itself damps the dynamics
numerically (ω·dt ≈ 0.3 for the built-in robot's first modes at dt = 10 ms).

Actuators (what the hardware really imposes):

- a cable is driven in DISPLACEMENT by its servo: the commanded stroke s [m] (cable
  pulled in) acts through a stiff spring k_c [N/m] (the cable's compliance), tension
  ``λ = k_c · max(0, s − δ(x))`` [N] where δ(x) is the cable shortening of the geometry
  (``L0 − L(x)``); a slack cable (``s < δ``) carries no tension;
- a pressure cavity is driven by its chamber pressure p [Pa] directly (λ = p);
- a force actuator is driven by its force [N] directly.

Contact (robots with a ``collision`` section, ``contact: description``): after each
sub-step's free motion the contacts detected at the sub-step's start are corrected
(core/contact/correction.py: Signorini, optionally Coulomb against obstacles, W = H A⁻¹ Hᵀ
with this step's matrix A), ``last_contact`` holds what the correction did. Obstacles with
a ``motion`` are placed where they are at the end of each sub-step (plant time from 0).

Deliberate model mismatch against the controller's :class:`RobotModel`: a Young's
modulus scale, a different mesh (any mesh file, or the built-in mesh regenerated with
another cell size), the cable compliance, and the dynamics themselves.

Units SI, robot base frame of the description (REP-103): positions [m], velocities
[m/s], time [s], tensions/forces [N], pressures [Pa].

Typical use (an offline co-simulation)::

    plant = SoftRobotPlant.from_config(PlantConfig(robot="builtin_diamond", dt=0.005))
    plant.equilibrate()                       # static start under gravity
    for k in range(1000):
        state = plant.step(cable_strokes=strokes_from_servos)
        tip = state.effector_position
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from soft_inverse_ros.core.contact.correction import ContactModel, ContactStats, contact_model_from_description
from soft_inverse_ros.core.model.description import RobotDescription, load_robot_description
from soft_inverse_ros.core.model.linear_solvers import (
    SOLVER_NAMES,
    ConvergenceError,
    FactorReuseSolver,
    make_solver,
)
from soft_inverse_ros.core.model.mapping import BarycentricMapping, map_points
from soft_inverse_ros.core.model.robot_model import RobotModel
from soft_inverse_ros.core.model.snapshot import ActuatorKind

__all__ = [
    "ConvergenceError",
    "PlantConfig",
    "PlantConfigError",
    "PlantState",
    "SoftRobotPlant",
    "MASS_MODELS",
    "PLANT_MODELS",
    "make_plant",
]

#: plant models (see make_plant)
PLANT_MODELS = ("fem", "reduced", "modal", "mujoco")
#: mass discretizations
MASS_MODELS = ("lumped", "consistent")
#: contact: the robot description's collision section, or none
CONTACT_MODES = ("description", "off")
#: a Newton iteration must shrink the residual by this factor, else the tangent is refreshed
_CONTRACTION = 0.5
#: halvings of a Newton step whose residual is larger than before
_MAX_BACKTRACKS = 4


class PlantConfigError(ValueError):
    """An invalid plant configuration; the message names the key."""


@dataclass(frozen=True)
class PlantConfig:
    """Configuration of the simulated plant (SI units).

    Field metadata (description, range, choices) is read by the ROS node runtime to
    declare typed parameters; :meth:`__post_init__` validates everything once.
    """

    robot: str = field(default="builtin_diamond", metadata={
        "description": "robot description: a name in config/robots or a YAML path"})
    model: str = field(default="fem", metadata={
        "description": "fem = full co-rotational dynamic FEM; reduced = its Galerkin "
                       "projection on a basis of static and vibration modes (co-rotational "
                       "elasticity, cheaper solves); modal = that basis with linear "
                       "elasticity about the slack equilibrium (cheapest, no foreshortening; "
                       "core/sim/modal_plant.py); mujoco = the MuJoCo engine (3D flex with "
                       "Saint Venant-Kirchhoff elasticity, cables as tendons; optional extra: "
                       "pip install -r requirements/mujoco.txt; core/sim/mujoco_plant.py)",
        "choices": PLANT_MODELS})
    modal_modes: int = field(default=24, metadata={
        "description": "vibration modes in the modal plant's basis (besides the static "
                       "modes of the actuators, gravity and effector rows)", "range": (0, 500)})
    hyper_reduction_tolerance: float = field(default=0.0, metadata={
        "description": "model: reduced: hyper-reduction (ECSW, core/sim/hyper_reduction.py): "
                       "the elastic forces and tangent are evaluated on a weighted sample of "
                       "the elements that reproduces the projected forces of the training "
                       "run to this relative error (0.002: ~10 % of the elements); 0: every "
                       "element; the other models evaluate every element and ignore it (as "
                       "the full FEM ignores modal_modes)", "range": (0.0, 0.5)})
    young_modulus_scale: float = field(default=1.0, metadata={
        "description": "multiplies the description's Young's modulus (model mismatch)",
        "range": (0.01, 100.0)})
    mesh_file: str = field(default="", metadata={
        "description": "replace the description's mesh by this file (same unit and "
                       "transform); empty: keep it"})
    mesh_cell_size: float = field(default=0.0, metadata={
        "description": "regenerate a built-in mesh with this cell size [m] (0: keep the "
                       "description's); a robot whose mesh is a file keeps it (give mesh_file "
                       "to change it)", "range": (0.0, 1.0)})
    cable_stiffness: float = field(default=5000.0, metadata={
        "description": "cable spring stiffness k_c [N/m] between servo stroke and robot "
                       "(finite: compliant cable)", "range": (1e-3, 1e9)})
    rayleigh_mass: float = field(default=-1.0, metadata={
        "description": "Rayleigh damping alpha [1/s] (C = alpha M + beta K); negative: "
                       "the description's material.rayleigh_mass", "range": (-1.0, 1e4)})
    rayleigh_stiffness: float = field(default=-1.0, metadata={
        "description": "Rayleigh damping beta [s]; negative: the description's "
                       "material.rayleigh_stiffness", "range": (-1.0, 10.0)})
    mass: str = field(default="lumped", metadata={
        "description": "mass matrix", "choices": MASS_MODELS})
    dt: float = field(default=0.005, metadata={
        "description": "plant time step [s] (one call of step())", "range": (1e-5, 1.0)})
    substeps: int = field(default=1, metadata={
        "description": "implicit Euler sub-steps per time step", "range": (1, 1000)})
    newton_iterations: int = field(default=2, metadata={
        "description": "most Newton iterations per sub-step (stops earlier when converged)",
        "range": (1, 50)})
    newton_rtol: float = field(default=0.01, metadata={
        "description": "Newton stops when |residual| <= newton_rtol (|gravity| + |J^T lambda|)",
        "range": (0.0, 1.0)})
    tangent_every: int = field(default=10, metadata={
        "description": "re-assemble the tangent K at least every this many sub-steps "
                       "(lagged tangent: cheaper steps, same equilibria; also re-assembled "
                       "when an iteration does not halve the residual)", "range": (1, 1000)})
    factorize_new_tangent: bool = field(default=True, metadata={
        "description": "factorize each new tangent at once and solve its lagged steps "
                       "directly (else: PCG with the older factor, refactorized by cost)"})
    solver: str = field(default="auto", metadata={
        "description": "sparse direct solver of the factorization", "choices": SOLVER_NAMES})
    contact: str = field(default="description", metadata={
        "description": "description = the robot description's collision section (self-collision, "
                       "obstacles; model fem only), if it has one; off = no contact",
        "choices": CONTACT_MODES})
    pcg_rtol: float = field(default=1e-8, metadata={
        "description": "relative tolerance of the preconditioned CG solves",
        "range": (1e-14, 1e-2)})

    def __post_init__(self) -> None:
        def bad(key: str, message: str) -> PlantConfigError:
            return PlantConfigError(f"plant config: {key}: {message}")

        if not isinstance(self.robot, (str, Path)) or not str(self.robot).strip():
            raise bad("robot", f"expected a robot name or YAML path, got {self.robot!r}")
        positive = {
            "young_modulus_scale": self.young_modulus_scale,
            "cable_stiffness": self.cable_stiffness,
            "dt": self.dt,
            "pcg_rtol": self.pcg_rtol,
        }
        for key, value in positive.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise bad(key, f"must be a finite number > 0, got {value!r}")
        if not (math.isfinite(self.mesh_cell_size) and self.mesh_cell_size >= 0):
            raise bad("mesh_cell_size", f"must be >= 0 m (0: keep), got {self.mesh_cell_size!r}")
        if self.mesh_cell_size > 0 and self.mesh_file:
            raise bad("mesh_cell_size", "give mesh_file or mesh_cell_size, not both")
        for key in ("rayleigh_mass", "rayleigh_stiffness"):
            value = getattr(self, key)
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise bad(key, f"must be a finite number (negative: from the description), got {value!r}")
        if self.model not in PLANT_MODELS:
            raise bad("model", f"expected one of {list(PLANT_MODELS)}, got {self.model!r}")
        if not (math.isfinite(self.hyper_reduction_tolerance)
                and 0.0 <= self.hyper_reduction_tolerance <= 0.5):
            raise bad("hyper_reduction_tolerance",
                      f"must be in [0, 0.5] (0: off), got {self.hyper_reduction_tolerance!r}")
        if isinstance(self.modal_modes, bool) or not isinstance(self.modal_modes, int) \
                or self.modal_modes < 0:
            raise bad("modal_modes", f"must be an integer >= 0, got {self.modal_modes!r}")
        if self.mass not in MASS_MODELS:
            raise bad("mass", f"expected one of {list(MASS_MODELS)}, got {self.mass!r}")
        if self.contact not in CONTACT_MODES:
            raise bad("contact", f"expected one of {list(CONTACT_MODES)}, got {self.contact!r}")
        if self.solver not in SOLVER_NAMES:
            raise bad("solver", f"expected one of {list(SOLVER_NAMES)}, got {self.solver!r}")
        for key in ("substeps", "newton_iterations", "tangent_every"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise bad(key, f"must be an integer >= 1, got {value!r}")
        if not (math.isfinite(self.newton_rtol) and self.newton_rtol >= 0):
            raise bad("newton_rtol", f"must be >= 0, got {self.newton_rtol!r}")


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class PlantState:
    """The plant after a step (arrays are copies).

    Attributes:
        time: simulated time [s] since the last reset.
        positions: node positions (N, 3) [m].
        velocities: node velocities (N, 3) [m/s].
        effector_position: effector rows (n_e,) [m] (see ``SoftRobotPlant.effector_row_names``).
        efforts: per actuator (n_a,): cable tension [N], pressure [Pa] or force [N].
        actuator_strokes: per actuator (n_a,): geometric stroke δ_a(x) [m or m³]
            (cable shortening, cavity volume growth, force displacement).
        cable_strokes: commanded cable strokes s (n_cables,) [m] (servo side).
        cable_tensions: (n_cables,) [N] (0 when slack).
        kinetic_energy: ½ vᵀ M v [J].
        residual_norm: |g| of the implicit-Euler equation after the last Newton
            correction of the last sub-step [N].
        newton_iterations: Newton iterations of the last sub-step.
        solve_iterations: PCG iterations of the step (0: direct solves only).
        wall_time: computation time of the step [s].
    """

    time: float
    positions: np.ndarray
    velocities: np.ndarray
    effector_position: np.ndarray
    efforts: np.ndarray
    actuator_strokes: np.ndarray
    cable_strokes: np.ndarray
    cable_tensions: np.ndarray
    kinetic_energy: float
    residual_norm: float
    newton_iterations: int
    solve_iterations: int
    wall_time: float


@dataclass
class _Geometry:
    """What one evaluation of the geometry gives (at node positions x)."""

    positions: np.ndarray  # (N, 3)
    state: object  # fem.ElementState
    strokes: np.ndarray  # (n_a,) δ_a(x)
    jacobian_t: np.ndarray | None  # (n_free, n_a); None in a reduced model's coordinates
    reduced_jacobian_t: np.ndarray | None = None  # (r, n_a) Φᵀ Jᵀ of a reduced model


def _plant_mesh(desc: RobotDescription, cfg: PlantConfig) -> RobotDescription:
    """The description with the plant's mesh: a mesh file override (same unit and
    transform as the description's mesh; for a built-in mesh, in ``length_unit``) or a
    built-in mesh regenerated with another cell size (a mesh file is kept as it is)."""
    if cfg.mesh_file:
        path = Path(cfg.mesh_file).expanduser()
        if not path.is_file():
            raise PlantConfigError(f"plant config: mesh_file: {path} not found")
        spec = dataclasses.replace(desc.mesh, file=path.resolve(), builtin=None, builtin_params={})
        return dataclasses.replace(desc, mesh=spec)
    if cfg.mesh_cell_size > 0 and desc.mesh.builtin is not None:
        spec = dataclasses.replace(
            desc.mesh, builtin_params={**dict(desc.mesh.builtin_params), "cell_size": cfg.mesh_cell_size}
        )
        return dataclasses.replace(desc, mesh=spec)
    return desc


class SoftRobotPlant:
    """Dynamic co-rotational FEM plant of one robot (see the module docstring).

    Build it with :meth:`from_config` (loads the description by name) or from a
    description object. Inputs (cable strokes, pressures, forces) are held between steps.

    Raises (construction):
        PlantConfigError: inconsistent configuration.
        DescriptionError / MeshError / MappingError: bad description or mesh.
    """

    def __init__(self, description: RobotDescription, config: PlantConfig | None = None) -> None:
        cfg = PlantConfig(robot=description.name) if config is None else config
        self.config = cfg
        desc = _plant_mesh(description, cfg)
        mesh = desc.load_mesh()
        self.description = desc
        #: the quasi-static model of the plant's own mesh and material (its FEM, constraints
        #: and gravity are the plant's; also gives static equilibria for comparisons).
        self.model = RobotModel.from_description(
            desc, solver=cfg.solver, young_modulus_scale=cfg.young_modulus_scale, mesh=mesh,
            factor_reuse=False,
        )
        self.fem = self.model.fem
        self.mesh = self.model.mesh
        self.actuators = self.model.actuators
        self.effectors = self.model.effectors
        kinds = self.model.actuator_kinds
        self._kinds = kinds
        self._cable_idx = np.array([i for i, k in enumerate(kinds) if k == ActuatorKind.CABLE], int)
        self._pressure_idx = np.array([i for i, k in enumerate(kinds) if k == ActuatorKind.PRESSURE], int)
        self._force_idx = np.array([i for i, k in enumerate(kinds) if k == ActuatorKind.FORCE], int)
        mat = desc.material
        self.rayleigh_mass = mat.rayleigh_mass if cfg.rayleigh_mass < 0 else float(cfg.rayleigh_mass)
        self.rayleigh_stiffness = (
            mat.rayleigh_stiffness if cfg.rayleigh_stiffness < 0 else float(cfg.rayleigh_stiffness)
        )
        self.cable_stiffness = float(cfg.cable_stiffness)
        fem = self.fem
        self._f_g = fem.reduce(self.model.gravity_forces)  # (n_free,) [N]
        if cfg.mass == "lumped":
            self._mass_diag = np.repeat(fem.lumped_mass()[fem.free_nodes], 3)  # (n_free,)
            self._mass_matrix: sp.csr_matrix | None = None
            k0 = fem.rest_stiffness()
            rows = np.repeat(np.arange(k0.shape[0]), np.diff(k0.indptr))
            self._diag_slots = np.flatnonzero(k0.indices == rows)
            if len(self._diag_slots) != k0.shape[0]:
                raise RuntimeError("stiffness pattern lacks diagonal entries")
        else:
            self._mass_diag = None
            self._mass_matrix = fem.consistent_mass_matrix()
        self.total_mass = float(fem.lumped_mass().sum())
        #: residual at round-off level [N] (nothing left to solve)
        self._atol = self.model.statics.atol
        self._solver = FactorReuseSolver(make_solver(cfg.solver, size=fem.n_free), rtol=cfg.pcg_rtol)
        self._marker_maps: dict[bytes, BarycentricMapping] = {}
        #: contacts corrected after every sub-step (None: no contact); see set_contact
        self.contact: ContactModel | None = None
        #: what the last sub-step's contact correction did (None before the first)
        self.last_contact: ContactStats | None = None
        if cfg.contact == "description" and desc.collision is not None:
            if cfg.model != "fem":
                raise PlantConfigError(
                    f"plant config: robot {desc.name!r} has a collision section: contact needs plant model "
                    f"'fem', not {cfg.model!r} (e.g. demo --plant-model fem), or contact 'off'")
            self.set_contact(contact_model_from_description(desc, self.surface_faces(), self.fem.rest_points,
                                                            self.fem.tets))
            h = cfg.dt / cfg.substeps  # detection runs at each sub-step
            for i, o in enumerate(desc.collision.obstacles):  # a contact must not be passed unseen
                travel = 0.0 if o.motion is None else o.motion.speed_bound() * h
                if travel > desc.collision.alarm_distance:
                    raise PlantConfigError(
                        f"plant config: obstacle {i} moves up to {1e3 * travel:.3g} mm per {1e3 * h:g} ms "
                        f"sub-step, more than the alarm distance {1e3 * desc.collision.alarm_distance:g} mm: "
                        "a contact would be passed unseen (a slower motion, a larger alarm distance, more "
                        "substeps or a shorter dt)")
        self.reset()

    @classmethod
    def from_config(cls, config: PlantConfig) -> "SoftRobotPlant":
        """Load ``config.robot`` (name in config/robots or YAML path) and build the plant."""
        return cls(load_robot_description(config.robot), config)

    # ------------------------------------------------------------------ description
    @property
    def actuator_names(self) -> tuple[str, ...]:
        return self.model.actuator_names

    @property
    def actuator_kinds(self) -> tuple[ActuatorKind, ...]:
        return self._kinds

    @property
    def cable_names(self) -> tuple[str, ...]:
        """Cable actuators, in the order of ``cable_strokes``."""
        return tuple(self.actuator_names[i] for i in self._cable_idx)

    @property
    def pressure_names(self) -> tuple[str, ...]:
        """Cavity actuators, in the order of ``pressures``."""
        return tuple(self.actuator_names[i] for i in self._pressure_idx)

    @property
    def force_names(self) -> tuple[str, ...]:
        """Force actuators, in the order of ``forces``."""
        return tuple(self.actuator_names[i] for i in self._force_idx)

    @property
    def effector_row_names(self) -> tuple[str, ...]:
        return self.model.effector_names

    @property
    def frame_id(self) -> str:
        return self.description.frame_id

    # ------------------------------------------------------------------ state
    @property
    def time(self) -> float:
        """Simulated time since the last reset [s]."""
        return self._time

    @property
    def positions(self) -> np.ndarray:
        """Node positions (N, 3) [m] (read-only view)."""
        v = self._geo.positions.view()
        v.flags.writeable = False
        return v

    @property
    def velocities(self) -> np.ndarray:
        """Node velocities (N, 3) [m/s] (copy)."""
        return self.fem.expand(self._v)

    @property
    def effector_position(self) -> np.ndarray:
        """Effector rows (n_e,) [m] at the current state."""
        return self.effectors.values(self._geo.positions)

    @property
    def cable_strokes(self) -> np.ndarray:
        """Commanded cable strokes s (n_cables,) [m]."""
        return self._s.copy()

    @property
    def pressures(self) -> np.ndarray:
        return self._p.copy()

    @property
    def forces(self) -> np.ndarray:
        return self._f.copy()

    def efforts(self) -> np.ndarray:
        """Efforts λ (n_a,) at the current state: tensions [N], pressures [Pa], forces [N]."""
        return self._efforts(self._geo.strokes)

    def reset(self) -> None:
        """Rest shape, zero velocity, zero inputs, time 0 (factorizations are kept)."""
        rest = self.fem.rest_points.copy()
        self._geo = self._evaluate(rest)
        self._v = np.zeros(self.fem.n_free)
        self._time = 0.0
        if getattr(self, "contact", None) is not None:
            self.contact.move_obstacles_to(0.0)
        self._s = np.zeros(len(self._cable_idx))
        self._p = np.zeros(len(self._pressure_idx))
        self._f = np.zeros(len(self._force_idx))
        self._k: sp.csr_matrix | None = None
        self._a0: sp.csr_matrix | None = None
        self._a0_h = 0.0
        self._factor_of: sp.csr_matrix | None = None  # the A0 the solver's factor is of
        self._since_tangent = 0
        self._refresh_next = False
        self._warm: np.ndarray | None = None
        #: tangent assemblies since construction (diagnostics)
        self.tangent_assemblies = getattr(self, "tangent_assemblies", 0)

    def set_state(self, positions: np.ndarray, velocities: np.ndarray | None = None) -> None:
        """Set node positions (N, 3) [m] (fixed nodes are put back at rest) and velocities."""
        x = np.array(positions, float).reshape(self.fem.n_nodes, 3)
        if not np.all(np.isfinite(x)):
            raise ValueError("positions must be finite")
        x[self.fem.fixed_mask] = self.fem.rest_points[self.fem.fixed_mask]
        v = np.zeros((self.fem.n_nodes, 3)) if velocities is None else np.asarray(velocities, float)
        if v.shape != (self.fem.n_nodes, 3) or not np.all(np.isfinite(v)):
            raise ValueError(f"velocities must be finite (N, 3) = ({self.fem.n_nodes}, 3)")
        self._geo = self._evaluate(x)
        self._v = self.fem.reduce(v).copy()
        self._k = None

    def set_inputs(
        self,
        cable_strokes: Sequence[float] | np.ndarray | None = None,
        pressures: Sequence[float] | np.ndarray | None = None,
        forces: Sequence[float] | np.ndarray | None = None,
    ) -> None:
        """Set (and hold) the inputs; None keeps the current value.

        Args:
            cable_strokes: (n_cables,) commanded strokes s [m] (cable pulled in > 0).
            pressures: (n_cavities,) chamber pressures [Pa].
            forces: (n_forces,) forces [N].

        Raises:
            ValueError: wrong length or non-finite values (inputs unchanged).
        """
        new = []
        for name, value, current in (
            ("cable_strokes", cable_strokes, self._s),
            ("pressures", pressures, self._p),
            ("forces", forces, self._f),
        ):
            if value is None:
                new.append(current)
                continue
            a = np.asarray(value, dtype=float).reshape(-1)
            if a.shape != current.shape:
                raise ValueError(f"{name}: expected {current.size} values, got {a.size}")
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{name} must be finite, got {a.tolist()}")
            new.append(a.copy())
        self._s, self._p, self._f = new

    # ------------------------------------------------------------------ physics
    def _evaluate(self, x: np.ndarray) -> _Geometry:
        state = self.fem.element_state(x)
        strokes, jt = self.actuators.values_and_jacobian_t(x)
        return _Geometry(x, state, strokes, jt)

    def _efforts(self, strokes: np.ndarray) -> np.ndarray:
        lam = np.zeros(len(strokes))
        if len(self._cable_idx):
            lam[self._cable_idx] = self.cable_stiffness * np.maximum(0.0, self._s - strokes[self._cable_idx])
        lam[self._pressure_idx] = self._p
        lam[self._force_idx] = self._f
        return lam

    def _forces(self, geo: _Geometry) -> tuple[np.ndarray, np.ndarray]:
        """(f(x) (n_free,) = f_el + f_g + J_aᵀ λ(x) [N], λ (n_a,))."""
        lam = self._efforts(geo.strokes)
        f = self.fem.reduce(geo.state.forces) + self._f_g + geo.jacobian_t @ lam
        return f, lam

    def _mass_times(self, v: np.ndarray) -> np.ndarray:
        if self._mass_diag is not None:
            return self._mass_diag * v
        return self._mass_matrix @ v

    def _system(self, k: sp.csr_matrix, h: float) -> sp.csr_matrix:
        """A0 = (1/h² + α/h) M + (1 + β/h) K (same sparsity pattern as K)."""
        am = 1.0 / h**2 + self.rayleigh_mass / h
        ak = 1.0 + self.rayleigh_stiffness / h
        data = k.data * ak
        if self._mass_diag is not None:
            data[self._diag_slots] += am * self._mass_diag
        else:
            data += am * self._mass_matrix.data
        return sp.csr_matrix((data, k.indices, k.indptr), shape=k.shape, copy=False)

    def _active_cables(self, geo: _Geometry) -> np.ndarray:
        """Indices (into the actuators) of the taut cables."""
        if not len(self._cable_idx):
            return self._cable_idx
        taut = self._s - geo.strokes[self._cable_idx] > 0.0
        return self._cable_idx[taut]

    def _solve_newton(self, a0: sp.csr_matrix, rhs: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, int]:
        """Δ = (A0 + k U Uᵀ)⁻¹ rhs by Woodbury; U (n_free, m) the taut cables' J_aᵀ.

        The block [rhs, U] is solved with A0 by the factor-reuse solver (PCG on a changed
        A0), or by one direct solve when the factor is of this very A0 (lagged tangent).
        """
        block = np.column_stack((rhs, u)) if u.shape[1] else rhs[:, None]
        if self._factor_of is not a0 and self.config.factorize_new_tangent:
            # A new lagged tangent serves the next tangent_every steps: one factorization
            # now makes every one of them a direct solve (PCG would iterate each step).
            self._solver.factorize(a0)
            self._factor_of = a0
        if self._factor_of is a0:
            sol = np.asarray(self._solver.direct.solve(block)).reshape(block.shape)
            its = 0
        else:
            warm = self._warm if self._warm is not None and self._warm.shape == block.shape else None
            before = self._solver.stats.factorizations
            sol = np.asarray(self._solver.solve(a0, block, warm)).reshape(block.shape)
            its = self._solver.stats.last_iterations
            if self._solver.stats.factorizations != before and not self._solver.background:
                self._factor_of = a0  # refactorized on this A0 (synchronously)
        if not np.all(np.isfinite(sol)):
            raise ConvergenceError("plant step: non-finite linear solve")
        self._warm = sol
        return self._woodbury(sol, u), its

    def _woodbury(self, sol: np.ndarray, u: np.ndarray) -> np.ndarray:
        """(A0 + k U Uᵀ)⁻¹ B from ``sol = A0⁻¹ [B, U]`` (Woodbury, k the cable stiffness):
        (n,) for one right-hand side B, else (n, columns of B)."""
        n_rhs = sol.shape[1] - u.shape[1]
        y = sol[:, :n_rhs]
        if u.shape[1]:
            z = sol[:, n_rhs:]
            small = np.eye(u.shape[1]) / self.cable_stiffness + u.T @ z
            y = y - z @ np.linalg.solve(small, u.T @ y)
        return y[:, 0] if n_rhs == 1 else y

    def step(
        self,
        dt: float | None = None,
        cable_strokes: Sequence[float] | np.ndarray | None = None,
        pressures: Sequence[float] | np.ndarray | None = None,
        forces: Sequence[float] | np.ndarray | None = None,
    ) -> PlantState:
        """Advance by ``dt`` [s] (default ``config.dt``) in ``config.substeps`` implicit
        Euler sub-steps, under the given inputs (None: hold the previous ones).

        Raises:
            ValueError: bad inputs or dt.
            ConvergenceError: non-finite state (the plant keeps its previous state).
        """
        t0 = time.perf_counter()
        h_total = self._begin_step(dt, cable_strokes, pressures, forces)
        n_sub = self.config.substeps
        h = h_total / n_sub
        geo, v = self._geo, self._v
        solve_its = 0
        residual = 0.0
        its = 0
        for i in range(n_sub):
            start = geo.positions
            geo, v, residual, its, s_its = self._substep(geo, v, h)
            solve_its += s_its
            if self.contact is not None:
                # moving obstacles where they are at the end of this sub-step
                self.contact.move_obstacles_to(self._time + (i + 1) * h)
                geo, v = self._contact_correction(geo, v, h, start)
        self._geo, self._v = geo, v
        self._time += h_total
        return self._state(residual, its, solve_its, time.perf_counter() - t0)

    def _begin_step(self, dt, cable_strokes, pressures, forces) -> float:
        """The step's length [s] (``dt`` or ``config.dt``), with the new inputs held.

        Raises:
            ValueError: bad inputs or dt (nothing changed).
        """
        h_total = self.config.dt if dt is None else float(dt)
        if not (math.isfinite(h_total) and h_total > 0):
            raise ValueError(f"dt must be > 0 s, got {dt!r}")
        self.set_inputs(cable_strokes, pressures, forces)
        return h_total

    def _refresh_tangent(self, geo: _Geometry, h: float) -> None:
        """Re-assemble K at ``geo`` and rebuild A0 for sub-steps of length h."""
        self._k = self.fem.stiffness(geo.state)
        self._a0 = self._system(self._k, h)
        self._a0_h = h
        self._since_tangent = 0
        self.tangent_assemblies += 1

    def _prepare_tangent(self, geo0: _Geometry, h: float) -> None:
        """Make ``self._a0`` the system matrix for a sub-step of ``h`` [s] from ``geo0``:
        re-assemble the tangent K when it is missing, ``tangent_every`` sub-steps old or
        flagged, else reuse the lagged K (rebuilding A0 only if h changed)."""
        if self._k is None or self._since_tangent >= self.config.tangent_every or self._refresh_next:
            self._refresh_tangent(geo0, h)
            self._refresh_next = False
        elif self._a0_h != h:
            self._a0 = self._system(self._k, h)
            self._a0_h = h
        self._since_tangent += 1

    def _residual_at(
        self, geo: _Geometry, x0: np.ndarray, mv0: np.ndarray, k_damp: sp.csr_matrix, h: float
    ) -> tuple[np.ndarray, float, float, np.ndarray, float]:
        """(g, |g|, force scale, h v₊, Φ) at ``geo``: g is the implicit Euler residual [N]
        and the gradient of the incremental potential Φ [J] (inertia + damping + strain +
        gravity + cable springs + pressure/force work), which the line search uses.

        ``x0`` (n_free,) start positions [m], ``mv0`` = M v0 [kg·m/s], ``k_damp`` the
        stiffness of the damping C = αM + βK (fixed within the sub-step), ``h`` [s].
        |g| and Φ are inf when non-finite.
        """
        alpha, beta = self.rayleigh_mass, self.rayleigh_stiffness
        f, lam = self._forces(geo)
        w = self.fem.reduce(geo.positions) - x0  # h v₊
        mw = self._mass_times(w)
        g = mw / h**2 - mv0 / h - f
        phi = float(w @ mw) / (2 * h**2) - float(w @ mv0) / h
        if alpha or beta:
            cw = alpha * mw + beta * (k_damp @ w)
            g += cw / h
            phi += float(w @ cw) / (2 * h)
        phi += self._potential(geo)
        norm = float(np.linalg.norm(g))
        scale = float(np.linalg.norm(self._f_g) + np.linalg.norm(geo.jacobian_t @ lam))
        ok = math.isfinite(norm) and math.isfinite(phi)
        return g, (norm if ok else math.inf), scale, w, (phi if ok else math.inf)

    def _line_search(
        self, geo: _Geometry, g: np.ndarray, dx: np.ndarray, residual: float, phi: float,
        x0: np.ndarray, mv0: np.ndarray, k_damp: sp.csr_matrix, h: float,
    ) -> tuple[_Geometry, np.ndarray, float, float, np.ndarray, float]:
        """Armijo backtracking on Φ along the Newton step ``dx`` (n_free,) [m] from ``geo``
        (accepting any step that lowers Φ or |g|): guards against a far-off lagged tangent
        or a large load jump. Returns the accepted (or least-residual) trial as
        (geo, g, |g|, scale, h v₊, Φ) (see :meth:`_residual_at`).

        Raises:
            ConvergenceError: every trial is non-finite.
        """
        slope = float(g @ dx)  # dΦ/dstep at 0 (< 0: A is SPD)
        best = None
        step = 1.0
        for _ in range(_MAX_BACKTRACKS + 1):
            trial = self._evaluate(geo.positions + step * self.fem.expand(dx))
            t_g, t_res, t_scale, t_w, t_phi = self._residual_at(trial, x0, mv0, k_damp, h)
            if best is None or t_res < best[2]:
                best = (trial, t_g, t_res, t_scale, t_w, t_phi)
            if t_phi <= phi + 1e-4 * step * min(slope, 0.0) or t_res < residual:
                best = (trial, t_g, t_res, t_scale, t_w, t_phi)
                break
            step *= 0.5
        if not math.isfinite(best[2]):
            raise ConvergenceError("plant step: non-finite state")
        return best

    def _substep(
        self, geo0: _Geometry, v0: np.ndarray, h: float
    ) -> tuple[_Geometry, np.ndarray, float, int, int]:
        """One implicit Euler sub-step of ``h`` [s] from (geo0, v0 [m/s]): Newton iterations
        until the residual meets the tolerance (or ``newton_iterations``); the tangent is
        lagged up to ``tangent_every`` sub-steps and re-assembled whenever an iteration does
        not contract the residual by ``_CONTRACTION`` (at once if another iteration follows,
        else at the next sub-step). Returns (geo, v₊, |g| [N], iterations, solve iterations)."""
        cfg = self.config
        self._prepare_tangent(geo0, h)
        k_damp = self._k  # C = αM + βK fixed within the sub-step
        x0 = self.fem.reduce(geo0.positions)
        mv0 = self._mass_times(v0)

        geo = geo0
        g, residual, scale, w, phi = self._residual_at(geo, x0, mv0, k_damp, h)
        if not math.isfinite(residual):
            raise ConvergenceError("plant step: non-finite residual")
        solve_its = 0
        iterations = 0
        while True:
            if residual <= self._atol or (iterations > 0 and residual <= cfg.newton_rtol * scale):
                break  # at rest to round-off, or converged
            if iterations >= cfg.newton_iterations:
                break
            active = self._active_cables(geo)
            dx, s_its = self._solve_newton(self._a0, -g, geo.jacobian_t[:, active])
            solve_its += s_its
            iterations += 1
            best = self._line_search(geo, g, dx, residual, phi, x0, mv0, k_damp, h)
            contracted = best[2] <= _CONTRACTION * residual
            geo, g, residual, scale, w, phi = best
            if not contracted and self._since_tangent > 1:
                # the lagged tangent is too far off: refresh it (now if another iteration
                # follows, else at the next sub-step)
                if iterations < cfg.newton_iterations:
                    self._refresh_tangent(geo, h)
                    self._since_tangent = 1
                else:
                    self._refresh_next = True
        v = w / h
        return geo, v, residual, iterations, solve_its

    # ------------------------------------------------------------------ contact
    def set_contact(self, contact: ContactModel | None) -> None:
        """Correct every sub-step for contact with ``contact``'s obstacles and self-collision
        (core/contact/correction.py); None removes contact."""
        self.contact = contact
        self.last_contact = None

    def surface_faces(self) -> np.ndarray:
        """(F, 3) the mesh's outward boundary triangles (the default collision surface)."""
        return self.mesh.boundary_faces()

    def _solve_columns(self, block: np.ndarray, geo: _Geometry) -> np.ndarray:
        """A⁻¹ B for the current step matrix A = A0 + k_c U Uᵀ (taut cables), by the
        factorization of A0 (made now if it is of an older A0) and Woodbury."""
        if self._factor_of is not self._a0:
            self._solver.factorize(self._a0)
            self._factor_of = self._a0
        u = geo.jacobian_t[:, self._active_cables(geo)]
        both = np.column_stack((block, u)) if u.shape[1] else block
        sol = np.asarray(self._solver.direct.solve(both)).reshape(both.shape)
        y = self._woodbury(sol, u)
        return y[:, None] if y.ndim == 1 else y

    def _contact_correction(
        self, geo: _Geometry, v: np.ndarray, h: float, start: np.ndarray
    ) -> tuple[_Geometry, np.ndarray]:
        """Free motion (geo, v) → corrected by the contact forces of this sub-step."""
        fem = self.fem
        dx, stats = self.contact.correct(
            geo.positions, start, fem.free_dofs, lambda block: self._solve_columns(block, geo)
        )
        self.last_contact = stats
        if dx is None:
            return geo, v
        if not np.all(np.isfinite(dx)):
            raise ConvergenceError("plant step: non-finite contact correction")
        corrected = self._evaluate(geo.positions + fem.expand(dx))
        return corrected, v + dx / h

    def _state(self, residual: float, its: int, solve_its: int, wall: float) -> PlantState:
        geo = self._geo
        lam = self._efforts(geo.strokes)
        return PlantState(
            time=self._time,
            positions=geo.positions.copy(),
            velocities=self.fem.expand(self._v),
            effector_position=self.effectors.values(geo.positions),
            efforts=lam,
            actuator_strokes=geo.strokes.copy(),
            cable_strokes=self._s.copy(),
            cable_tensions=lam[self._cable_idx].copy(),
            kinetic_energy=self.kinetic_energy(),
            residual_norm=residual,
            newton_iterations=its,
            solve_iterations=solve_its,
            wall_time=wall,
        )

    def state(self) -> PlantState:
        """The current state (no step)."""
        return self._state(0.0, 0, 0, 0.0)

    # ------------------------------------------------------------------ energies
    def kinetic_energy(self) -> float:
        """½ vᵀ M v [J]."""
        return 0.5 * float(self._v @ self._mass_times(self._v))

    def potential_energy(self) -> float:
        """Strain + gravity + cable-spring energy [J], minus the work potential of the
        pressures and forces at their current values (zero at rest with zero inputs)."""
        return self._potential(self._geo)

    def _potential(self, geo: _Geometry) -> float:
        u = self.fem.reduce(geo.positions - self.fem.rest_points)
        if len(self._cable_idx):
            stretch = np.maximum(0.0, self._s - geo.strokes[self._cable_idx])
            springs = 0.5 * self.cable_stiffness * float(stretch @ stretch)
        else:
            springs = 0.0
        return (
            float(geo.state.energy)
            - float(self._f_g @ u)
            + springs
            - float(self._p @ geo.strokes[self._pressure_idx])
            - float(self._f @ geo.strokes[self._force_idx])
        )

    # ------------------------------------------------------------------ statics
    def static_residual_norm(self) -> float:
        """|f_el + f_g + J_aᵀ λ| over the free DOFs at the current state [N]."""
        return float(np.linalg.norm(self._forces(self._geo)[0]))

    def equilibrate(
        self, *, slack_cables: bool = False, max_iterations: int = 100, rtol: float = 1e-9
    ) -> int:
        """Static equilibrium under the current inputs and gravity; velocities set to 0.

        Newton on the potential (:meth:`potential_energy`) with the exact co-rotational
        tangent when it is positive definite (else K = Σ R K0 Rᵀ), the cable springs by
        Woodbury, and a backtracking line search, from the current positions.

        Args:
            slack_cables: solve with every cable slack, then set the commanded strokes to
                the cables' shortenings at that equilibrium (each cable just taut, zero
                tension): the natural start of a robot whose servos were zeroed under
                gravity.

        Returns:
            Newton iterations taken.

        Raises:
            ConvergenceError: not converged in ``max_iterations`` (state and inputs unchanged).
        """
        if not slack_cables:
            return self._equilibrate(max_iterations, rtol)
        saved = self._s
        self._s = np.full_like(saved, -np.inf)
        try:
            its = self._equilibrate(max_iterations, rtol)
        except ConvergenceError:
            self._s = saved
            raise
        self._s = self._geo.strokes[self._cable_idx].copy()
        self._inputs_changed()
        return its

    def _inputs_changed(self) -> None:
        """Called when the plant set its own inputs (slack-cable start); engines that keep
        a copy of them (MuJoCo's controls) refresh it here."""

    def _equilibrate(self, max_iterations: int, rtol: float) -> int:
        fem = self.fem
        direct = make_solver(self.config.solver, size=fem.n_free)
        geo = self._geo
        saved = self._geo
        atol = self.model.statics.atol
        for it in range(max_iterations + 1):
            f, lam = self._forces(geo)
            g = -f
            scale = (np.linalg.norm(self._f_g) + np.linalg.norm(geo.jacobian_t @ lam)
                     + np.linalg.norm(fem.reduce(geo.state.forces)))
            if np.linalg.norm(g) <= rtol * scale + atol:
                self._geo, self._v, self._k, self._warm = geo, np.zeros(fem.n_free), None, None
                return it
            if it == max_iterations:
                break
            active = self._active_cables(geo)
            u = geo.jacobian_t[:, active]
            dx = None
            for exact in (True, False):
                try:
                    k = fem.consistent_stiffness(geo.positions) if exact else fem.stiffness(geo.state)
                    if exact:
                        k_load = self.actuators.load_stiffness(geo.positions, lam)
                        if k_load is not None:
                            k = (k + k_load).tocsr()
                    direct.factorize(k)
                    block = np.column_stack((-g, u))
                    sol = np.asarray(direct.solve(block)).reshape(block.shape)
                except Exception:  # not positive definite / singular: fall back
                    continue
                y = self._woodbury(sol, u)
                if np.all(np.isfinite(y)) and float(g @ y) < 0.0:
                    dx = y
                    break
            if dx is None:
                self._geo = saved
                raise ConvergenceError("plant equilibrate: no descent direction")
            self._geo = geo
            pot0 = self.potential_energy()
            slope = float(g @ dx)
            step = 1.0
            for _ in range(30):
                trial = self._evaluate(geo.positions + step * fem.expand(dx))
                self._geo = trial
                pot = self.potential_energy()
                if np.isfinite(pot) and (
                    pot <= pot0 + 1e-4 * step * slope
                    or np.linalg.norm(self._forces(trial)[0]) < np.linalg.norm(g)
                ):
                    break
                step *= 0.5
            else:
                self._geo = saved
                raise ConvergenceError("plant equilibrate: line search failed")
            geo = trial
        self._geo = saved
        raise ConvergenceError(
            f"plant equilibrate: not converged in {max_iterations} iterations "
            f"(|r| = {np.linalg.norm(g):.3e} N)"
        )

    # ------------------------------------------------------------------ markers
    def map_points(self, points: np.ndarray, *, name: str = "marker") -> BarycentricMapping:
        """Map points (k, 3) [m] given at REST into the plant mesh (cached by value)."""
        pts = np.ascontiguousarray(np.atleast_2d(np.asarray(points, dtype=float)))
        key = pts.tobytes() + bytes(str(pts.shape), "ascii")
        mapping = self._marker_maps.get(key)
        if mapping is None:
            mapping = map_points(self.fem.rest_points, self.fem.tets, pts, name=name)
            self._marker_maps[key] = mapping
        return mapping

    def marker_positions(self, marker_points: np.ndarray) -> np.ndarray:
        """Current positions (k, 3) [m] of material points given at rest (k, 3) [m],
        carried barycentrically by the plant mesh (like the effector)."""
        return self.map_points(marker_points).apply(self._geo.positions)

    def cable_paths(self) -> dict[str, np.ndarray]:
        """Current cable polylines by name: pull point (if any) then the cable's mapped
        points (k, 3) [m] (for drawing)."""
        out = {}
        x = self._geo.positions
        for i in self._cable_idx:
            cable = self.actuators.constraints[i]
            pts = cable.mapping.apply(x)
            if cable.pull_point is not None:
                pts = np.vstack((cable.pull_point[None, :], pts))
            out[cable.name] = pts
        return out

    def solver_stats(self):
        """Counters of the factor-reuse solver (PCG iterations, factorizations)."""
        return self._solver.stats


def make_plant(config: PlantConfig) -> SoftRobotPlant:
    """The plant ``config.model`` selects, built from ``config.robot``."""
    if config.model in ("reduced", "modal"):
        from soft_inverse_ros.core.sim.modal_plant import ModalPlant

        return ModalPlant.from_config(config)
    if config.model == "mujoco":  # optional extra: a one-line ValueError without it
        from soft_inverse_ros.core.sim.mujoco_plant import MujocoPlant

        return MujocoPlant.from_config(config)
    return SoftRobotPlant.from_config(config)
