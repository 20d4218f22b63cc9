"""One inverse step of the hybrid scene (Coevoet eq. 13-14) with core/control/contact_qp.py.

Actuators: the five joints as servo-torque increments λ_a (N m; the command moves by
λ_a / k_joint rad) with their URDF effort limits, and strokes δ_a = Δq (rad) bounded by the
URDF position range and velocity × period (:func:`joint_increment_bounds`). Contacts: the
rod's tip nodes against the block (W summed over both bodies, eq. 12), one force-sum group
(eq. 14). Effector rows: the alignment error of the probe axis with a target inside the block
(3 rows, m; the target moves with the block), plus an insertion row (weight ``depth_weight``)
asking the probe tip to sit ``depth`` m below the block's rest surface, which keeps the probe
pressing the block (the paper's probe is in contact with the tissue).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.control.contact_qp import ContactProblem, ContactQPResult, solve_contact_qp
from soft_inverse_ros.core.rigid.effectors import alignment_error
from soft_inverse_ros.core.rigid.hybrid_scene import NORMAL, HybridScene, Linearization
from soft_inverse_ros.core.rigid.joint_actuators import joint_increment_bounds


@dataclass(frozen=True)
class InverseConfig:
    """Force-sum limit (N), control period (s), insertion depth (m) and its weight, ε (relative)."""

    force_limit: float = 1.0
    period: float = 0.05
    depth: float = 0.002
    depth_weight: float = 0.03
    energy_epsilon: float = 1e-6

    def __post_init__(self) -> None:
        if not (self.force_limit > 0 and self.period > 0 and self.depth >= 0 and self.depth_weight >= 0):
            raise SystemExit("hybrid inverse: force limit and period must be > 0, depth and its weight >= 0")


def probe_alignment(scene: HybridScene, target_node: int) -> np.ndarray:
    """Alignment error vector (m) of the probe axis with block node ``target_node``."""
    x = scene.rod_positions()
    return alignment_error(x[scene.tip].mean(0), x[scene.back].mean(0), scene.block_positions()[target_node])[0]


def build_problem(scene: HybridScene, lin: Linearization, target_node: int, cfg: InverseConfig) -> ContactProblem:
    """The contact QP of one inverse step at the scene's current (settled) state."""
    h = lin.hybrid
    nq = scene.chain.nq
    x = scene.rod_positions()
    a, b = x[scene.tip].mean(0), x[scene.back].mean(0)
    t_now = scene.block_positions()[target_node]
    e0, de = alignment_error(a, b, t_now)
    u = (a - b) / np.linalg.norm(a - b)
    proj = np.eye(3) - np.outer(u, u)  # de/dt
    ra, rb = scene.centroid_rows(h, scene.tip), scene.centroid_rows(h, scene.back)
    e_z = de[:, :3] @ ra.toarray() + de[:, 3:] @ rb.toarray()
    d_z = cfg.depth_weight * (NORMAL @ ra.toarray())[None, :]
    d0 = cfg.depth_weight * (a @ NORMAL - (scene.block_top_z - cfg.depth))
    t_rest = scene.block.rest_points[target_node]
    sa = h.solve(h.joint_rows(np.arange(nq)).T.toarray())
    sc = h.solve(lin.contact_rows.T.toarray())
    t_fields = lin.block_fields[3 * target_node + np.arange(3)]  # (3, m)
    w_ea = np.vstack([e_z @ sa, d_z @ sa])
    w_ec = np.vstack([e_z @ sc + proj @ t_fields, d_z @ sc])
    e_free = np.concatenate([e0 + e_z @ lin.dz_free + proj @ (t_rest - t_now), [d0 + (d_z @ lin.dz_free)[0]]])
    lo, hi = joint_increment_bounds(scene.q, scene.chain.limits(), cfg.period)
    effort = scene.chain.limits().effort
    w_aa = sa[:nq]
    return ContactProblem(
        w_ea=w_ea, w_ec=w_ec, w_aa=0.5 * (w_aa + w_aa.T), w_ca=lin.contact_rows @ sa, w_cc=lin.w_cc,
        e_free=e_free, a_free=lin.dz_free[:nq], c_free=lin.gap_free,
        effort_min=-effort, effort_max=effort, stroke_min=lo, stroke_max=hi,
        energy_weight=cfg.energy_epsilon * float(np.sum(w_ea**2) / np.trace(w_aa)),
        sum_rows=np.ones((1, lin.w_cc.shape[0])), sum_limits=np.array([cfg.force_limit]))


def inverse_step(scene: HybridScene, target_node: int, cfg: InverseConfig,
                 active: np.ndarray | None = None) -> tuple[ContactProblem, ContactQPResult]:
    """Solve one inverse step and move the joint commands by λ_a / k_joint (not settled)."""
    lin = scene.linearize()
    prob = build_problem(scene, lin, target_node, cfg)
    res = solve_contact_qp(prob, initial_active=active)
    if res.feasible:
        scene.q_cmd = scene.q_cmd + res.efforts / scene.kj
    return prob, res
