"""Reduced-order plants: the simulated robot at a fraction of the full FEM's cost.

Model-order reduction is the soft-robotics community's answer to real-time FEM (e.g. the
POD reductions of SOFA's ModelOrderReduction). Both models here keep the motion in a
small subspace around the robot's **slack static equilibrium under gravity** x_eq (every
cable just taut, computed once with the full co-rotational FEM of the plant's mesh)::

    x = x_eq + Φ q,          Φ (n_free, r) M-orthonormal (Φᵀ M Φ = I)

The basis Φ holds

* the static responses K_eq⁻¹ J_aᵀ of every actuator, K_eq⁻¹ f_g of gravity and
  K_eq⁻¹ J_eᵀ of every effector row (static answers to small actuation are kept),
* the ``modal_modes`` lowest vibration modes of (K_eq, M) (dynamics), and
* for ``model: reduced`` only, POD modes of a training run of the full dynamic FEM
  driven by smooth random inputs (seeded; :meth:`ModalPlant._pod_modes`), which carry the
  large, rotating deformations,

M-orthonormalized (near-dependent vectors dropped). The implicit Euler step in these
coordinates is

    (q₊ − q − h q̇) / h² + C_r (q₊ − q) / h + g_el(q₊) − Φᵀ J_a(x₊)ᵀ λ(x₊) = 0,

with Rayleigh damping C_r = α I + β K_r, solved by Newton iterations (at most
``newton_iterations``) on the r×r tangent ``I/h² + C_r/h + K_r + k_c Σ_taut (Φᵀ j)(Φᵀ j)ᵀ``:

* ``model: reduced``: g_el(q) = −Φᵀ (f_el(x) + f_g), the full co-rotational element forces
  projected (Galerkin), K_r = Φᵀ K(x) Φ lagged like the full plant's tangent; its
  effector follows the full dynamic FEM within ~0.35 mm over a 17 mm motion;
* ``model: modal``: g_el(q) = Φᵀ K_eq Φ q, linear elasticity about x_eq (no co-rotation:
  it misses the foreshortening of bending legs and the gravity preload's stiffness).

What stays nonlinear in both: the cable geometry (strokes δ(x) and directions J_a(x) from
the full positions), the unilateral cables (λ = k_c max(0, s − δ)), pressure and force
directions. Either plant is a **different model** from the controller's co-rotational FEM
(another, reduced discretization, dynamics, the plant's own mesh and Young's modulus);
``soft-inverse-ros experiment plant-mismatch`` measures the static difference.

``hyper_reduction_tolerance`` > 0 (``model: reduced``) evaluates the elastic forces and
tangent on a weighted sample of the elements (ECSW, core/sim/hyper_reduction.py, trained on
every ``HYPER_TRAINING_STRIDE``-th configuration of the POD training run); a step then
multiplies only what it touches: the sample's DOFs, and the actuators' mapped points
(their Jacobian Φᵀ Jᵀ from the points' gradients).

Cost per simulated second at dt 10 ms on the demo's 1109-node plant (``soft-inverse-ros
bench plant --model M``): reduced ~0.20, modal ~0.10 CPU-s, against ~0.32 for the full
dynamic FEM, in quiet hours; hyper-reduced at tolerance 0.002, 40–50 % less than reduced
in the same run (on in config/sim.yaml). Building costs the full static solve, one
factorization, a sparse eigen-solve and (reduced) 600 training steps of the full model:
1–3 s in quiet hours (4–6 s in a slow spell), plus 2–8 s for the hyper-reduction's
sampling. The result (x_eq, Φ and the element sample) is kept in the plant build cache
(core/sim/build_cache.py): a later build with the same inputs and code loads it
(0.7 s for the demo's plant, against 12 s on the 2-core machine under load) and then
simulates bit for bit like the build that computed it. Two computed builds may differ
in the last bits: the eigen-solver starts from a random vector.

Units SI, robot base frame (REP-103).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from soft_inverse_ros.core.model.description import RobotDescription
from soft_inverse_ros.core.model.linear_solvers import ConvergenceError, make_solver
from soft_inverse_ros.core.sim.build_cache import cached_arrays
from soft_inverse_ros.core.sim.hyper_reduction import HyperReduction, build_ecsw
from soft_inverse_ros.core.sim.plant import PlantConfig, SoftRobotPlant, _Geometry

#: POD training of the co-rotational reduced model (see ModalPlant._pod_modes)
POD_SEED = 20150526
POD_TRAINING_STEPS = 600
POD_CABLE_RANGE = 0.008  # m of cable shortening beyond the slack state
POD_TOLERANCE = 1e-8
POD_MAX_MODES = 40
#: hyper-reduction: every this many POD training steps is a training configuration
HYPER_TRAINING_STRIDE = 10
#: relative M-norm below which a basis vector is dropped as dependent
_DEPENDENT = 1e-8


class ModalPlant(SoftRobotPlant):
    """Reduced-order dynamic plant (see the module docstring); same interface as
    :class:`SoftRobotPlant`.

    Attributes:
        basis: Φ (n_free, r) [m per unit coordinate], M-orthonormal.
        x_eq: (N, 3) [m] the slack equilibrium the model is linearized about.
        stiffness_r: K_r = Φᵀ K_eq Φ (r, r) [1/s²].
        build_time: wall time of the reduction [s].
    """

    def __init__(self, description: RobotDescription, config: PlantConfig | None = None) -> None:
        t0 = time.perf_counter()
        #: False while the full model computes the linearization point (construction)
        self._reduced = False
        #: the sampled elements (``hyper_reduction_tolerance`` > 0), else None
        self.hyper: HyperReduction | None = None
        super().__init__(description, config)
        #: "reduced": Galerkin projection of the full co-rotational elastic forces with a
        #: lagged reduced tangent; "modal": linear elasticity K_eq about x_eq
        self._corotational = self.config.model == "reduced"
        fem = self.fem
        mass = (sp.diags(self._mass_diag) if self._mass_diag is not None
                else self._mass_matrix).tocsc()
        # the slack equilibrium, the basis and the element sample: from the build cache
        # when this plant was built before (core/sim/build_cache.py), else computed
        arrays, self.from_cache = cached_arrays(
            "modal_plant", self._cache_parts(), lambda: self._build_reduction(mass))
        self.x_eq = np.array(arrays["x_eq"])
        self.basis = np.array(arrays["basis"])
        self.pod_modes = int(arrays["pod_modes"])
        k_eq = fem.stiffness(SoftRobotPlant._evaluate(self, self.x_eq).state).tocsc()
        self.stiffness_r = self.basis.T @ (k_eq @ self.basis)
        self.stiffness_r = 0.5 * (self.stiffness_r + self.stiffness_r.T)
        r = self.basis.shape[1]
        self._damping_r = self.rayleigh_mass * np.eye(r) + self.rayleigh_stiffness * self.stiffness_r
        self._rest_q = self._project(fem.reduce(fem.rest_points - self.x_eq), mass)
        self._mass_csc = mass
        # the elastic forces and tangent: every element, or the hyper-reduction's sample
        self._elastic_fem = fem
        self._elastic_offset = np.zeros(r)
        if "hyper_elements" in arrays:
            self.hyper = HyperReduction.from_arrays(fem, arrays, prefix="hyper_")
            self._elastic_fem = self.hyper.fem
            self._elastic_offset = self.hyper.offset
        self._gravity_r = self.basis.T @ self._f_g
        self._reduce_operators()
        self._reduced = True
        self.build_time = time.perf_counter() - t0
        self.reset()

    def _cache_parts(self) -> dict[str, object]:
        """What the reduction is computed from (the build cache's key, besides the code):
        the configuration, the description (without its file's path) and the plant's mesh."""
        import dataclasses

        description = self.description
        if any(f.name == "source" for f in dataclasses.fields(description)):
            description = dataclasses.replace(description, source=None)
        return {"config": repr(self.config), "description": repr(description),
                "rest_points": self.fem.rest_points, "tets": self.fem.tets,
                "fixed": self.fem.fixed_mask, "gravity": self._f_g}

    def _build_reduction(self, mass: sp.csc_matrix) -> dict[str, np.ndarray]:
        """The slack equilibrium x_eq, the M-orthonormal basis Φ and,
        hyper-reduced, the element sample (module doc), as arrays for the build cache."""
        cfg = self.config
        fem = self.fem
        # 1. the slack static equilibrium of the full co-rotational model
        super().equilibrate(slack_cables=True)
        x_eq = np.array(self._geo.positions)
        self.x_eq = x_eq
        geo = SoftRobotPlant._evaluate(self, x_eq)
        k_eq = fem.stiffness(geo.state).tocsc()
        # 2. static modes: actuators, gravity, effector rows
        solver = make_solver(cfg.solver, size=k_eq.shape[0])
        solver.factorize(k_eq.tocsr())
        loads = [geo.jacobian_t, self._f_g[:, None], self._effector_jacobian_t(x_eq)]
        statics = np.asarray(solver.solve(np.column_stack(loads))).reshape(fem.n_free, -1)
        # 3. vibration modes (shift-invert about 0: the lowest frequencies)
        n_modes = min(cfg.modal_modes, fem.n_free - statics.shape[1] - 2)
        if n_modes > 0:
            _, modes = spla.eigsh(k_eq, k=n_modes, M=mass, sigma=0.0, which="LM")
        else:
            modes = np.zeros((fem.n_free, 0))
        # 4. POD of a training run of the full model (co-rotational model only)
        snapshots = None
        if self._corotational:
            pod, snapshots = self._pod_modes(mass)
        else:
            pod = np.zeros((fem.n_free, 0))
        basis = _m_orthonormal(np.column_stack((pod, statics, modes)), mass)
        arrays = {"x_eq": x_eq, "basis": basis, "pod_modes": np.array(pod.shape[1])}
        if self._corotational and cfg.hyper_reduction_tolerance > 0:
            self.basis = basis
            hyper = self._hyper_reduce(snapshots, mass, cfg.hyper_reduction_tolerance)
            arrays.update(hyper.to_arrays(prefix="hyper_"))
        return arrays

    def _pod_modes(self, mass: sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
        """POD modes of the full dynamic model driven from x_eq by smooth random inputs, and
        the training run's displacements from x_eq (n_free, steps).

        Training (seeded, so every build gives the same plant): ``POD_TRAINING_STEPS``
        steps of the full co-rotational plant; each actuator follows the mean of three
        sines of random frequency (0.1–0.6 Hz) and phase, between its slack value and
        ``POD_CABLE_RANGE`` more cable shortening (cables), or between 0 and half its
        finite upper limit (pressures, forces; none when unbounded). The snapshots'
        displacements from x_eq are decomposed in the mass-weighted norm and the modes
        holding all but ``POD_TOLERANCE`` of their energy are kept (at most
        ``POD_MAX_MODES``). Restores the slack equilibrium afterwards.
        """
        fem = self.fem
        rng = np.random.default_rng(POD_SEED)
        n_a = len(self._kinds)
        freq = rng.uniform(0.1, 0.6, (n_a, 3))
        phase = rng.uniform(0.0, 2 * np.pi, (n_a, 3))
        upper = np.array([getattr(a, "max_pressure", getattr(a, "max_force", np.inf))
                          for a in self.description.actuators], float)
        amplitude = np.where(np.isfinite(upper), 0.5 * np.abs(upper), 0.0)
        amplitude[self._cable_idx] = POD_CABLE_RANGE
        base = np.zeros(n_a)
        base[self._cable_idx] = self._s
        snapshots = np.empty((fem.n_free, POD_TRAINING_STEPS))
        for k in range(POD_TRAINING_STEPS):
            u = 0.5 * (1.0 + np.sin(2 * np.pi * freq * k * self.config.dt + phase).mean(axis=1))
            inputs = base + amplitude * u
            self._s = inputs[self._cable_idx]
            self._p = inputs[self._pressure_idx]
            self._f = inputs[self._force_idx]
            SoftRobotPlant.step(self)
            snapshots[:, k] = fem.reduce(np.asarray(self._geo.positions) - self.x_eq)
        self.set_inputs(np.zeros(len(self._cable_idx)), np.zeros(len(self._pressure_idx)),
                        np.zeros(len(self._force_idx)))
        self._s = base[self._cable_idx]
        SoftRobotPlant.set_state(self, self.x_eq)
        weight = np.sqrt(np.asarray(mass.diagonal()))
        u, sv, _ = np.linalg.svd(snapshots * weight[:, None], full_matrices=False)
        energy = np.cumsum(sv**2) / max(float(np.sum(sv**2)), 1e-300)
        keep = min(int(np.searchsorted(energy, 1.0 - POD_TOLERANCE)) + 1, POD_MAX_MODES)
        return u[:, :keep] / weight[:, None], snapshots

    def _reduce_operators(self) -> None:
        """What a reduced step multiplies by, restricted to what it touches: the actuators'
        mapped points (their Jacobian Φᵀ Jᵀ from the points' gradients, r × n_a work) and
        the free DOFs of the elements the elastic forces come from (all of them, or the
        hyper-reduction's sample)."""
        fem = self.fem
        self._actuator_points_basis = self.actuators.points_basis(self.basis)  # (3K, r)
        if self._elastic_fem is fem:
            self._elastic_dofs: slice | np.ndarray = slice(None)
        else:
            nodes = np.unique(self._elastic_fem.tets)
            nodes = nodes[~fem.fixed_mask[nodes]]
            free_index = np.searchsorted(fem.free_nodes, nodes)
            self._elastic_dofs = (3 * free_index[:, None] + np.arange(3)).ravel()
        self._elastic_global = fem.free_dofs[self._elastic_dofs]  # into the (3N,) forces
        self._basis_elastic = np.ascontiguousarray(self.basis[self._elastic_dofs])

    def _hyper_reduce(self, snapshots: np.ndarray, mass: sp.spmatrix,
                      tolerance: float) -> HyperReduction:
        """ECSW sample of the elements (core/sim/hyper_reduction.py), trained on every
        ``HYPER_TRAINING_STRIDE``-th configuration of the POD training run (``snapshots``,
        displacements from x_eq) projected on the basis (where the reduced model evaluates
        its forces)."""
        displacements = snapshots[:, ::HYPER_TRAINING_STRIDE]
        coordinates = self.basis.T @ (mass @ displacements)
        configurations = [self._positions_of(q) for q in coordinates.T]
        return build_ecsw(self.fem, self.basis, self.x_eq, configurations, tolerance)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(cls, config: PlantConfig) -> "ModalPlant":
        from soft_inverse_ros.core.model.description import load_robot_description

        return cls(load_robot_description(config.robot), config)

    def _effector_jacobian_t(self, x: np.ndarray) -> np.ndarray:
        """J_eᵀ (n_free, n_e) of the effector rows at x."""
        return np.asarray(self.effectors.values_and_jacobian_t(x)[1])

    def _project(self, u: np.ndarray, mass: sp.csc_matrix) -> np.ndarray:
        """M-orthogonal projection coefficients of a free-DOF displacement u."""
        return self.basis.T @ (mass @ u)

    @property
    def n_coordinates(self) -> int:
        """r, the number of reduced coordinates."""
        return self.basis.shape[1]

    # ------------------------------------------------------------------ state
    def _positions_of(self, q: np.ndarray) -> np.ndarray:
        return self.x_eq + self.fem.expand(self.basis @ q)

    def _evaluate(self, x: np.ndarray) -> _Geometry:
        """Actuator geometry at x, and the element state for the co-rotational elasticity
        (of the sampled elements when hyper-reduced; none for the linear one)."""
        if not self._reduced:
            return super()._evaluate(x)
        strokes, gradient = self.actuators.values_and_point_gradient(x)
        state = self._elastic_fem.element_state(x) if self._corotational else None
        return _Geometry(x, state, strokes, None,
                         reduced_jacobian_t=self._actuator_points_basis.T @ gradient.T)

    def reset(self) -> None:
        """Rest shape (the undeformed mesh projected on the basis), zero velocity, zero
        inputs, time 0."""
        super().reset()
        self._kr = None  # lagged reduced tangent (co-rotational model)
        if not self._reduced:
            return
        self._q = self._rest_q.copy()
        self._qv = np.zeros_like(self._q)
        self._geo = self._evaluate(self._positions_of(self._q))
        self._v = np.zeros(self.fem.n_free)

    def set_state(self, positions: np.ndarray, velocities: np.ndarray | None = None) -> None:
        """Set positions (N, 3) [m] and velocities, projected on the reduced basis."""
        super().set_state(positions, velocities)
        self._q = self._project(self.fem.reduce(np.asarray(self._geo.positions) - self.x_eq),
                                self._mass_csc)
        self._qv = self._project(self._v, self._mass_csc)
        self._sync()

    def _sync(self) -> None:
        self._geo = self._evaluate(self._positions_of(self._q))
        self._v = self.basis @ self._qv

    # ------------------------------------------------------------------ dynamics
    def _reduced_forces(self, geo: _Geometry) -> tuple[np.ndarray, np.ndarray]:
        """(Φᵀ J_aᵀ λ (r,), λ (n_a,)) at ``geo``."""
        lam = self._efforts(geo.strokes)
        return geo.reduced_jacobian_t @ lam, lam

    def _elastic_r(self, q: np.ndarray, geo: _Geometry) -> np.ndarray:
        """Reduced restoring force of elasticity and gravity [r]: K_r q (linear), or
        −Φᵀ (f_el(x) + f_g) (co-rotational; zero at x_eq, where the cables are slack)."""
        if self._corotational:
            forces = geo.state.forces.reshape(-1)[self._elastic_global]
            return -(self._basis_elastic.T @ forces + self._elastic_offset + self._gravity_r)
        return self.stiffness_r @ q

    def _reduced_tangent(self, geo: _Geometry) -> np.ndarray:
        """Φᵀ K(x) Φ at ``geo`` (co-rotational tangent, one assembly; of the sampled
        elements when hyper-reduced) [r, r]."""
        k = self._elastic_fem.stiffness(geo.state)
        self.tangent_assemblies += 1
        kr = self._basis_elastic.T @ (k @ self.basis)[self._elastic_dofs]
        return 0.5 * (kr + kr.T)

    def _cable_tangent(self, geo: _Geometry) -> np.ndarray:
        """k_c Σ_taut (Φᵀ j)(Φᵀ j)ᵀ (r, r)."""
        active = self._active_cables(geo)
        if not len(active):
            return 0.0
        u = geo.reduced_jacobian_t[:, active]
        return self.cable_stiffness * (u @ u.T)

    def _substep(self, geo0: _Geometry, v0: np.ndarray, h: float):
        if not self._reduced:  # the full model, during construction (POD training)
            return super()._substep(geo0, v0, h)
        return self._reduced_substep(geo0, h)

    def _reduced_substep(self, geo0: _Geometry, h: float):
        """Implicit Euler in reduced coordinates from the current (q, q̇) and its geometry
        ``geo0``: up to ``newton_iterations`` Newton iterations (each one evaluation of the
        actuator geometry, and of the element forces for the co-rotational model), stopping
        early when the reduced residual is at round-off. The co-rotational model's tangent
        Φᵀ K Φ is lagged like the full plant's (``tangent_every`` steps, or sooner when an
        iteration does not halve the residual)."""
        cfg = self.config
        q0, qv0 = self._q, self._qv
        if self._corotational and (self._kr is None or self._since_tangent >= cfg.tangent_every
                                   or self._refresh_next):
            self._kr = self._reduced_tangent(geo0)
            self._since_tangent, self._refresh_next = 0, False
        self._since_tangent += 1
        k_r = self._kr if self._corotational else self.stiffness_r
        a_lin = np.eye(len(q0)) / h**2 + self._damping_r / h + k_r
        q, geo = q0, geo0
        scale = float(np.linalg.norm(self._gravity_r)) + 1e-12
        iterations, residual, previous = 0, math.inf, math.inf
        while True:
            f_r, _ = self._reduced_forces(geo)
            g = (q - q0 - h * qv0) / h**2 + self._damping_r @ (q - q0) / h \
                + self._elastic_r(q, geo) - f_r
            residual = float(np.linalg.norm(g))
            if not math.isfinite(residual):
                raise ConvergenceError("modal plant step: non-finite residual")
            if iterations and residual > 0.5 * previous:
                self._refresh_next = True  # the lagged tangent is too far off
            if iterations >= cfg.newton_iterations or residual <= 1e-12 * scale:
                break
            previous = residual
            q = q + la.solve(a_lin + self._cable_tangent(geo), -g, assume_a="pos")
            geo = self._evaluate(self._positions_of(q))
            iterations += 1
        if not np.all(np.isfinite(q)):
            raise ConvergenceError("modal plant step: non-finite state")
        self._qv = (q - q0) / h
        self._q = q
        self._v = self.basis @ self._qv
        return geo, self._v, residual, iterations, 0

    # ------------------------------------------------------------------ energies
    def kinetic_energy(self) -> float:
        if not self._reduced:
            return super().kinetic_energy()
        return 0.5 * float(self._qv @ self._qv)

    def _potential(self, geo: _Geometry) -> float:
        if not self._reduced:
            return super()._potential(geo)
        q = self._project(self.fem.reduce(np.asarray(geo.positions) - self.x_eq), self._mass_csc)
        if self._corotational:  # the offset's potential −cᵀq (zero without hyper-reduction)
            return super()._potential(geo) - float(self._elastic_offset @ q)
        springs = 0.0
        if len(self._cable_idx):
            stretch = np.maximum(0.0, self._s - geo.strokes[self._cable_idx])
            springs = 0.5 * self.cable_stiffness * float(stretch @ stretch)
        return (0.5 * float(q @ self.stiffness_r @ q) + springs
                - float(self._p @ geo.strokes[self._pressure_idx])
                - float(self._f @ geo.strokes[self._force_idx]))

    def static_residual_norm(self) -> float:
        f_r, _ = self._reduced_forces(self._geo)
        return float(np.linalg.norm(self._elastic_r(self._q, self._geo) - f_r))

    # ------------------------------------------------------------------ statics
    def equilibrate(self, *, slack_cables: bool = False, max_iterations: int = 100,
                    rtol: float = 1e-9) -> int:
        """Static equilibrium of the reduced model under the current inputs (velocities 0).

        With ``slack_cables`` the state is the linearization point x_eq and the commanded
        strokes become the cables' shortenings there (every cable just taut).
        """
        if slack_cables:
            self._q = np.zeros(self.n_coordinates)
            self._qv = np.zeros_like(self._q)
            self._sync()
            self._s = self._geo.strokes[self._cable_idx].copy()
            return 0
        q = self._q.copy()
        geo = self._evaluate(self._positions_of(q))
        scale = float(np.linalg.norm(self._gravity_r)) + 1e-12
        for it in range(max_iterations + 1):
            f_r, _ = self._reduced_forces(geo)
            g = self._elastic_r(q, geo) - f_r
            if float(np.linalg.norm(g)) <= rtol * scale:
                self._q, self._qv = q, np.zeros_like(q)
                self._sync()
                return it
            if it == max_iterations:
                break
            k_r = self._reduced_tangent(geo) if self._corotational else self.stiffness_r
            q = q + la.solve(k_r + self._cable_tangent(geo), -g, assume_a="pos")
            geo = self._evaluate(self._positions_of(q))
        raise ConvergenceError(
            f"modal plant equilibrate: not converged in {max_iterations} iterations")


def _m_orthonormal(vectors: np.ndarray, mass: sp.spmatrix) -> np.ndarray:
    """M-orthonormal basis of the columns of ``vectors`` (modified Gram–Schmidt, twice),
    dropping columns whose M-norm falls below ``_DEPENDENT`` of their original norm."""
    out: list[np.ndarray] = []
    for v in vectors.T:
        v = np.array(v, float)
        norm0 = math.sqrt(max(float(v @ (mass @ v)), 0.0))
        if norm0 == 0.0:
            continue
        for _ in range(2):
            for b in out:
                v -= (b @ (mass @ v)) * b
        norm = math.sqrt(max(float(v @ (mass @ v)), 0.0))
        if norm > _DEPENDENT * norm0:
            out.append(v / norm)
    return np.column_stack(out) if out else np.zeros((vectors.shape[0], 0))
