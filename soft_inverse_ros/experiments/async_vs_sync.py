"""``soft-inverse-ros experiment async-vs-sync``: two-rate control vs the single-rate baseline.

Largilliere et al. (ICRA 2015) compare their asynchronous scheme (QP at 1 kHz on the
newest compliance, only the target changing between snapshots) with the "generic"
synchronous one (QP solved once per FEM step): 1.82 mm vs 2.33 mm mean error on the
Diamond, and a staircase actuation for the latter (their Figs. 4–6).

Here both run on the same offline co-simulation (simulated time, see
:mod:`soft_inverse_ros.experiments.cosim`): the controller's FEM (built-in robot, 1691
nodes) at ``--fem-period`` with the snapshot usable ``--fem-compute-time`` after the
state it describes; the QP every 1 ms (async) or only when a snapshot arrives (sync); the
simulated servos (config/drivers/servo_sim.yaml dynamics: 100 Hz commands, 5 ms dead
time, 30 ms lag, 40 mm/s); a dynamic FEM plant that is NOT the model
(:class:`~soft_inverse_ros.experiments.setups.PlantSpec`: finer mesh, E × 0.9, damping,
cable springs). The target is the 20 mm square 1.6 mm above the rest tip, held for
``--start-delay`` then traversed once at each ``--speeds``; figures are over the lap
(after the approach from the centre).

Errors are ‖true effector − target(t)‖ (time-aligned, so they include the lag along the
path); ``path`` errors are the distance to the square (shape only) and ``delay_fit_ms``
the delay of the target that best explains the effector (with the error left at that
delay). Smoothness of the commanded strokes: ``max_step_mm`` (largest change between two
1 ms samples) and ``second_difference_mm`` (Σ|Δ²u|: ≈ 0 for a ramp, twice each stair of
a staircase);
``delivered`` figures are the same at the servo output (sampled at the plant's 10 ms
steps; ``max_speed_mm_s`` is the largest change over its interval). With ``--json`` the last line is
one JSON object (``async_mean_error_mm``, ``sync_mean_error_mm``, … at the reference
speed, 25 mm/s when run, and one row per speed).
"""

from __future__ import annotations

import argparse

from soft_inverse_ros.cli_values import finite, non_negative, positive

NAME = "async-vs-sync"
DEFAULT_SPEEDS_MM_S = (25.0, 50.0, 100.0)
QUICK_SPEEDS_MM_S = (50.0,)
REFERENCE_SPEED_MM_S = 25.0
MODES = ("async", "sync")


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from soft_inverse_ros.experiments import common_arguments

    parser = subparsers.add_parser(
        NAME, help="two-rate (async) vs single-rate (sync) control on a mismatched plant",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--speeds", default=None,
                        help="comma-separated speeds [mm/s] (default 25,50,100; --quick: 50)")
    parser.add_argument("--size", type=positive, default=0.02,
                        help="square side [m], at most the robot's extent (default 0.02)")
    parser.add_argument("--z-offset", type=finite, default=0.0016,
                        help="square centre above the rest tip [m] (default 0.0016)")
    parser.add_argument("--start-delay", type=non_negative, default=None,
                        help="target held at the centre first [s] (default 0.6; --quick: 0.3)")
    plant_arguments(parser)
    common_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def plant_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the robot and the simulated plant's mismatch (shared with closed-loop)."""
    from soft_inverse_ros.experiments.plant_spec import PlantSpec

    spec = PlantSpec()
    parser.add_argument("--robot", default=spec.robot,
                        help=f"robot name or description YAML of the model and the plant "
                             f"(default {spec.robot}; a built-in mesh is needed for --plant-cell-size)")
    parser.add_argument("--plant-young-scale", type=positive, default=spec.young_modulus_scale,
                        help=f"plant Young's modulus / model's (default {spec.young_modulus_scale})")
    parser.add_argument("--plant-cell-size", type=positive, default=spec.mesh_cell_size,
                        help=f"plant built-in mesh cell size [m] (default {spec.mesh_cell_size}; "
                             "the model's is 0.007)")


