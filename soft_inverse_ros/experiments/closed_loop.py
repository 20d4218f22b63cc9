"""``soft-inverse-ros experiment closed-loop``: open vs closed loop on a mismatched plant.

The same co-simulation as async-vs-sync (two-rate controller, simulated servos, the
mismatched dynamic plant of :class:`~soft_inverse_ros.experiments.setups.PlantSpec`), with
the simulated mocap observing the true effector (labeled marker, ``--noise`` per axis,
``--latency``, ``--mocap-rate``) through the mocap pipeline, and the controller's
:class:`~soft_inverse_ros.core.control.feedback.TargetFeedback` correcting the QP target:

- ``open_loop``: no correction;
- ``closed_loop_default``: the controller node's own defaults (integral only, K_i = 2/s,
  as in config/hardware.yaml; config/sim.yaml ships K_i = 10/s);
- ``closed_loop``: the experiment's gains ``--ki`` / ``--kp`` (default: integral only,
  K_i = 10/s, chosen by the gain scan recorded in EXPERIMENTS.md). On a straight side of
  the square the lag of the actuation (servo dead time and lag, plant dynamics) is an
  error of constant direction, which a fast enough integrator removes too; at each corner
  it has to re-converge.

All on the 20 mm square (1.6 mm above the rest tip; ``--trajectory circle``: the circle of
that diameter, a trajectory the gains were not tuned on) at ``--speed`` (25 mm/s), held at
the centre for ``--start-delay`` (the integrator converges there first), then one lap;
figures over the lap. Defaults follow the live graph: the FEM snapshot lags its state by one
FEM period (``--fem-compute-time period``) and the mocap has config/sim.yaml's dropouts,
bursts and outliers (``--mocap-faults sim.yaml``). Goal (issue F): closed-loop mean error below 0.5 mm at 25 mm/s with 0.2 mm
marker noise (``goal_met`` is null at other speeds, noises, mocap faults or with ``--quick``:
the figure is then reported, not judged). With ``--json`` the last line is one JSON object
(``closed_loop_mean_error_mm``, ``open_loop_mean_error_mm``, … and ``goal_met``).
"""

from __future__ import annotations

import argparse
import math

from soft_inverse_ros.cli_values import finite, non_negative, non_negative_count, positive, positive_at_most

NAME = "closed-loop"
GOAL_MEAN_ERROR_MM = 0.5
#: the conditions the goal is stated at (issue F): target speed [mm/s], marker noise [m]
GOAL_SPEED_MM_S = 25.0
GOAL_NOISE_M = 0.0002
#: Gains of the experiment's closed loop (chosen on this plant, see EXPERIMENTS.md).
DEFAULT_KI = 10.0
DEFAULT_KP = 0.0
#: highest --speed [mm/s]: 12 x the simulated servos' stroke speed (40 mm/s), 5 x the
#: fastest paper speed (100 mm/s); a 20 mm square's lap then lasts 160 ms
MAX_SPEED_MM_S = 500.0
#: shortest lap [s] measured: 10 mocap frames and servo periods (a 3 ms lap left no sample)
MIN_LAP_S = 0.1


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from soft_inverse_ros.experiments import common_arguments
    from soft_inverse_ros.experiments.async_vs_sync import plant_arguments

    parser = subparsers.add_parser(
        NAME, help="open vs closed loop (mocap feedback) on a mismatched plant",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--speed", type=positive_at_most(MAX_SPEED_MM_S, "12 x the servos' 40 mm/s"), default=25.0,
                        help=f"target speed [mm/s], at most {MAX_SPEED_MM_S:g} (default 25)")
    parser.add_argument("--size", type=positive, default=0.02,
                        help="square side [m], at most the robot's extent (default 0.02)")
    parser.add_argument("--z-offset", type=finite, default=0.0016,
                        help="square centre above the rest tip [m] (default 0.0016)")
    parser.add_argument("--start-delay", type=non_negative, default=None,
                        help="target held at the centre first [s] (default 1.5; --quick: 0.8)")
    parser.add_argument("--ki", type=non_negative, default=DEFAULT_KI,
                        help=f"integral gain [1/s] of the closed loop (default {DEFAULT_KI})")
    parser.add_argument("--kp", type=non_negative, default=DEFAULT_KP,
                        help=f"proportional gain of the closed loop (default {DEFAULT_KP})")
    parser.add_argument("--extra-gains", default="",
                        help="more closed-loop runs, comma-separated KI:KP pairs (a gain scan), "
                             "e.g. 2:0.3,5:0,20:0 (about 25 s each)")
    parser.add_argument("--noise", type=non_negative, default=0.0002,
                        help="mocap marker noise, std per axis [m] (default 0.0002)")
    parser.add_argument("--latency", type=non_negative, default=0.005, help="mocap latency [s] (default 0.005)")
    parser.add_argument("--mocap-rate", type=positive, default=100.0,
                        help="mocap frame rate [Hz], a divisor of 1000 (default 100)")
    parser.add_argument("--seed", type=non_negative_count, default=1, help="mocap noise seed (default 1)")
    parser.add_argument("--trajectory", choices=("square", "circle"), default="square",
                        help="the lap's shape: the ICRA 2015 square (the gains were tuned on it) or "
                             "a circle of diameter --size (a trajectory they were not tuned on)")
    parser.add_argument("--mocap-faults", choices=("sim.yaml", "none"), default="sim.yaml",
                        help="dropouts, bursts and outliers of the simulated mocap: those of "
                             "config/sim.yaml's mocap_node (the live graph; default) or none")
    plant_arguments(parser)
    common_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def check_lap(size: float, speed_mm_s: float, shape: str) -> None:
    """Refuse (SystemExit naming --size and --speed) a lap [s] shorter than :data:`MIN_LAP_S`:
    the square's perimeter 4·size (circle: π·size) [m] at ``speed_mm_s`` [mm/s]."""
    lap = (math.pi if shape == "circle" else 4.0) * size / (speed_mm_s / 1e3)
    if lap < MIN_LAP_S:
        raise SystemExit(f"--size {size:g} m at --speed {speed_mm_s:g} mm/s is a {lap * 1e3:.3g} ms lap, under "
                         f"{MIN_LAP_S * 1e3:g} ms: too short to measure (a smaller --speed or a larger --size)")


