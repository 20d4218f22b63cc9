"""A soft robot's quasi-static FEM model: what the FEM/compliance nodes and the plant wrap.

:class:`RobotModel` builds, from a :class:`~soft_inverse_ros.core.model.description.RobotDescription`,
the co-rotational FEM (fixed nodes eliminated), the actuator and effector constraints
(points mapped into the mesh), the gravity load and a linear solver, and then advances a
quasi-static state under actuator efforts and linearizes it into
:class:`~soft_inverse_ros.core.model.snapshot.ComplianceSnapshot` objects.

Units (SI, robot base frame of the description, REP-103): positions [m]; efforts λ [N]
(cables, forces) or [Pa] (cavities); strokes δ_a [m] (cable shortening, force
displacement) or [m³] (cavity volume growth); effector rows [m].

Typical low-rate loop (one Newton step and the compliance per update, sharing one
assembly and one block solve)::

    model = RobotModel.from_description(load_robot_description("diamond"))
    info, snap = model.update(lambda_a, seq=k, stamp=t)
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.control.actuator_limits import ActuatorLimits, limits_from_description
from soft_inverse_ros.core.model.compliance import ComplianceMatrices, compliance_from_columns, make_snapshot
from soft_inverse_ros.core.model.constraints import (
    CableActuator,
    ConstraintSet,
    Effector,
    ForceActuator,
    PressureActuator,
)
from soft_inverse_ros.core.model.description import (
    CableSpec,
    ForceSpec,
    RobotDescription,
)
from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.model.linear_solvers import (
    ConvergenceError,
    DirectSolver,
    FactorReuseSolver,
    make_solver,
    solve_linear,
)
from soft_inverse_ros.core.model.mapping import map_points
from soft_inverse_ros.core.model.mesh import TetMesh
from soft_inverse_ros.core.model.snapshot import ActuatorKind, ComplianceSnapshot, ContactBlock
from soft_inverse_ros.core.model.statics import Evaluation, QuasiStaticSolver, StaticsResult
from soft_inverse_ros.core.model.support import immobile, support_problem

__all__ = ["QuasiStaticModelState", "RobotModel", "StepInfo", "ConvergenceError"]

_LOG = logging.getLogger(__name__)


class _ContactStep:
    """The contact correction of one update: the free Newton step d corrected by the
    Signorini forces on W = R K⁻¹ Rᵀ and the linearized gaps of R.

    Full contact: R = H (m contact rows), the forces are λ_c per contact. With a reduced
    basis (``psi`` = Ψ_m (m, k), the basis rows of the detected contact vertices): R = Ψ_mᵀ H
    (k rows), the gaps Ψ_mᵀ (δ(x_k) + H d) and the forces β (λ_c = Ψ_m β, Goury eq. 18–21);
    a basis vector with no detected contact has a zero row and β = 0. The contact model's
    per-point gap check (``enrich_tolerance``, :func:`~soft_inverse_ros.core.contact.correction.solve_reduced_checked`)
    solves again with a unit column for each contact the reduced law would let sink in
    (``solve_columns``: B ↦ K⁻¹ B for their columns; forces γ ≥ 0 on those v contacts).
    The step and the snapshot then carry one more generalized contact, the enrichment's
    force pattern p = Eγ / Σγ (its variable Σγ [N]): R = [Ψ_m, p]ᵀ H, k + 1 rows (p = 0
    when nothing was enriched), so the forces Ψ_m β + Eγ are exactly those of the check
    and the controller's block stays (k + 1) × (k + 1) whatever touches."""

    def __init__(self, contacts, hc: np.ndarray, kinv_rows: np.ndarray, model, free_direction: np.ndarray,
                 psi: np.ndarray | None = None, solve_columns=None) -> None:
        self.contacts, self.hc, self.psi, self.kinv_rows = contacts, hc, psi, kinv_rows
        self.enriched = np.zeros(0, dtype=np.int64)
        gaps = contacts.gaps + hc @ free_direction
        if psi is None:
            self.rows = hc
            w = self.rows @ kinv_rows
            self.w_cc = 0.5 * (w + w.T)
            self.forces = model.solve(self.w_cc, gaps).forces
        else:
            from soft_inverse_ros.core.contact.correction import solve_reduced_checked

            tolerance = getattr(model, "enrich_tolerance", None)
            r = solve_reduced_checked(model, psi, hc, kinv_rows, gaps, solve_columns, tolerance)
            self.enriched = r.enriched
            k = psi.shape[1]
            if tolerance is None:
                self.forces = r.coefficients
            else:  # the enrichment as one more generalized contact: its pattern p and Σγ
                gamma = r.coefficients[k:]
                total = float(gamma.sum())
                pattern = r.basis[:, k:] @ gamma / total if total > 0 else np.zeros(psi.shape[0])
                a_pattern = r.a_inv[:, k:] @ gamma / total if total > 0 else np.zeros(kinv_rows.shape[0])
                self.psi = np.column_stack((psi, pattern))
                self.kinv_rows = np.column_stack((kinv_rows, a_pattern))
                self.forces = np.append(r.coefficients[:k], total)
            self.rows = self.psi.T @ hc
            w = self.rows @ self.kinv_rows
            self.w_cc = 0.5 * (w + w.T)
        self.direction = free_direction + self.kinv_rows @ self.forces

    @property
    def contact_forces(self) -> np.ndarray:
        """(m,) the normal force of each detected contact [N] (reduced: Ψ_m β)."""
        return self.forces if self.psi is None else self.psi @ self.forces

    @property
    def nodal_forces(self) -> np.ndarray:
        """Rᵀ forces (n_free,) [N]: the contact forces on the free DOFs."""
        return self.rows.T @ self.forces

    def block(self, positions: np.ndarray, kinv_ja: np.ndarray, je_t: np.ndarray) -> ContactBlock:
        """The snapshot's contact block: W at x_k, gaps at the new ``positions``."""
        c = self.contacts
        gap = c.gaps_at(positions)
        w_ca, w_ec = self.rows @ kinv_ja, je_t.T @ self.kinv_rows
        if self.psi is None:
            return ContactBlock(ids=c.vertex, points=c.points, normals=c.normals, gap=gap,
                                force=self.forces, w_cc=self.w_cc, w_ca=w_ca, w_ec=w_ec, source=c.obstacle)
        points, normals = _generalized_geometry(self.psi, c.points, c.normals)
        heaviest = np.argmax(self.psi, axis=0)  # (k,) the contact each vector weighs most
        weight = self.psi.sum(axis=0)
        source = np.where(weight > 0, np.asarray(c.obstacle)[heaviest], -1)
        return ContactBlock(ids=np.arange(self.psi.shape[1]), points=points, normals=normals,
                            gap=self.psi.T @ gap, force=self.forces, w_cc=self.w_cc, w_ca=w_ca, w_ec=w_ec,
                            source=source, force_weight=weight, reduced=True)


