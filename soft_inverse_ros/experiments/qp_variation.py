"""``soft-inverse-ros experiment qp-variation``: how fast the QP matrices change with speed.

The table of Largilliere et al. (ICRA 2015): the variation of ‖W_eaᵀW_ea‖∞ between
consecutive compliance snapshots while the effector follows the 20 mm square at 6.25 …
150 mm/s. The loop is the perfect-model one of the paper's simulations: the controller's
FEM (one Newton step + compliance per update under the newest QP efforts, a snapshot
usable ``fem_compute_time`` after the state it describes) and the QP at 1 kHz; the model
is the robot. The indicator is the solver's own (``InverseSolver.set_snapshot`` →
``ComplianceVariation``): ``percent`` between consecutive snapshots and
``percent_per_second`` (that change over the snapshots' stamp difference).

Robots: the built-in Diamond-like robot and SOFA's Diamond mesh (``config/robots/diamond.yaml``,
mesh from ``$SOFA_SOFTROBOTS_DATA`` or ``../shared``; skipped with a message when absent).
The square is centred at x = y = 0 above each robot's rest tip (pulling the cables lifts
the tip of both robots): 1.6 mm on the built-in robot (the demo's centre z = 0.118 m of
config/sim.yaml), 12 mm on SOFA's Diamond (at 180 kPa its tip sags 22 mm under gravity;
the square's corners are out of reach below about +10 mm). Figures are over one lap (after
the approach from the centre). With ``--json`` the last output line is one JSON object.
"""

from __future__ import annotations

import argparse

from soft_inverse_ros.cli_values import finite, positive

NAME = "qp-variation"
DEFAULT_ROBOTS = ("builtin_diamond", "diamond")
QUICK_SPEEDS_MM_S = (50.0, 150.0)
#: Height of the square's centre above the rest tip per robot [m] (others: the built-in's).
Z_OFFSETS = {"builtin_diamond": 0.0016, "diamond": 0.012}


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from soft_inverse_ros.experiments import common_arguments

    parser = subparsers.add_parser(
        NAME, help="variation of the QP matrices between snapshots vs trajectory speed",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--robot", action="append", default=None,
                        help="robot name or description YAML (repeatable; default: "
                             + ", ".join(DEFAULT_ROBOTS) + ")")
    parser.add_argument("--speeds", default=None,
                        help="comma-separated speeds [mm/s] (default: the paper's 6.25,12.5,25,50,100,150)")
    parser.add_argument("--size", type=positive, default=0.02, help="square side [m] (default 0.02)")
    parser.add_argument("--z-offset", type=finite, default=None,
                        help="square centre above the rest tip [m] (default 0.0016, Diamond 0.012)")
    common_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def variation_run(controller, speed: float, *, size: float, center, fem_period: float,
                  compute_time: float, start_delay: float = 0.3, qp_config=None) -> dict:
    """One lap of the square at ``speed`` [m/s] in the perfect-model loop; returns the
    variation figures over the lap and the model's tracking figures."""
    import numpy as np

    from soft_inverse_ros.experiments.cosim import CosimConfig, CosimParts, run_cosim
    from soft_inverse_ros.experiments.run_metrics import run_metrics, square_vertices
    from soft_inverse_ros.experiments.setups import approach_time, square_target

    target, trajectory = square_target(center, size, speed, start_delay)
    lap_start = start_delay + approach_time(trajectory)
    end = lap_start + trajectory.lap_time
    snapshot = controller.initial_snapshot()
    model = controller.restore()
    parts = CosimParts(model=model, solver=controller.solver(qp_config), target=target,
                       initial_snapshot=snapshot)
    config = CosimConfig(duration=end, mode="async", fem_period=fem_period,
                         fem_compute_time=compute_time, record_every=1)
    result = run_cosim(config, parts)
    lap = [v for v in result.variations if lap_start <= v.stamp < end]
    percent = np.array([abs(v.percent) for v in lap if np.isfinite(v.percent)])
    rate = np.array([abs(v.percent_per_second) for v in lap if np.isfinite(v.percent_per_second)])
    norms = np.array([v.norm for v in lap])
    tracking = run_metrics(result, lap_start, end, path=square_vertices(np.asarray(center), size))
    return {
        "speed_mm_s": speed * 1e3,
        "lap_s": trajectory.lap_time,
        "snapshots_in_lap": len(lap),
        "max_variation_percent": float(percent.max()) if len(percent) else None,
        "mean_variation_percent": float(percent.mean()) if len(percent) else None,
        "max_variation_percent_per_s": float(rate.max()) if len(rate) else None,
        "mean_variation_percent_per_s": float(rate.mean()) if len(rate) else None,
        "norm_range": [float(norms.min()), float(norms.max())] if len(norms) else None,
        "model_mean_error_mm": tracking["mean_error_mm"],
        "model_max_error_mm": tracking["max_error_mm"],
        "model_mean_path_error_mm": tracking["mean_path_error_mm"],
        "wall_time_s": result.wall_time,
    }


