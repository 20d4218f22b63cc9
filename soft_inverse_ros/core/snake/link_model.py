"""Static FEM of the two-chamber bending link with pressure actuation (paper §IV-C).

Silicone body: the co-rotational tetrahedral FEM (:class:`CorotationalFEM`), Ecoflex 00-30.
Constraints, as the paper models them (stiff two-node constraints, :mod:`.springs`):
- inextensible layer: the axial edges of the centre plane y = 0 keep their length;
- radial fibres: each chamber's cross-section (4 edges + 2 diagonals per section) keeps
  its shape;
- caps: the section x = 0 is clamped (the first rigid plate), the section x = L is held
  rigid (edges + diagonals of its grid);
- actuation: the 4 axial edges of the pressurized chamber get the rest length
  l₀·(1 + p/E) (the paper's linear strain–pressure relation, "expansion … given by … the
  Young's modulus (E) and pressure (p)"), with stiffness E·A_c/(4 l₀) (A_c the chamber
  cross-section: the chamber's own axial stiffness shared by its 4 edges).
The passive chamber's axial constraints stay at their rest length (its walls' stiffness).
Only one chamber is active at a time (antagonistic valves): signed pressure p < 0 inflates
the left chamber (y < 0), p > 0 the right one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse.linalg as spla

from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.snake.link_mesh import LinkGeometry, LinkMesh, build_link_mesh
from soft_inverse_ros.core.snake.springs import SpringSet, concat, spring_forces, spring_stiffness

PSI = 6894.757293168  # Pa per psi


@dataclass(frozen=True)
class LinkMaterial:
    """Material and constraint parameters.

    Attributes:
        young_modulus: silicone E [Pa] (paper: Ecoflex 00-30, 66 kPa).
        poisson_ratio: ν (lost in the text; 0.45, near-incompressible without locking).
        density: ρ [kg/m³] (Ecoflex 00-30: 1070).
        constraint_stiffness_ratio: stiffness of the "inextensible" constraints relative to
            the silicone's axial cell stiffness E·A/l (10²: stiff; at 10³ Newton needs ~40
            iterations instead of 6, for a yaw within 0.3 %).
        actuation_stiffness_scale: multiplies the actuation constraint stiffness E·A_c/(4 l₀).
    """

    young_modulus: float = 66e3
    poisson_ratio: float = 0.45
    density: float = 1070.0
    constraint_stiffness_ratio: float = 1e2
    actuation_stiffness_scale: float = 1.0

    def __post_init__(self) -> None:
        if not (self.young_modulus > 0 and -1 < self.poisson_ratio < 0.5 and self.density > 0
                and self.constraint_stiffness_ratio > 0 and self.actuation_stiffness_scale > 0):
            raise ValueError(f"invalid link material {self!r}")


def _grid_pairs(ids: np.ndarray) -> np.ndarray:
    """Edges + both diagonals of each quad of a (ny, nz) node-id grid."""
    pairs = [np.stack([ids[:-1, :].ravel(), ids[1:, :].ravel()], 1),
             np.stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()], 1),
             np.stack([ids[:-1, :-1].ravel(), ids[1:, 1:].ravel()], 1),
             np.stack([ids[1:, :-1].ravel(), ids[:-1, 1:].ravel()], 1)]
    return np.concatenate(pairs)


def actuated_springs(constraints: SpringSet, actuators: list[SpringSet], pressures, young_modulus: float) -> SpringSet:
    """All springs with each chamber's axial rest length scaled by (1 + p/E).

    ``actuators[k]`` are chamber k's axial edges at rest, ``pressures[k]`` its gauge
    pressure [Pa] (≥ 0); the chamber walls' axial stiffness is there at any pressure."""
    scaled = [a.with_rest(a.rest * (1.0 + max(float(p), 0.0) / young_modulus)) for a, p in zip(actuators, pressures)]
    return concat([constraints, *scaled])


