"""``soft-inverse-ros bench mocap``: CPU cost of one frame of the simulated motion capture.

Runs the work ``mocap_node`` (backend ``sim``) does per capture, without ROS transport, on
the setup a graph ships: ``--graph snake`` reads ``config/sim_snake.yaml`` (five plates of
four markers, each plate a rigid body), ``--graph sim`` reads ``config/sim.yaml`` (three
markers and the effector marker). The node's parameters (``source_config``, ``rate``,
``rigid_bodies``, ``markers_per_body``, ``marker_names``, ``effector_marker``, ``sim.*``)
come from that file. True marker positions move smoothly (plates translating and turning,
the effector on an 8 mm circle) so the jump filter accepts them.

Stages per frame [µs]: ``observe`` (noise, dropouts, latency queue), ``poll``,
``rigid_bodies`` (the plates' rigid fits), ``pipeline`` (registration, jump / stale
filters, effector extraction) and ``messages`` (the PoseStamped / PointCloud2 /
PointStamped messages the node publishes, built by its own ``estimate_messages`` but not
sent). Median and p99 over
``--frames`` frames after ``--warmup``; ``cpu_fraction_at_rate`` is the mean frame cost
times the graph's capture rate: the share of one core the node needs to keep up, less
what publishing, its lock and its diagnostics add.
With ``--json`` the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from soft_inverse_ros import finite_json

GRAPHS = {"snake": "sim_snake.yaml", "sim": "sim.yaml"}
STAGES = ("observe", "poll", "rigid_bodies", "pipeline", "messages")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("mocap", help="simulated motion capture: CPU per frame",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graph", choices=sorted(GRAPHS), default="snake",
                        help="whose mocap_node parameters to use (default snake)")
    parser.add_argument("--frames", type=int, default=3000, help="timed frames (default 3000)")
    parser.add_argument("--warmup", type=int, default=200, help="untimed frames first")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(func=run)


def _node_parameters(graph: str) -> dict:
    import yaml

    from soft_inverse_ros.core.config_files import find_config

    path = find_config(GRAPHS[graph])
    params = (yaml.safe_load(path.read_text()) or {}).get("mocap_node", {}).get("ros__parameters")
    if not params:
        raise ValueError(f"{path}: no mocap_node parameters")
    return params


def _mocap_config(params: dict):
    from soft_inverse_ros.core.config_files import find_config
    from soft_inverse_ros.core.mocap.config import load_mocap_config

    from soft_inverse_ros.nodes.mocap_node import SimOverrides

    config = load_mocap_config(find_config(params["source_config"]))
    overrides = SimOverrides(**{k[len("sim."):]: v for k, v in params.items()
                                if k.startswith("sim.")})
    return dataclasses.replace(config, simulated=overrides.apply(config.simulated))


def _true_markers(params: dict):
    """Marker names and a function t [s] → their true positions (n, 3) [m]."""
    import numpy as np

    from soft_inverse_ros.core.mocap.rigid_bodies import MarkerRigidBodies
    from soft_inverse_ros.core.mocap.rigid_transform import (
        quaternion_to_matrix,
        rotation_vector_to_quaternion,
    )

    bodies = list(params.get("rigid_bodies") or [])
    if bodies:
        k = int(params.get("markers_per_body", 4))
        groups = MarkerRigidBodies.grouped(bodies, k)
        names = [m for g in groups.values() for m in g]
        angles = 2 * np.pi * np.arange(k) / k
        layout = np.stack([np.zeros(k), 0.015 * np.cos(angles), 0.012 * np.sin(angles)], axis=1)
        phases = np.arange(len(bodies), dtype=float)

        def positions(t: float) -> np.ndarray:
            yaw = 0.1 * np.sin(2 * np.pi * 0.5 * t + phases)
            rot = quaternion_to_matrix(rotation_vector_to_quaternion(
                np.stack([np.zeros_like(yaw), np.zeros_like(yaw), yaw], axis=1)))
            centres = np.stack([0.03 * phases + 0.005 * np.sin(2 * np.pi * 0.5 * t + phases),
                                np.zeros_like(phases), np.full_like(phases, 0.012)], axis=1)
            return (np.einsum("bij,kj->bki", rot, layout) + centres[:, None]).reshape(-1, 3)

        return names, positions, groups
    names = list(params.get("marker_names") or [])
    effector = params.get("effector_marker", "")
    fixed = 0.02 * np.arange(len(names), dtype=float)[:, None] * [1.0, 0.0, 0.0] + [0, 0.03, 0.1]

    def positions(t: float) -> np.ndarray:
        w = 0.02 / 0.008  # 20 mm/s on an 8 mm circle [rad/s]
        tip = np.array([0.008 * np.cos(w * t), 0.008 * np.sin(w * t), 0.118])
        return np.vstack([fixed, tip[None]]) if effector else fixed

    return names + ([effector] if effector else []), positions, None


def _stats_us(samples) -> dict:
    import numpy as np

    s = 1e6 * np.asarray(samples)
    return {"median_us": float(np.median(s)), "p99_us": float(np.percentile(s, 99)),
            "mean_us": float(np.mean(s))}


def run(args: argparse.Namespace) -> int:
    from soft_inverse_ros.core.mocap.pipeline import MocapPipeline
    from soft_inverse_ros.core.mocap.rigid_bodies import MarkerRigidBodies
    from soft_inverse_ros.core.mocap.simulated_source import SimulatedMocapSource
    from soft_inverse_ros.nodes.mocap_node import estimate_messages

    if args.frames < 1 or args.warmup < 0:
        print("bench mocap: --frames must be >= 1 and --warmup >= 0", file=sys.stderr)
        return 2
    params = _node_parameters(args.graph)
    config = _mocap_config(params)
    rate = float(params.get("rate", 200.0))
    names, positions, groups = _true_markers(params)
    source = SimulatedMocapSource(config.simulated, config.registration)
    rigid = MarkerRigidBodies(groups) if groups else None
    pipeline = MocapPipeline.from_config(config)

    times = {stage: [] for stage in STAGES}
    totals, delivered, bodies_solved = [], 0, 0
    clock = time.perf_counter
    for k in range(args.warmup + args.frames):
        t = k / rate
        true = positions(t)
        spent = dict.fromkeys(STAGES, 0.0)
        a = clock()
        source.observe(t, markers=dict(zip(names, true)))
        b = clock()
        frames = list(source.poll(t))
        spent["observe"], spent["poll"] = b - a, clock() - b
        for frame in frames:
            a = clock()
            if rigid is not None:
                frame = rigid.solve(frame)
            b = clock()
            estimate = pipeline.process(frame)
            c = clock()
            estimate_messages(estimate, "base_link")
            d = clock()
            spent["rigid_bodies"] += b - a
            spent["pipeline"] += c - b
            spent["messages"] += d - c
            if k >= args.warmup:
                delivered += 1
                bodies_solved += len(estimate.frame.bodies)
        if k >= args.warmup:
            for stage in STAGES:
                times[stage].append(spent[stage])
            totals.append(sum(spent.values()))
    total = _stats_us(totals)
    res = {
        "graph": args.graph, "source_config": params["source_config"], "rate_hz": rate,
        "markers": len(names), "rigid_bodies": len(groups or {}), "frames": args.frames,
        "frames_delivered": delivered,
        "bodies_per_frame": bodies_solved / max(delivered, 1),
        **{f"{stage}_median_us": _stats_us(times[stage])["median_us"] for stage in STAGES},
        "frame_median_us": total["median_us"], "frame_p99_us": total["p99_us"],
        "frame_mean_us": total["mean_us"],
        "cpu_fraction_at_rate": total["mean_us"] * 1e-6 * rate,
    }
    for key, value in res.items():
        print(f"{key:>22}: {value:.3f}" if isinstance(value, float) else f"{key:>22}: {value}")
    if args.json:
        print(finite_json.dumps(res))
    return 0
