"""``soft-inverse-ros bench hybrid``: the costs of the hybrid robot's live loops, one thread.

On a hybrid description (default the built-in ``hybrid_arm``), with its target of
``config/sim_hybrid.yaml`` held: the low-rate loop (``HybridSnapshotModel.snapshot``: settle
with ``--newton`` steps and linearise, as hybrid_model_node) and the 1 kHz controller tick
(``InverseSolver.solve`` on those snapshots: 5 joint columns, the contact block with the
block, force-sum limit and minimum, as inverse_controller_node), the snapshots taken along a
closed loop on the controller's own model (``--frames`` snapshots of ``--ticks`` ticks each,
the joints moving to align the probe), and the simulated robot's step
(``HybridContactPlant.step``, ``--dt``). Tick p50/p99/max [µs] over all ticks (the first
snapshot's ticks include the one-off kernel compilation and are left out), snapshot and plant
step medians [ms], the plant's CPU (thread) and wall seconds per simulated second, and the
alignment error reached [mm]. A run whose timed ticks are not at least 95 % OK is INVALID
(exit status 3): its tick figures would not be the solving loop's. The first tick on each new snapshot runs the full contact-state search
(core/control/contact_inverse.py), the others warm-start from it: their figures are given
apart too (``arrival_tick_median_us``, ``steady_tick_p99_us``). A tick whose inputs are the
previous contact tick's (the held target, once the command has converged) reuses that
tick's result (core/control/inverse_qp.py): ``contact_ticks_reused`` counts them (and
``contact_ticks`` the ticks that searched), and
``searched_tick_p50_us`` / ``searched_tick_p99_us`` are the ticks that searched (what every
tick costs when the target moves at each tick). With ``--json`` the last line is one JSON
object.
"""

from __future__ import annotations

import argparse
import time

from soft_inverse_ros import finite_json
from soft_inverse_ros.cli_values import count, positive

#: a run whose timed ticks gave OK commands less often than this is INVALID: its tick
#: figures would be those of failed (HELD/SAFE) ticks, not of the solving loop
MIN_OK_TICK_SHARE = 0.95


