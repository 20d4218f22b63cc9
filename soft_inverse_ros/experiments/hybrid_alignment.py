"""``experiment hybrid-alignment``: a rigid arm carrying a soft rod aligns its probe with
targets inside a soft block (Coevoet et al., Figs 8-9), quasi-statically.

The built-in scene (core/rigid/hybrid_scene.py): the 5-revolute ``hybrid_arm.urdf``
(Pinocchio), a soft rod (12 x 12 x 50 mm, co-rotational FEM, base rigidified to the flange)
whose two last node layers define the probe axis, a soft block (80 x 80 x 40 mm, 30 kPa,
bottom clamped). Each frame: one inverse step (core/rigid/hybrid_inverse.py: joints as
servo actuators with URDF effort, position and velocity limits; the rod tip's contacts with
the block through core/control/contact_qp.py with the force-sum limit; alignment rows plus an
insertion row that keeps the probe pressing), then the plant settles at the new commands
(Newton + exact contact LCP, W summed over both bodies). Four targets 12 mm deep in the block,
10 mm off the probe's home axis in x and y; the rod at 18, 0.8 and 0.08 MPa (Fig. 9).

JSON (``--json``): ``alignment_error_mm`` {stiffness_MPa: [per target]} at the last frame,
``alignment_error_max_mm``, ``contact_force_sum_max_n`` (settled plant, all frames) and
``contact_force_limit_n``, ``frame_time_ms`` (inverse step: linearisation + QP; median and
max), ``plant_settle_ms`` (median), ``constraints`` (QP rows: effector + joint strokes +
contacts + force-sum group), ``held_frames`` (frames whose QP had no feasible contact
state: the command is held, contact_qp's convention), ``qp_tick_p99_ms`` (the contact QP re-solved per tick on a
frame's snapshot with a moving target, warm-started: the high-rate loop's cost).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

NAME = "hybrid-alignment"
STIFFNESS_PA = (18e6, 0.8e6, 0.08e6)
TARGET_OFFSETS_M = ((0.01, 0.01), (-0.01, 0.01), (-0.01, -0.01), (0.01, -0.01))
TARGET_DEPTH_M = 0.012


def _targets(scene, count: int) -> list[int]:
    """Block nodes nearest the target points (they move with the block)."""
    import numpy as np

    tip = scene.rod_positions()[scene.tip].mean(0)
    pts = scene.block.rest_points
    out = []
    for dx, dy in TARGET_OFFSETS_M[:count]:
        goal = np.array([tip[0] + dx, tip[1] + dy, scene.block_top_z - TARGET_DEPTH_M])
        out.append(int(np.argmin(np.linalg.norm(pts - goal, axis=1))))
    return out


def _tick_p99(prob, res, ticks: int) -> float:
    """p99 (ms) of solve_contact_qp on ``prob`` with the effector offset moving per tick."""
    import dataclasses

    import numpy as np

    from soft_inverse_ros.core.control.contact_qp import solve_contact_qp

    rng = np.random.default_rng(0)
    active, times = res.active, []
    for _ in range(ticks):
        p = dataclasses.replace(prob, e_free=prob.e_free + rng.normal(scale=2e-4, size=prob.e_free.shape))
        t0 = time.perf_counter()
        active = solve_contact_qp(p, initial_active=active).active
        times.append(time.perf_counter() - t0)
    return float(np.percentile(times, 99) * 1e3)


def _run(young: float, target: int | None, args: argparse.Namespace) -> dict:
    import numpy as np

    from soft_inverse_ros.core.rigid.hybrid_inverse import InverseConfig, inverse_step, probe_alignment
    from soft_inverse_ros.core.rigid.hybrid_scene import HybridScene, HybridSceneConfig

    scene = HybridScene(HybridSceneConfig(rod_young=young, rod_divisions=(args.rod_grid, args.rod_grid, 5)))
    scene.settle()
    node = _targets(scene, 4)[target]
    cfg = InverseConfig(force_limit=args.force_limit)
    errors, sums, frame_t, settle_t, active, held = [], [], [], [], None, 0
    for _ in range(args.frames):
        t0 = time.perf_counter()
        prob, res = inverse_step(scene, node, cfg, active)
        t1 = time.perf_counter()
        held += not res.feasible  # no feasible contact state: the command is held (contact_qp)
        active = res.active if res.feasible else None
        scene.settle(3)
        settle_t.append(time.perf_counter() - t1)
        frame_t.append(t1 - t0)
        errors.append(float(np.linalg.norm(probe_alignment(scene, node))))
        sums.append(float(scene.forces.sum()))
    if held == args.frames:
        raise RuntimeError("the inverse QP had no feasible contact state in any frame")
    return {"held": held, "errors": errors, "sums": sums, "frame_t": frame_t, "settle_t": settle_t,
            "constraints": prob.w_ea.shape[0] + prob.n_a + prob.m + 1, "tick_p99": _tick_p99(prob, res, args.ticks)}


def measure(args: argparse.Namespace) -> dict:
    import numpy as np

    n_targets = 1 if args.quick else 4
    runs = {young: [_run(young, k, args) for k in range(n_targets)] for young in STIFFNESS_PA}
    every = [r for rs in runs.values() for r in rs]
    frames = np.concatenate([r["frame_t"] for r in every])
    out = {
        "alignment_error_mm": {f"{y / 1e6:g}": [r["errors"][-1] * 1e3 for r in rs] for y, rs in runs.items()},
        "alignment_error_max_mm": max(r["errors"][-1] for r in every) * 1e3,
        "contact_force_sum_max_n": max(max(r["sums"]) for r in every),
        "contact_force_sum_final_min_n": min(r["sums"][-1] for r in every),
        "contact_force_limit_n": args.force_limit,
        "frame_time_ms": {"median": float(np.median(frames) * 1e3), "max": float(frames.max() * 1e3)},
        "plant_settle_ms": float(np.median(np.concatenate([r["settle_t"] for r in every])) * 1e3),
        "constraints": every[0]["constraints"],
        "qp_tick_p99_ms": max(r["tick_p99"] for r in every),
        "held_frames": sum(r["held"] for r in every),
        "frames": args.frames, "targets": n_targets, "rod_grid": args.rod_grid,
    }
    if args.out is not None:
        out["figure"] = str(_figure(runs, args.force_limit, args.out))
    return out


def _figure(runs: dict, limit: float, folder: Path) -> Path:
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

    for key in ("frames", "force_limit", "ticks", "rod_grid"):
        if not getattr(args, key) > 0:
            print(f"experiment {NAME}: --{key.replace('_', '-')} must be > 0", file=sys.stderr)
            return 2
    if args.quick:
        args.frames = min(args.frames, 15)
        args.ticks = min(args.ticks, 50)
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
    parser.add_argument("--frames", type=int, default=40, help="inverse frames per target")
    parser.add_argument("--force-limit", type=float, default=1.0, help="contact force-sum limit [N] (eq. 14)")
    parser.add_argument("--rod-grid", type=int, default=2,
                        help="rod cross-section divisions (tip contacts: (grid+1)^2; 7 gives the paper's ~73 rows)")
    parser.add_argument("--ticks", type=int, default=1000, help="QP re-solves timed for the tick p99")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--out", type=Path, default=None, help="write hybrid-alignment.json and the figure here")
    parser.add_argument("--quick", action="store_true", help="one target, 15 frames (seconds, for tests)")
    parser.set_defaults(func=main)
    return parser