def _generalized_geometry(psi: np.ndarray, points: np.ndarray, normals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per basis vector j: the centroid of the detected contact points weighted by Ψ_mj
    (the share of the vector's force each contact carries) [m], and the unit Ψ_mj-weighted
    sum of their normals; zeros for a vector with no detected contact."""
    weight = psi.sum(axis=0)  # (k,)
    safe = np.where(weight > 0, weight, 1.0)
    centroid = (psi.T @ points) / safe[:, None]
    normal = psi.T @ normals
    length = np.linalg.norm(normal, axis=1)
    normal = normal / np.where(length > 0, length, 1.0)[:, None]
    centroid[weight <= 0] = 0.0
    normal[weight <= 0] = 0.0
    return centroid, normal


def _empty_reduced_block(k: int, n_a: int, n_e: int) -> ContactBlock:
    """The reduced block when nothing touches: k generalized contacts, all rows zero."""
    return ContactBlock(ids=np.arange(k), points=np.zeros((k, 3)), normals=np.zeros((k, 3)), gap=np.zeros(k),
                        force=np.zeros(k), w_cc=np.zeros((k, k)), w_ca=np.zeros((k, n_a)),
                        w_ec=np.zeros((n_e, k)), source=np.full(k, -1), force_weight=np.zeros(k), reduced=True)


@dataclass(frozen=True)
class StepInfo:
    """What one quasi-static advance did.

    Attributes:
        newton_iterations: Newton iterations taken.
        residual_norm: |r| of the equilibrium residual at the new state [N] (with contact:
            including the update's contact forces Hᵀλ_c).
        residual_before: |r| before the first iteration (under the new efforts) [N].
        step_length: line-search factor of the last iteration (1: full Newton step).
        solve_iterations: PCG iterations of the linear solves (0: direct solves only).
        wall_time: [s].
    """

    newton_iterations: int
    residual_norm: float
    residual_before: float
    step_length: float
    solve_iterations: int
    wall_time: float


def _constraints(desc: RobotDescription, points: np.ndarray, tets: np.ndarray,
                 mapping_tolerance: float | None) -> tuple[list, list]:
    """The description's actuators and effectors mapped barycentrically into the mesh
    (``points`` (N, 3) [m], ``tets`` (M, 4))."""

    def mapped(name: str, pts: np.ndarray):
        return map_points(points, tets, pts, tolerance=mapping_tolerance, name=name)

    actuators = []
    for spec in desc.actuators:
        if isinstance(spec, CableSpec):
            mp = mapped(f"cable {spec.name}", spec.points)
            actuators.append(CableActuator(spec.name, mp, mp.apply(points), spec.pull_point))
        elif isinstance(spec, ForceSpec):
            pts = spec.point.reshape(1, 3)
            if spec.second_point is not None:
                pts = np.vstack((pts, spec.second_point.reshape(1, 3)))
            mp = mapped(f"force {spec.name}", pts)
            actuators.append(ForceActuator(spec.name, mp, mp.apply(points), spec.direction))
        else:
            surf_points, triangles = spec.load_surface()
            mp = mapped(f"cavity {spec.name}", surf_points)
            actuators.append(PressureActuator(spec.name, mp, mp.apply(points), triangles))
    effectors = [
        Effector(e.name, mapped(f"effector {e.name}", e.points), weights=e.weights, mode=e.mode, axes=e.axes)
        for e in desc.effectors
    ]
    return actuators, effectors


class QuasiStaticModelState:
    """What a quasi-static model of a robot tells about its description and its state, shared
    by :class:`RobotModel` and the reduced model
    (:class:`~soft_inverse_ros.core.model.reduced_model.ReducedRobotModel`).

    The class using it sets ``description``, ``fem``, ``actuators``, ``effectors``,
    ``_kinds``, the state's evaluation ``_ev`` (``positions``, ``strokes``, ``residual``,
    ``residual_norm``) and the efforts ``_lambda``, and defines ``compliance()``.
    """

    # ------------------------------------------------------------------ description
    @property
    def actuator_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.actuators.constraints)

    @property
    def actuator_kinds(self) -> tuple[ActuatorKind, ...]:
        return self._kinds

    @property
    def effector_names(self) -> tuple[str, ...]:
        """Effector row names, e.g. ``("tip.x", "tip.y", "tip.z")``."""
        return self.effectors.row_names

    @property
    def n_actuators(self) -> int:
        return len(self._kinds)

    @property
    def n_effector_rows(self) -> int:
        return self.effectors.n_rows

    def actuator_limits(self) -> ActuatorLimits:
        """Validated bounds per actuator, from the description's specs (SI), named."""
        return limits_from_description(self.description)

    # ------------------------------------------------------------------ state
    @property
    def positions(self) -> np.ndarray:
        """Node positions (N, 3) [m] of the current state (read-only view)."""
        v = self._ev.positions.view()
        v.flags.writeable = False
        return v

    @property
    def rest_positions(self) -> np.ndarray:
        return self.fem.rest_points

    @property
    def efforts(self) -> np.ndarray:
        """Efforts λ (n_a,) the state was last advanced under [N or Pa]."""
        return self._lambda.copy()

    @property
    def effector_position(self) -> np.ndarray:
        """Effector rows x_e (n_e,) [m] at the current state."""
        return self.effectors.values(self._ev.positions)

    @property
    def actuator_stroke(self) -> np.ndarray:
        """Actuator strokes δ_a (n_a,) [m or m³] at the current state."""
        return self._ev.strokes.copy()

    @property
    def residual_norm(self) -> float:
        """|r| of the equilibrium residual of the current state under its efforts [N] (a
        reduced model: of its projection Φᵀ r)."""
        return self._ev.residual_norm

    @property
    def residual(self) -> np.ndarray:
        """The equilibrium residual r (n_free,) of the current state under its efforts [N]
        (a reduced model: its projection Φᵀ r, (r,))."""
        return self._ev.residual.copy()

    def snapshot(self, seq: int, stamp: float) -> ComplianceSnapshot:
        """Compliance snapshot linearizing the current state (efforts λ0 = current; W from
        the class's ``compliance()``)."""
        m = self.compliance()
        return make_snapshot(
            m, seq=seq, stamp=stamp, actuator_names=self.actuator_names,
            actuator_kinds=self._kinds, effector_names=self.effector_names,
            effector_position=self.effector_position, actuator_stroke=self._ev.strokes,
            lambda0=self._lambda,
        )

    def _check_efforts(self, lambda_a: np.ndarray) -> np.ndarray:
        lam = np.asarray(lambda_a, dtype=float).reshape(-1)
        if lam.shape != (self.n_actuators,):
            raise ValueError(f"expected {self.n_actuators} efforts, got shape {np.shape(lambda_a)}")
        if not np.all(np.isfinite(lam)):
            raise ValueError(f"efforts must be finite, got {lam.tolist()}")
        return lam


class RobotModel(QuasiStaticModelState):
    """Quasi-static co-rotational FEM model of one robot with its actuators and effectors.

    Build it with :meth:`from_description`. The state is the node positions (N, 3) [m] and
    the efforts λ (n_a,) it was last advanced under.
    """

    def __init__(
        self,
        description: RobotDescription,
        mesh: TetMesh,
        fem: CorotationalFEM,
        actuators: ConstraintSet,
        effectors: ConstraintSet,
        actuator_kinds: tuple[ActuatorKind, ...],
        direct_solver: DirectSolver,
        *,
        factor_reuse: bool = True,
        pcg_rtol: float = 1e-7,
        newton_rtol: float = 1e-4,
        refactor_iterations: int = 20,
        w_rtol: float = 1e-8,
    ) -> None:
        self.description = description
        self.mesh = mesh
        self.fem = fem
        self.actuators = actuators
        self.effectors = effectors
        self._kinds = actuator_kinds
        self.gravity_forces = fem.gravity_forces(description.gravity)  # (N, 3) [N]
        self.direct_solver = direct_solver
        self.pcg_rtol = float(pcg_rtol)
        #: warm-start the update's PCG by extrapolating the last two block solutions
        self.extrapolate = True
        #: relative residual of the update's Newton direction (the inexact-Newton forcing
        #: term: one step then leaves ≈ newton_rtol of the force imbalance it started from)
        self.newton_rtol = float(newton_rtol)
        if factor_reuse:
            self.linear_solver: DirectSolver | FactorReuseSolver = FactorReuseSolver(
                direct_solver, rtol=pcg_rtol, refactor_iterations=refactor_iterations,
                gram_rtol=w_rtol,
            )
        else:
            self.linear_solver = direct_solver
        self.statics = QuasiStaticSolver(fem, actuators, self.gravity_forces, self.linear_solver)
        self._columns: np.ndarray | None = None
        #: contact of the low-rate update (None: none); see :meth:`set_contact`
        self.contact = None
        #: at most this many contacts (the smallest gaps) enter an update and its snapshot
        self.max_contacts = 64
        self.reset()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_description(
        cls,
        desc: RobotDescription,
        *,
        solver: str = "auto",
        young_modulus_scale: float = 1.0,
        mesh: TetMesh | None = None,
        factor_reuse: bool = True,
        pcg_rtol: float = 1e-7,
        mapping_tolerance: float | None = None,
        contact: bool = True,
        w_rtol: float = 1e-8,
    ) -> "RobotModel":
        """Build the model of a robot description.

        Args:
            desc: the robot description (SI).
            solver: direct solver name (``auto``, ``block_ldl``, ``cholmod``, ``pardiso``,
                ``qdldl``, ``superlu_nd``, ``scipy``; ``auto`` chooses by what is installed and
                the number of free DOFs, see :func:`~soft_inverse_ros.core.model.linear_solvers.make_solver`).
            young_modulus_scale: multiplies the description's Young's modulus (a deliberately
                mismatched model, e.g. for the simulated plant).
            mesh: use this mesh instead of the description's (same frame and units).
            factor_reuse: solve by PCG preconditioned with a reused factorization (else a
                direct solve with a new factorization each time).
            pcg_rtol: relative residual tolerance of the PCG columns judged by their residual
                (contact columns; the W columns too when no λ_min estimate exists).
            w_rtol: bound on the relative error of W from PCG columns in :meth:`update`
                without contact (energy-norm stopping test, ``FactorReuseSolver.gram_rtol``).
            mapping_tolerance: largest distance [m] a mapped point may lie outside the mesh
                (default: three mean edge lengths).
            contact: model the description's ``collision`` section (if any) in :meth:`update`.

        Raises:
            soft_inverse_ros.core.model.mapping.MappingError: a point lies too far outside the mesh.
            ValueError: invalid scale or solver.
        """
        if not (np.isfinite(young_modulus_scale) and young_modulus_scale > 0):
            raise ValueError(f"young_modulus_scale must be > 0, got {young_modulus_scale}")
        if mesh is None:
            mesh = desc.load_mesh()
        for warning in desc.plausibility_warnings(mesh):
            _LOG.warning("robot %s: %s", desc.name, warning)
        points = np.asarray(mesh.points, float)
        tets = np.asarray(mesh.tets, np.int64)
        fixed = desc.fixed.node_indices(points)
        if fixed.size == 0:
            raise ValueError(f"robot {desc.name!r}: no mesh node lies in the fixed boxes")
        problem = support_problem(mesh, fixed)
        if problem:
            raise ValueError(f"robot {desc.name!r}: {problem}")
        mat = desc.material
        fem = CorotationalFEM(
            points, tets, mat.young_modulus * young_modulus_scale, mat.poisson_ratio, fixed,
        )
        fem.density = mat.mass_density(fem.total_volume)

        actuators, effectors = _constraints(desc, points, tets, mapping_tolerance)
        still = immobile({f"{kind} {c.name}": c.mapping for kind, group in (("actuator", actuators),
                                                                         ("effector", effectors))
                          for c in group}, fixed, len(points))
        if still:
            raise ValueError(f"robot {desc.name!r}: {', '.join(still)} lie(s) on fixed nodes only: "
                             "an effector there cannot move, an actuator there moves nothing; "
                             "move it off the fixed boxes")
        model = cls(
            desc,
            mesh,
            fem,
            ConstraintSet(actuators, fem.free_dofs),
            ConstraintSet(effectors, fem.free_dofs),
            desc.actuator_kinds,
            make_solver(solver, size=fem.n_free),
            factor_reuse=factor_reuse,
            pcg_rtol=pcg_rtol,
            w_rtol=w_rtol,
        )
        if contact and desc.collision is not None:
            from soft_inverse_ros.core.contact.correction import contact_model_from_description

            model.set_contact(contact_model_from_description(desc, mesh.boundary_faces(), fem.rest_points,
                                                             fem.tets))
        return model

    def set_contact(self, contact, *, max_contacts: int | None = None) -> None:
        """Model contact in :meth:`update` (a :class:`~soft_inverse_ros.core.contact.correction.ContactModel`,
        frictionless here; None: no contact); at most ``max_contacts`` contacts per update."""
        if max_contacts is not None:
            if not (isinstance(max_contacts, int) and max_contacts >= 1):
                raise ValueError(f"max_contacts must be an integer >= 1, got {max_contacts!r}")
            self.max_contacts = max_contacts
        self.contact = contact

    def reset(self) -> None:
        """Back to the rest shape with zero efforts (the solver keeps its factorization)."""
        self._lambda = np.zeros(self.n_actuators)
        self._ev = self.statics.evaluate(self.fem.rest_points.copy(), self._lambda)
        self._columns = None
        self._direction: np.ndarray | None = None
        self._update_prev: np.ndarray | None = None
        self._update_prev2: np.ndarray | None = None
        self._update_prev3: np.ndarray | None = None
        self._held_contacts = None  # the last update's loaded contacts (see _with_held)
        self._relaxation = 1.0  # step factor of the update while its steps cycle in contact
        #: the share of the last update's step the contact step bound let through (1 without contact)
        self.last_step_fraction = 1.0

    def set_state(self, positions: np.ndarray, efforts: np.ndarray) -> None:
        """Set the node positions (N, 3) [m] and efforts (n_a,) (e.g. from a plant)."""
        lam = self._check_efforts(efforts)
        self._ev = self.statics.evaluate(np.array(positions, float).reshape(-1, 3), lam)
        self._lambda = lam
        self._direction = None
        self._update_prev = self._update_prev2 = self._update_prev3 = None
        self._held_contacts = None
        self._relaxation = 1.0

    def _under(self, lam: np.ndarray) -> Evaluation:
        """The current geometry's evaluation under efforts λ."""
        if np.array_equal(lam, self._lambda):
            return self._ev
        return self.statics.evaluate(self._ev.positions, lam, reuse=self._ev)

    # ------------------------------------------------------------------ advancing
    def step(self, lambda_a: np.ndarray, *, newton_iterations: int = 1) -> StepInfo:
        """Apply efforts λ and advance the quasi-static state by Newton iterations.

        Each iteration assembles K at the current state, solves K Δx = r and takes the
        step with a backtracking line search on the potential.

        Raises:
            ConvergenceError: a line search found no decrease, or non-finite values.
        """
        if newton_iterations < 1:
            raise ValueError("newton_iterations must be >= 1")
        t0 = time.perf_counter()
        lam = self._check_efforts(lambda_a)
        ev = self._under(lam)
        before = ev.residual_norm
        alpha, solve_its = 1.0, 0
        for _ in range(newton_iterations):
            k = self.fem.stiffness(ev.state)
            guess = self._direction
            dx, its = self._solve(k, ev.residual[:, None], None if guess is None else guess[:, None])
            solve_its += its
            step = self.statics.newton_step(ev, lam, stiffness=k, direction=dx[:, 0])
            alpha = step.step_length
            self._direction = dx[:, 0]
            ev = step.evaluation
        self._ev, self._lambda = ev, lam
        return StepInfo(newton_iterations, ev.residual_norm, before, alpha, solve_its,
                        time.perf_counter() - t0)

    def equilibrate(self, lambda_a: np.ndarray, *, from_rest: bool = False) -> StaticsResult:
        """Full equilibrium under efforts λ (Newton, line search, load stepping).

        The load ramps from the current efforts (or from zero efforts and zero gravity at
        the rest shape with ``from_rest``).

        Raises:
            ConvergenceError: no equilibrium reached.
        """
        lam = self._check_efforts(lambda_a)
        if from_rest:
            result = self.statics.solve(
                self.fem.rest_points, lam, start_efforts=np.zeros_like(lam), start_external_scale=0.0
            )
        else:
            result = self.statics.solve(self._ev.positions, lam, start_efforts=self._lambda)
        self._ev, self._lambda = result.evaluation, lam
        self._direction = None
        self._update_prev = self._update_prev2 = self._update_prev3 = None
        return result

    # ------------------------------------------------------------------ compliance
    def compliance(self) -> ComplianceMatrices:
        """W_aa, W_ea, W_ee at the current state (K and Jacobians of the current geometry)."""
        t0 = time.perf_counter()
        k = self.fem.stiffness(self._ev.state)
        _, je_t = self.effectors.values_and_jacobian_t(self._ev.positions)
        ja_t = self._ev.jacobian_t
        rhs = np.hstack((ja_t, je_t))
        cols, its = self._solve(k, rhs, self._columns)
        self._columns = cols
        return compliance_from_columns(ja_t, je_t, cols, iterations=its,
                                       wall_time=time.perf_counter() - t0)

    def update(self, lambda_a: np.ndarray, seq: int, stamp: float) -> tuple[StepInfo, ComplianceSnapshot]:
        """The low-rate update: one Newton step under λ and the compliance, fused.

        K and the Jacobians are assembled once at the current state x_k; one block solve
        gives the Newton direction and the compliance columns. The state advances to
        x_{k+1} (line search on the potential), and the snapshot carries W at x_k with
        x_e0 and δ_a0 at x_{k+1} (≈ the equilibrium under λ0 = λ).

        With contact (:meth:`set_contact`): the contacts of x_k (at most ``max_contacts``)
        add their rows H to the block solve; the free Newton step d is corrected by the
        contact forces λ_c solving the Signorini LCP on W_cc = H K⁻¹ Hᵀ and the linearized
        gaps δ(x_k) + H d, the corrected step is taken without line search (the elastic
        potential alone is not a merit function with contact forces) but shortened so no
        node moves further than the alarm distance (a contact could be missed; without
        contacts the line-searched step is shortened by the clearance bound instead, see
        :meth:`_bounded`), and the snapshot carries the contact block (W_cc, W_ca, W_ec at
        x_k; gaps at x_{k+1}; λ_c).

        With a reduced contact basis Ψ (the description's ``collision: reduced_basis``):
        all contacts of x_k are detected (no ``max_contacts`` cap), Ψ_m are the basis rows
        of their vertices, the block solve takes the k columns Hᵀ Ψ_m instead of the m of
        Hᵀ, the Signorini problem is solved on β (λ_c = Ψ_m β), and the snapshot's block is
        the reduced one, k × k (``ContactBlock.reduced``): W_cc = Ψ_mᵀ H K⁻¹ Hᵀ Ψ_m,
        W_ca = Ψ_mᵀ W_ca, W_ec = W_ec Ψ_m, gap = Ψ_mᵀ gap, force = β. The contact model's
        per-point gap check (``enrich_tolerance``, on by default) then solves the
        contacts the reduced law would let sink in again with their own unit columns
        (one more K⁻¹ solve each); their forces' pattern is one more generalized contact:
        the block is (k + 1) × (k + 1) (:attr:`reduced_size`).

        Raises:
            ConvergenceError: the line search found no decrease, or non-finite values.
        """
        t0 = time.perf_counter()
        lam = self._check_efforts(lambda_a)
        ev = self._under(lam)
        before = ev.residual_norm
        k = self.fem.stiffness(ev.state)
        _, je_t = self.effectors.values_and_jacobian_t(ev.positions)
        ja_t = ev.jacobian_t
        contacts, hc = self._active_contacts(ev.positions)
        psi = self._basis_rows(contacts)
        rows_t = hc.T if psi is None else hc.T @ psi  # Hᵀ, or Hᵀ Ψ_m (k columns whatever m)
        rhs = np.hstack((ev.residual[:, None], ja_t, je_t, rows_t))
        rtol = np.full(rhs.shape[1], self.pcg_rtol)
        rtol[0] = max(self.pcg_rtol, self.newton_rtol)  # inexact Newton direction
        n_w = 1 + ja_t.shape[1] + je_t.shape[1]
        # without contact columns W is all the columns serve: judge them by W's error
        # (their Gram products, second order in the residual); contact columns (whose
        # responses also move the state) keep the residual test
        gram = None
        if rows_t.shape[1] == 0:
            gram = np.arange(rhs.shape[1]) >= 1
        x0, r0 = self._warm_start(k, rhs)
        cols, its = self._solve(k, rhs, x0, rtol, gram=gram, residual0=r0)
        w_residual = getattr(self.linear_solver, "residual_block", None) if gram is not None else None
        t_solve = time.perf_counter()
        contact = None
        if contacts is not None:
            contact = _ContactStep(contacts, hc, cols[:, n_w:], self.contact, cols[:, 0], psi,
                                   lambda b: self._solve(k, b, None)[0])
            loaded = np.flatnonzero(contact.contact_forces > 0.0)
            held = contacts.subset(loaded) if loaded.size else None
        else:
            held = None
        self._held_contacts = held
        direction = self._bounded(cols[:, 0] if contact is None else contact.direction, ev.positions,
                                  in_contact=contact is not None)
        # with contacts, a step that turns back on the last one (a nonsmooth two-state cycle:
        # the loaded contacts alternate and a full step repeats it forever): a shorter step,
        # halved again while the cycle lasts, back to the full step once it stops
        previous = self._direction
        reverses = (contact is not None and previous is not None
                    and float(direction @ previous) < -0.5 * float(np.linalg.norm(direction) * np.linalg.norm(previous)))
        self._relaxation = max(self._relaxation * 0.5, 1.0 / 16.0) if reverses else min(1.0, 2.0 * self._relaxation)
        if self._relaxation < 1.0:
            direction = self._relaxation * direction
        self._direction = direction
        self._columns = cols[:, 1:n_w]
        self._update_prev3, self._update_prev2, self._update_prev = (
            self._update_prev2, self._update_prev, cols)
        # with contact forces the elastic potential alone is no merit function: full step
        step = self.statics.newton_step(ev, lam, stiffness=k, direction=direction,
                                        line_search=contact is None)
        self._ev, self._lambda = step.evaluation, lam
        residual = step.evaluation.residual_norm
        if contact is not None:  # the equilibrium includes the contact forces
            residual = float(np.linalg.norm(step.evaluation.residual + contact.nodal_forces))
        info = StepInfo(1, residual, before, step.step_length, its, time.perf_counter() - t0)
        m = compliance_from_columns(ja_t, je_t, cols[:, 1:n_w], iterations=its,
                                    wall_time=t_solve - t0,
                                    residual=None if w_residual is None else w_residual[:, 1:n_w])
        block = None if contact is None else contact.block(self._ev.positions, cols[:, 1:1 + ja_t.shape[1]], je_t)
        if block is None and self.basis is not None:
            block = _empty_reduced_block(self.reduced_size, ja_t.shape[1], je_t.shape[1])
        snap = make_snapshot(
            m, seq=seq, stamp=stamp, actuator_names=self.actuator_names,
            actuator_kinds=self._kinds, effector_names=self.effector_names,
            effector_position=self.effectors.values(self._ev.positions),
            actuator_stroke=self._ev.strokes, lambda0=lam, fem_step_time=info.wall_time,
            contacts=block,
        )
        return info, snap

    # ------------------------------------------------------------------ helpers
    def _warm_start(self, k, rhs: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The PCG start of the update's block solve and its residual B − K x0 (None if not
        computed): the last solution, or (smooth effort trajectories) its extrapolation in
        time, per column whichever has the smaller residual; (None, None) when the solver
        will solve directly or the block changed shape."""
        direct_next = (isinstance(self.linear_solver, FactorReuseSolver)
                       and self.linear_solver.next_solve_is_direct())
        if direct_next or self._update_prev is None or self._update_prev.shape != rhs.shape:
            return None, None
        guess = self._update_prev
        # a contact appearing or leaving changes the block's width: extrapolate same-shape blocks only
        prev2 = self._update_prev2 if self._update_prev2 is not None and self._update_prev2.shape == rhs.shape else None
        if not (self.extrapolate and prev2 is not None):
            return guess, None
        if self._update_prev3 is not None and self._update_prev3.shape == rhs.shape:
            extra = 3.0 * (self._update_prev - self._update_prev2) + self._update_prev3
        else:
            extra = 2.0 * self._update_prev - self._update_prev2
        r_prev = rhs - k @ guess
        r_extra = rhs - k @ extra
        better = np.linalg.norm(r_extra, axis=0) < np.linalg.norm(r_prev, axis=0)
        return np.where(better, extra, guess), np.where(better, r_extra, r_prev)

    def _bounded(self, direction: np.ndarray, positions: np.ndarray, in_contact: bool) -> np.ndarray:
        """With a contact model: the step from ``positions`` (N, 3) [m] shortened so no
        contact is passed unseen (contacts are detected within the alarm distance only).

        - With contacts detected (``in_contact``; the step is the contact-corrected one,
          taken without line search): no node moves further than the alarm distance.
        - Without (free motion; the step is line-searched on the elastic potential): every
          pair that can touch approaches by at most max(2 × alarm, 0.9 × its distance)
          (:meth:`~soft_inverse_ros.core.contact.correction.ContactModel.step_bound`), so a
          pair farther than 2 × alarm / 0.9 is not crossed, and surfaces moving together (a
          tip swinging) are not held back. Never shorter than the first rule, which lets
          two nodes approach by up to twice the alarm distance.

        :attr:`last_step_fraction` records the share of the step let through."""
        self.last_step_fraction = 1.0
        if self.contact is None:
            return direction
        alarm = self.contact.alarm_distance
        if in_contact:
            largest = float(np.abs(direction).reshape(-1, 3).max(initial=0.0) * np.sqrt(3.0))
            if largest > alarm:
                self.last_step_fraction = alarm / largest
            return direction * self.last_step_fraction
        displacement = np.zeros(self.fem.n_nodes * 3)
        displacement[self.fem.free_dofs] = direction
        displacement = displacement.reshape(-1, 3)
        largest = float(np.sqrt((displacement ** 2).sum(axis=1).max(initial=0.0)))
        if largest > alarm:  # else no two nodes approach by more than 2 × alarm
            self.last_step_fraction = self.contact.step_bound(positions, displacement, 2.0 * alarm)
        return direction * self.last_step_fraction

    @property
    def basis(self):
        """The contact model's reduced basis (:class:`~soft_inverse_ros.core.contact.correction.ReducedContactBasis`), or None."""
        return None if self.contact is None else getattr(self.contact, "basis", None)

    @property
    def reduced_size(self) -> int | None:
        """Generalized contacts of the reduced snapshot block: the basis size k, plus one (the
        enrichment's pattern) with the contact model's per-point gap check; None: full contact."""
        if self.basis is None:
            return None
        return self.basis.size + (getattr(self.contact, "enrich_tolerance", None) is not None)

    def _basis_rows(self, contacts) -> np.ndarray | None:
        """Ψ_m (m, k): the basis rows of the detected contact vertices (None: full contact)."""
        if self.basis is None:
            return None
        if contacts is None:
            return np.zeros((0, self.basis.size))
        return self.basis.rows_for(contacts.vertex)

    def _active_contacts(self, positions: np.ndarray):
        """(contacts, H over the free DOFs (m, n_free)) at ``positions``: the ``max_contacts``
        smallest gaps among the contacts a free node takes part in (all of them with a
        reduced basis: the update's size is then k whatever m); (None, (0, n_free)) without."""
        n_free = self.fem.n_free
        if self.contact is None:
            return None, np.zeros((0, n_free))
        cs = self._with_held(self.contact.detect(positions), positions)
        if cs.size == 0:
            return None, np.zeros((0, n_free))
        hc = cs.rows[:, self.fem.free_dofs].toarray()
        keep = np.flatnonzero(np.linalg.norm(hc, axis=1) > 1e-9)  # not between clamped nodes
        if self.basis is None:
            keep = keep[np.argsort(cs.gaps[keep], kind="stable")[: self.max_contacts]]
        if keep.size == 0:
            return None, np.zeros((0, n_free))
        return cs.subset(keep), hc[keep]

    def _with_held(self, cs, positions: np.ndarray):
        """The detected contacts plus the last update's loaded contacts the detection no
        longer reports (a vertex whose closest point slid past a triangle's edge, pushed
        out by the force of that pair), kept with their last rows (normal and barycentric
        weights) while their linearized gap stays below the alarm distance. Without it a
        contact can flicker between updates: found, pushed out of the triangle's region,
        lost, pressed back in — a two-state cycle that never settles."""
        held = self._held_contacts
        if held is None:
            return cs
        from soft_inverse_ros.core.contact.geometry import merge

        seen = {(int(v), tuple(o), int(b)) for v, o, b in zip(cs.vertex, cs.other, cs.obstacle)}
        gaps = held.gaps_at(positions)
        keep = [i for i, (v, o, b) in enumerate(zip(held.vertex, held.other, held.obstacle))
                if (int(v), tuple(o), int(b)) not in seen and gaps[i] < self.contact.alarm_distance]
        if not keep:
            return cs
        kept = held.subset(np.asarray(keep))
        kept = dataclasses.replace(kept, gaps=gaps[keep])
        return merge([cs, kept], positions.shape[0])

    def _solve(
        self, k, rhs: np.ndarray, x0: np.ndarray | None, rtol: np.ndarray | None = None, *,
        gram: np.ndarray | None = None, residual0: np.ndarray | None = None,
    ) -> tuple[np.ndarray, int]:
        return solve_linear(self.linear_solver, k, rhs, x0, rtol=rtol, gram=gram,
                            residual0=residual0)