def at_least_two(text: str) -> int:
    """``--frames``: a count >= 2 (the first snapshot's ticks include the kernels'
    compilation and are left out of the timings: one frame would time nothing)."""
    value = count(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2 (the first frame is not timed), got {text}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("hybrid", help="hybrid robot: snapshot, 1 kHz tick and plant step costs",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="hybrid_arm", help="hybrid robot description")
    parser.add_argument("--frames", type=at_least_two, default=20,
                        help="snapshots (low-rate updates), at least 2: the first one's ticks are not timed")
    parser.add_argument("--ticks", type=count, default=100, help="controller ticks per snapshot")
    parser.add_argument("--newton", type=count, default=2, help="Newton steps per snapshot")
    parser.add_argument("--dt", type=positive, default=0.01,
                        help="plant time step [s], 1e-4 … 0.05 (hybrid_plant_node's range)")
    parser.add_argument("--plant-steps", type=count, default=200, help="plant steps timed")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    if not 1e-4 <= args.dt <= 0.05:
        print(f"bench hybrid: --dt must be in [1e-4, 0.05] s (hybrid_plant_node's range), got {args.dt:g}",
              file=sys.stderr)
        return 2
    from soft_inverse_ros.bench._threads import limit_threads

    _limiter = limit_threads()  # noqa: F841 -- kept alive while timing
    import numpy as np
    import yaml

    from soft_inverse_ros.core.config_files import find_config
    from soft_inverse_ros.core.control.actuator_limits import limits_from_description
    from soft_inverse_ros.core.control.inverse_qp import CommandStatus, InverseSolver
    from soft_inverse_ros.core.control.shipped_settings import shipped_solver_config
    from soft_inverse_ros.core.model.description import DescriptionError
    from soft_inverse_ros.core.model.hybrid_description import load_hybrid_description
    from soft_inverse_ros.core.rigid.hybrid_live import HybridSnapshotModel, alignment_distance
    from soft_inverse_ros.core.sim.hybrid_plant import HybridContactPlant, HybridPlantConfig

    try:
        desc = load_hybrid_description(args.robot)
    except DescriptionError as exc:
        print(f"bench hybrid: {exc}", file=sys.stderr)
        return 2
    params = yaml.safe_load(find_config("sim_hybrid.yaml").read_text())
    target = np.array(params["target_node"]["ros__parameters"]["center"], float)
    model = HybridSnapshotModel(desc, args.newton)
    # the controller's settings as sim_hybrid.yaml ships them, the force limits from the
    # description (as inverse_controller_node takes them)
    config = shipped_solver_config("sim_hybrid.yaml", contact_force_sum_max=desc.force_sum_max,
                                   contact_min_force_sum=desc.min_force_sum)
    solver = InverseSolver(config, limits_from_description(desc))
    q = desc.home.copy()
    ticks, snaps, status = [], [], {s.name: 0 for s in CommandStatus}
    timed_status = dict(status)  # the timed ticks' (frame 0's include the kernel compilation)
    arrival, steady = [], []  # the first tick on a new snapshot (full contact search), the others
    searched = []  # the ticks that searched (the others reused the last search's result)
    for frame in range(args.frames):
        t0 = time.perf_counter()
        snap = model.snapshot(q, target, frame + 1, float(frame + 1))
        snaps.append(time.perf_counter() - t0)
        solver.set_snapshot(snap)
        for k in range(args.ticks):
            before = solver.contact_ticks[0]
            t0 = time.perf_counter()
            result = solver.solve(target, stamp=frame + 1 + 1e-3 * k)
            if frame > 0:
                ticks.append(time.perf_counter() - t0)
                (arrival if k == 0 else steady).append(ticks[-1])
                if solver.contact_ticks[0] > before:
                    searched.append(ticks[-1])
            status[result.command_status.name] += 1
            if frame > 0:
                timed_status[result.command_status.name] += 1
        q = desc.joint_positions(result.efforts)
    model.snapshot(q, target, 0, 0.0)
    tip, back = model.scene.probe_points()
    plant = HybridContactPlant(desc, HybridPlantConfig(dt=args.dt))
    plant.set_joint_setpoints(q)
    plant.step()
    steps, step_cpu = [], []
    for _ in range(args.plant_steps):
        t0, c0 = time.perf_counter(), time.thread_time()
        plant.step()
        steps.append(time.perf_counter() - t0)
        step_cpu.append(time.thread_time() - c0)
    t_us = 1e6 * np.asarray(ticks) if ticks else np.zeros(1)
    res = {
        "robot": desc.name, "frames": args.frames, "ticks_per_frame": args.ticks, "newton": args.newton,
        "tick_p50_us": float(np.percentile(t_us, 50)), "tick_p99_us": float(np.percentile(t_us, 99)),
        "tick_max_us": float(t_us.max()), "tick_status": status,
        "contact_tick_budget_us": 1e6 * config.contact_tick_budget,
        "contact_ticks_cut_by_budget": solver.contact_ticks[1], "contact_ticks": solver.contact_ticks[0],
        "contact_ticks_reused": solver.contact_ticks_reused,
        "searched_tick_p50_us": 1e6 * float(np.percentile(searched, 50)) if searched else None,
        "searched_tick_p99_us": 1e6 * float(np.percentile(searched, 99)) if searched else None,
        "arrival_tick_median_us": 1e6 * float(np.median(arrival)) if arrival else None,
        "steady_tick_p99_us": 1e6 * float(np.percentile(steady, 99)) if steady else None,
        "snapshot_median_ms": 1e3 * float(np.median(snaps[1:] if len(snaps) > 1 else snaps)),
        "snapshot_max_ms": 1e3 * float(max(snaps[1:] if len(snaps) > 1 else snaps)),
        "contacts": int(snap.contacts.size) if snap.contacts is not None else 0,
        "alignment_error_mm": 1e3 * alignment_distance(tip, back, target),
        "contact_force_sum_n": float(model.scene.forces.sum()),
        "plant_dt_ms": 1e3 * args.dt, "plant_step_median_ms": 1e3 * float(np.median(steps)),
        "plant_cpu_s_per_sim_s": float(np.sum(step_cpu) / (args.dt * len(step_cpu))),
        "plant_wall_s_per_sim_s": float(np.sum(steps) / (args.dt * len(steps))),
        "timed_tick_status": timed_status,
        # the tick figures are a solving loop's only if (nearly) every timed tick solved
        "valid": sum(timed_status.values()) > 0
        and timed_status["OK"] >= MIN_OK_TICK_SHARE * sum(timed_status.values()),
    }
    for key, value in res.items():
        print(f"{key:>24}: {value:.3f}" if isinstance(value, float) else f"{key:>24}: {value}")
    if not res["valid"]:  # the tick figures are those of held commands: not the loop's cost
        print(f"bench hybrid: INVALID RUN: under {100 * MIN_OK_TICK_SHARE:g} % of the timed ticks gave an OK "
              f"command ({timed_status}); the description's limits (e.g. contact.min_force_sum, "
              "command_period, clearance) leave no feasible command", file=sys.stderr)
    if args.json:
        print(finite_json.dumps(res))
    return 0 if res["valid"] else 3  # the exit status of an invalid run, as `demo/analyze --strict`