def parse_gains(text: str) -> list[tuple[float, float]]:
    """``"KI:KP,KI:KP"`` → [(ki [1/s], kp)] (empty text: none)."""
    pairs = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        try:
            ki, kp = (float(v) for v in item.split(":"))
        except ValueError:
            raise SystemExit(f"--extra-gains: expected KI:KP pairs, got {item!r}") from None
        if not (ki >= 0 and kp >= 0):
            raise SystemExit(f"--extra-gains: gains must be >= 0, got {item!r}")
        pairs.append((ki, kp))
    return pairs


def closed_loop_runs(controller, rig, *, speed: float, center, size: float, start_delay: float,
                     fem_compute_time: float, fem_period: float, variants: dict,
                     mocap_options: dict, mocap_period: float, shape: str = "square"):
    """One lap of the square (or circle) per variant ``{label: FeedbackConfig or None}``,
    all with the simulated mocap (so the open loop records the measurements too).

    Returns ``(rows, results, lap_window)``: figures per variant (lap window) and the
    :class:`CosimResult` per variant.
    """
    import numpy as np

    from soft_inverse_ros.experiments.run_metrics import run_metrics, square_vertices
    from soft_inverse_ros.experiments.setups import approach_time, run_tracking, square_target

    target, trajectory = square_target(center, size, speed, start_delay, shape)
    lap_start = start_delay + approach_time(trajectory)
    end = lap_start + trajectory.lap_time
    if shape == "circle":  # the path as a fine polygon (path error to the circle)
        angles = np.linspace(0.0, 2.0 * np.pi, 721)
        path = np.asarray(center) + 0.5 * size * np.column_stack((np.cos(angles), np.sin(angles), 0 * angles))
    else:
        path = square_vertices(np.asarray(center), size)
    rows, results = {}, {}
    for label, feedback in variants.items():
        result = run_tracking(controller, rig, target, duration=end, mode="async",
                              fem_compute_time=fem_compute_time, fem_period=fem_period,
                              feedback_config=feedback, mocap_options=dict(mocap_options),
                              mocap_period=mocap_period)
        metrics = run_metrics(result, lap_start, end, path=path)
        hold = result.window(max(0.0, start_delay - 0.3), start_delay)
        metrics["holding_error_mm"] = float(result.error[hold].mean()) * 1e3 if hold.any() else None
        metrics["wall_time_s"] = result.wall_time
        if feedback is not None:
            metrics["gains"] = {"ki": feedback.ki, "kp": feedback.kp,
                                "max_correction_m": feedback.max_correction,
                                "anti_windup": feedback.anti_windup}
        rows[label] = metrics
        results[label] = result
    return rows, results, (lap_start, end)


