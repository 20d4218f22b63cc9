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

    def __post_init__(self) -> None:
        ok = (self.n_links >= 1 and self.plate_mass >= 0 and self.mu_along >= 0 and self.mu_across >= 0
              and self.ground_stiffness > 0 and self.slip_regularization > 0 and self.gravity >= 0
              and self.dt > 0 and self.newton_iterations >= 1)
        if not ok:
            raise ValueError(f"invalid snake parameters {self!r}")


class Snake:
    """State (x, v) and implicit step of one snake; ``pressures`` (n_links, 2) [Pa] are the
    (left, right) chamber gauge pressures."""

    def __init__(self, params: SnakeParams = SnakeParams()):
        self.params = params
        g, per = params.geometry, params.geometry.sections - 1
        self.link_mesh = lm = build_link_mesh(g, params.n_links)
        pts = np.array(lm.mesh.points)
        self.fem = CorotationalFEM(pts, lm.mesh.tets, params.material.young_modulus,
                                   params.material.poisson_ratio, density=params.material.density)
        self.plate_sections = np.arange(params.n_links + 1) * per
        self.wheels = np.stack([lm.grid_ids[self.plate_sections, 0, 0], lm.grid_ids[self.plate_sections, 6, 0]], 1)
        mass = self.fem.lumped_mass()
        for s in self.plate_sections:
            ids = lm.section_nodes(s)
            mass[ids] += params.plate_mass / len(ids)
        self.mass = mass
        self._m3 = np.repeat(mass, 3)
        self.constraints, self.actuators = self._springs(pts)
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
            v = v - spla.spsolve(jac.tocsc(), r).reshape(v.shape)
        self.v, self.x = v, x0 + h * v
        self.time += h

    def com(self) -> np.ndarray:
        """Centre of mass (3,) [m]."""
        return (self.mass[:, None] * self.x).sum(0) / self.mass.sum()

    def heading(self) -> float:
        """Yaw [rad] of the tail-to-head plate axis (plate 0 → last plate) in the ground plane."""
        d = self.x[self.wheels[-1]].mean(0) - self.x[self.wheels[0]].mean(0)
        return float(np.arctan2(d[1], d[0]))