def robot_table(name: str, speeds, *, size: float, z_offset: float, fem_period: float,
                compute_time_arg: str, log) -> dict:
    """The variation table of one robot (or ``{"skipped": reason}``)."""
    import numpy as np

    from soft_inverse_ros.core.config_files import ConfigNotFoundError
    from soft_inverse_ros.core.model.description import DescriptionError, load_robot_description
    from soft_inverse_ros.experiments import resolve_compute_time
    from soft_inverse_ros.experiments.setups import Controller

    try:
        desc = load_robot_description(name)
        controller = Controller.build(desc)
    except (DescriptionError, ConfigNotFoundError, FileNotFoundError) as exc:
        hint = ""
        if name.startswith("diamond"):
            hint = " (SOFA's meshes: set SOFA_SOFTROBOTS_DATA or provide ../shared/data/sofa-softrobots)"
        import sys

        print(f"experiment {NAME}: {name}: not run: {exc}{hint}", file=sys.stderr)
        return {"skipped": f"{exc}{hint}"}
    compute_time, measured = resolve_compute_time(controller, compute_time_arg, fem_period)
    rest = controller.rest_effector
    center = np.array([0.0, 0.0, float(rest[2]) + z_offset])
    model = controller.model
    log(f"{name}: {model.mesh.n_points} nodes, {model.mesh.n_tets} tets, rest tip "
        f"{np.round(rest * 1e3, 2).tolist()} mm; FEM update {compute_time * 1e3:.1f} ms "
        f"({'measured' if measured else 'configured'}), timer {fem_period * 1e3:.1f} ms; "
        f"square {size * 1e3:g} mm at z = {center[2] * 1e3:.2f} mm")
    rows = []
    for speed in speeds:
        row = variation_run(controller, speed, size=size, center=center, fem_period=fem_period,
                            compute_time=compute_time)
        rows.append(row)
        log(f"  {row['speed_mm_s']:7.2f} mm/s: max {row['max_variation_percent']:.3f} %/snapshot, "
            f"max {row['max_variation_percent_per_s']:.2f} %/s over {row['snapshots_in_lap']} snapshots; "
            f"model error mean {row['model_mean_error_mm']:.2f} mm ({row['wall_time_s']:.1f} s)")
    return {
        "nodes": int(model.mesh.n_points), "tets": int(model.mesh.n_tets),
        "rest_tip_mm": (rest * 1e3).tolist(), "center_mm": (center * 1e3).tolist(),
        "fem_compute_time_s": compute_time, "fem_compute_time_measured": measured,
        "fem_period_s": fem_period, "rows": rows,
    }


def run(args: argparse.Namespace) -> int:
    import sys

    from soft_inverse_ros.experiments import emit, limit_threads, parse_speeds

    limit_threads()
    log = (lambda text: print(text, file=sys.stderr)) if args.json else print
    robots = args.robot or (["builtin_diamond"] if args.quick else list(DEFAULT_ROBOTS))
    speeds = parse_speeds(args.speeds, QUICK_SPEEDS_MM_S if args.quick else None)
    out = {"experiment": NAME, "quick": bool(args.quick), "size_m": args.size,
           "speeds_mm_s": [s * 1e3 for s in speeds], "robots": {}}
    for name in robots:
        out["robots"][name] = robot_table(
            name, speeds, size=args.size,
            z_offset=args.z_offset if args.z_offset is not None else Z_OFFSETS.get(name, Z_OFFSETS["builtin_diamond"]),
            fem_period=args.fem_period,
            compute_time_arg=args.fem_compute_time, log=log)
    skipped = [name for name, r in out["robots"].items() if "skipped" in r]
    if skipped and (args.robot or len(skipped) == len(robots)):
        emit(out, args, NAME)  # what ran, and why the others did not
        if args.robot:  # a robot the user named that cannot run is an error, not a skip
            print(f"experiment {NAME}: cannot run --robot {', '.join(skipped)} (above)", file=sys.stderr)
        return 2
    if args.out is not None:
        from soft_inverse_ros.experiments.figures import plot_qp_variation

        plot_qp_variation(out, args.out / f"{NAME}.png")
    emit(out, args, NAME)
    return 0
