"""``experiment hybrid-alignment``: a rigid arm carrying a soft rod aligns its probe with
targets inside a soft block (Coevoet et al., Figs 8-9), quasi-statically.

The built-in scene (core/rigid/hybrid_scene.py): the 5-revolute ``hybrid_arm.urdf``
(Pinocchio), a soft rod (12 x 12 x 50 mm, co-rotational FEM, base rigidified to the flange)
whose two last node layers define the probe axis, a soft block (80 x 80 x 40 mm, 30 kPa,
bottom clamped). Each frame (core/rigid/hybrid_inverse.py, ``HybridInverse.frame``): an
inverse step (joints as servo actuators with URDF effort, position and velocity limits and
a trust region; the rod tip's contacts with the block through core/control/contact_qp.py
with the force-sum limit and minimum), the scene settles at the new commands (Newton + exact
contact LCP, W summed over both bodies); the step is kept only if the settled force sum is
within [minimum, limit] and the alignment error did not grow, else undone and re-solved
(smaller trust region, force bounds corrected by the measured/predicted ratio). Before the
probe first presses with the minimum force (the approach) the objective also asks for the
middle of the force band. Four targets: the block nodes nearest the points 12 mm below the
block's top face and 10 mm off the probe's home axis in x and y; on the block's 10 mm node
grid (its top 2 mm below the rest tip) they are 10 mm deep, 12 mm below the rest tip and
exactly 10 mm off the axis, and they move with the block; the rod at 18, 0.8 and 0.08 MPa
(Fig. 9).

JSON (``--json``): ``alignment_error_mm`` {stiffness_MPa: [per target]} at the last frame,
``alignment_error_max_mm``, ``contact_force_sum_max_n`` (settled plant, all frames) with
``contact_force_limit_n``, ``contact_force_sum_min_in_contact_n`` (settled plant, frames
after the approach) with ``contact_force_min_n``, ``frame_time_ms`` (a whole frame: every
trial's linearisation + QP and settle; median and max), ``inverse_step_ms`` (one trial's
linearisation + QP; median and max), ``plant_settle_ms`` (one settle, median),
``trials_per_frame`` (mean), ``held_frames`` (frames whose trials were all rejected or
infeasible: the command is held), ``targets_not_in_contact`` (runs whose settled force never reached the minimum),
``converged_frames`` (in contact within the force band and
the error below 1 µm: no trial runs; not counted in the frame times and trials), ``constraints`` (QP rows in contact: effector + joint
strokes + contacts + the two force-sum rows), ``qp_tick_p99_ms`` (the contact QP re-solved
per tick on the in-contact problem at the final settled state with a moving target, its matrices built once and
warm-started from the previous tick's state without restarts, with the controller's
settings as ``config/sim_hybrid.yaml`` ships them: at most ``qp.contact_max_states``
state QPs, none started after ``qp.contact_tick_budget``: the high-rate loop's cost),
``qp_tick_budget_ms``, ``qp_ticks_cut_fraction`` (ticks the budget cut) and
``qp_tick_cut_residual_excess_mm`` (the most a cut tick's effector residual exceeded the
same tick's uncut search).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from soft_inverse_ros.cli_values import count, positive

NAME = "hybrid-alignment"
STIFFNESS_PA = (18e6, 0.8e6, 0.08e6)
#: largest --stiffness [Pa]: 100 MPa solved, 300 MPa failed the contact solve (block 30 kPa)
MAX_STIFFNESS_PA = 100e6
TARGET_OFFSETS_M = ((0.01, 0.01), (-0.01, 0.01), (-0.01, -0.01), (0.01, -0.01))
#: the target points' depth below the block's top face [m]; the targets are the nearest block
#: nodes (:func:`_targets`), on the 10 mm grid 10 mm deep
TARGET_DEPTH_M = 0.012


def _targets(scene, count: int) -> list[int]:
    """Block nodes nearest the target points (they move with the block): TARGET_DEPTH_M
    below the top face and TARGET_OFFSETS_M off the probe's axis; the nearest node, not
    the point, is the target (10 mm deep on the shipped 10 mm grid)."""
    import numpy as np

    tip = scene.rod_positions()[scene.tip].mean(0)
    pts = scene.block.rest_points
    out = []
    for dx, dy in TARGET_OFFSETS_M[:count]:
        goal = np.array([tip[0] + dx, tip[1] + dy, scene.block_top_z - TARGET_DEPTH_M])
        out.append(int(np.argmin(np.linalg.norm(pts - goal, axis=1))))
    return out


def _ticks(prob, res, ticks: int, limits) -> dict:
    """The high-rate loop's cost on ``prob``: solve_contact_qp with the effector offset
    moving per tick (0.2 mm noise), as the controller's ContactTick runs a tick with
    ``limits`` (the ContactForceLimits of ``config/sim_hybrid.yaml``: ``qp.contact_max_states``,
    ``qp.contact_tick_budget``): the stacked matrices built once per snapshot,
    warm-started from the previous tick's state, no restarts. Returns the tick p99 [ms],
    the fraction of ticks the time budget cut, and what the cuts cost: the largest
    excess of a cut tick's effector residual over the same tick searched to
    ``max_states`` without the budget [mm] (untimed)."""
    import dataclasses

    import numpy as np

    from soft_inverse_ros.core.control.contact_qp import Stacked, solve_contact_qp

    rng = np.random.default_rng(0)
    stacked = Stacked(prob)
    active, times, cut, excess = res.active, [], 0, [0.0]
    for _ in range(ticks):
        p = dataclasses.replace(prob, e_free=prob.e_free + rng.normal(scale=2e-4, size=prob.e_free.shape))
        t0 = time.perf_counter()
        deadline = t0 + limits.tick_budget if limits.tick_budget > 0 else None
        out = solve_contact_qp(p, initial_active=active, local_search=False, stacked=stacked,
                               max_states=limits.max_states, deadline=deadline)
        times.append(time.perf_counter() - t0)
        if out.truncated:
            cut += 1
            whole = solve_contact_qp(p, initial_active=active, local_search=False, stacked=stacked,
                                     max_states=limits.max_states)
            excess.append(float(np.linalg.norm(out.effector_residual) - np.linalg.norm(whole.effector_residual)))
        active = out.active
    return {"p99_ms": float(np.percentile(times, 99) * 1e3), "cut": cut / max(ticks, 1),
            "excess_mm": 1e3 * max(excess)}


def _run(young: float, target: int, args: argparse.Namespace, limits) -> dict:
    from soft_inverse_ros.core.control.contact_qp import initial_state, solve_contact_qp
    from soft_inverse_ros.core.rigid.hybrid_inverse import HybridInverse, InverseConfig, build_problem
    from soft_inverse_ros.core.rigid.hybrid_scene import HybridScene, HybridSceneConfig

    scene = HybridScene(HybridSceneConfig(rod_young=young, rod_divisions=(args.rod_grid, args.rod_grid, 5)))
    scene.settle()
    node = _targets(scene, 4)[target]
    cfg = InverseConfig(force_limit=args.force_limit, force_min=args.force_min)
    inv = HybridInverse(scene, node, cfg)
    errors, sums, contact_sums, frame_t, step_t, settle_t, trials, held, converged = [], [], [], [], [], [], [], 0, 0
    for _ in range(args.frames):
        t0 = time.perf_counter()
        rep = inv.frame()
        if rep.converged:
            converged += 1
        else:
            frame_t.append(time.perf_counter() - t0)
            trials.append(rep.trials)
        step_t += rep.qp_time
        settle_t += rep.settle_time
        held += not (rep.accepted or rep.converged)
        errors.append(rep.error)
        sums.append(rep.force_sum)
        if inv.in_contact:
            contact_sums.append(rep.force_sum)
    # the high-rate tick's problem: the in-contact QP at the final settled state (alignment
    # rows, joint strokes, contacts, the force sum's limit and minimum)
    prob = build_problem(scene, scene.linearize(), node, cfg)
    res = solve_contact_qp(prob, initial_active=initial_state(prob), max_states=cfg.max_states, local_search=False)
    if not res.feasible:
        raise RuntimeError(f"the in-contact QP has no feasible contact state at the end ({young / 1e6:g} MPa, "
                           f"target {target + 1})")
    return {"held": held, "converged": converged, "errors": errors, "sums": sums, "contact_sums": contact_sums,
            "frame_t": frame_t, "step_t": step_t, "settle_t": settle_t, "trials": trials,
            "in_contact": inv.in_contact, "constraints": prob.w_ea.shape[0] + prob.n_a + prob.m + prob.sum_rows.shape[0],
            "ticks": _ticks(prob, res, args.ticks, limits)}


def measure(args: argparse.Namespace) -> dict:
    import numpy as np

    from soft_inverse_ros.core.control.shipped_settings import shipped_solver_config

    n_targets = 1 if args.quick else 4
    limits = shipped_solver_config("sim_hybrid.yaml").contact_limits()  # the controller's, as shipped
    runs = {young: [_run(young, k, args, limits) for k in range(n_targets)] for young in args.stiffness}
    every = [r for rs in runs.values() for r in rs]
    frames = np.concatenate([r["frame_t"] for r in every])
    steps = np.concatenate([r["step_t"] for r in every])
    in_contact = [s for r in every for s in r["contact_sums"]]
    out = {
        "alignment_error_mm": {f"{y / 1e6:g}": [r["errors"][-1] * 1e3 for r in rs] for y, rs in runs.items()},
        "alignment_error_max_mm": max(r["errors"][-1] for r in every) * 1e3,
        "contact_force_sum_max_n": max(max(r["sums"]) for r in every),
        "contact_force_limit_n": args.force_limit,
        "contact_force_sum_min_in_contact_n": min(in_contact) if in_contact else None,
        "contact_force_min_n": args.force_min,
        "frame_time_ms": {"median": float(np.median(frames) * 1e3), "max": float(frames.max() * 1e3)},
        "inverse_step_ms": {"median": float(np.median(steps) * 1e3), "max": float(steps.max() * 1e3)},
        "plant_settle_ms": float(np.median(np.concatenate([r["settle_t"] for r in every])) * 1e3),
        "trials_per_frame": float(np.mean(np.concatenate([r["trials"] for r in every]))),
        "constraints": every[0]["constraints"],
        "qp_tick_p99_ms": max(r["ticks"]["p99_ms"] for r in every),
        "qp_tick_budget_ms": 1e3 * limits.tick_budget,
        "qp_ticks_cut_fraction": float(np.mean([r["ticks"]["cut"] for r in every])),
        "qp_tick_cut_residual_excess_mm": max(r["ticks"]["excess_mm"] for r in every),
        "held_frames": sum(r["held"] for r in every),
        "targets_not_in_contact": sum(not r["in_contact"] for r in every),
        "converged_frames": sum(r["converged"] for r in every),
        "frames": args.frames, "targets": n_targets, "rod_grid": args.rod_grid,
        "stiffness_mpa": [y / 1e6 for y in args.stiffness],
    }
    if args.out is not None:
        out["figure"] = str(_figure(runs, args.force_limit, args.force_min, args.out))
    return out


def _figure(runs: dict, limit: float, minimum: float, folder: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for young, rs in runs.items():
        for k, r in enumerate(rs):
            lab = f"{young / 1e6:g} MPa, target {k + 1}"
            ax1.semilogy([max(e * 1e3, 1e-9) for e in r["errors"]], label=lab)
            ax2.plot(r["sums"], label=lab)
    ax1.set_xlabel("frame")
    ax1.set_ylabel("alignment error [mm]")
    ax2.axhline(limit, color="k", ls="--", label="force-sum limit")
    ax2.axhline(minimum, color="k", ls=":", label="force-sum minimum")
    ax2.set_xlabel("frame")
    ax2.set_ylabel("contact force sum [N]")
    ax2.legend(fontsize=6)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{NAME}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(args: argparse.Namespace) -> int:
    import sys

    from soft_inverse_ros.experiments import emit, limit_threads

    if not args.force_min < args.force_limit:
        print(f"experiment {NAME}: --force-min must be below --force-limit", file=sys.stderr)
        return 2
    stiffness = STIFFNESS_PA if args.stiffness is None else tuple(v * 1e6 for v in args.stiffness)
    if not all(0 < v <= MAX_STIFFNESS_PA for v in stiffness):
        print(f"experiment {NAME}: --stiffness must be rod Young's moduli in (0, {MAX_STIFFNESS_PA / 1e6:g}] "
              f"MPa (a soft rod; the scene's contact solve fails near 300 MPa), got {args.stiffness}",
              file=sys.stderr)
        return 2
    args.stiffness = stiffness
    if args.frames is None:  # --quick sizes what is not given
        args.frames = 15 if args.quick else 40
    if args.ticks is None:
        args.ticks = 50 if args.quick else 1000
    limit_threads()
    try:
        result = measure(args)
    except RuntimeError as exc:
        print(f"experiment {NAME}: {exc}", file=sys.stderr)
        return 1
    emit(result, args, NAME)
    return 0


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, help="hybrid arm + soft rod aligns a probe with targets in a soft block (Coevoet Figs 8-9)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=count, default=None,
                        help="inverse frames per target (default 40; --quick: 15)")
    parser.add_argument("--force-limit", type=positive, default=1.0, help="contact force-sum limit [N] (eq. 14)")
    parser.add_argument("--force-min", type=positive, default=0.1,
                        help="contact force-sum minimum once in contact [N] (stay in contact)")
    parser.add_argument("--stiffness", type=positive, nargs="+", default=None, metavar="MPA",
                        help="rod Young's moduli [MPa], at most 100 (default 18 0.8 0.08, Fig. 9)")
    parser.add_argument("--rod-grid", type=count, default=2,
                        help="rod cross-section divisions (tip contacts: (grid+1)^2; 7 gives the paper's ~73 rows)")
    parser.add_argument("--ticks", type=count, default=None,
                        help="QP re-solves timed for the tick p99 (default 1000; --quick: 50)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--out", type=Path, default=None, help="write hybrid-alignment.json and the figure here")
    parser.add_argument("--quick", action="store_true",
                        help="one target, 15 frames and 50 ticks unless given (seconds, for tests)")
    parser.set_defaults(func=main)
    return parser
