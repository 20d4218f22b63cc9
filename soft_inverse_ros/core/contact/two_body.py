"""Contact between two deformable bodies (Coevoet et al., eq. 11–12): a soft robot pressing
on a soft object (the probe-on-tissue setting).

Each body is a quasi-static FEM model (:class:`~soft_inverse_ros.core.model.robot_model.RobotModel`)
with its own stiffness K_A, K_B. Contact i pairs node a_i of A with node b_i of B along a
unit normal n_i (pointing from B towards A); its gap is δ_i = n_i · (x_a − x_b) − offset_i,
so its rows are H_A (n_i on node a_i) and H_B (−n_i on node b_i), and the contact forces λ
(≥ 0, pushing A along +n and B along −n) see the **sum** of both compliances::

    δ = δ_free + (H_A K_A⁻¹ H_Aᵀ + H_B K_B⁻¹ H_Bᵀ) λ = δ_free + W λ

:meth:`TwoBodyContact.step` is one Newton step of both bodies together: the free steps
d_A = K_A⁻¹ r_A and d_B = K_B⁻¹ r_B, the linearized gaps δ(x) + H_A d_A + H_B d_B, the
Signorini forces on W, and the corrected steps d + K⁻¹ Hᵀ λ. Repeated, it converges to
the static equilibrium of the two bodies in contact. Units SI.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.contact.signorini import ContactSolution, solve_signorini_exact, solve_signorini_gs
from soft_inverse_ros.core.model.linear_solvers import solve_linear


def _rows(model, nodes: np.ndarray, normals: np.ndarray, sign: float) -> np.ndarray:
    """(m, n_free) contact rows of one body: ``sign`` n_i on node i's free coordinates."""
    full = np.zeros((len(nodes), 3 * model.fem.n_nodes))
    for i, (node, n) in enumerate(zip(nodes, normals)):
        full[i, 3 * node:3 * node + 3] = sign * n
    return full[:, model.fem.free_dofs]


@dataclass
class TwoBodyStep:
    solution: ContactSolution
    w: np.ndarray  # (m, m) [m/N]: W_A + W_B
    w_a: np.ndarray
    w_b: np.ndarray
    gaps: np.ndarray  # (m,) at the new state (linearized) [m]
    residual_a: float  # |r_A + H_Aᵀ λ| after the step [N]
    residual_b: float


class TwoBodyContact:
    """Point contacts between node ``nodes_a[i]`` of ``model_a`` and ``nodes_b[i]`` of
    ``model_b`` along ``normals[i]`` (from B towards A), gap ``n·(x_a − x_b) − offsets``.

    Args:
        solver: ``"gs"`` (projected Gauss–Seidel) or ``"exact"`` (the LCP as a QP).
    """

    def __init__(self, model_a, model_b, nodes_a, nodes_b, normals, offsets=None, *, solver: str = "exact",
                 tolerance: float = 1e-12) -> None:
        self.a, self.b = model_a, model_b
        self.nodes_a = np.asarray(nodes_a, dtype=np.int64)
        self.nodes_b = np.asarray(nodes_b, dtype=np.int64)
        n = np.asarray(normals, dtype=float).reshape(-1, 3)
        self.normals = n / np.linalg.norm(n, axis=1, keepdims=True)
        m = self.normals.shape[0]
        if self.nodes_a.shape != (m,) or self.nodes_b.shape != (m,):
            raise ValueError("two-body contact: nodes_a, nodes_b and normals must have one entry per contact")
        self.offsets = np.zeros(m) if offsets is None else np.asarray(offsets, dtype=float).reshape(m)
        if solver not in ("gs", "exact"):
            raise ValueError(f"two-body contact: solver must be 'gs' or 'exact', got {solver!r}")
        self.solver, self.tolerance = solver, tolerance
        self.h_a = _rows(model_a, self.nodes_a, self.normals, 1.0)
        self.h_b = _rows(model_b, self.nodes_b, self.normals, -1.0)

    def gaps(self) -> np.ndarray:
        """Gaps at the bodies' current positions [m]."""
        xa, xb = self.a.positions[self.nodes_a], self.b.positions[self.nodes_b]
        return np.einsum("ij,ij->i", self.normals, xa - xb) - self.offsets

    def step(self, efforts_a, efforts_b) -> TwoBodyStep:
        """One Newton step of both bodies with their contact forces (module docstring)."""
        parts = []
        for model, h, efforts in ((self.a, self.h_a, efforts_a), (self.b, self.h_b, efforts_b)):
            lam = np.asarray(efforts, dtype=float)
            ev = model.statics.evaluate(model.positions, lam)
            k = model.fem.stiffness(ev.state)
            cols, _ = solve_linear(model.direct_solver, k, np.column_stack((ev.residual, h.T)))
            parts.append((model, lam, ev, cols[:, 0], cols[:, 1:], h))
        (_, _, _, d_a, ka_h, h_a), (_, _, _, d_b, kb_h, h_b) = parts
        w_a, w_b = h_a @ ka_h, h_b @ kb_h
        w = 0.5 * ((w_a + w_b) + (w_a + w_b).T)
        free = self.gaps() + h_a @ d_a + h_b @ d_b
        if self.solver == "exact":
            sol = solve_signorini_exact(w, free)
        else:
            sol = solve_signorini_gs(w, free, tolerance=self.tolerance, max_sweeps=100000)
        residuals = []
        for model, lam, ev, d, k_h, h in parts:
            x = model.positions + model.fem.expand(d + k_h @ sol.forces)
            model.set_state(x, lam)  # evaluates the new state
            residuals.append(float(np.linalg.norm(model.residual + h.T @ sol.forces)))
        return TwoBodyStep(sol, w, w_a, w_b, self.gaps(), residuals[0], residuals[1])
