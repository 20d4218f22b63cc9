"""``soft-inverse-ros experiment plant-reach``: can the simulated robot reach the demo's path?

A target the robot cannot reach statically is one no controller reaches: open loop it is
missed by the model's error plus the gap, closed loop the correction winds up against the
gap. This experiment builds the simulated robot exactly as the live graph does (the
``plant_sim_node`` section of ``--params-file``, default config/sim.yaml) and samples one
lap of the ``target_node`` trajectory of the same file (``--points`` points, equally spaced
in time: for the square every corner and the sides' middles are among them). For each
point, and for the path raised along its plane's normal by each of ``--raise`` [mm], it
finds the closest static equilibrium of the robot's effector (core/sim/static_reach.py:
multi-start projected Levenberg–Marquardt over the cable strokes, the far cables let out)
and reports the gap [mm]. A gap is an upper bound (a local search from several starts).

``lowest_reachable_raise_mm`` is the smallest tested raise at which every point's gap is at
most ``--tolerance``; the shipped square's height comes from this experiment (see
EXPERIMENTS.md, "plant-reach"). With ``--json`` the last line is one JSON object.
Cable-driven robots only.
"""

from __future__ import annotations

import argparse
import time

from soft_inverse_ros.cli_values import count, finite_list, positive

NAME = "plant-reach"
#: points per lap: default, and with --quick (every corner of the square)
DEFAULT_POINTS = 16
QUICK_POINTS = 4


def _trajectory(params_file):
    """The ``target_node`` path of ``params_file``: its keys as the node reads them; what the
    file leaves out takes TrajectoryConfig's defaults, except the centre (the node's default
    differs from TrajectoryConfig's, and where the path is is the question asked)."""
    from soft_inverse_ros.core.control.shipped_settings import node_params
    from soft_inverse_ros.core.control.trajectory import Trajectory, TrajectoryConfig

    p = node_params(params_file, "target_node")
    if "center" not in p:
        raise SystemExit(f"plant-reach: {params_file} sets no target_node center: nothing to place")
    if p.get("trajectory", "square") in ("hold", "csv"):
        raise SystemExit(f"plant-reach: trajectory {p.get('trajectory')!r} of {params_file}: only the "
                         "square, circle and line are sampled")
    keys = {"trajectory": "shape", "center": "center", "size": "size", "speed": "speed",
            "plane_normal": "plane_normal"}
    values = {field: tuple(p[key]) if isinstance(p[key], list) else p[key] for key, field in keys.items() if key in p}
    try:
        config = TrajectoryConfig(**values, loop=True)
    except (TypeError, ValueError) as exc:
        raise SystemExit(f"plant-reach: target_node of {params_file}: {exc}") from None
    return Trajectory(config), config


def lap_sizes(args: argparse.Namespace) -> tuple[int, list[float]]:
    """(points per lap, raises [mm]): ``--points`` and ``--raise`` when given, else the
    defaults (``--quick``: :data:`QUICK_POINTS`, no raise)."""
    points = args.points if args.points is not None else (QUICK_POINTS if args.quick else DEFAULT_POINTS)
    return points, list(args.raise_mm) if args.raise_mm is not None else [0.0]


def measure(args: argparse.Namespace) -> dict:
    import numpy as np

    from soft_inverse_ros.core.jit_warm_up import plant_config_from_params
    from soft_inverse_ros.core.sim.plant import make_plant
    from soft_inverse_ros.core.sim.static_reach import StaticReach

    params_file = args.params_file or "sim.yaml"
    trajectory, traj_config = _trajectory(params_file)
    overrides = {"robot": args.robot} if args.robot else {}
    config = plant_config_from_params(params_file, **overrides)
    t0 = time.perf_counter()
    plant = make_plant(config)
    try:
        reach = StaticReach(plant, tolerance=1e-3 * args.tolerance / 10.0)
    except ValueError as exc:
        raise SystemExit(f"plant-reach: {exc}") from None
    print(f"simulated robot {config.robot!r} ({config.model}) built in {time.perf_counter() - t0:.1f} s; "
          f"effector at rest {np.round(1e3 * reach.rest_effector, 3)} mm", flush=True)
    points, raises = lap_sizes(args)
    lap, start = trajectory.lap_time, trajectory.duration - trajectory.lap_time
    path = np.array([trajectory.position(start + k * lap / points) for k in range(points)])
    normal = np.asarray(traj_config.plane_normal, float)
    normal /= np.linalg.norm(normal)
    rows, lowest = [], None
    for raise_mm in raises:
        gaps, details = [], []
        for target in path + 1e-3 * raise_mm * normal:
            res = reach.solve(target)
            gaps.append(1e3 * res.gap)
            details.append({"target_mm": (1e3 * target).tolist(), "gap_mm": 1e3 * res.gap,
                            "effector_mm": (1e3 * res.effector).tolist(),
                            "cable_strokes_mm": (1e3 * res.cable_strokes).tolist()})
        gaps_a = np.array(gaps)
        out = int((gaps_a > args.tolerance).sum())
        print(f"raised {raise_mm:+.2f} mm: gap max {gaps_a.max():.3f} mm, mean {gaps_a.mean():.3f} mm, "
              f"{out} of {points} points out of reach (> {args.tolerance:g} mm)", flush=True)
        if out == 0 and (lowest is None or raise_mm < lowest):  # the smallest, in any order given
            lowest = raise_mm
        rows.append({"raise_mm": raise_mm, "gap_max_mm": float(gaps_a.max()), "gap_mean_mm": float(gaps_a.mean()),
                     "points_out_of_reach": out, "points": details})
    if lowest is None:
        print("plant-reach: no tested raise puts the whole path within reach", flush=True)
    else:
        print(f"lowest tested raise with the whole path within reach: {lowest:+.2f} mm", flush=True)
    return {
        "experiment": NAME, "params_file": str(params_file), "robot": config.robot, "plant_model": config.model,
        "trajectory": {"shape": traj_config.shape, "center_mm": [1e3 * c for c in traj_config.center],
                       "size_mm": 1e3 * traj_config.size},
        "rest_effector_mm": (1e3 * reach.rest_effector).tolist(), "tolerance_mm": args.tolerance,
        "points_per_lap": points, "raises": rows, "lowest_reachable_raise_mm": lowest,
    }


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from soft_inverse_ros.experiments import common_arguments

    parser = subparsers.add_parser(
        NAME, help="static reach of the simulated robot along the demo's target path",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params-file", default="",
                        help="graph parameter file: its plant_sim_node builds the robot, its target_node "
                             "gives the path (default config/sim.yaml)")
    parser.add_argument("--robot", default="", help="override the plant's robot description")
    parser.add_argument("--points", type=count, default=None,
                        help=f"points per lap (default {DEFAULT_POINTS}; --quick: {QUICK_POINTS} unless given)")
    parser.add_argument("--raise", dest="raise_mm", type=finite_list, default=None,
                        help="comma-separated raises of the path along its plane normal [mm] (default 0)")
    parser.add_argument("--tolerance", type=positive, default=0.01,
                        help="a gap above this is out of reach [mm] (default 0.01)")
    common_arguments(parser, fem=False)
    parser.set_defaults(func=main)
    return parser


def main(args: argparse.Namespace) -> int:
    from soft_inverse_ros.experiments import emit, limit_threads

    limit_threads()
    emit(measure(args), args, NAME)
    return 0
