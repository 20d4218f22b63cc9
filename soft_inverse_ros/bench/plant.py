"""``soft-inverse-ros bench plant``: cost of the simulated robot's time step.

Runs :class:`~soft_inverse_ros.core.sim.plant.SoftRobotPlant` (one BLAS thread) from its
slack-cable static start under a smooth servo-stroke trajectory (two opposite cables
pulled/released sinusoidally, ``--amplitude`` at ``--frequency``) for ``--seconds`` of
simulated time, and reports per configuration: mesh size, wall time per step (median,
p95, max), CPU time per simulated second (the real-time load: < 1 means real-time
capable on one core), mean Newton iterations, tangent assemblies and factorizations
per step. Configurations: the cross product of ``--cell-sizes`` (0: the description's
mesh), ``--dts`` and ``--hyper-reduction-tolerances`` (``--model reduced``: 0 evaluates
every element, > 0 the ECSW sample, core/sim/hyper_reduction.py), with ``--tangent-every``
and ``--newton-iterations``. A hyper-reduced case also reports its sampled elements and
its effector's distance to the same case with tolerance 0 when that one runs too (mean
and max over the run [mm]). With ``--json`` the last output line is one JSON object.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from soft_inverse_ros import finite_json
from soft_inverse_ros.bench._threads import limit_threads
from soft_inverse_ros.cli_values import count, non_negative, positive


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plant", help="time the simulated robot's implicit Euler step", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--robot", default="builtin_diamond",
                        help="robot name in config/robots or description YAML")
    parser.add_argument("--cell-sizes", type=non_negative, nargs="+", default=[0.0, 0.009],
                        help="built-in mesh cell sizes [m] (0: the description's mesh)")
    parser.add_argument("--dts", type=positive, nargs="+", default=[0.005, 0.01],
                        help="plant time steps [s]")
    parser.add_argument("--tangent-every", type=count, default=None,
                        help="sub-steps a lagged tangent serves (fem, reduced; default 10)")
    parser.add_argument("--newton-iterations", type=count, default=None,
                        help="Newton iterations per step at most (fem, reduced, modal; default 2)")
    parser.add_argument("--pcg-on-new-tangent", action="store_true",
                        help="solve a new tangent by PCG with the older factor (no immediate "
                             "factorization; fem)")
    parser.add_argument("--newton-rtol", type=positive, default=None,
                        help="relative residual at which Newton stops (fem; default 0.01)")
    parser.add_argument("--seconds", type=positive, default=3.0, help="simulated time per case")
    parser.add_argument("--amplitude", type=non_negative, default=0.008, help="stroke amplitude [m]")
    parser.add_argument("--frequency", type=non_negative, default=0.5, help="stroke frequency [Hz]")
    parser.add_argument("--solver", default="auto")
    parser.add_argument("--model", default="fem", choices=("fem", "reduced", "modal", "mujoco"),
                        help="plant model (core.sim.plant.PLANT_MODELS): full dynamic FEM, its POD-reduced co-rotational model, the linear modal model, or MuJoCo (optional extra)")
    parser.add_argument("--modal-modes", type=count, default=None,
                        help="vibration modes of the reduced and modal plants' basis (default 24)")
    parser.add_argument("--hyper-reduction-tolerances", type=non_negative, nargs="+", default=None,
                        help="--model reduced: ECSW sampling tolerances (0: every element, the "
                             "default; config/sim.yaml uses 0.002)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(func=run)


def _case(args, cell: float, dt: float, hyper: float) -> tuple[dict, object]:
    """One configuration's figures and its effector path (steps, n_e) [m]."""
    import numpy as np

    from soft_inverse_ros.core.sim.plant import PlantConfig, make_plant

    cfg = PlantConfig(robot=args.robot, model=args.model, modal_modes=args.modal_modes,
                      mesh_cell_size=cell, dt=dt, solver=args.solver,
                      tangent_every=args.tangent_every, newton_iterations=args.newton_iterations,
                      newton_rtol=args.newton_rtol, rayleigh_mass=2.0, rayleigh_stiffness=0.005,
                      factorize_new_tangent=not args.pcg_on_new_tangent,
                      hyper_reduction_tolerance=hyper)
    t0 = time.perf_counter()
    plant = make_plant(cfg)
    plant.equilibrate(slack_cables=True)
    setup = time.perf_counter() - t0
    s0 = plant.cable_strokes
    pattern = np.zeros(len(s0))
    pattern[0] = 1.0
    if len(s0) > 2:
        pattern[2] = -1.0
    n = int(round(args.seconds / dt))
    walls, its, path = [], [], []
    assemblies0, fact0 = plant.tangent_assemblies, plant.solver_stats().factorizations
    cpu0 = time.process_time()
    for k in range(n):
        s = s0 + args.amplitude * np.sin(2 * np.pi * args.frequency * k * dt) * pattern
        state = plant.step(cable_strokes=s)
        walls.append(state.wall_time)
        its.append(state.newton_iterations)
        path.append(state.effector_position)
    cpu = time.process_time() - cpu0
    w = np.asarray(walls) * 1e3
    hr = getattr(plant, "hyper", None)
    return {
        "cell_size": cell, "dt": dt, "hyper_reduction_tolerance": hyper,
        "sampled_elements": None if hr is None else int(len(hr.elements)),
        "nodes": int(plant.mesh.n_points),
        "tets": int(plant.mesh.n_tets), "steps": n, "setup_s": round(setup, 3),
        "step_ms_p50": round(float(np.median(w)), 3),
        "step_ms_p95": round(float(np.percentile(w, 95)), 3),
        "step_ms_max": round(float(w.max()), 3),
        "cpu_per_sim_second": round(cpu / (n * dt), 3),
        "newton_iterations_mean": round(float(np.mean(its)), 2),
        "tangent_assemblies_per_step": round((plant.tangent_assemblies - assemblies0) / n, 3),
        "factorizations_per_step": round(
            (plant.solver_stats().factorizations - fact0) / n, 3),
        "final_residual_N": float(state.residual_norm),
    }, np.asarray(path)


#: the plant models that read each model-specific option (core/sim/plant.py, modal_plant.py,
#: mujoco_plant.py), and its value when not given
_MODEL_OPTIONS = {
    "tangent_every": (("fem", "reduced"), 10),
    "newton_iterations": (("fem", "reduced", "modal"), 2),
    "newton_rtol": (("fem",), 0.01),
    "pcg_on_new_tangent": (("fem",), False),
    "modal_modes": (("reduced", "modal"), 24),
    "hyper_reduction_tolerances": (("reduced",), [0.0]),
}


def _model_options_problem(args: argparse.Namespace) -> str | None:
    """The first option given that ``args.model`` does not read (an option that would do
    nothing), else None; fills in the defaults of the options not given."""
    for key, (models, default) in _MODEL_OPTIONS.items():
        given = getattr(args, key)
        if given is None or given is False:
            setattr(args, key, default)
        elif args.model not in models:
            option = "--" + key.replace("_", "-")
            return f"{option} applies to --model {' or '.join(models)} only, not {args.model}"
    return None


def run(args: argparse.Namespace) -> int:
    problem = _model_options_problem(args)
    if problem is not None:
        print(f"soft-inverse-ros bench plant: {problem}", file=sys.stderr)
        return 2
    limit_threads()  # one BLAS thread for the whole run (the process ends after)
    import numpy as np

    cases = []
    for cell in args.cell_sizes:
        for dt in args.dts:
            unreduced = None
            for hyper in args.hyper_reduction_tolerances:
                c, path = _case(args, cell, dt, hyper)
                if hyper == 0:
                    unreduced = path
                elif unreduced is not None:
                    d = np.linalg.norm(path - unreduced, axis=1) * 1e3
                    c["effector_vs_every_element_mm_mean"] = round(float(d.mean()), 4)
                    c["effector_vs_every_element_mm_max"] = round(float(d.max()), 4)
                cases.append(c)
                _print_case(c)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    result = {"bench": "plant", "robot": args.robot, "model": args.model, "cases": cases,
              "tangent_every": args.tangent_every,
              "newton_iterations": args.newton_iterations,
              "factorize_new_tangent": not args.pcg_on_new_tangent,
              "machine": platform.machine(), "cpus": os.cpu_count(), "load_avg_1min": load}
    if load is not None:
        print(f"(1-min load average {load:.2f} on {os.cpu_count()} CPUs)")
    if args.json:
        print(finite_json.dumps(result))
    return 0


def _print_case(c: dict) -> None:
    hyper = ""
    if c["sampled_elements"] is not None:
        hyper = (f" ECSW {c['hyper_reduction_tolerance']:g}: {c['sampled_elements']}/"
                 f"{c['tets']} elements")
        if "effector_vs_every_element_mm_mean" in c:
            hyper += (f", effector {c['effector_vs_every_element_mm_mean']:.3f} mean / "
                      f"{c['effector_vs_every_element_mm_max']:.3f} max mm from every element")
        hyper += ";"
    print(
        f"cell {c['cell_size'] * 1e3:4.1f} mm ({c['nodes']:5d} nodes) dt "
        f"{c['dt'] * 1e3:4.1f} ms:{hyper} step p50 {c['step_ms_p50']:6.2f} p95 "
        f"{c['step_ms_p95']:6.2f} max {c['step_ms_max']:6.1f} ms; CPU per sim s "
        f"{c['cpu_per_sim_second']:5.2f}; Newton {c['newton_iterations_mean']:.2f}, "
        f"K/step {c['tangent_assemblies_per_step']:.2f}, "
        f"factor/step {c['factorizations_per_step']:.2f}",
        flush=True,
    )
