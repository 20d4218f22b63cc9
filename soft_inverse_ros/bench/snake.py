"""``soft-inverse-ros bench snake``: time to step N soft snakes together (paper Table II).

The N snakes (:class:`~soft_inverse_ros.core.snake.snake.Snake` with ``n_snakes = N``) form
one block-diagonal system: one FEM kernel call over all elements, one spring and contact
evaluation, and one linear solve per Newton iteration. ``--solver minres`` (default) is the paper's fixed
cost: 4 Newton iterations × 20 Jacobi-preconditioned MINRES iterations (scipy's
conjugate-residual-type Krylov solver) per frame of dt = 5 ms (one substep, not the paper's
2); ``--solver direct``: 2 Newton iterations × a SuperLU solve. ``--dt`` and ``--newton``
time other settings, e.g. the live plant's (``--dt 0.01 --newton 2``). The snakes run the eq. 9 gait's pressures (no valve model:
the solver's cost does not depend on it). One BLAS thread, CPU. Wall and CPU time per
frame are both reported (on a shared machine the wall time includes waiting for a core).
"""

from __future__ import annotations

import argparse
import time

from soft_inverse_ros import finite_json

NAME = "snake"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(NAME, help="time stepping N soft snakes together (Table II)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--snakes", default="1,2,4,7,10", help="comma-separated snake counts (default 1,2,4,7,10)")
    parser.add_argument("--solver", choices=("minres", "direct"), default="minres",
                        help="minres: the paper's fixed cost, 4 Newton x 20 Jacobi-preconditioned MINRES "
                             "(conjugate-residual) iterations; direct: 2 Newton x SuperLU (default minres)")
    parser.add_argument("--frames", type=int, default=40, help="timed frames per count (default 40)")
    parser.add_argument("--dt", type=float, default=0.005,
                        help="time step of one frame [s] (default 0.005; the live plant, config/sim_snake.yaml: 0.01)")
    parser.add_argument("--newton", type=int, default=None,
                        help="Newton iterations per frame (default 4 with minres, 2 with direct; the live plant: 2)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(func=run)


def _counts(text: str) -> list[int]:
    try:
        counts = [int(v) for v in text.split(",")]
    except ValueError:
        raise SystemExit(f"bench {NAME}: --snakes must be comma-separated integers, got {text!r}") from None
    if not counts or min(counts) < 1:
        raise SystemExit(f"bench {NAME}: --snakes must be integers >= 1, got {text!r}")
    return counts


def _time_frames(n: int, frames: int, solver: str, dt: float, newton: int) -> tuple[float, float]:
    """Median wall time and median CPU time (this process) of one frame [s] for n snakes
    (after 3 warm-up frames). On a shared machine the wall time includes waiting for the
    core; the CPU time is what one frame costs one core."""
    import numpy as np

    from soft_inverse_ros.core.snake.gait import Gait
    from soft_inverse_ros.core.snake.snake import Snake, SnakeParams

    snake = Snake(SnakeParams(n_snakes=n, linear_solver=solver, newton_iterations=newton, dt=dt))
    gait = Gait(1.0, np.pi / 2, 0.0, 4e4)
    samples, cpu = [], []
    for _ in range(frames + 3):
        p = gait.pressures(snake.time, 4)
        pressures = np.stack([np.maximum(-p, 0), np.maximum(p, 0)], 1)
        t0, c0 = time.perf_counter(), time.process_time()
        snake.step(np.broadcast_to(pressures, (n, 4, 2)))
        samples.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(samples[3:])), float(np.median(cpu[3:]))


def run(args: argparse.Namespace) -> int:
    import os

    from soft_inverse_ros.bench._threads import limit_threads

    counts = _counts(args.snakes)
    if args.frames < 1:
        raise SystemExit(f"bench {NAME}: --frames must be >= 1")
    newton = args.newton if args.newton is not None else (4 if args.solver == "minres" else 2)
    if not (0 < args.dt <= 0.05) or newton < 1:
        raise SystemExit(f"bench {NAME}: need 0 < --dt <= 0.05 s and --newton >= 1")
    limiter = limit_threads()  # noqa: F841  (one BLAS thread while timing)
    dt = args.dt
    rows = []
    for n in counts:
        frame, cpu = _time_frames(n, args.frames, args.solver, dt, newton)
        rows.append({"snakes": n, "time_per_frame_ms": 1e3 * frame, "time_per_snake_ms": 1e3 * frame / n,
                     "cpu_per_frame_ms": 1e3 * cpu, "cpu_per_snake_ms": 1e3 * cpu / n})
        if not args.json:
            print(f"N={n:3d}  frame {1e3 * frame:8.2f} ms  per snake {1e3 * frame / n:7.2f} ms  "
                  f"(CPU {1e3 * cpu:8.2f} ms, per snake {1e3 * cpu / n:7.2f} ms)", flush=True)
    per = [r["time_per_snake_ms"] for r in rows if r["snakes"] >= 2]
    per_cpu = [r["cpu_per_snake_ms"] for r in rows if r["snakes"] >= 2]
    one = [r for r in rows if r["snakes"] == 1]
    result = {"rows": rows, "dt_s": dt, "solver": args.solver, "newton_iterations": newton,
              "time_per_snake_spread": max(per) / min(per) if per else None,
              "cpu_per_snake_spread": max(per_cpu) / min(per_cpu) if per_cpu else None,
              "real_time_factor_one_snake": dt / (one[0]["time_per_frame_ms"] * 1e-3) if one else None,
              "cpu_real_time_factor_one_snake": dt / (one[0]["cpu_per_frame_ms"] * 1e-3) if one else None,
              "load_average": list(os.getloadavg())}
    if args.json:
        print(finite_json.dumps(result))
    else:
        print(f"spread {result['time_per_snake_spread']} (CPU {result['cpu_per_snake_spread']}), RTF one snake "
              f"{result['real_time_factor_one_snake']} (CPU {result['cpu_real_time_factor_one_snake']})")
    return 0
