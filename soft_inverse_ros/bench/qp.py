"""``soft-inverse-ros bench qp``: per-tick time of the inverse QP for every backend.

For n_a ∈ {4, 8, 16} actuators × n_e ∈ {3, 6, 9} effector rows and each backend, a
synthetic robot (random SPD stiffness, testing/synthetic_compliance.py) is driven along a
target trajectory (a circle around the rest position, part of it outside the workspace,
so bounds do become active); a new snapshot (stiffness drifting by ~0.5 %) arrives every
``--ticks-per-snapshot`` ticks, as from the low-rate FEM loop. Timed: the whole
``InverseSolver.solve()`` call (µs wall-clock median / p99 / max, and the p99 of the
thread's CPU time, which a busy shared machine does not inflate) and ``set_snapshot()``
(median).
Every backend sees the same sequence; ``max_rel_diff`` is the largest
‖λ − λ_quadprog‖/‖λ_quadprog‖ over the ticks (quadprog = the reference active-set solver).

The floor: for the default case (daqp, 4 actuators × 3 effector rows) the very QPs the
solver handed DAQP are recorded in an untimed replay and each is timed with one bare
``daqp.solve`` call (daqp's own Python call: argument conversion, then set-up and solve
in C from a cold start, with the solver's settings), in the same run, back to back
and interleaved with the same snapshot arrivals as the ticks (see :func:`_bare_daqp`);
the summary gives the whole tick over each (target ≤ 2×). Those cases run seconds apart, so
the ticks are then replayed once more, each followed by the bare solve of its own QP
(alternating: a spell of the shared host slows both alike); that ratio is the one measured in
the same seconds. The ``daqp`` rows time the
solver as shipped: with numba and the verified daqp release, one compiled call into
DAQP's C solver (core/control/daqp_direct.py; ``qp_call`` says which path ran;
``SOFT_INVERSE_ROS_DAQP_DIRECT=off`` times daqp's Python interface instead).

With ``--json`` the last line is one JSON object with every case,
``default_4x3_p99_us`` (default backend, 4 actuators, 3 effector rows),
``bare_daqp_4x3_p99_us``/``_median_us`` (back to back), ``default_4x3_p99_over_bare``,
``bare_daqp_4x3_interleaved_p99_us``/``_median_us``, ``default_4x3_p99_over_interleaved_bare``,
``default_4x3_alternating_p99_us``/``_median_us``, ``bare_daqp_4x3_alternating_p99_us``/``_median_us``,
``default_4x3_p99_over_alternating_bare`` and ``qp_call``.
"""

from __future__ import annotations

import argparse
import platform
import time

from soft_inverse_ros import finite_json
from soft_inverse_ros.cli_values import count