def run(args: argparse.Namespace) -> int:
    import sys

    from soft_inverse_ros.core.control.feedback import FeedbackConfig
    from soft_inverse_ros.experiments import emit, limit_threads
    from soft_inverse_ros.experiments.async_vs_sync import square_setup
    from soft_inverse_ros.experiments.setups import sim_yaml_mocap_faults

    limit_threads()
    log = (lambda text: print(text, file=sys.stderr)) if args.json else print
    check_lap(args.size, args.speed, args.trajectory)
    mocap_period = 1.0 / args.mocap_rate if args.mocap_rate > 0 else -1.0
    if not (mocap_period > 0 and abs(round(mocap_period * 1e3) - mocap_period * 1e3) < 1e-6):
        raise SystemExit(f"--mocap-rate must divide 1000 Hz (the QP rate), got {args.mocap_rate}")
    start_delay = args.start_delay if args.start_delay is not None else (0.8 if args.quick else 1.5)
    spec, controller, rig, compute_time, measured, center = square_setup(args)
    variants = {"open_loop": None, "closed_loop": FeedbackConfig(ki=args.ki, kp=args.kp)}
    if not args.quick:
        variants = {"open_loop": None, "closed_loop_default": FeedbackConfig(ki=2.0, kp=0.0),
                    "closed_loop": FeedbackConfig(ki=args.ki, kp=args.kp)}
    for ki, kp in parse_gains(args.extra_gains):
        variants[f"closed_loop_ki{ki:g}_kp{kp:g}"] = FeedbackConfig(ki=ki, kp=kp)
    mocap = {"noise_std": args.noise, "latency": args.latency, "seed": args.seed}
    if args.mocap_faults == "sim.yaml":
        mocap.update(sim_yaml_mocap_faults())
    log(f"model {controller.model.mesh.n_points} nodes, plant {rig.plant.mesh.n_points} nodes "
        f"(E x{spec.young_modulus_scale}, cell {spec.mesh_cell_size * 1e3:g} mm); FEM update "
        f"{compute_time * 1e3:.1f} ms ({'measured' if measured else 'configured'}); mocap "
        f"{args.mocap_rate:g} Hz, noise {args.noise * 1e3:g} mm, latency {args.latency * 1e3:g} ms")
    rows, results, window = closed_loop_runs(
        controller, rig, speed=args.speed / 1e3, center=center, size=args.size,
        start_delay=start_delay, fem_compute_time=compute_time, fem_period=args.fem_period,
        variants=variants, mocap_options=mocap, mocap_period=mocap_period, shape=args.trajectory)
    for label, m in rows.items():
        log(f"{label:22s} mean {m['mean_error_mm']:.3f} mm, max {m['max_error_mm']:.3f} mm, path "
            f"{m['mean_path_error_mm']:.3f} mm, lag {m['delay_fit_ms']:.0f} ms, holding "
            f"{m['holding_error_mm']:.3f} mm, command "
            f"travel {m['command_smoothness']['total_variation_mm']:.1f} mm ({m['wall_time_s']:.0f} s)")
    closed, opened = rows["closed_loop"], rows["open_loop"]
    # the goal is stated for these conditions: elsewhere the figure is reported, not judged
    goal_conditions = (abs(args.speed - GOAL_SPEED_MM_S) < 1e-9 and abs(args.noise - GOAL_NOISE_M) < 1e-12
                       and not args.quick and args.mocap_faults == "sim.yaml")
    met = closed["mean_error_mm"] < GOAL_MEAN_ERROR_MM if goal_conditions else None
    log(f"goal: closed-loop mean error < {GOAL_MEAN_ERROR_MM} mm: "
        + ({True: "met", False: "NOT met"}[met] if met is not None else
           f"not judged (stated at {GOAL_SPEED_MM_S:g} mm/s, {GOAL_NOISE_M * 1e3:g} mm marker noise, "
           "the full robot, the live graph's mocap faults)"))
    out = {"experiment": NAME, "quick": bool(args.quick), "speed_mm_s": args.speed,
           "trajectory": args.trajectory, "seed": args.seed,
           "closed_loop_mean_error_mm": closed["mean_error_mm"],
           "open_loop_mean_error_mm": opened["mean_error_mm"],
           "closed_loop_max_error_mm": closed["max_error_mm"],
           "open_loop_max_error_mm": opened["max_error_mm"],
           "goal_mean_error_mm": GOAL_MEAN_ERROR_MM, "goal_met": met,
           "setup": {"plant": spec.as_dict(), "fem_compute_time_s": compute_time,
                     "fem_compute_time_measured": measured, "fem_period_s": args.fem_period,
                     "mocap": {**mocap, "rate_hz": args.mocap_rate}, "start_delay_s": start_delay,
                     "center_m": center.tolist(), "square_size_m": args.size,
                     "lap_window_s": list(window)},
           "runs": rows}
    if args.out is not None:
        from soft_inverse_ros.experiments.figures import plot_runs

        shown = {k: v for k, v in results.items() if k in ("open_loop", "closed_loop_default", "closed_loop")}
        plot_runs(shown, args.out / f"{NAME}.png", window=(window[0] - 0.2, window[1]),
                  title=f"open vs closed loop (mocap {args.noise * 1e3:g} mm noise, "
                        f"{args.latency * 1e3:g} ms), {args.trajectory} at {args.speed:g} mm/s")
    emit(out, args, NAME)
    return 0