class BendingLink:
    """The link's FEM, constraints and static solve under chamber pressure."""

    def __init__(self, geometry: LinkGeometry = LinkGeometry(), material: LinkMaterial = LinkMaterial()):
        self.geometry, self.material = geometry, material
        self.link_mesh: LinkMesh = build_link_mesh(geometry)
        lm = self.link_mesh
        pts = lm.mesh.points
        self.rest_points = np.array(pts)
        self.fem = CorotationalFEM(pts, lm.mesh.tets, material.young_modulus, material.poisson_ratio,
                                   fixed_nodes=lm.section_nodes(0), density=material.density)
        hx, hy, hz = lm.step
        e = material.young_modulus
        k_stiff = material.constraint_stiffness_ratio * e * hy * hz / hx
        corners = [lm.chamber_corner_ids(s) for s in (0, 1)]
        first, last = 1, len(lm.grid_ids) - 1  # chamber spans sections 1 … nx−1 (end walls outside)
        layer = lm.centre_layer_ids()
        fixed = [
            SpringSet.between(pts, np.stack([layer[:-1].ravel(), layer[1:].ravel()], 1), k_stiff),
            SpringSet.between(pts, _grid_pairs(lm.grid_ids[-1]), k_stiff),
        ]
        for c in corners:
            quad = np.stack([c[first:last, [0, 1, 2, 3]], c[first:last, [1, 2, 3, 0]]], 2).reshape(-1, 2)
            diag = np.concatenate([c[first:last, [0, 2]], c[first:last, [1, 3]]])
            fixed.append(SpringSet.between(pts, np.concatenate([quad, diag]), k_stiff))
        self.constraints = concat(fixed)
        k_act = material.actuation_stiffness_scale * e * hy * hz / (4.0 * hx)
        self.actuators = [SpringSet.between(
            pts, np.stack([c[first - 1:last, :].ravel(), c[first:last + 1, :].ravel()], 1), k_act)
            for c in corners]
        self.x = np.array(pts)

    def springs(self, pressure_pa: float) -> SpringSet:
        """Constraint + actuation springs at signed pressure [Pa] (<0 left, >0 right)."""
        pressures = (max(-pressure_pa, 0.0), max(pressure_pa, 0.0))
        return actuated_springs(self.constraints, self.actuators, pressures, self.material.young_modulus)

    def solve(self, pressure_pa: float, max_iter: int = 40, rel_tol: float = 1e-5) -> np.ndarray:
        """Static equilibrium (N, 3) [m] at signed pressure [Pa], Newton from the last state.

        Raises RuntimeError if the largest nodal force residual does not fall below
        ``rel_tol``·E·A_cell [N] (A_cell the grid's y–z cell area)."""
        springs = self.springs(pressure_pa)
        hy, hz = self.link_mesh.step[1:]
        tol = rel_tol * self.material.young_modulus * hy * hz
        free = self.fem.free_dofs
        x = self.x.copy()

        def residual(xx):
            return (self.fem.internal_forces(xx) + spring_forces(springs, xx)).ravel()[free]

        r = residual(x)
        for self.iterations in range(max_iter + 1):
            if np.abs(r).max() < tol:
                self.x = x
                return x
            if self.iterations == max_iter:
                break
            k = self.fem.consistent_stiffness(x) + spring_stiffness(springs, x)[free][:, free]
            dx = spla.spsolve(k.tocsc(), r)
            step, r_norm = 1.0, np.linalg.norm(r)
            while True:
                xt = x.copy()
                xt.reshape(-1)[free] += step * dx
                rt = residual(xt)
                if np.linalg.norm(rt) < r_norm or step < 1e-3:
                    break
                step *= 0.5
            x, r = xt, rt
        raise RuntimeError(f"link statics did not converge at {pressure_pa:.0f} Pa "
                           f"(residual {np.abs(r).max():.2e} N)")

    def plate_yaw(self, x: np.ndarray) -> float:
        """Yaw [rad] of the end plate (section x = L) relative to the clamped first plate:
        the z-rotation of the best-fit rotation (Kabsch) of its nodes, (−π, π]."""
        ids = self.link_mesh.section_nodes(len(self.link_mesh.grid_ids) - 1)
        p, q = self.rest_points[ids], x[ids]
        p, q = p - p.mean(0), q - q.mean(0)
        u, _, vt = np.linalg.svd(q.T @ p)
        d = np.sign(np.linalg.det(u @ vt))
        rot = u @ np.diag([1.0, 1.0, d]) @ vt
        return float(np.arctan2(rot[1, 0], rot[0, 0]))