CASES_A = (4, 8, 16)
CASES_E = (3, 6, 9)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("qp", help="inverse QP solve time per backend", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--ticks", type=count, default=4000, help="timed solves per case (default 4000)")
    parser.add_argument("--ticks-per-snapshot", type=count, default=20, help="ticks between snapshots")
    parser.add_argument("--epsilon", type=float, default=None, help="energy regularization (default: config default)")
    parser.add_argument(
        "--kinds", choices=("cable", "mixed"), default="cable", help="all cables, or cables and cavities alternating"
    )
    parser.add_argument("--no-step-limits", action="store_true", help="without per-tick variation limits")
    parser.add_argument("--osqp-eps", type=float, default=None, help="OSQP eps_abs = eps_rel (default: config default)")
    parser.add_argument("--osqp-no-polish", action="store_true", help="OSQP without solution polishing")
    parser.add_argument("--backends", default="daqp,osqp,quadprog", help="comma-separated backends")
    parser.add_argument("--seed", type=int, default=7)
    parser.set_defaults(func=run)


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


class _Scenario:
    """One case's problem sequence: a synthetic robot, its limits, the targets and the
    stiffness drift of the snapshots (the same for every backend and the bare solver)."""

    def __init__(self, n_a: int, n_e: int, args: argparse.Namespace) -> None:
        import numpy as np

        from soft_inverse_ros.core.model.snapshot import ActuatorKind
        from soft_inverse_ros.testing.synthetic_compliance import make_synthetic_robot

        rng = np.random.default_rng(args.seed + 100 * n_a + n_e)
        kinds = None
        if args.kinds == "mixed":
            kinds = [ActuatorKind.CABLE if i % 2 == 0 else ActuatorKind.PRESSURE for i in range(n_a)]
        self.robot = make_synthetic_robot(n_a, n_e, kinds=kinds, rng=rng)
        base = self.robot.limits()
        if args.no_step_limits:
            self.limits = base
        else:
            self.limits = self.robot.limits(
                max_effort_step=0.05 * base.effort_max, max_stroke_step=0.05 * base.stroke_max
            )
        # reachable scale: effector motion of all actuators at half effort
        self.snap0 = self.robot.snapshot()
        reach = float(np.abs(self.snap0.w_ea @ (0.5 * base.effort_max)).max())
        centre = self.snap0.effector_position + self.snap0.w_ea @ (0.3 * base.effort_max)
        phase = np.linspace(0.0, 4.0 * np.pi, args.ticks)
        dirs = rng.standard_normal((2, n_e))
        dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
        self.targets = centre + 1.5 * reach * (np.outer(np.cos(phase), dirs[0]) + np.outer(np.sin(phase), dirs[1]))
        self.stiffening = 1.0 + 0.005 * np.sin(np.arange(args.ticks // args.ticks_per_snapshot + 2))
        self.every = args.ticks_per_snapshot

    def solver(self, backend: str, args: argparse.Namespace):
        from soft_inverse_ros.core.control.inverse_qp import InverseSolver, InverseSolverConfig

        cfg: dict = {"backend": backend}
        if args.epsilon is not None:
            cfg["epsilon"] = args.epsilon
        if args.osqp_eps is not None:
            cfg["osqp_eps_abs"] = cfg["osqp_eps_rel"] = args.osqp_eps
        if args.osqp_no_polish:
            cfg["osqp_polish"] = False
        solver = InverseSolver(InverseSolverConfig(**cfg), self.limits)
        # warm-up (imports, kernel compilation, first setup) outside the timed loop
        solver.set_snapshot(self.snap0)
        solver.solve(self.targets[0])
        solver.reset()
        return solver

    def snapshot(self, tick: int, solver):
        """The snapshot that arrives before ``tick`` (None between snapshots), linearized
        at the solver's last command."""
        if tick % self.every:
            return None
        return self.snapshot_at(tick, solver.last_command.efforts if solver.last_command else None)

    def snapshot_at(self, tick: int, efforts):
        """The snapshot of ``tick`` (a multiple of ``every``) linearized at ``efforts``."""
        k = tick // self.every
        return self.robot.stiffened(self.stiffening[k]).snapshot(efforts, seq=k, stamp=0.02 * k)


def _case(backend: str, scenario: _Scenario, args: argparse.Namespace) -> dict:
    import numpy as np

    solver = scenario.solver(backend, args)
    n_ticks = args.ticks
    solve_ns = np.empty(n_ticks)
    cpu_ns = np.empty(n_ticks)
    snapshot_ns = []
    efforts = np.empty((n_ticks, scenario.limits.n_actuators))
    statuses: dict[str, int] = {}
    iterations = 0
    for tick in range(n_ticks):
        snap = scenario.snapshot(tick, solver)
        if snap is not None:
            t0 = time.perf_counter_ns()
            solver.set_snapshot(snap)
            snapshot_ns.append(time.perf_counter_ns() - t0)
        c0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        res = solver.solve(scenario.targets[tick])
        solve_ns[tick] = time.perf_counter_ns() - t0
        cpu_ns[tick] = time.thread_time_ns() - c0
        efforts[tick] = res.efforts
        statuses[res.status.name] = statuses.get(res.status.name, 0) + 1
        iterations += res.iterations
    us = solve_ns / 1e3
    cpu_us = cpu_ns / 1e3
    first = np.arange(n_ticks) % scenario.every == 0
    return {
        "backend": backend,
        "n_a": scenario.limits.n_actuators,
        "n_e": scenario.targets.shape[1],
        "median_us": float(np.median(us)),
        "p99_us": float(np.percentile(us, 99)),
        "max_us": float(us.max()),
        "cpu_median_us": float(np.median(cpu_us)),
        "cpu_p99_us": float(np.percentile(cpu_us, 99)),
        "set_snapshot_median_us": float(np.median(snapshot_ns) / 1e3),
        # the first tick on each new snapshot (its kernel warmed by set_snapshot) and the others
        "first_tick_median_us": float(np.median(us[first])) if first.any() else None,
        "first_tick_p99_us": float(np.percentile(us[first], 99)) if first.any() else None,
        "other_ticks_p99_us": float(np.percentile(us[~first], 99)) if (~first).any() else None,
        "mean_iterations": iterations / n_ticks,
        "statuses": statuses,
        "qp_call": solver.qp_call,
        "_efforts": efforts,
    }


def _bare_daqp(scenario: _Scenario, args: argparse.Namespace) -> dict:
    """``daqp.solve`` alone (daqp's own Python call; set-up and solve from a cold start,
    with the solver's tolerance, iteration cap and no proximal iterations) on the very QPs
    the solver handed DAQP in :func:`_case`: the reference the tick is measured against.
    The tick warm-starts from the last tick's working set (``mean_iterations``), the bare
    call does not (``mean_iterations`` in the result): at 4 × 3 that is ~1 against ~6
    active-set iterations, ~1 µs of C time.

    The problems are recorded in an untimed replay of the same sequence, then each is
    timed with one ``daqp.solve(H, f, A, bupper, blower, sense)`` call, twice:

    - back to back (``tight``): the solver's code and data stay in the CPU caches;
    - ``interleaved`` with the snapshots as the ticks in :func:`_case` are: where a
      snapshot arrived there, the same snapshot is built and handed to a solver (untimed)
      before the timed solve. A tick right after a snapshot runs with caches the
      snapshot's numpy work has evicted (~2× the time of the next ticks here before
      ``set_snapshot`` warmed the new kernel, ~1.5× since: the case's
      ``first_tick_median_us`` / ``first_tick_p99_us`` against ``other_ticks_p99_us``),
      and those ticks weigh on the ticks' p99 (5 % of them with a snapshot every 20);
      this is the bare solve under the same conditions.
    """
    import daqp
    import numpy as np

    from soft_inverse_ros.core.control.qp_backends import DaqpBackend

    solver = scenario.solver("daqp", args)
    backend = solver._backend  # noqa: SLF001 - the bench records what the solver hands DAQP
    problems: dict[int, tuple] = {}
    solve = backend.solve
    tick = 0

    def recording_solve(g, lower, upper):  # the Python-interface path
        h, a = backend._data  # noqa: SLF001
        problems[tick] = (h, g.copy(), a, upper.copy(), lower.copy())
        return solve(g, lower, upper)

    backend.solve = recording_solve
    linearized_at = {}  # the efforts each snapshot was linearized at
    for tick in range(args.ticks):
        snap = scenario.snapshot(tick, solver)
        if snap is not None:
            linearized_at[tick] = snap.lambda0
            solver.set_snapshot(snap)
        direct = solver._prep.direct  # noqa: SLF001 - the compiled path (daqp_direct.py)
        calls = 0 if direct is None else direct.qp_calls
        solver.solve(scenario.targets[tick])
        if direct is not None and direct.qp_calls > calls:
            problems[tick] = direct.last_problem()
    backend.solve = solve
    first = next(iter(problems.values()))
    sense = np.zeros(first[3].shape[0], dtype=np.int32)
    settings = DaqpBackend.daqp_settings(solver.config.backend_settings())  # as the solver sets them
    daqp.solve(*first, sense, **settings)  # warm-up
    tight = np.empty(len(problems))
    bare_iterations = 0
    for i, (h, f, a, bu, bl) in enumerate(problems.values()):
        t0 = time.perf_counter_ns()
        info = daqp.solve(h, f, a, bu, bl, sense, **settings)[3]
        tight[i] = time.perf_counter_ns() - t0
        bare_iterations += info["iterations"]
    receiver = scenario.solver("daqp", args)  # takes the same snapshots as the timed ticks' solver
    interleaved = []
    for tick in range(args.ticks):
        if tick in linearized_at:
            receiver.set_snapshot(scenario.snapshot_at(tick, linearized_at[tick]))
        problem = problems.get(tick)
        if problem is not None:
            t0 = time.perf_counter_ns()
            daqp.solve(*problem, sense, **settings)
            interleaved.append(time.perf_counter_ns() - t0)
    # the ticks again, each followed by the bare solve of its own QP: the cases above run
    # seconds apart, and a spell of the shared host between them moved their ratio (2.5× in one
    # run of nine, 0.96–1.66× in the others); alternating, a spell slows both alike
    replay = scenario.solver("daqp", args)
    tick_ns, alternating_ns = [], []
    for tick in range(args.ticks):
        snap = scenario.snapshot(tick, replay)
        if snap is not None:
            replay.set_snapshot(snap)
        t0 = time.perf_counter_ns()
        replay.solve(scenario.targets[tick])
        tick_ns.append(time.perf_counter_ns() - t0)
        problem = problems.get(tick)
        if problem is not None:
            t0 = time.perf_counter_ns()
            daqp.solve(*problem, sense, **settings)
            alternating_ns.append(time.perf_counter_ns() - t0)
    tight_us, interleaved_us = tight / 1e3, np.array(interleaved) / 1e3
    tick_us, alternating_us = np.array(tick_ns) / 1e3, np.array(alternating_ns) / 1e3
    return {"median_us": float(np.median(tight_us)), "p99_us": float(np.percentile(tight_us, 99)),
            "interleaved_median_us": float(np.median(interleaved_us)),
            "interleaved_p99_us": float(np.percentile(interleaved_us, 99)), "n": len(problems),
            "alternating_tick_median_us": float(np.median(tick_us)),
            "alternating_tick_p99_us": float(np.percentile(tick_us, 99)),
            "alternating_median_us": float(np.median(alternating_us)),
            "alternating_p99_us": float(np.percentile(alternating_us, 99)),
            "mean_iterations": bare_iterations / len(problems)}


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from soft_inverse_ros.core.control.inverse_qp import DEFAULT_BACKEND

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    load_start = _loadavg()
    results = []
    bare = None
    print(
        f"inverse QP, {args.ticks} ticks/case, snapshot every {args.ticks_per_snapshot} ticks, "
        f"kinds={args.kinds}, step limits={'off' if args.no_step_limits else 'on'}, "
        f"epsilon={'default' if args.epsilon is None else args.epsilon}"
    )
    print(f"load average at start: {_loadavg()}")
    print(f"{'backend':9s} {'n_a':>3s} {'n_e':>3s} {'median µs':>10s} {'p99 µs':>9s} {'max µs':>9s} "
          f"{'cpu p99':>8s} {'snap µs':>8s} {'iters':>6s} {'rel diff':>9s}  statuses")
    for n_a in CASES_A:
        for n_e in CASES_E:
            scenario = _Scenario(n_a, n_e, args)
            case = {b: _case(b, scenario, args) for b in backends}
            if n_a == 4 and n_e == 3 and DEFAULT_BACKEND == "daqp" and "daqp" in backends:
                bare = _bare_daqp(scenario, args)
            efforts = {b: case[b].pop("_efforts") for b in backends}
            ref = efforts.get("quadprog")
            for b in backends:
                r = case[b]
                if ref is not None:
                    scale = np.maximum(np.linalg.norm(ref, axis=1), 1e-300)
                    r["max_rel_diff"] = float((np.linalg.norm(efforts[b] - ref, axis=1) / scale).max())
                results.append(r)
                diff = f"{r['max_rel_diff']:9.1e}" if "max_rel_diff" in r else f"{'-':>9s}"
                print(
                    f"{b:9s} {n_a:3d} {n_e:3d} {r['median_us']:10.1f} {r['p99_us']:9.1f} {r['max_us']:9.0f} "
                    f"{r['cpu_p99_us']:8.1f} {r['set_snapshot_median_us']:8.0f} {r['mean_iterations']:6.1f} {diff}  {r['statuses']}"
                )
    default = next(
        (r for r in results if r["backend"] == DEFAULT_BACKEND and r["n_a"] == 4 and r["n_e"] == 3), None
    )
    summary = {
        "bench": "qp",
        "python": platform.python_version(),
        "ticks": args.ticks,
        "kinds": args.kinds,
        "step_limits": not args.no_step_limits,
        "epsilon": args.epsilon,
        "osqp_eps": args.osqp_eps,
        "osqp_polish": not args.osqp_no_polish,
        "default_backend": DEFAULT_BACKEND,
        "default_4x3_p99_us": None if default is None else default["p99_us"],
        "default_4x3_median_us": None if default is None else default["median_us"],
        "default_4x3_cpu_p99_us": None if default is None else default["cpu_p99_us"],
        "bare_daqp_4x3_p99_us": None if bare is None else bare["p99_us"],
        "bare_daqp_4x3_median_us": None if bare is None else bare["median_us"],
        "default_4x3_p99_over_bare": None if bare is None or default is None else default["p99_us"] / bare["p99_us"],
        "default_4x3_median_over_bare": (
            None if bare is None or default is None else default["median_us"] / bare["median_us"]
        ),
        "bare_daqp_4x3_interleaved_p99_us": None if bare is None else bare["interleaved_p99_us"],
        "bare_daqp_4x3_interleaved_median_us": None if bare is None else bare["interleaved_median_us"],
        "default_4x3_p99_over_interleaved_bare": (
            None if bare is None or default is None else default["p99_us"] / bare["interleaved_p99_us"]
        ),
        "default_4x3_median_over_interleaved_bare": (
            None if bare is None or default is None else default["median_us"] / bare["interleaved_median_us"]
        ),
        # the same ticks, each followed by its bare solve (the same seconds of the host)
        "default_4x3_alternating_p99_us": None if bare is None else bare["alternating_tick_p99_us"],
        "default_4x3_alternating_median_us": None if bare is None else bare["alternating_tick_median_us"],
        "bare_daqp_4x3_alternating_p99_us": None if bare is None else bare["alternating_p99_us"],
        "bare_daqp_4x3_alternating_median_us": None if bare is None else bare["alternating_median_us"],
        "default_4x3_p99_over_alternating_bare": (
            None if bare is None else bare["alternating_tick_p99_us"] / bare["alternating_p99_us"]),
        "default_4x3_median_over_alternating_bare": (
            None if bare is None else bare["alternating_tick_median_us"] / bare["alternating_median_us"]),
        "bare_daqp_4x3_mean_iterations": None if bare is None else bare["mean_iterations"],
        "default_4x3_mean_iterations": None if default is None else default["mean_iterations"],
        "qp_call": None if default is None else default["qp_call"],
        "loadavg_start": load_start,
        "loadavg_end": _loadavg(),
        "cases": results,
    }
    if default is not None:
        print(
            f"default backend {DEFAULT_BACKEND} at 4x3: p99 {default['p99_us']:.1f} µs wall, "
            f"{default['cpu_p99_us']:.1f} µs CPU (target ≤ 50 µs); load average at end {_loadavg()}"
        )
        if default["first_tick_median_us"] is not None:
            print(f"  the first tick on each snapshot: median {default['first_tick_median_us']:.1f} µs, p99 "
                  f"{default['first_tick_p99_us']:.1f} µs; the other ticks: p99 {default['other_ticks_p99_us']:.1f} µs")
    if bare is not None and default is not None:
        print(
            f"bare daqp.solve on the same {bare['n']} QPs, same run: median {bare['median_us']:.1f} µs, "
            f"p99 {bare['p99_us']:.1f} µs; the whole tick / bare: median "
            f"{default['median_us'] / bare['median_us']:.2f}×, p99 {default['p99_us'] / bare['p99_us']:.2f}× "
            "(target ≤ 2×)"
        )
        print(
            f"the same bare solves interleaved with the snapshots as the ticks are: median "
            f"{bare['interleaved_median_us']:.1f} µs, p99 {bare['interleaved_p99_us']:.1f} µs; the whole tick / "
            f"interleaved bare: median {default['median_us'] / bare['interleaved_median_us']:.2f}×, p99 "
            f"{default['p99_us'] / bare['interleaved_p99_us']:.2f}×"
        )
        print(
            f"the ticks again, each followed by its bare solve (alternating: the same seconds of the "
            f"host): tick median {bare['alternating_tick_median_us']:.1f} µs, p99 "
            f"{bare['alternating_tick_p99_us']:.1f} µs; bare median {bare['alternating_median_us']:.1f} µs, "
            f"p99 {bare['alternating_p99_us']:.1f} µs; tick / bare: median "
            f"{bare['alternating_tick_median_us'] / bare['alternating_median_us']:.2f}×, p99 "
            f"{bare['alternating_tick_p99_us'] / bare['alternating_p99_us']:.2f}× (target ≤ 2×)"
        )
        print(f"active-set iterations per solve: tick {default['mean_iterations']:.1f} (warm-started), "
              f"bare {bare['mean_iterations']:.1f} (cold); the ticks' QP call: {default['qp_call']}")
    if args.json:
        _flush_c_stdio()  # backend messages printed by C must not come after the JSON line
        print(finite_json.dumps(summary), flush=True)
    return 0


def _flush_c_stdio() -> None:
    import ctypes
    import sys

    sys.stdout.flush()
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass
