"""The inverse steps of the hybrid scene (Coevoet eq. 13-14) with core/control/contact_qp.py.

**One step** (:func:`inverse_step`). Actuators: the five joints as servo-torque increments
λ_a (N m; the command moves by λ_a / k_joint rad) with their URDF effort limits, and strokes
δ_a = Δq (rad) bounded by the URDF position range and velocity × period
(:func:`joint_increment_bounds`), intersected with a trust region. Contacts: the rod's tip
nodes against the block (W summed over both bodies, eq. 12) with two force-sum rows (eq. 14
and the paper's "strict minimum to this sum ... which guarantees that the probe stays in
contact"): ``lower ≤ 1ᵀλ_c ≤ upper``. Effector rows: the alignment error of the probe axis
with a target inside the block (3 rows, m; the target moves with the block).

**One frame** (:class:`HybridInverse`): the step is a linearisation at the settled state; on
a soft rod (0.08 MPa) a full-length step lands far from its prediction (the rod bends, the
contact set changes), and the settled force sum comes out above the QP's. A frame therefore
settles each trial step on the scene (Newton until a step moves no node by more than 1 µm)
and accepts it only if the settled plant keeps
``force_min ≤ 1ᵀλ ≤ force_limit`` (once the minimum is reached; before, the force may only
grow toward it) and does not increase the alignment error; a rejected trial is undone and
re-solved with

- a smaller trust region on Δq: the textbook trust-region rule (Nocedal & Wright, Numerical
  Optimization, Alg. 4.1) on ρ = actual / predicted decrease of ½‖δ_e‖²: radius × ¼ when
  ρ < ¼ or the trial is rejected, × 2 (up to the velocity bound) when ρ > ¾ and the step
  reached the radius;
- the QP's force bounds corrected by the measured / predicted force-sum ratio r of the
  settled trial, as the controller's ``contact_limit_feedback`` does (inverse_qp.py):
  upper = limit / s_u, lower = min · s_l with s_u ← max(r, 1 + ½(s_u − 1)) and
  s_l ← max(1/r, 1 + ½(s_l − 1)), both within [1, 2]; they carry over to the next frame.

After ``max_trials`` rejected trials the frame holds the command (counted). In this
quasi-static experiment the scene is both the controller's model and the plant: the trial
settles are the model's forward simulation of each candidate command (as the paper's
simulation runs the model), and the accepted trial's settle is the plant's.

The search over contact states starts from the contacts the settled plant has loaded (the
linearisation's own LCP at zero step: a state whose QP is feasible, unlike the previous
frame's state at a new linearisation) and follows the multipliers from there, with
``local_search`` off. Restarts from the extreme states add nothing here: with the minimum
row the no-contact state is infeasible, and so, under load, is the all-contact one (a flat
press needs some pulling forces). Before the minimum row, the no-contact restart was what
lifted the probe off (EXPERIMENTS.md, hybrid-alignment).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from soft_inverse_ros.core.control.contact_qp import ContactProblem, ContactQPResult, initial_state, solve_contact_qp
from soft_inverse_ros.core.model.linear_solvers import ConvergenceError
from soft_inverse_ros.core.rigid.effectors import alignment_error
from soft_inverse_ros.core.rigid.hybrid_scene import HybridScene, Linearization
from soft_inverse_ros.core.rigid.joint_actuators import joint_increment_bounds

#: Nocedal & Wright Alg. 4.1: shrink below ρ = ¼ (by ¼), grow above ρ = ¾ (by 2)
RHO_SHRINK, RHO_GROW, SHRINK, GROW = 0.25, 0.75, 0.25, 2.0
#: the controller's contact_limit_feedback convention: the factor at most 2, halfway back to 1 per frame
SCALE_MAX, SCALE_DECAY = 2.0, 0.5


@dataclass(frozen=True)
class InverseConfig:
    """Force-sum limit and minimum (N, on the settled plant), control period (s), energy ε
    (relative), contact-state QPs per step at most, trial steps per frame at most, Newton
    iterations of a trial settle at most, and the resolution (m) of the frames: a trial is
    settled once a Newton step moves no node by more than it (a trial not settled within the
    iterations is rejected: its force cannot be checked), and a frame in contact within the
    force band whose alignment error is below it runs no trial (1 µm, 500x below the issue's
    0.5 mm)."""

    force_limit: float = 1.0
    force_min: float = 0.1
    period: float = 0.05
    energy_epsilon: float = 1e-6
    max_states: int = 64
    max_trials: int = 4
    settle_iterations: int = 30
    error_tolerance: float = 1e-6

    def __post_init__(self) -> None:
        if not (self.force_limit > 0 and self.period > 0 and np.isfinite(self.force_limit)):
            raise SystemExit("hybrid inverse: force limit and period must be > 0 and finite")
        if not (0 <= self.force_min < self.force_limit):
            raise SystemExit(f"hybrid inverse: force minimum {self.force_min!r} N must be >= 0 and below the "
                             f"limit {self.force_limit} N")
        if not (np.isfinite(self.error_tolerance) and self.error_tolerance >= 0):
            raise SystemExit(f"hybrid inverse: error_tolerance must be >= 0 m, got {self.error_tolerance!r}")
        for name in ("max_states", "max_trials", "settle_iterations"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SystemExit(f"hybrid inverse: {name} must be an integer >= 1, got {v!r}")


def probe_alignment(scene: HybridScene, target_node: int) -> np.ndarray:
    """Alignment error vector (m) of the probe axis with block node ``target_node``."""
    x = scene.rod_positions()
    return alignment_error(x[scene.tip].mean(0), x[scene.back].mean(0), scene.block_positions()[target_node])[0]


def build_problem(scene: HybridScene, lin: Linearization, target_node: int, cfg: InverseConfig, *,
                  upper: float | None = None, lower: float | None = None,
                  radius: np.ndarray | None = None, force_target: tuple[float, float] | None = None,
                  ) -> ContactProblem:
    """The contact QP of one inverse step at the scene's current (settled) state.

    ``upper``/``lower``: the force-sum bounds of the QP (N; default the configured limit and
    minimum); ``radius``: (n_q,) trust region on Δq (rad; default none beyond the URDF's);
    ``force_target``: (F*, k): one more effector row k (1ᵀλ_c − F*) (k in m/N: a force
    error counted as the contact displacement it makes), the approach's objective."""
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
    t_rest = scene.block.rest_points[target_node]
    sa = h.solve(h.joint_rows(np.arange(nq)).T.toarray())
    sc = lin.contact_solve
    t_fields = lin.block_fields[3 * target_node + np.arange(3)]  # (3, m)
    w_ea = e_z @ sa
    w_ec = e_z @ sc + proj @ t_fields
    e_free = e0 + e_z @ lin.dz_free + proj @ (t_rest - t_now)
    if force_target is not None:
        f_star, k = force_target
        w_ea = np.vstack([w_ea, np.zeros((1, nq))])
        w_ec = np.vstack([w_ec, np.full((1, w_ec.shape[1]), k)])
        e_free = np.append(e_free, -k * f_star)
    lo, hi = joint_increment_bounds(scene.q, scene.chain.limits(), cfg.period)
    if radius is not None:
        lo, hi = np.maximum(lo, -radius), np.minimum(hi, radius)
    effort = scene.chain.limits().effort
    w_aa = sa[:nq]
    m = lin.w_cc.shape[0]
    upper = cfg.force_limit if upper is None else upper
    lower = cfg.force_min if lower is None else lower
    rows, limits = [np.ones(m)], [upper]
    if lower > 0:  # −1ᵀλ_c ≤ −lower: the minimum as one more force-sum row (contact_qp's convention)
        rows.append(-np.ones(m))
        limits.append(-lower)
    return ContactProblem(
        w_ea=w_ea, w_ec=w_ec, w_aa=0.5 * (w_aa + w_aa.T), w_ca=lin.contact_rows @ sa, w_cc=lin.w_cc,
        e_free=e_free, a_free=lin.dz_free[:nq], c_free=lin.gap_free,
        effort_min=-effort, effort_max=effort, stroke_min=lo, stroke_max=hi,
        energy_weight=cfg.energy_epsilon * float(np.sum(w_ea**2) / np.trace(w_aa)),
        sum_rows=np.array(rows), sum_limits=np.array(limits))


def inverse_step(scene: HybridScene, target_node: int, cfg: InverseConfig, active: np.ndarray | None = None, *,
                 upper: float | None = None, lower: float | None = None, radius: np.ndarray | None = None,
                 force_target: tuple[float, float] | None = None) -> tuple[ContactProblem, ContactQPResult]:
    """Solve one inverse step and move the joint commands by λ_a / k_joint (not settled).
    ``active``: the warm-start contact state (default: the contacts the linearisation loads
    at zero step, contact_qp's :func:`initial_state`: at a settled state, the plant's own
    contact state as the linearisation sees it; given as the warm start, the single-flip
    search runs only when a multiplier pivoted away from it); the other arguments as
    :func:`build_problem`."""
    lin = scene.linearize()
    prob = build_problem(scene, lin, target_node, cfg, upper=upper, lower=lower, radius=radius,
                         force_target=force_target)
    res = solve_contact_qp(prob, initial_active=initial_state(prob) if active is None else active,
                           max_states=cfg.max_states, local_search=False)
    if res.feasible:
        scene.q_cmd = scene.q_cmd + res.efforts / scene.kj
    return prob, res


@dataclass
class FrameReport:
    """One frame of :meth:`HybridInverse.frame` (times in s, forces in N, error in m)."""

    accepted: bool  # a trial was accepted (else the command is held)
    converged: bool  # no trial needed: error below tolerance, force within its band
    trials: int
    error: float  # alignment error of the settled plant after the frame
    force_sum: float  # settled plant
    predicted_force_sum: float  # the accepted (or last) trial's QP
    qp_time: list[float] = field(default_factory=list)  # linearisation + QP per trial
    settle_time: list[float] = field(default_factory=list)  # per trial
    problem: ContactProblem | None = None  # the accepted (or last) trial's
    result: ContactQPResult | None = None


class HybridInverse:
    """The settle-and-correct inverse frames of one target (module docstring).

    Two phases, as the paper's procedure (§IV-C: first the probe reaches the wall while the
    contact forces are limited, then the alignment): while the settled force sum is below
    ``force_min`` (the approach) the QP has no minimum row (a state with no contact must
    stay feasible) and one more effector row asks for the middle of the force band,
    (force_min + force_limit) / 2, weighted by the contact compliance k (m/N: the mean of
    diag W_cc at the start, the displacement a unit force error makes); from the first
    settled frame at or above the minimum on, the minimum is a QP row and the objective is
    the alignment alone."""

    def __init__(self, scene: HybridScene, target_node: int, cfg: InverseConfig = InverseConfig()) -> None:
        self.scene, self.target, self.cfg = scene, target_node, cfg
        self.radius_max = scene.chain.limits().velocity * cfg.period  # rad: the URDF's bound
        self.radius_factor = 1.0  # the trust region: radius_factor × radius_max
        self.scale_upper = self.scale_lower = 1.0
        self.force_weight = float(np.mean(np.diag(scene.linearize().w_cc)))  # k [m/N]
        self.in_contact = False  # the approach is over (the settled plant reached force_min)

    def _feedback(self, measured: float, predicted: float) -> None:
        """The force bounds' factors from one settled trial (contact_limit_feedback's rule)."""
        if predicted <= 1e-3 * self.cfg.force_limit or measured <= 0.0:
            return
        r = measured / predicted
        self.scale_upper = min(SCALE_MAX, max(r, 1.0 + SCALE_DECAY * (self.scale_upper - 1.0)))
        self.scale_lower = min(SCALE_MAX, max(1.0 / r, 1.0 + SCALE_DECAY * (self.scale_lower - 1.0)))

    def _merit(self, force: float) -> float:
        """½‖δ_e‖² of the settled scene (the QP's objective rows, measured)."""
        e = probe_alignment(self.scene, self.target)
        f = 0.5 * float(e @ e)
        if not self.in_contact:
            f += 0.5 * (self.force_weight * (force - self._force_goal())) ** 2
        return f

    def _force_goal(self) -> float:
        return 0.5 * (self.cfg.force_min + self.cfg.force_limit)

    def frame(self) -> FrameReport:
        """Trial steps until one is accepted on the settled scene (or ``max_trials``)."""
        scene, cfg = self.scene, self.cfg
        before = scene.save()
        force_now = float(scene.forces.sum())
        self.in_contact = self.in_contact or force_now >= cfg.force_min
        f_now = self._merit(force_now)
        report = FrameReport(False, False, 0, float(np.linalg.norm(probe_alignment(scene, self.target))),
                             force_now, float("nan"))
        floor = 0.5 * cfg.error_tolerance**2
        if self.in_contact and f_now <= floor and cfg.force_min <= force_now <= cfg.force_limit:
            report.converged = True
            return report
        for _ in range(cfg.max_trials):
            report.trials += 1
            upper = cfg.force_limit / self.scale_upper
            lower = min(cfg.force_min * self.scale_lower, upper) if self.in_contact else 0.0
            goal = None if self.in_contact else (self._force_goal(), self.force_weight)
            radius = self.radius_factor * self.radius_max
            t0 = time.perf_counter()
            prob, res = inverse_step(scene, self.target, cfg, upper=upper, lower=lower, radius=radius,
                                     force_target=goal)
            t1 = time.perf_counter()
            report.qp_time.append(t1 - t0)
            report.problem, report.result = prob, res
            if not res.feasible:  # no contact state within this radius: a larger one next trial
                self.radius_factor = min(1.0, GROW * self.radius_factor)
                continue
            try:
                scene.settle(cfg.settle_iterations, tolerance=cfg.error_tolerance)
                settled = True
            except ConvergenceError:  # the scene is at the last step's state; restored below
                settled = False
            report.settle_time.append(time.perf_counter() - t1)
            force = float(scene.forces.sum())
            f_new = self._merit(force)
            predicted = float(res.forces.sum())
            report.predicted_force_sum = predicted
            self._feedback(force, predicted)
            f_pred = 0.5 * float(res.effector_residual @ res.effector_residual)
            gain = f_now - f_pred
            rho = (f_now - f_new) / gain if gain > 0 else (1.0 if f_new <= f_now else -1.0)
            at_edge = bool(np.any(np.abs(scene.q - before[0][: scene.chain.nq]) >= 0.99 * radius))
            # the settled plant: never above the limit; in contact, never below the minimum
            force_ok = settled and force <= cfg.force_limit and (force >= cfg.force_min or not self.in_contact)
            # a step that brings the force back under the limit need not reduce the error
            if force_ok and (f_new <= max(f_now, floor) or force_now > cfg.force_limit):
                if rho < RHO_SHRINK and f_new > floor:
                    self.radius_factor *= SHRINK
                elif rho > RHO_GROW and at_edge:
                    self.radius_factor = min(1.0, GROW * self.radius_factor)
                report.accepted = True
                report.error = float(np.linalg.norm(probe_alignment(scene, self.target)))
                report.force_sum = force
                return report
            # rejected (not settled, the force band or the error): a smaller step next trial, as a trust
            # region does; with the force bounds alone corrected, a model error ratio that
            # holds from trial to trial would land the next trial on the limit again
            self.radius_factor *= SHRINK
            scene.restore(before)
        return report
