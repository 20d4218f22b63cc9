"""Implicit Euler of a hybrid soft-rigid robot in mixed coordinates z = [q, x_free] (Coevoet eq. 7-9).

Per step of h seconds (one linearisation, as the paper and SOFA's implicit Euler)::

    (M_z + h D_z + h² K_z) Δv = h (τ(z) − D_z v − h K_z v),   v ← v + Δv,   z ← z + h v

with M_z = Jᵀ M J + M_arm(q) (kg, kg m² for joints; FEM lumped mass projected by the mapping,
the arm's joint-space inertia from Pinocchio ``crba``), K_z = Jᵀ K J + K_joint (eq. 6),
Rayleigh damping D_z = α M_z + β K_z, and generalised forces
τ = Jᵀ (f_int(x) + f_gravity) − g_arm(q) + τ_servo (N m per joint, N per free node dof). The
joints are position servos of stiffness K_joint (N m/rad) driven to q_cmd (rad), whose motors
give at most their effort limit (the URDF's ``effort``, when given):
τ_servo = clip(g_ff + K_joint (q_cmd − q), −effort, effort), g_ff the gravity feed-forward
(:attr:`HybridDynamicsConfig.gravity_compensation`) or 0; a saturated joint has no servo
stiffness in K_z.
The arm's velocity-product (Coriolis) terms are omitted (slow motions; stated limit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.rigid.mapping import RigidMapping

#: systems up to this many mixed coordinates are assembled and factorized dense: scipy.sparse's
#: per-call overhead (~40 small sparse matrices built per step) costs more than the arithmetic
#: there. One step without contacts, one BLAS thread (twenty-first session): 221 coordinates
#: 4.5 ms dense / 10.2 ms sparse, 485: 31 / 15 ms. The built-in hybrid_arm's rod has 140.
DENSE_MAX_COORDS = 300


@dataclass(frozen=True)
class HybridDynamicsConfig:
    """Integration settings: step h (s), Rayleigh α (1/s) and β (s), gravity (m/s², world)."""

    step: float = 1e-2
    rayleigh_mass: float = 0.1
    rayleigh_stiffness: float = 0.01
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    #: the joint servos add the arm's gravity torque g(q) as a feed-forward (position-controlled
    #: arms do); the soft part's weight is not compensated
    gravity_compensation: bool = False

    def __post_init__(self) -> None:
        if not (np.isfinite(self.step) and self.step > 0):
            raise SystemExit(f"time step must be a positive finite time [s], got {self.step!r}")
        if self.rayleigh_mass < 0 or self.rayleigh_stiffness < 0:
            raise SystemExit("Rayleigh damping coefficients must be >= 0")


class HybridPlant:
    """The simulated hybrid robot: arm (URDF) + soft part whose listed nodes are rigidified."""

    def __init__(self, mapping: RigidMapping, fem: CorotationalFEM, joint_stiffness: np.ndarray,
                 q: np.ndarray, config: HybridDynamicsConfig = HybridDynamicsConfig(),
                 dense: bool | None = None, joint_effort_limit: np.ndarray | None = None) -> None:
        """``fem`` over all nodes (no fixed nodes; the rigidified ones follow the arm), rest
        positions = ``mapping``'s; ``q`` the initial joint angles (rad); ``dense``: assemble
        and factorize the step's matrices dense (None: up to :data:`DENSE_MAX_COORDS`
        coordinates) or sparse; ``joint_effort_limit`` (nq,) the servo motors' largest torque
        [N m] (None: unlimited)."""
        if fem.n_free_nodes != mapping.n_nodes:
            raise SystemExit("the hybrid plant's FEM must have no fixed nodes (rigidified nodes follow the arm)")
        self.mapping, self.fem, self.config = mapping, fem, config
        self.kj = np.asarray(joint_stiffness, float)
        x0 = np.asarray(fem.rest_points, float)
        self.z = np.concatenate([np.asarray(q, float), x0[mapping.free].ravel()])
        self.v = np.zeros(mapping.n_coords)
        self.q_cmd = np.asarray(q, float).copy()
        nq = mapping.chain.nq
        self.joint_effort_limit = (np.full(nq, np.inf) if joint_effort_limit is None
                                   else np.asarray(joint_effort_limit, float).reshape(nq))
        #: extra generalised forces τ_ext(z) (N m per joint, N per free node dof), e.g. the
        #: soft part's force actuators; applied explicitly (effort-driven: no stiffness)
        self.external_forces = None
        self._mass_diagonal = np.repeat(fem.lumped_mass(), 3)
        self._mass = sp.diags(self._mass_diagonal)
        self._f_gravity = fem.gravity_forces(np.asarray(config.gravity)).ravel()
        #: the step's matrices are dense arrays (small systems) or scipy.sparse
        self.dense = mapping.n_coords <= DENSE_MAX_COORDS if dense is None else bool(dense)

    @property
    def positions(self) -> np.ndarray:
        """FEM node positions (N, 3) m, world."""
        return self.mapping.positions(self.z)

    def _joint_terms(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        model, data = self.mapping.chain.model, self.mapping.chain.data
        m = pin.crba(model, data, q)
        m = np.triu(m) + np.triu(m, 1).T
        model.gravity.linear = np.asarray(self.config.gravity, float)
        return m, pin.computeGeneralizedGravity(model, data, q)

    def jacobian(self) -> np.ndarray | sp.csr_matrix:
        """The mapping's Jacobian dx/dz at the current z, dense or sparse as the step
        assembles (:attr:`dense`)."""
        return self.mapping.dense_jacobian(self.z) if self.dense else self.mapping.jacobian(self.z)

    def generalized_forces(self, jac: sp.spmatrix | np.ndarray | None = None,
                           joint_gravity: np.ndarray | None = None,
                           positions: np.ndarray | None = None,
                           internal_forces: np.ndarray | None = None) -> np.ndarray:
        """τ(z) (see the module docstring). ``jac``, ``joint_gravity``, ``positions``,
        ``internal_forces``: the mapping's Jacobian, the arm's generalised gravity, the node
        positions and the FEM's internal forces (N, 3) at the current z when the caller has
        them (computed here otherwise)."""
        nq = self.mapping.chain.nq
        q = self.z[:nq]
        x = self.positions if positions is None else positions
        f_int = self.fem.internal_forces(x) if internal_forces is None else internal_forces
        f = np.asarray(f_int).ravel() + self._f_gravity
        tau = self.mapping.forces_to_coords(self.z, f, jac=jac)
        g = self._joint_terms(q)[1] if joint_gravity is None else joint_gravity
        tau[:nq] += self._servo_torque(q, g)[0] - g
        if self.external_forces is not None:
            tau = tau + self.external_forces(self.z)
        return tau

    def _servo_torque(self, q: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The servo motors' torques [N m] at joint angles ``q`` with the arm's generalised
        gravity ``g``, and which of them are at their effort limit (module docstring)."""
        demand = (g if self.config.gravity_compensation else 0.0) + self.kj * (self.q_cmd - q)
        torque = np.clip(demand, -self.joint_effort_limit, self.joint_effort_limit)
        return torque, torque != demand

    def step(self) -> None:
        """One linearised implicit Euler step of h seconds (eq. 7-9)."""
        a, rhs = self._step_system()
        if self.dense:
            self.v = self.v + sla.solve(a, rhs, check_finite=False)
        else:
            self.v = self.v + spla.spsolve(a.tocsc(), rhs)
        self.z = self.z + self.config.step * self.v

    def step_contacts(self, rows: sp.spmatrix | np.ndarray, gap: np.ndarray, w_env: np.ndarray,
                      jac: sp.spmatrix | np.ndarray | None = None) -> np.ndarray:
        """One implicit Euler step with unilateral contacts (Coevoet eq. 12); the contact
        forces λ (N, >= 0, along each row's direction on the robot).

        ``rows`` (m, n_coords): n_k · dx_k/dz of the contacting points; ``gap`` (m,) their gaps
        now [m]; ``w_env`` (m, m): the environment's compliance at the pairs [m/N] (a
        quasi-static soft body: its surface yields by ``w_env λ``). The gaps after the step,
        ``gap + h rows v' + w_env λ`` with ``v' = v + Δv_free + h A⁻¹ rowsᵀ λ``, solve the
        Signorini LCP exactly (W = h² rows A⁻¹ rowsᵀ + w_env). ``jac``: the mapping's
        Jacobian at the current z when the caller has it (:meth:`jacobian`)."""
        from soft_inverse_ros.core.contact.signorini import solve_signorini_exact

        h = self.config.step
        a, rhs = self._step_system(jac)
        if self.dense:
            lu_piv = sla.lu_factor(a, check_finite=False)
            solve = lambda b: sla.lu_solve(lu_piv, b, check_finite=False)  # noqa: E731
            rows = rows.toarray() if sp.issparse(rows) else np.asarray(rows, float)
        else:
            solve = spla.splu(a.tocsc()).solve
            rows = sp.csr_matrix(rows)
        dv = solve(rhs)
        gap_free = np.asarray(gap, float) + h * (rows @ (self.v + dv))
        forces = np.zeros(rows.shape[0])
        if rows.shape[0] and np.any(gap_free < 0):
            sol = solve(np.ascontiguousarray(rows.T) if self.dense else rows.T.toarray())
            w = h * h * (rows @ sol) + np.asarray(w_env, float)
            forces = solve_signorini_exact(0.5 * (w + w.T), gap_free).forces
            dv = dv + h * (sol @ forces)
        self.v = self.v + dv
        self.z = self.z + h * self.v
        return forces

    def _projected_dense(self, k_full: np.ndarray, jac: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Jᵀ K J and Jᵀ M J (eq. 6; M the lumped mass) as dense arrays, by the mapping's
        structure: J is J_r (3 n_r × nq) on the rigidified nodes' DOFs, the identity on the
        free ones, so the products cost O(n² nq), not O(n³)."""
        nq, n = self.mapping.chain.nq, self.mapping.n_coords
        rigid, free = self.mapping.rigid_dofs, self.mapping.free_dofs
        jr = jac[rigid, :nq]
        kj = np.empty((k_full.shape[0], n))  # K J
        kj[:, :nq] = k_full[:, rigid] @ jr
        kj[:, nq:] = k_full[:, free]
        k = np.empty((n, n))
        k[:nq] = jr.T @ kj[rigid]
        k[nq:] = kj[free]
        m = np.zeros((n, n))  # M diagonal: no coupling between the q and the free blocks
        m[:nq, :nq] = (jr.T * self._mass_diagonal[rigid]) @ jr
        m[np.arange(nq, n), np.arange(nq, n)] = self._mass_diagonal[free]
        return k, m

    def _step_system(self, jac: sp.spmatrix | np.ndarray | None = None
                     ) -> tuple[sp.csr_matrix | np.ndarray, np.ndarray]:
        """The step's matrix M + h D + h² K (dense or sparse, :attr:`dense`) and right-hand
        side (module docstring); ``jac`` the mapping's Jacobian at the current z (computed
        here when None)."""
        h, nq, n = self.config.step, self.mapping.chain.nq, self.mapping.n_coords
        if jac is None:
            jac = self.jacobian()
        elif self.dense:
            jac = jac.toarray() if sp.issparse(jac) else np.asarray(jac, float)
        else:
            jac = sp.csr_matrix(jac)
        x = self.positions
        state = self.fem.element_state(x)
        m_arm, g_arm = self._joint_terms(self.z[:nq])
        servo_k = np.where(self._servo_torque(self.z[:nq], g_arm)[1], 0.0, self.kj)  # saturated: none
        if self.dense:
            k, m = self._projected_dense(self.fem.stiffness(state).toarray(), jac)  # eq. 6
            k[np.arange(nq), np.arange(nq)] += servo_k
            m[:nq, :nq] += m_arm
        else:
            # the arm's joint-space inertia on the q block (added as a sparse term: a LIL round
            # trip cost more than the rest of the assembly); the joint stiffness on its diagonal
            iq, jq = np.meshgrid(np.arange(nq), np.arange(nq), indexing="ij")
            arm = sp.csr_matrix((m_arm.ravel(), (iq.ravel(), jq.ravel())), shape=(n, n))
            k = self.mapping.project_stiffness(self.z, self.fem.stiffness(state), servo_k * np.ones(nq))  # eq. 6
            m = self.mapping.project_stiffness(self.z, self._mass) + arm
        a = (1 + h * self.config.rayleigh_mass) * m + (h * self.config.rayleigh_stiffness + h * h) * k
        damping = self.config.rayleigh_mass * (m @ self.v) + self.config.rayleigh_stiffness * (k @ self.v)
        rhs = h * (self.generalized_forces(jac, g_arm, x, state.forces) - damping - h * (k @ self.v))
        return a, rhs
