"""The soft snake: n two-chamber links in a row joined by rigid plates on wheels (paper §IV–V).

One tet mesh for the whole body (:func:`build_link_mesh` with ``n_links``); the plates are
the shared end sections, held rigid by stiff constraints. Each plate carries an axle with
two wheels, the contact points being the plate's two bottom corners (the wheels keep the
silicone off the ground; the body itself has no ground contact). Wheel–ground contact:
a one-sided penalty on z = 0 and anisotropic Coulomb friction, μ_along along the body
(rolling) and μ_across across it (the wheel's side slip), each regularized as
μN·v/√(v² + ε²) and linearized with lagged coefficients. Gravity −z.

Dynamics: implicit (backward) Euler on the velocities, a fixed number of Newton iterations
per step, each a sparse direct solve of (M/h + C + h·K) Δv = −r. Frame: world, z up, SI.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from soft_inverse_ros.core.model.fem import CorotationalFEM
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
        mu_along, mu_across: friction coefficients along / across the body.
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
    mu_along: float = 0.1
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

    def __init__(self, params: SnakeParams = SnakeParams()):
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
        for axis, mu in ((along, p.mu_along), (across, p.mu_across)):
            speed = (v[w] * axis).sum(1)
            c = mu * normal / np.sqrt(speed**2 + p.slip_regularization**2)
            blocks += c[:, None, None] * axis[:, :, None] * axis[:, None, :]
        r3 = np.arange(3)
        rows = (3 * w[:, None, None] + r3[None, :, None]).repeat(3, 2)
        cols = (3 * w[:, None, None] + r3[None, None, :]).repeat(3, 1)
        damping = sp.csr_matrix((blocks.ravel(), (rows.ravel(), cols.ravel())), shape=(3 * n, 3 * n))
        return f, kdiag, damping

    def step(self, pressures: np.ndarray) -> None:
        """Advance one time step dt [s] under chamber pressures (n_links, 2) [Pa]."""
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
            force = self.fem.internal_forces(x) + spring_forces(springs, x) + grav + fn
            r = self._m3 * (v - v0).ravel() / h - force.ravel() + damping @ v.ravel()
            k = self.fem.stiffness(self.fem.element_state(x)) + spring_stiffness(springs, x) + sp.diags(kn)
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