def square_setup(args: argparse.Namespace):
    """What the square experiments share: (plant spec, controller, plant rig, FEM compute
    time [s], measured?, the square's centre (1 × 3) [m]: ``--z-offset`` above the rest tip)."""
    import numpy as np

    from soft_inverse_ros.core.model.description import load_robot_description
    from soft_inverse_ros.experiments import resolve_compute_time
    from soft_inverse_ros.experiments.setups import Controller, PlantRig

    spec = plant_spec(args)
    controller = Controller.build(load_robot_description(spec.robot))
    check_size_within_robot(args.size, controller.model.mesh.bounding_box())
    rig = PlantRig(spec)
    compute_time, measured = resolve_compute_time(controller, args.fem_compute_time, args.fem_period)
    center = np.array([0.0, 0.0, float(controller.rest_effector[2]) + args.z_offset])
    return spec, controller, rig, compute_time, measured, center


def check_size_within_robot(size: float, bounds) -> None:
    """Refuse (SystemExit naming --size) a square side [m] larger than the robot's extent
    (``bounds``: its mesh's (min, max) corners [m]): a path the robot cannot follow, most
    likely a size in mm given as m (``--size 20``: a 3200 s lap at 25 mm/s)."""
    extent = float(max(hi - lo for lo, hi in zip(*bounds)))
    if size > extent:
        raise SystemExit(f"--size {size:g} m is larger than the robot itself ({extent * 1e3:.0f} mm across): "
                         "the square's side is in metres (mm given as m?)")


def plant_spec(args: argparse.Namespace):
    from soft_inverse_ros.experiments.plant_spec import PlantSpec

    return PlantSpec(robot=args.robot, young_modulus_scale=args.plant_young_scale,
                     mesh_cell_size=args.plant_cell_size)


def compare_at_speed(controller, rig, speed: float, *, center, size: float, start_delay: float,
                     fem_compute_time: float, fem_period: float, modes=MODES):
    """Both modes on one lap of the square at ``speed`` [m/s].

    Returns ``(row, results)``: the figures per mode (lap window) and the
    :class:`CosimResult` per mode.
    """
    import numpy as np

    from soft_inverse_ros.experiments.run_metrics import run_metrics, square_vertices
    from soft_inverse_ros.experiments.setups import approach_time, run_tracking, square_target

    target, trajectory = square_target(center, size, speed, start_delay)
    lap_start = start_delay + approach_time(trajectory)
    end = lap_start + trajectory.lap_time
    path = square_vertices(np.asarray(center), size)
    row = {"speed_mm_s": speed * 1e3, "lap_window_s": [lap_start, end]}
    results = {}
    for mode in modes:
        result = run_tracking(controller, rig, target, duration=end, mode=mode,
                              fem_compute_time=fem_compute_time, fem_period=fem_period)
        metrics = run_metrics(result, lap_start, end, path=path)
        metrics["wall_time_s"] = result.wall_time
        row[mode] = metrics
        results[mode] = result
    return row, results


def summary(rows: list[dict]) -> dict:
    """Top-level figures at the reference speed (25 mm/s, else the first row)."""
    ref = next((r for r in rows if abs(r["speed_mm_s"] - REFERENCE_SPEED_MM_S) < 1e-9), rows[0])
    out = {"reference_speed_mm_s": ref["speed_mm_s"]}
    for mode in MODES:
        m = ref[mode]
        out[f"{mode}_mean_error_mm"] = m["mean_error_mm"]
        out[f"{mode}_max_error_mm"] = m["max_error_mm"]
        out[f"{mode}_mean_path_error_mm"] = m["mean_path_error_mm"]
        out[f"{mode}_delay_fit_ms"] = m["delay_fit_ms"]
        out[f"{mode}_mean_error_at_delay_mm"] = m["mean_error_at_delay_mm"]
        out[f"{mode}_command_max_step_mm"] = m["command_smoothness"]["max_step_mm"]
        out[f"{mode}_command_second_difference_mm"] = m["command_smoothness"]["second_difference_mm"]
        out[f"{mode}_command_total_variation_mm"] = m["command_smoothness"]["total_variation_mm"]
        out[f"{mode}_command_max_speed_mm_s"] = m["command_smoothness"]["max_speed_mm_s"]
        out[f"{mode}_servo_max_speed_mm_s"] = m["delivered_smoothness"]["max_speed_mm_s"]
        out[f"{mode}_servo_second_difference_mm"] = m["delivered_smoothness"]["second_difference_mm"]
    return out


