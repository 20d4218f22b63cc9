"""Validation experiments, run as a deterministic offline co-simulation in simulated time.

:mod:`~soft_inverse_ros.experiments.cosim` is the co-simulation loop (FEM model, inverse
QP, servos, plant, mocap, feedback on one simulated clock); each experiment module
(:data:`EXPERIMENTS`) defines ``register(subparsers)`` for
``soft-inverse-ros experiment NAME``. This package file only holds the light helpers the
command line needs (no numpy at import time, so ``--help`` stays fast).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from soft_inverse_ros import finite_json
from soft_inverse_ros.cli_values import positive

#: Experiment name → module of this package.
EXPERIMENTS = {
    "async-vs-sync": "async_vs_sync",
    "qp-variation": "qp_variation",
    "closed-loop": "closed_loop",
    "plant-mismatch": "plant_mismatch",
    "plant-reach": "plant_reach",
    "distributed": "distributed",
    "self-collision": "self_collision",
    "reduced-contact": "reduced_contact",
    "inverse-contact": "inverse_contact",
    "snake-link": "snake_link",
    "snake-gait": "snake_gait",
    "hybrid-alignment": "hybrid_alignment",
}

_STARTED = time.perf_counter()


def common_arguments(parser: argparse.ArgumentParser, *, quick: bool = True, fem: bool = True) -> None:
    """Options the experiments take: ``--json``, ``--out``; ``quick``: ``--quick``; ``fem``:
    ``--fem-compute-time`` and ``--fem-period`` (an experiment without a live FEM loop does
    not offer options it would ignore)."""
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--out", type=Path, default=None,
                        help="write NAME.json and the figures into this folder")
    if quick:
        parser.add_argument("--quick", action="store_true", help="small sizes (seconds, for tests)")
    if not fem:
        return
    parser.add_argument("--fem-compute-time", default="period",
                        help="latency from a FEM state to its snapshot being usable [s], or 'period' "
                             "(one FEM period: the live graph's state-to-snapshot delay at 30 Hz is "
                             "12-44 ms on 2 cores, BENCHMARKS.md) or 'measured' (median thread CPU "
                             "time of an update on an idle core, rounded to 1 ms) (default: period)")
    parser.add_argument("--fem-period", type=positive, default=1.0 / 30.0,
                        help="FEM timer period [s] (default 1/30: fem_node rate_hz 30 of config/sim.yaml)")


def resolve_compute_time(controller, value: str, fem_period: float | None = None) -> tuple[float, bool]:
    """(FEM compute time [s], measured?) from ``--fem-compute-time``: a number, ``period``
    (``fem_period``: what the live graph's snapshots lag by), or ``measured``: the median
    thread CPU time of ``model.update`` here, rounded to 1 ms."""
    if str(value).strip().lower() == "period":
        if fem_period is None or not fem_period > 0:
            raise SystemExit("--fem-compute-time period needs a FEM period > 0")
        return float(fem_period), False
    if str(value).strip().lower() == "measured":
        cpu, _wall = controller.measure_update_time()
        return round(cpu, 3), True
    try:
        seconds = float(value)
    except ValueError:
        raise SystemExit(f"--fem-compute-time must be 'period', 'measured' or seconds, got {value!r}") from None
    if not seconds >= 0:
        raise SystemExit(f"--fem-compute-time must be >= 0 s, got {value!r}")
    return seconds, False


def parse_speeds(text: str | None, default_mm_s=None) -> list[float]:
    """Speeds [m/s] from a comma-separated list in mm/s (default: the paper's speeds)."""
    from soft_inverse_ros.experiments.setups import PAPER_SPEEDS

    if text is None:
        return [v / 1e3 for v in default_mm_s] if default_mm_s else list(PAPER_SPEEDS)
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"--speeds must be comma-separated numbers in mm/s, got {text!r}") from None
    if not values or any(not v > 0 for v in values):
        raise SystemExit(f"--speeds must be positive mm/s values, got {text!r}")
    return [v / 1e3 for v in values]


def limit_threads() -> None:
    """One BLAS/OpenMP thread and one contact-detection thread (ipctk, TBB), as ``bench fem``:
    the FEM loop is single-threaded."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "SOFT_INVERSE_ROS_CONTACT_THREADS"):
        os.environ.setdefault(var, "1")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(1)


def emit(result: dict, args: argparse.Namespace, name: str) -> None:
    """Add run facts, write ``--out/NAME.json`` and print the JSON line with ``--json``."""
    result = dict(result)
    result["wall_time_s"] = time.perf_counter() - _STARTED
    try:
        result["load_average"] = list(os.getloadavg())
    except OSError:
        pass
    text = finite_json.dumps(result)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{name}.json").write_text(finite_json.dumps(json.loads(text), indent=1) + "\n")
    if args.json:
        print(text, flush=True)


