"""``soft-inverse-ros reduce-model``: train a reduced-order model of a robot's FEM.

The controller's low-rate update on a large mesh (tens of thousands of nodes) is bounded
by the solves with the mesh's stiffness. A reduced model (core/model/reduced_model.py;
Goury & Duriez, T-RO 2018) restricts the motion to a basis trained on the full model:
--samples equilibria under efforts spread over the actuators' effort ranges (a seeded Latin
hypercube; efforts the full model cannot balance within the stroke limits are halved towards
zero) and their compliance columns, decomposed in the energy norm; each training
snapshot keeps all but --mode-tolerance of its energy in the basis. The update then costs
one assembly, one projection K ↦ Φᵀ K Φ and an r × r Cholesky factorization.

After training, --check held-out effort vectors (another seed) compare the reduced model
with the full one: the equilibria's effector distance and the relative error of W (the
largest entry error over the largest entry) against an exact factorization at the
reduced equilibrium. The FEM and compliance nodes load the file with their ``reduction``
parameter; ``bench fem --reduced --reduction FILE`` times it.

Examples::

    soft-inverse-ros reduce-model --robot diamond --out diamond_reduction.npz
    soft-inverse-ros reduce-model --nodes 50000 --out box50k_reduction.npz --check 2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from soft_inverse_ros import finite_json

NAME = "reduce-model"


def register(subparsers: argparse._SubParsersAction) -> None:
    from soft_inverse_ros.core.model.reduced_model import (
        DEFAULT_MAX_MODES,
        DEFAULT_MODE_TOLERANCE,
        DEFAULT_SAMPLES,
        DEFAULT_SEED,
    )

    parser = subparsers.add_parser(
        NAME, help="train a reduced-order model of a robot's FEM (large meshes)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--robot", help="robot description name or YAML file")
    src.add_argument("--nodes", type=int, help="the generated cantilever box of bench fem, about N nodes")
    parser.add_argument("--mesh", type=Path, default=None, help="mesh file overriding the robot's")
    parser.add_argument("--out", type=Path, required=True, help="the reduction file to write (.npz)")
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES,
                        help=f"training equilibria (default {DEFAULT_SAMPLES})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="training efforts' seed")
    parser.add_argument("--mode-tolerance", type=float, default=DEFAULT_MODE_TOLERANCE,
                        help="energy fraction of each training snapshot left outside the basis "
                             f"(default {DEFAULT_MODE_TOLERANCE:g})")
    parser.add_argument("--max-modes", type=int, default=DEFAULT_MAX_MODES,
                        help=f"at most this many POD modes; the rest shape adds one basis vector "
                             f"(default {DEFAULT_MAX_MODES})")
    parser.add_argument("--hyper-tolerance", type=float, default=0.0,
                        help="> 0: also sample the elements (ECSW) to this relative force error; "
                             "faster updates on any mesh size, but W then errs by about this much "
                             "(default 0: every element)")
    parser.add_argument("--check", type=int, default=3,
                        help="held-out effort vectors the reduced model is checked on (default 3; 0: none)")
    parser.add_argument("--solver", default="auto", help="the full model's direct solver (default auto)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(func=run)


#: a held-out W error above this is reported as a warning: such a basis misguides the controller
W_ERROR_WARNING = 1e-2


def _say(line: str) -> None:
    print(f"{NAME}: {line}", file=sys.stderr, flush=True)


def _refused_options(args: argparse.Namespace) -> str | None:
    """Why the options cannot train a reduction (one line naming the option), or None; checked
    before the model is built, so a mistake costs no training time."""
    import math

    if args.samples < 1:
        return f"--samples must be at least 1, got {args.samples}"
    if args.seed < 0:
        return f"--seed must be >= 0, got {args.seed}"
    if not 0.0 < args.mode_tolerance < 1.0:
        return f"--mode-tolerance must be in (0, 1), got {args.mode_tolerance}"
    if args.max_modes < 1:
        return f"--max-modes must be at least 1, got {args.max_modes}"
    if not (math.isfinite(args.hyper_tolerance) and 0.0 <= args.hyper_tolerance < 1.0):
        return f"--hyper-tolerance must be in [0, 1), got {args.hyper_tolerance}"
    if args.check < 0:
        return f"--check must be >= 0, got {args.check}"
    return None


def run(args: argparse.Namespace) -> int:
    from soft_inverse_ros.bench._threads import limit_threads

    limit_threads()
    from soft_inverse_ros.bench.fem import _load_robot
    from soft_inverse_ros.core.model.linear_solvers import ConvergenceError
    from soft_inverse_ros.core.model.reduced_model import ReducedRobotModel, build_model_reduction
    from soft_inverse_ros.core.model.robot_model import RobotModel

    from soft_inverse_ros.output_paths import writable_output

    refused = _refused_options(args)
    out = writable_output(args.out, "--out", ".npz") if refused is None else None
    if refused is not None or isinstance(out, str):
        print(f"{NAME}: {refused or out}", file=sys.stderr)
        return 2
    loaded = _load_robot(argparse.Namespace(nodes=args.nodes, robot=args.robot, mesh=args.mesh), NAME)
    if loaded is None:
        return 2
    desc, mesh = loaded
    model = RobotModel.from_description(desc, mesh=mesh, solver=args.solver, contact=False)
    if desc.collision is not None:
        _say(f"robot {desc.name} has a collision section: the reduced model does not model contact "
             "(the nodes refuse a reduction unless their contact parameter is false)")
    _say(f"robot {desc.name}: {model.fem.n_nodes} nodes, {model.fem.n_elements} tets, "
         f"{model.fem.n_free} free DOFs; training on {args.samples} equilibria")
    try:
        reduction = build_model_reduction(
            model, samples=args.samples, seed=args.seed, mode_tolerance=args.mode_tolerance,
            max_modes=args.max_modes, hyper_tolerance=args.hyper_tolerance, progress=_say)
    except ConvergenceError as exc:
        print(f"{NAME}: error: the full model found no equilibrium under gravity: {exc}", file=sys.stderr)
        return 1
    reduced = ReducedRobotModel(model, reduction)
    if not _reaches_rest(reduced, args):
        return 1
    path = reduction.save(out)
    _say(f"wrote {path} ({reduction.size} coordinates, trained in {reduction.training['build_s']:.1f} s)")
    result = {"command": NAME, "robot": desc.name, "nodes": model.fem.n_nodes,
              "free_dofs": model.fem.n_free, "out": str(path), "size": reduction.size,
              **{f"training_{k}": v for k, v in reduction.training.items()}}
    if args.check:
        result.update(_check(model, reduced, reduction, args))
    if args.json:
        print(finite_json.dumps(result))
    return 0


def _reaches_rest(reduced, args: argparse.Namespace) -> bool:
    """Whether the reduced model reaches its equilibrium under gravity from rest, as the
    FEM node loads it (a one-line error and False if not: the file is not written)."""
    import numpy as np

    from soft_inverse_ros.core.model.linear_solvers import ConvergenceError

    try:
        rest = reduced.equilibrate(np.zeros(reduced.n_actuators), from_rest=True)
    except ConvergenceError as exc:
        hint = ("the hyper-reduction is too coarse: a smaller --hyper-tolerance or more --samples"
                if args.hyper_tolerance > 0 else "a smaller --mode-tolerance or more --samples")
        print(f"{NAME}: error: the reduced model found no equilibrium under gravity ({exc}): {hint}; "
              f"nothing written", file=sys.stderr)
        return False
    _say(f"reduced model at rest under gravity in {rest.iterations} iterations ({rest.wall_time:.2f} s)")
    return True


def _check(full, reduced, reduction, args: argparse.Namespace) -> dict:
    """Held-out comparison of the reduced and the full model (module docstring), from the
    reduced model's rest equilibrium."""
    import numpy as np

    from soft_inverse_ros.bench.fem import _w_rel_error
    from soft_inverse_ros.core.model.linear_solvers import ConvergenceError, make_solver
    from soft_inverse_ros.core.model.reduced_model import equilibrium_within_limits, training_efforts

    limits = full.actuator_limits()
    efforts = training_efforts(limits, args.check, args.seed + 1, full.actuator_names)
    solver = make_solver(args.solver, size=full.fem.n_free)
    effector, w_error, reduced_failures = [], [], 0
    for i, drawn in enumerate(efforts, 1):
        t0 = time.perf_counter()
        lam = equilibrium_within_limits(full, drawn, limits, reduction.reference_positions)
        if lam is None:
            _say(f"check {i}/{args.check}: the full model reaches no equilibrium within the "
                 "stroke limits under these efforts, halved; skipped")
            continue
        try:
            reduced.equilibrate(lam)
        except ConvergenceError as exc:
            _say(f"check {i}/{args.check}: the reduced model found no equilibrium ({exc})")
            reduced_failures += 1
            continue
        distance = float(np.abs(reduced.effector_position - full.effector_position).max())
        error = _w_rel_error(full, np.array(reduced.positions), lam, reduced.compliance(), solver)
        effector.append(distance)
        w_error.append(error)
        _say(f"check {i}/{args.check}: efforts {np.round(lam, 4).tolist()}: effector vs the full "
             f"model {distance * 1e3:.4f} mm, W relative error {error:.2e} "
             f"({time.perf_counter() - t0:.1f} s)")
    # checks where the full model balanced the efforts but the reduced one did not count apart
    # (JSON has no infinity to put in the maxima)
    result = {"check_samples": len(effector), "check_reduced_failures": reduced_failures}
    if effector:
        result.update(check_effector_vs_full_mm_max=1e3 * max(effector),
                      check_w_rel_error_max=max(w_error))
        if max(w_error) > W_ERROR_WARNING:
            _say(f"warning: W errs by up to {max(w_error):.2g} on the held-out efforts: a controller "
                 "using this reduction would be misguided (a smaller --hyper-tolerance or "
                 "--mode-tolerance, or more --samples)")
    return result