def run(args: argparse.Namespace) -> int:
    import sys

    import numpy as np

    from soft_inverse_ros.experiments import emit, limit_threads, parse_speeds

    limit_threads()
    log = (lambda text: print(text, file=sys.stderr)) if args.json else print
    speeds = parse_speeds(args.speeds, QUICK_SPEEDS_MM_S if args.quick else DEFAULT_SPEEDS_MM_S)
    start_delay = args.start_delay if args.start_delay is not None else (0.3 if args.quick else 0.6)
    spec, controller, rig, compute_time, measured, center = square_setup(args)
    rest = controller.rest_effector
    model, plant = controller.model, rig.plant
    log(f"model {model.mesh.n_points} nodes, plant {plant.mesh.n_points} nodes (E x{spec.young_modulus_scale}, "
        f"cell {spec.mesh_cell_size * 1e3:g} mm); rest tip model {np.round(rest * 1e3, 2).tolist()} mm, "
        f"plant {np.round(rig.rest_effector * 1e3, 2).tolist()} mm")
    log(f"FEM update {compute_time * 1e3:.1f} ms ({'measured' if measured else 'configured'}), timer "
        f"{args.fem_period * 1e3:.1f} ms; square {args.size * 1e3:g} mm at z = {center[2] * 1e3:.2f} mm")
    rows, reference = [], None
    for speed in speeds:
        row, results = compare_at_speed(controller, rig, speed, center=center, size=args.size,
                                        start_delay=start_delay, fem_compute_time=compute_time,
                                        fem_period=args.fem_period)
        rows.append(row)
        if reference is None or abs(speed * 1e3 - REFERENCE_SPEED_MM_S) < 1e-9:
            reference = (speed, results, row["lap_window_s"])
        a, s = row["async"], row["sync"]
        log(f"{row['speed_mm_s']:6.1f} mm/s: mean error async {a['mean_error_mm']:.3f} / sync "
            f"{s['mean_error_mm']:.3f} mm, max {a['max_error_mm']:.3f} / {s['max_error_mm']:.3f} mm, "
            f"path {a['mean_path_error_mm']:.3f} / {s['mean_path_error_mm']:.3f} mm, lag "
            f"{a['delay_fit_ms']:.0f} / {s['delay_fit_ms']:.0f} ms; command "
            f"max step {a['command_smoothness']['max_step_mm']:.3f} / "
            f"{s['command_smoothness']['max_step_mm']:.3f} mm, Σ|Δ²u| "
            f"{a['command_smoothness']['second_difference_mm']:.1f} / "
            f"{s['command_smoothness']['second_difference_mm']:.1f} mm "
            f"({a['wall_time_s']:.0f} + {s['wall_time_s']:.0f} s)")
    out = {"experiment": NAME, "quick": bool(args.quick), **summary(rows),
           "paper": {"async_mean_error_mm": 1.82, "sync_mean_error_mm": 2.33,
                     "source": "Largilliere et al., ICRA 2015, Diamond robot"},
           "setup": {"model_nodes": int(model.mesh.n_points), "plant_nodes": int(plant.mesh.n_points),
                     "plant": spec.as_dict(), "fem_compute_time_s": compute_time,
                     "fem_compute_time_measured": measured, "fem_period_s": args.fem_period,
                     "qp_rate_hz": 1000.0, "square_size_m": args.size,
                     "center_m": center.tolist(), "start_delay_s": start_delay,
                     "model_rest_tip_m": rest.tolist(), "plant_rest_tip_m": rig.rest_effector.tolist()},
           "rows": rows}
    if args.out is not None and reference is not None:
        from soft_inverse_ros.experiments.figures import plot_runs

        speed, results, window = reference
        plot_runs(results, args.out / f"{NAME}.png", window=(window[0] - 0.2, window[1]),
                  title=f"async (QP 1 kHz) vs sync (QP per snapshot), square at {speed * 1e3:g} mm/s, "
                        f"mismatched plant")
    emit(out, args, NAME)
    return 0
