"""``soft-inverse-ros bench fem``: the low-rate FEM loop on one thread.

Times, on a robot (default ``builtin_diamond``; ``--robot diamond`` is SOFA's real Diamond
and needs ../shared), a description file, or a generated cantilever box of about
``--nodes`` nodes with four cables:

- element state (rotations by polar decomposition, internal forces),
- stiffness assembly (element blocks + scatter into the fixed CSR pattern),
- a numeric factorization and a block solve of the constraint columns (direct solver),
- the whole low-rate update (one Newton step + compliance, factor reuse + PCG),

under a smooth effort trajectory sampled at 100 Hz, and checks the updates' W against an
exact factorization at the same state. ``--reduced`` times the reduced-order model instead
(``reduce-model``; trained here, or loaded with ``--reduction``): its parts, its updates,
W against an exact factorization of the full model at the reduced state, and the effector
of its equilibrium against the full model's. Medians and p95 in ms; with ``--json`` the last
output line is one JSON object (``update_hz`` is based on the median update time).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from soft_inverse_ros import finite_json
from soft_inverse_ros.bench._threads import limit_threads

if TYPE_CHECKING:
    import numpy as np


#: the full model's PCG tolerances when --pcg-rtol / --w-rtol are not given
PCG_RTOL = 1e-7
W_RTOL = 1e-8


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fem", help="time the co-rotational FEM low-rate update (one thread)", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--robot", default=None,
                     help="robot name in config/robots or description YAML (default builtin_diamond)")
    src.add_argument("--nodes", type=int, default=None,
                     help="generated cantilever box mesh of about N nodes instead of a robot")
    parser.add_argument("--mesh", type=Path, default=None, help="mesh file overriding the robot's")
    parser.add_argument("--repeat", type=int, default=200, help="timed low-rate updates (default 200)")
    parser.add_argument("--solver", default="auto",
                        help="direct solver: auto (by size and what is installed), block_ldl, cholmod, "
                             "pardiso, qdldl, superlu_nd, scipy")
    parser.add_argument("--pcg-rtol", type=float, default=None,
                        help="PCG relative residual tolerance of columns judged by their residual "
                             f"(the Newton direction's floor, contact columns; default {PCG_RTOL:g}; "
                             "the full model only)")
    parser.add_argument("--w-rtol", type=float, default=None,
                        help="bound on W's relative error for the compliance columns solved by PCG "
                             f"(their energy-norm stopping test; default {W_RTOL:g}; the full model only)")
    parser.add_argument("--no-reuse", action="store_true",
                        help="refactorize at every update (no PCG; the full model only)")
    parser.add_argument("--reduced", action="store_true",
                        help="train a reduced-order model on the full one (core/model/reduced_model.py) "
                             "and time its updates instead; W is checked against an exact solve of "
                             "the full model and the effector against the full model's equilibrium")
    parser.add_argument("--reduction", type=Path, default=None,
                        help="with --reduced: load this reduction (reduce-model's output) instead of training one")
    parser.add_argument("--samples", type=int, default=None,
                        help="with --reduced: training equilibria (default: reduce-model's)")
    parser.add_argument("--mode-tolerance", type=float, default=None,
                        help="with --reduced: energy left outside the basis per training snapshot "
                             "(default: reduce-model's)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(func=run)


def box_robot(n_nodes: int, *, young_modulus: float = 180e3):
    """A cantilever box robot (description, mesh) of about ``n_nodes`` nodes.

    Box 0.2 × 0.05 × 0.05 m (x × y × z), clamped at x = 0, four cables running along x near
    the edges (pulled from the clamped face) and a tip effector at the free end's centre.
    Material: silicone-like (E 180 kPa, ν 0.45, 1070 kg/m³), gravity −z.
    """
    import numpy as np

    from soft_inverse_ros.core.model.description import (
        Box,
        CableSpec,
        EffectorSpec,
        FixedSpec,
        Material,
        MeshSpec,
        RobotDescription,
    )
    from soft_inverse_ros.core.model.mesh_generation import box_mesh

    if n_nodes < 50:
        raise ValueError("--nodes must be at least 50")
    k = max(1, round((n_nodes / 4.0) ** (1.0 / 3.0)))
    best = min(range(max(1, k - 2), k + 3), key=lambda d: abs((4 * d + 1) * (d + 1) ** 2 - n_nodes))
    size = (0.2, 0.05, 0.05)
    mesh = box_mesh(size, (4 * best, best, best))
    cables = []
    for name, (y, z) in {"c_yp_zp": (0.04, 0.04), "c_ym_zp": (0.01, 0.04),
                         "c_ym_zm": (0.01, 0.01), "c_yp_zm": (0.04, 0.01)}.items():
        pts = np.array([[x, y, z] for x in (0.05, 0.1, 0.15, 0.195)])
        cables.append(CableSpec(name=name, points=pts, pull_point=np.array([0.0, y, z]),
                                min_force=0.0, max_force=2.0, max_stroke=0.03))
    desc = RobotDescription(
        name=f"box_{mesh.n_points}",
        source=None,
        mesh=MeshSpec(file=Path("<generated box>")),
        material=Material(young_modulus=young_modulus, poisson_ratio=0.45, density=1070.0),
        gravity=np.array([0.0, 0.0, -9.81]),
        fixed=FixedSpec(boxes=(Box(np.array([-1e-3, -1.0, -1.0]), np.array([1e-3, 1.0, 1.0])),)),
        actuators=tuple(cables),
        effectors=(EffectorSpec(name="tip", points=np.array([[0.195, 0.025, 0.025]])),),
    )
    return desc, mesh


def _stats(samples) -> dict:
    import numpy as np

    a = np.asarray(samples, dtype=float) * 1e3
    return {"median_ms": float(np.median(a)), "p95_ms": float(np.percentile(a, 95)),
            "n": int(a.size)}


def _time(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _load_robot(args: argparse.Namespace, command: str = "bench fem"):
    """The robot's (description, mesh) from the CLI options; None (error printed, prefixed
    with ``command``) if unloadable."""
    from soft_inverse_ros.core.model.description import load_robot_description

    if args.nodes is not None and args.mesh is not None:
        print(f"{command}: --mesh replaces a robot's mesh; the generated box (--nodes) has its own, "
              "and its cables and effector are placed for it", file=sys.stderr)
        return None
    try:
        if args.nodes is not None:
            desc, mesh = box_robot(args.nodes)
        else:  # --mesh: read as the description's own (unit, transform, on_inverted, checks)
            desc = load_robot_description(args.robot or "builtin_diamond",
                                          mesh_override=None if args.mesh is None else Path(args.mesh))
            mesh = desc.load_mesh()
    except (OSError, ValueError) as exc:
        hint = ""
        if (args.robot or "").startswith(("diamond", "finger", "springy")):
            hint = " (the SOFA meshes live in ../shared/data/sofa-softrobots or $SOFA_SOFTROBOTS_DATA)"
        print(f"{command}: cannot load the robot: {exc}{hint}", file=sys.stderr)
        return None
    return desc, mesh


def _effort_trajectory(model) -> Callable[[int], np.ndarray]:
    """Smooth effort trajectory sampled at 100 Hz: step index → (n_a,) efforts [N or Pa].

    Each actuator follows ``amp·(1 + sin(2π t / 4 s + phase))/2`` with ``amp`` a quarter of
    its effort limit (1 where unbounded or non-positive) and phases spread over the actuators.
    """
    import numpy as np

    limits = model.actuator_limits()
    amp = np.where(np.isfinite(limits.effort_max), limits.effort_max, 1.0) * 0.25
    amp = np.where(amp > 0, amp, 1.0)
    n_a = model.n_actuators

    def efforts(step: int) -> np.ndarray:
        t = 0.01 * step
        phase = np.arange(n_a) * 2.0 * math.pi / max(n_a, 1)
        return amp * (1.0 + np.sin(2.0 * math.pi * t / 4.0 + phase)) * 0.5

    return efforts


def _time_components(model, solver: str, repeat: int) -> tuple[str, dict]:
    """Time the FEM components at the model's current state, ``repeat`` samples each.

    Returns the direct solver's name and the result entries (``element_state`` …
    ``constraints``; times in ms via :func:`_stats`).
    """
    import numpy as np

    from soft_inverse_ros.core.model.linear_solvers import make_solver

    fem = model.fem
    positions = model.positions.copy()
    state = fem.element_state(positions)
    t_state = _time(lambda: fem.element_state(positions), repeat)
    # numpy reference path of the assembly (values + sparse summation), for comparison
    t_values = _time(lambda: fem.element_values(state.rotated_gradients), repeat)
    values = fem.element_values(state.rotated_gradients).copy()
    t_scatter = _time(lambda: fem.assemble_values(values), repeat)
    t_assembly = _time(lambda: fem.stiffness(state), repeat)
    k = fem.stiffness(state)
    direct = make_solver(solver, size=fem.n_free)
    t0 = time.perf_counter()
    direct.factorize(k)
    t_first_factor = time.perf_counter() - t0
    t_factor = _time(lambda: direct.factorize(k), max(3, repeat // 5))
    _, je_t = model.effectors.values_and_jacobian_t(positions)
    ja_t = model.actuators.jacobian_t(positions)
    rhs = np.hstack((np.zeros((fem.n_free, 1)) + 1.0, ja_t, je_t))
    t_solve = _time(lambda: direct.solve(rhs), repeat)
    t_matvec = _time(lambda: k @ rhs, repeat)
    t_constraints = _time(lambda: (model.actuators.values_and_jacobian_t(positions),
                                   model.effectors.values_and_jacobian_t(positions)), repeat)
    return direct.name, {
        "element_state": _stats(t_state),
        "numpy_element_values": _stats(t_values),
        "numpy_scatter": _stats(t_scatter),
        "assembly": _stats(t_assembly),
        "first_factorization_ms": t_first_factor * 1e3,
        "factorization": _stats(t_factor),
        "block_solve": _stats(t_solve),
        "block_solve_columns": int(rhs.shape[1]),
        "matvec_block": _stats(t_matvec),
        "constraints": _stats(t_constraints),
    }


def _reduce(model, args: argparse.Namespace):
    """(the reduced model, its reduction summary) of ``model`` for ``--reduced``: loaded
    from ``--reduction`` or trained here (progress on stderr); None (error printed) when
    it cannot be."""
    from soft_inverse_ros.core.model.reduced_model import (
        DEFAULT_MODE_TOLERANCE,
        DEFAULT_SAMPLES,
        ReducedRobotModel,
        ReductionError,
        build_model_reduction,
        load_model_reduction,
    )

    t0 = time.perf_counter()
    try:
        if args.reduction is not None:
            reduction = load_model_reduction(args.reduction, model)
        else:
            reduction = build_model_reduction(
                model, samples=DEFAULT_SAMPLES if args.samples is None else args.samples,
                mode_tolerance=DEFAULT_MODE_TOLERANCE if args.mode_tolerance is None else args.mode_tolerance,
                progress=lambda line: print(f"bench fem: reduction: {line}", file=sys.stderr, flush=True))
        reduced = ReducedRobotModel(model, reduction)
    except ReductionError as exc:
        print(f"bench fem: {exc}", file=sys.stderr)
        return None
    summary = {"size": reduction.size, "samples_used": reduction.training.get("samples_used"),
               "mode_tolerance": reduction.training.get("mode_tolerance"),
               "dropped_energy": reduction.training.get("dropped_energy"),
               "build_s": reduction.training.get("build_s"),  # the training's, here or in the file
               "load_s": time.perf_counter() - t0 if args.reduction is not None else None,
               "loaded": args.reduction is not None}
    return reduced, summary


def _time_reduced_components(model, repeat: int) -> dict:
    """Time a reduced model's parts at its current state (ms via :func:`_stats`)."""
    ev = model._ev
    q = model.q
    lam = model.efforts
    t_eval = _time(lambda: model._evaluate(q, lam), repeat)
    t_state = _time(lambda: model._elastic_fem.element_state(ev.positions), repeat)
    t_assembly = _time(lambda: model._assemble(ev), repeat)  # the tangent's own (upper blocks)
    t_tangent = _time(lambda: model._tangent(ev), repeat)
    return {
        "element_state": _stats(t_state),
        "assembly": _stats(t_assembly),
        "reduced_tangent": _stats(t_tangent),
        "reduced_evaluation": _stats(t_eval),
    }


