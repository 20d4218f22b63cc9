"""The soft snake: n two-chamber links in a row joined by rigid plates on wheels (paper §IV–V).

One tet mesh for the whole body (:func:`build_link_mesh` with ``n_links``); the plates are
the shared end sections, held rigid by stiff constraints. Each plate carries an axle with
two wheels, the contact points being the plate's two bottom corners (the wheels keep the
silicone off the ground; the body itself has no ground contact). Wheel–ground contact:
a one-sided penalty on z = 0 and anisotropic Coulomb friction, μ_along along the body
(rolling) and μ_across across it (the wheel's side slip): the force is
−N·(μ_along·v_a·a + μ_across·v_c·c)/√(|v_t|² + ε²), v_t the contact's slip velocity in the
ground plane and v_a, v_c its components along a and across c (the form of Hu et al. 2009,
PNAS 106:10081, with û = v_t/|v_t| regularized). One slip speed |v_t| regularizes both axes,
so equal coefficients give isotropic friction (a per-axis √(v_a² + ε²) would not: in the
Coulomb regime its force is box-shaped, up to √2·μN, aligned with the body). The
coefficients are lagged at the step's start velocities (linear damping in each step).
Gravity −z.

Dynamics: implicit (backward) Euler on the velocities, a fixed number of Newton iterations
per step, each a linear solve of (M/h + C + h·K) Δv = −r (sparse direct, or a fixed number
of Jacobi-preconditioned MINRES iterations). Frame: world, z up, SI.

Two implementations of the same step: the compiled one (numba, :mod:`.snake_kernels`: the
Jacobian's block-sparse (BSR) pattern is built once and its data refilled in place, one fused pass for
springs, ground and friction, MINRES on the BSR arrays) and the numpy/scipy reference
(``kernels="numpy"``; used when numba is absent, and by the tests to check the compiled one).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from soft_inverse_ros.core.model.fem import _PAIR_I, _PAIR_J, CorotationalFEM
from soft_inverse_ros.core.snake.link_mesh import LinkGeometry, build_link_mesh
from soft_inverse_ros.core.snake.link_model import LinkMaterial, _grid_pairs, actuated_springs
from soft_inverse_ros.core.snake.springs import SpringSet, concat, spring_forces, spring_stiffness


@dataclass(frozen=True)
class SnakeParams:
    """Snake parameters (values the paper's text lost are our choices, see EXPERIMENTS.md).

    Attributes:
        n_links: links (paper: 4).
        geometry: one link's geometry (``sections`` per link; 7 for a coarse, fast mesh).
        material: silicone and constraint parameters.
        plate_mass: mass of one plate with its axle and wheels [kg].
        mu_along, mu_across: friction coefficients along / across the body. Along, the
            wheel rolls on its hinge (the paper): μ_along is its rolling resistance, 0.01
            (small hard wheels on a hard floor: ~0.005–0.02; the text gives none). Across,
            the wheel–ground contact's Coulomb coefficient.
        ground_stiffness: wheel–ground penalty [N/m] per contact point.
        slip_regularization: ε of the regularized Coulomb law [m/s].
        gravity: [m/s²], along −z.
        dt: time step [s]; newton_iterations: Newton iterations per step.
        n_snakes: independent snakes stepped together as one block-diagonal system (one
            FEM kernel call, one spring/contact evaluation and one sparse solve for all),
            side by side ``snake_spacing`` [m] apart along y.
        linear_solver: ``"direct"`` (SuperLU) or ``"minres"``: the fixed-cost solve of the
            paper, ``krylov_iterations`` Jacobi-preconditioned MINRES iterations (a
            conjugate-residual method for symmetric systems, scipy), started from zero.
    """

    n_links: int = 4
    geometry: LinkGeometry = field(default_factory=lambda: LinkGeometry(sections=7))
    material: LinkMaterial = field(default_factory=LinkMaterial)
    plate_mass: float = 0.030
    mu_along: float = 0.01
    mu_across: float = 1.0
    ground_stiffness: float = 2000.0
    slip_regularization: float = 2e-3
    gravity: float = 9.81
    dt: float = 0.005
    newton_iterations: int = 2
    n_snakes: int = 1
    snake_spacing: float = 0.2
    linear_solver: str = "direct"
    krylov_iterations: int = 20

    def __post_init__(self) -> None:
        ok = (self.linear_solver in ("direct", "minres") and self.krylov_iterations >= 1
              and self.n_links >= 1 and self.n_snakes >= 1 and self.snake_spacing > 0 and self.plate_mass >= 0 and self.mu_along >= 0 and self.mu_across >= 0
              and self.ground_stiffness > 0 and self.slip_regularization > 0 and self.gravity >= 0
              and self.dt > 0 and self.newton_iterations >= 1)
        if not ok:
            raise ValueError(f"invalid snake parameters {self!r}")


def _tile(springs: SpringSet, copies: int, n_nodes: int) -> SpringSet:
    """``springs`` repeated for ``copies`` bodies of ``n_nodes`` nodes each."""
    offs = (np.arange(copies) * n_nodes)[:, None, None]
    return SpringSet((springs.pairs[None] + offs).reshape(-1, 2), np.tile(springs.rest, copies),
                     np.tile(springs.stiffness, copies))


class Snake:
    """State (x, v) and implicit step of ``n_snakes`` snakes; ``pressures``
    (n_snakes, n_links, 2) or, for one snake, (n_links, 2) [Pa] are the (left, right)
    chamber gauge pressures."""

    def __init__(self, params: SnakeParams = SnakeParams(), kernels: str = "auto"):
        """``kernels``: ``"numba"`` (compiled step, needs numba), ``"numpy"`` (the
        numpy/scipy reference step) or ``"auto"`` (numba when it imports, unless
        ``SOFT_INVERSE_ROS_SNAKE_KERNELS=numpy``)."""
        if kernels not in ("auto", "numpy", "numba"):
            raise ValueError(f"kernels must be 'auto', 'numpy' or 'numba', got {kernels!r}")
        if kernels == "auto" and os.environ.get("SOFT_INVERSE_ROS_SNAKE_KERNELS") == "numpy":
            kernels = "numpy"
        self._kernels = None
        if kernels != "numpy":
            try:
                from soft_inverse_ros.core.snake import snake_kernels
            except ImportError:
                if kernels == "numba":
                    raise ValueError("kernels='numba' needs numba") from None
            else:
                self._kernels = snake_kernels
        #: "numba" (compiled step) or "numpy" (reference step)
        self.kernels = "numba" if self._kernels is not None else "numpy"
        self.params = params
        g, per = params.geometry, params.geometry.sections - 1
        self.link_mesh = lm = build_link_mesh(g, params.n_links)
        one = np.array(lm.mesh.points)
        n, s_count = len(one), params.n_snakes
        self.nodes_per_snake = n
        shift = np.arange(s_count)[:, None, None] * np.array([0.0, params.snake_spacing, 0.0])
        pts = (one[None] + shift).reshape(-1, 3)
        tets = (lm.mesh.tets[None] + (np.arange(s_count) * n)[:, None, None]).reshape(-1, 4)
        self.fem = CorotationalFEM(pts, tets, params.material.young_modulus,
                                   params.material.poisson_ratio, density=params.material.density)
        self.plate_sections = np.arange(params.n_links + 1) * per
        wheels = np.stack([lm.grid_ids[self.plate_sections, 0, 0], lm.grid_ids[self.plate_sections, 6, 0]], 1)
        #: (n_snakes·(n_links+1), 2) node ids of each plate's (left, right) wheel contact
        self.wheels = (wheels[None] + (np.arange(s_count) * n)[:, None, None]).reshape(-1, 2)
        mass = self.fem.lumped_mass().reshape(s_count, n)
        for sec in self.plate_sections:
            ids = lm.section_nodes(sec)
            mass[:, ids] += params.plate_mass / len(ids)
        self.mass = mass.ravel()
        self._m3 = np.repeat(self.mass, 3)
        constraints, actuators = self._springs(one)
        self.constraints = _tile(constraints, s_count, n)
        self.actuators = [SpringSet(a.pairs + k * n, a.rest, a.stiffness) for k in range(s_count) for a in actuators]
        self.x, self.v = pts.copy(), np.zeros_like(pts)
        self.time = 0.0
        self._grav = np.zeros_like(pts)
        self._grav[:, 2] = -params.gravity * self.mass
        if self._kernels is not None:
            self._build_pattern()

    def _springs(self, pts: np.ndarray) -> tuple[SpringSet, list[SpringSet]]:
        lm, p = self.link_mesh, self.params
        hx, hy, hz = lm.step
        k_stiff = p.material.constraint_stiffness_ratio * p.material.young_modulus * hy * hz / hx
        k_act = p.material.actuation_stiffness_scale * p.material.young_modulus * hy * hz / (4.0 * hx)
        layer = lm.centre_layer_ids()
        sets = [SpringSet.between(pts, np.stack([layer[:-1].ravel(), layer[1:].ravel()], 1), k_stiff)]
        sets += [SpringSet.between(pts, _grid_pairs(lm.grid_ids[s]), k_stiff) for s in self.plate_sections]
        actuators = []
        for link in range(p.n_links):
            a, b = self.plate_sections[link], self.plate_sections[link + 1]
            for side in (0, 1):
                c = lm.chamber_corner_ids(side)
                quad = np.stack([c[a + 1:b, [0, 1, 2, 3]], c[a + 1:b, [1, 2, 3, 0]]], 2).reshape(-1, 2)
                diag = np.concatenate([c[a + 1:b, [0, 2]], c[a + 1:b, [1, 3]]])
                sets.append(SpringSet.between(pts, np.concatenate([quad, diag]), k_stiff))
                actuators.append(SpringSet.between(pts, np.stack([c[a:b].ravel(), c[a + 1:b + 1].ravel()], 1), k_act))
        return concat(sets), actuators

    def _contact(self, x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix]:
        """(normal penalty force (N,3) [N], its stiffness diagonal (3N,), friction damping C)
        at the wheels, friction coefficients lagged at velocities v."""
        p, n = self.params, len(x)
        w = self.wheels.ravel()
        pen = np.maximum(-x[w, 2], 0.0)
        f = np.zeros_like(x)
        f[w, 2] = p.ground_stiffness * pen
        kdiag = np.zeros(3 * n)
        kdiag[3 * w + 2] = np.where(pen > 0, p.ground_stiffness, 0.0)
        axle = x[self.wheels[:, 1]] - x[self.wheels[:, 0]]
        across = np.repeat(axle * [1.0, 1.0, 0.0], 2, axis=0)
        across /= np.maximum(np.linalg.norm(across, axis=1, keepdims=True), 1e-12)
        along = np.stack([-across[:, 1], across[:, 0], np.zeros(len(w))], 1)
        normal = p.ground_stiffness * pen
        blocks = np.zeros((len(w), 3, 3))
        slip = np.sqrt(v[w, 0] ** 2 + v[w, 1] ** 2 + p.slip_regularization**2)
        for axis, mu in ((along, p.mu_along), (across, p.mu_across)):
            c = mu * normal / slip
            blocks += c[:, None, None] * axis[:, :, None] * axis[:, None, :]
        r3 = np.arange(3)
        rows = (3 * w[:, None, None] + r3[None, :, None]).repeat(3, 2)
        cols = (3 * w[:, None, None] + r3[None, None, :]).repeat(3, 1)
        damping = sp.csr_matrix((blocks.ravel(), (rows.ravel(), cols.ravel())), shape=(3 * n, 3 * n))
        return f, kdiag, damping

    def _build_pattern(self) -> None:
        """The Jacobian's block-sparse (BSR, 3×3 node blocks) pattern: the FEM's blocks, each
        spring's four and the wheel contacts' diagonal ones, built once, with every
        contribution's data slot (block·9 + 3a + b)."""
        fem, n = self.fem, self.fem.n_nodes
        f_ptr = fem._csr_indptr.astype(np.int64)
        f_idx = fem._csr_indices.astype(np.int64)
        f_rows = np.repeat(np.arange(3 * n), np.diff(f_ptr))
        all_pairs = np.concatenate([self.constraints.pairs] + [s.pairs for s in self.actuators])
        nodes = np.arange(n)
        keys = np.unique(np.concatenate([(f_rows // 3) * n + f_idx // 3, all_pairs[:, 0] * n + all_pairs[:, 1],
                                         all_pairs[:, 1] * n + all_pairs[:, 0], nodes * n + nodes]))
        br, bc = keys // n, keys % n
        self._bsr_indptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.bincount(br, minlength=n), out=self._bsr_indptr[1:])
        self._bsr_indices = bc.astype(np.int32)
        self._n_blocks = len(keys)

        def block_slots(i, j):  # (len, 9) data slots of blocks (i, j)
            return 9 * np.searchsorted(keys, i * n + j)[:, None] + np.arange(9)

        # the FEM's CSR slots (fem._slot_*_em) moved to this layout: its stiffness kernel
        # then writes straight into the Jacobian's layout
        fem_map = 9 * np.searchsorted(keys, (f_rows // 3) * n + f_idx // 3) + 3 * (f_rows % 3) + f_idx % 3
        self._fem_map = fem_map
        # block of each element's node pair (i, j) and of its twin (j, i) (−1 on the diagonal)
        t = fem.tets
        pi, pj = t[:, _PAIR_I], t[:, _PAIR_J]
        self._fem_block_up = np.searchsorted(keys, pi * n + pj).astype(np.int32)
        self._fem_block_lo = np.where(_PAIR_I == _PAIR_J, -1, np.searchsorted(keys, pj * n + pi)).astype(np.int32)
        a, b = all_pairs[:, 0], all_pairs[:, 1]
        self._spring_slots = np.stack([block_slots(a, a), block_slots(b, b), block_slots(a, b), block_slots(b, a)])
        w = self.wheels.ravel()
        self._contact_slots = block_slots(w, w)
        self._diag_slots = (block_slots(nodes, nodes)[:, [0, 4, 8]]).ravel()
        nnz = 9 * self._n_blocks
        self._fem_data, self._jac, self._k_spring = np.zeros(nnz), np.empty(nnz), np.empty(nnz)
        self._damping = np.empty((len(w), 3, 3))
        self._force, self._r, self._fem_forces = np.empty((n, 3)), np.empty(3 * n), np.empty((n, 3))
        self._constraint_rest = np.ascontiguousarray(self.constraints.rest)
        self._act_rest = np.concatenate([s.rest for s in self.actuators])
        self._act_count = np.array([len(s.rest) for s in self.actuators])
        self._all_pairs = np.ascontiguousarray(all_pairs)
        self._all_stiff = np.concatenate([self.constraints.stiffness] + [s.stiffness for s in self.actuators])

    def jacobian(self) -> sp.bsr_matrix:
        """The last Newton iteration's Jacobian M/h + C + h·K (3N, 3N) of the compiled step
        (for inspection and tests)."""
        if self._kernels is None:
            raise RuntimeError("jacobian() needs the compiled step (kernels='numba')")
        n = 3 * self.fem.n_nodes
        return sp.bsr_matrix((self._jac.reshape(-1, 3, 3), self._bsr_indices, self._bsr_indptr), shape=(n, n))

    def _step_compiled(self, pressures: np.ndarray) -> None:
        """:meth:`step` through :mod:`.snake_kernels` (the same model as the reference)."""
        p, h, kern, fem = self.params, self.params.dt, self._kernels, self.fem
        scale = 1.0 + np.maximum(np.asarray(pressures, float).ravel(), 0.0) / p.material.young_modulus
        rest = np.concatenate([self._constraint_rest, self._act_rest * np.repeat(scale, self._act_count)])
        x0, v0 = self.x, self.v
        kern.contact_damping(x0, v0, self.wheels, p.mu_along, p.mu_across, p.ground_stiffness,
                             p.slip_regularization, self._damping)
        contacts = self.wheels.ravel()
        v = v0.copy()
        for _ in range(p.newton_iterations):
            x = x0 + h * v
            if fem.kernels == "numba":
                kern.fem_forces_and_stiffness(x, fem.tets, fem.gradients, fem.weighted_volumes, fem._gram_em, fem.lam,
                                              fem.mu, _PAIR_I, _PAIR_J, self._fem_block_up, self._fem_block_lo,
                                              self._fem_forces, self._fem_data)
            else:  # numpy FEM kernels (SOFT_INVERSE_ROS_FEM_KERNELS=numpy): the same, through objects
                state = fem.element_state(x)
                self._fem_forces[:] = state.forces
                self._fem_data[self._fem_map] = fem.stiffness(state).data
            kern.newton_system(x, v, v0, h, self._m3, self._fem_forces, self._fem_data, self._all_pairs, rest,
                               self._all_stiff, self._spring_slots, self._grav, contacts, p.ground_stiffness,
                               self._damping, self._contact_slots, self._diag_slots, self._force, self._r,
                               self._jac, self._k_spring)
            if p.linear_solver == "minres":
                dv = kern.minres(self._bsr_indptr, self._bsr_indices, self._jac, self._diag_slots, self._r,
                                 p.krylov_iterations)
            else:
                dv = spla.spsolve(self.jacobian().tocsc(), self._r)
            v = v - dv.reshape(v.shape)
        self.v, self.x = v, x0 + h * v
        self.time += h

    def step(self, pressures: np.ndarray) -> None:
        """Advance one time step dt [s] under chamber pressures (n_links, 2) [Pa]."""
        if self._kernels is not None:
            self._step_compiled(pressures)
            return
        p, h = self.params, self.params.dt
        springs = actuated_springs(self.constraints, self.actuators, np.asarray(pressures, float).ravel(),
                                   p.material.young_modulus)
        x0, v0 = self.x, self.v
        _, _, damping = self._contact(x0, v0)
        grav = np.zeros_like(x0)
        grav[:, 2] = -p.gravity * self.mass
        v = v0.copy()
        for _ in range(p.newton_iterations):
            x = x0 + h * v
            fn, kn, _ = self._contact(x, v0)
            state = self.fem.element_state(x)
            force = state.forces + spring_forces(springs, x) + grav + fn
            r = self._m3 * (v - v0).ravel() / h - force.ravel() + damping @ v.ravel()
            k = self.fem.stiffness(state) + spring_stiffness(springs, x) + sp.diags(kn)
            jac = sp.diags(self._m3 / h) + damping + h * k
            v = v - self._solve(jac.tocsr(), r).reshape(v.shape)
        self.v, self.x = v, x0 + h * v
        self.time += h

    def _solve(self, jac: sp.csr_matrix, r: np.ndarray) -> np.ndarray:
        if self.params.linear_solver == "direct":
            return spla.spsolve(jac.tocsc(), r)
        inv_diag = sp.diags(1.0 / jac.diagonal())
        dv, _ = spla.minres(jac, r, M=inv_diag, maxiter=self.params.krylov_iterations, rtol=0.0)
        return dv

    def coms(self) -> np.ndarray:
        """Centre of mass of each snake (n_snakes, 3) [m]."""
        m = self.mass.reshape(self.params.n_snakes, -1)
        x = self.x.reshape(self.params.n_snakes, -1, 3)
        return (m[..., None] * x).sum(1) / m.sum(1)[:, None]

    def com(self) -> np.ndarray:
        """Centre of mass (3,) [m] of the first snake."""
        return self.coms()[0]

    def heading(self, snake: int = 0) -> float:
        """Yaw [rad] of a snake's plate axis (plate 0 → last plate) in the ground plane."""
        w = self.wheels.reshape(self.params.n_snakes, -1, 2)[snake]
        d = self.x[w[-1]].mean(0) - self.x[w[0]].mean(0)
        return float(np.arctan2(d[1], d[0]))

    # ------------------------------------------------------------------ plates
    def plate_corner_ids(self, snake: int = 0) -> np.ndarray:
        """(n_links+1, 4) node ids of each plate's four corners of one snake, link 0's
        plate first; corners (left bottom, right bottom, right top, left top). The
        simulated motion capture puts its four markers per plate there (paper §VI)."""
        g = self.link_mesh.grid_ids[self.plate_sections]
        ids = np.stack([g[:, 0, 0], g[:, 6, 0], g[:, 6, 3], g[:, 0, 3]], axis=1)
        return ids + snake * self.nodes_per_snake

    def plate_poses(self, snake: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Poses of one snake's plates: positions (n_links+1, 3) [m] (corner centroids)
        and orientations (n_links+1, 4) quaternions (x, y, z, w), world frame; a plate's
        y axis runs from its left to its right corners, z up through it, x = y × z (along
        the body at rest: the identity)."""
        from soft_inverse_ros.core.mocap.rigid_transform import matrix_to_quaternion

        c = self.x[self.plate_corner_ids(snake)]  # (P, 4, 3)
        y = (c[:, 1] + c[:, 2]) - (c[:, 0] + c[:, 3])
        z = (c[:, 2] + c[:, 3]) - (c[:, 0] + c[:, 1])
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        x = np.cross(y, z)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        z = np.cross(x, y)
        rot = np.stack([x, y, z], axis=2)  # columns: the plate's axes in the world
        return c.mean(axis=1), matrix_to_quaternion(rot)