def _w_rel_error(model, positions: np.ndarray, efforts: np.ndarray, snap, solver) -> float:
    """Max abs. error of ``snap``'s W blocks vs an exact factorization (by the direct
    ``solver``) of the full ``model`` at ``positions`` [m] under ``efforts``, relative to the
    largest exact entry (dimensionless)."""
    import numpy as np

    from soft_inverse_ros.core.model.compliance import compute_compliance

    ev = model.statics.evaluate(positions, efforts)
    kk = model.fem.stiffness(ev.state)
    _, je = model.effectors.values_and_jacobian_t(positions)
    exact = compute_compliance(kk, ev.jacobian_t, je, solver)
    num = max(np.abs(snap.w_aa - exact.w_aa).max(), np.abs(snap.w_ea - exact.w_ea).max(),
              np.abs(snap.w_ee - exact.w_ee).max())
    den = max(np.abs(exact.w_aa).max(), np.abs(exact.w_ea).max(), np.abs(exact.w_ee).max())
    return num / den


def _time_updates(model, efforts: Callable[[int], np.ndarray], args: argparse.Namespace,
                  full=None) -> dict:
    """Time ``args.repeat`` low-rate updates (after 5 warm-up ones) and check W ten times.

    ``full``: the full model when ``model`` is its reduction; W is then checked against
    the full model's exact W at the reduced state, and the reduced equilibrium's effector
    against the full model's equilibrium under the same efforts (``effector_vs_full_mm``).
    Returns the result entries ``update`` … ``w_rel_error_median`` (times in ms, rates in Hz).
    """
    import numpy as np

    from soft_inverse_ros.core.model.linear_solvers import make_solver

    exact_model = model if full is None else full
    exact_solver = make_solver(args.solver, size=exact_model.fem.n_free)
    effector_errors = []
    for i in range(5):  # warm-up
        model.update(efforts(i), seq=i, stamp=0.0)
    solver_stats = getattr(getattr(model, "linear_solver", None), "stats", None)
    f0 = solver_stats.factorizations if solver_stats else 0
    t_update, c_update, w_errors, iterations = [], [], [], []
    check_every = max(1, args.repeat // 10)
    for i in range(5, 5 + args.repeat):
        lam = efforts(i)
        check = (i - 5) % check_every == 0
        if check:
            before = model.positions.copy()
        t0 = time.perf_counter()
        c0 = time.thread_time()
        info, snap = model.update(lam, seq=i, stamp=0.01 * i)
        t_update.append(time.perf_counter() - t0)
        c_update.append(time.thread_time() - c0)
        iterations.append(info.solve_iterations)
        if check:
            w_errors.append(_w_rel_error(exact_model, before, lam, snap, exact_solver))
            if full is not None:
                effector_errors.append(_effector_vs_full(model, full, lam))
    refactorizations = (solver_stats.factorizations - f0) if solver_stats else args.repeat
    update = _stats(t_update)
    extra = {}
    if full is not None:
        extra = {"effector_vs_full_mm_max": 1e3 * float(np.max(effector_errors)),
                 "effector_vs_full_mm_median": 1e3 * float(np.median(effector_errors))}
    return {**extra,
        "update": update,
        "update_hz": 1e3 / update["median_ms"],
        "update_hz_p95": 1e3 / update["p95_ms"],
        "update_cpu": _stats(c_update),
        "update_cpu_hz": 1e3 / _stats(c_update)["median_ms"],
        "pcg_iterations_mean": float(np.mean(iterations)),
        "pcg_iterations_max": int(np.max(iterations)),
        "refactorizations": None if full is not None else int(refactorizations),
        "updates": args.repeat,
        "w_rel_error_max": float(np.max(w_errors)),
        "w_rel_error_median": float(np.median(w_errors)),
    }


def _effector_vs_full(reduced, full, efforts: np.ndarray) -> float:
    """Largest effector row difference [m] between the reduced and the full model's
    equilibria under ``efforts`` (each from its own current state); the reduced model's
    state is restored afterwards, the full model stays at its equilibrium."""
    import numpy as np

    saved = (np.array(reduced.positions), reduced.efforts)
    reduced.equilibrate(efforts)
    at_reduced = reduced.effector_position
    reduced.set_state(*saved)
    full.equilibrate(efforts)
    return float(np.abs(at_reduced - full.effector_position).max())


def _report_lines(result: dict) -> list[str]:
    """The human-readable summary of a ``bench fem`` result (times in ms/s, rates in Hz)."""
    lines = [
        f"robot {result['robot']}: {result['nodes']} nodes, {result['tets']} tets, "
        f"{result['free_dofs']} free DOFs, nnz {result['stiffness_nnz']}, {result['actuators']} actuators, "
        f"{result['effector_rows']} effector rows, solver {result['solver']}, "
        f"FEM kernels {result['fem_kernels']}",
        f"build {result['build_s']:.2f} s; equilibrium {result['equilibrium_s']:.2f} s "
        f"({result['equilibrium_newton_iterations']} Newton iterations)",
    ]
    for key in ("element_state", "assembly", "numpy_element_values", "numpy_scatter",
                "factorization", "block_solve", "matvec_block", "constraints", "reduced_evaluation",
                "reduced_tangent", "update"):
        if key not in result:
            continue
        s = result[key]
        lines.append(f"  {key:20s} median {s['median_ms']:8.2f} ms   p95 {s['p95_ms']:8.2f} ms")
    if "first_factorization_ms" in result:
        lines.append(f"  first factorization (with analysis) {result['first_factorization_ms']:.1f} ms")
    if result.get("reduction"):
        red = result["reduction"]
        loaded = f", loaded from its file in {red['load_s']:.1f} s" if red["loaded"] else ""
        lines.append(
            f"reduced model: {red['size']} coordinates from {red['samples_used']} training equilibria "
            f"(mode tolerance {red['mode_tolerance']:g}; trained in {red['build_s']:.1f} s{loaded}); "
            f"effector vs the full model's equilibrium "
            f"max {result['effector_vs_full_mm_max']:.3g} mm")
    solves = ("r x r Cholesky per update (no PCG)" if result.get("reduction") else
              f"PCG iterations mean {result['pcg_iterations_mean']:.2f} max {result['pcg_iterations_max']}; "
              f"refactorizations {result['refactorizations']}/{result['updates']}")
    lines.append(
        f"update rate {result['update_hz']:.1f} Hz (median), {result['update_hz_p95']:.1f} Hz (p95); "
        f"{solves}; "
        f"update CPU time median {result['update_cpu']['median_ms']:.2f} ms "
        f"({result['update_cpu_hz']:.1f} Hz on an idle core); "
        f"W rel. error vs exact max {result['w_rel_error_max']:.2e}"
    )
    return lines


def _refused_options(args: argparse.Namespace) -> str | None:
    """Why the options cannot run together or are out of range (one line), or None."""
    if args.repeat < 1:
        return f"--repeat must be at least 1, got {args.repeat}"
    needs_reduced = [flag for flag, value in (("--reduction", args.reduction), ("--samples", args.samples),
                                              ("--mode-tolerance", args.mode_tolerance)) if value is not None]
    if needs_reduced and not args.reduced:
        return f"{', '.join(needs_reduced)} need --reduced"
    if args.reduction is not None and (args.samples is not None or args.mode_tolerance is not None):
        return "--samples and --mode-tolerance train a reduction; --reduction loads one"
    full_only = [flag for flag, given in (("--no-reuse", args.no_reuse), ("--pcg-rtol", args.pcg_rtol is not None),
                                          ("--w-rtol", args.w_rtol is not None)) if given]
    if full_only and args.reduced:
        return (f"{', '.join(full_only)} set the full model's solver; the reduced model solves its "
                "r × r system by Cholesky at every update")
    if args.samples is not None and args.samples < 1:
        return f"--samples must be at least 1, got {args.samples}"
    if args.mode_tolerance is not None and not 0.0 < args.mode_tolerance < 1.0:
        return f"--mode-tolerance must be in (0, 1), got {args.mode_tolerance}"
    for flag, value in (("--pcg-rtol", args.pcg_rtol), ("--w-rtol", args.w_rtol)):
        if value is not None and not 0.0 < value < 1.0:
            return f"{flag} must be in (0, 1), got {value}"
    return None


def run(args: argparse.Namespace) -> int:
    limiter = limit_threads()
    import logging

    from soft_inverse_ros.core.model.robot_model import RobotModel

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    refused = _refused_options(args)
    if refused:
        print(f"bench fem: {refused}", file=sys.stderr)
        return 2
    t_build = time.perf_counter()
    loaded = _load_robot(args)
    if loaded is None:
        return 2
    desc, mesh = loaded
    contact = True
    if args.reduced and desc.collision is not None:
        print(f"bench fem: robot {desc.name} has a collision section and the reduced model does not "
              "model contact: the full and the reduced model both run without contact", file=sys.stderr)
        contact = False
    pcg_rtol = PCG_RTOL if args.pcg_rtol is None else args.pcg_rtol
    w_rtol = W_RTOL if args.w_rtol is None else args.w_rtol
    model = RobotModel.from_description(
        desc, mesh=mesh, solver=args.solver, factor_reuse=not args.no_reuse, pcg_rtol=pcg_rtol,
        w_rtol=w_rtol, contact=contact,
    )
    t_build = time.perf_counter() - t_build
    fem = model.fem
    efforts = _effort_trajectory(model)
    full, reduction = None, None
    if args.reduced:
        loaded = _reduce(model, args)
        if loaded is None:
            return 2
        full, (model, reduction) = model, loaded

    t0 = time.perf_counter()
    eq = model.equilibrate(efforts(0), from_rest=True)
    t_equilibrium = time.perf_counter() - t0

    # -- component timings at the equilibrium state, then the low-rate loop
    if full is None:
        solver_name, components = _time_components(model, args.solver, max(5, min(args.repeat, 50)))
    else:
        solver_name, components = "reduced (dense Cholesky)", _time_reduced_components(
            model, max(5, min(args.repeat, 50)))
    updates = _time_updates(model, efforts, args, full=full)
    result = {
        "benchmark": "fem",
        "robot": desc.name if args.nodes is None else f"box(~{args.nodes} nodes)",
        "nodes": fem.n_nodes,
        "tets": fem.n_elements,
        "free_dofs": fem.n_free,
        "stiffness_nnz": fem.nnz,
        "actuators": model.n_actuators,
        "effector_rows": model.n_effector_rows,
        "solver": solver_name,
        "fem_kernels": fem.kernels,
        "factor_reuse": not args.no_reuse and full is None,
        "reduction": reduction,
        "pcg_rtol": None if full is not None else pcg_rtol,
        "w_rtol": None if full is not None else w_rtol,
        "threads": 1,
        "build_s": t_build,
        "equilibrium_s": t_equilibrium,
        "equilibrium_newton_iterations": eq.iterations,
        **components,
        **updates,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "threadpoolctl": limiter is not None,
    }
    print("\n".join(_report_lines(result)))
    if args.json:
        print(finite_json.dumps(result))
    return 0
