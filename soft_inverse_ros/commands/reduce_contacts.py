"""``soft-inverse-ros reduce-contacts``: build a reduced contact basis for a robot.

Goury et al. 2021 §III-C/§IV (Algorithm 1, eq. 23, Fig. 12): the simulated robot (the
dynamic FEM plant, full contact from the description's ``collision`` section) is driven
through a sweep of actuator postures; after each plant step the contact forces on every
potential contact vertex are one snapshot; the snapshots are factorized by NNMF
(S ≈ Ψ B, Ψ ≥ 0) into a basis of --k vectors, written to --out (``.npz``,
core/contact/basis_file.py). A description loads it with::

    collision:
      self_collision: true
      reduced_basis: finger_basis.npz     # relative to the description file

Sweep specs (``--sweep`` once per actuator): ``NAME=LO:HI[:STEP]UNIT``, the unit of the
actuator's input (cable: a length, its stroke, for the plant; a force, its tension, for
``--simulator model``; cavity: a pressure; force: a force), STEP the increment per step
(default: --steps steps per ramp; --hold more steps at each posture). One actuator: a ramp
from LO to HI. Several: a two-level Plackett–Burman design (Hadamard columns; each posture
ramped to from rest), every actuator at LO or HI per run.

``--simulator model`` sweeps the controller's quasi-static model instead of the simulated
robot (one low-rate update per step): its snapshots are the contact configurations the
controller's model reaches, which a plant sweep can miss (EXPERIMENTS.md).

After the build the basis is checked in the controller's model (--model-check): from 3
of the sweep's states with contact force, N low-rate updates of the description's
RobotModel with full contact and with the basis; the largest tip distance between the two
is printed with the tip shift contact itself causes. A basis is only as good as its sweep:
a model that leaves the swept configurations drifts.

Prints a progress bar on stderr, the relative reconstruction error per k; --figure (or,
by default, ``<out>_error_vs_k.png`` beside --out) is the error-vs-k figure; --json
prints one JSON object as the last line.

Example (the finger's basis shipped with the repository)::

    soft-inverse-ros reduce-contacts --robot finger --sweep cable=0:55:0.05mm --k 5 \\
        --out config/robots/finger_basis.npz
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from soft_inverse_ros import finite_json

NAME = "reduce-contacts"
#: the plant's step [s] and cable stiffness [N/m] when --dt / --cable-stiffness are not given
PLANT_DT = 0.01
PLANT_CABLE_STIFFNESS = 1e5


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        NAME, help="build a reduced (NNMF) contact basis for a robot from a sweep of postures",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", required=True, help="robot description name or YAML file (with a collision section)")
    parser.add_argument("--sweep", action="append", default=[], metavar="NAME=LO:HI[:STEP]UNIT",
                        help="actuator range, e.g. cable=0:55:0.05mm (repeat for several actuators)")
    parser.add_argument("--simulator", choices=("plant", "model"), default="plant",
                        help="what is swept: plant = the simulated robot (dynamic FEM; cables by stroke, "
                             "e.g. cable=0:55:0.05mm), model = the controller's quasi-static model (one "
                             "update per step; cables by tension, e.g. cable=0:5:0.02N) (default plant)")
    parser.add_argument("--steps", type=int, default=100,
                        help="steps per ramp for a spec without STEP (default 100)")
    parser.add_argument("--hold", type=int, default=0,
                        help="steps held (and recorded) at each posture after its ramp (default 0)")
    parser.add_argument("--k", type=int, default=5, help="basis size (default 5, the paper's)")
    parser.add_argument("--kmax", type=int, default=30, help="report the error for k = 1 .. kmax (default 30)")
    parser.add_argument("--nnmf", choices=("hals", "als"), default="hals",
                        help="NNMF algorithm: hals (monotone, default) or als (the paper's Algorithm 1)")
    parser.add_argument("--nnmf-iterations", type=int, default=500, help="NNMF sweeps (default 500)")
    parser.add_argument("--dt", type=float, default=None,
                        help=f"plant time step [s] (default {PLANT_DT:g}; --simulator plant only)")
    parser.add_argument("--cable-stiffness", type=float, default=None,
                        help=f"cable spring stiffness [N/m] (default {PLANT_CABLE_STIFFNESS:g}: stroke ≈ cable "
                             "shortening; --simulator plant only)")
    parser.add_argument("--out", type=Path, required=True, help="the basis file to write (.npz)")
    parser.add_argument("--figure", default=None,
                        help="the error-vs-k figure (a format matplotlib writes, e.g. .png, .pdf, .svg; no "
                             "suffix: .png; default: <out>_error_vs_k.png)")
    parser.add_argument("--model-check", default="3,100", metavar="N[,N...]",
                        help="check the basis in the controller's model: from 3 sweep states with contact "
                             "force, N updates with full contact vs with the basis, the largest tip distance "
                             "(default 3,100; 0: skip)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.set_defaults(func=run)


class _Progress:
    """A one-line text progress bar on stderr (redrawn in place; a newline at the end)."""

    def __init__(self, width: int = 30) -> None:
        self.width, self._last = width, (None, -1)

    def __call__(self, phase: str, done: int, total: int) -> None:
        percent = int(100 * done / max(total, 1))
        filled = self.width * done // max(total, 1)
        if (phase, filled) == self._last and done != total:
            return
        self._last = (phase, filled)
        label = "steps" if phase == "sweep" else "NNMF k"
        bar = "#" * filled + "." * (self.width - filled)
        stream = sys.stderr  # looked up per call: whatever stderr is now
        stream.write(f"\r{phase:5s} [{bar}] {percent:3d}% {label} {done}/{total}")
        if done == total:
            stream.write("\n")
        stream.flush()


def _horizons(text: str) -> tuple[int, ...]:
    """``--model-check``: comma-separated update counts ≥ 1, or 0 alone (skip)."""
    try:
        values = tuple(sorted({int(v) for v in text.split(",")}))
    except ValueError:
        raise ValueError(f"--model-check: expected comma-separated integers, got {text!r}") from None
    if values == (0,):
        return ()
    if min(values) < 1:
        raise ValueError(f"--model-check: update counts must be >= 1 (or 0 alone: skip), got {text!r}")
    return values


def _check(args: argparse.Namespace) -> None:
    bad = [f"--{k.replace('_', '-')}" for k in ("k", "kmax", "nnmf_iterations") if getattr(args, k) < 1]
    if bad:
        raise ValueError(f"{', '.join(bad)} must be >= 1")
    if args.kmax < args.k:
        raise ValueError(f"--kmax ({args.kmax}) must be >= --k ({args.k})")
    plant_only = [flag for flag, value in (("--dt", args.dt), ("--cable-stiffness", args.cable_stiffness))
                  if value is not None]
    if plant_only and args.simulator == "model":
        raise ValueError(f"{', '.join(plant_only)} set the simulated robot; --simulator model sweeps the "
                         "controller's quasi-static model, which has neither")
    if not all(value is None or value > 0 for value in (args.dt, args.cable_stiffness)):
        raise ValueError("--dt and --cable-stiffness must be > 0")


def run(args: argparse.Namespace) -> int:
    from soft_inverse_ros.core.contact.basis_builder import build_basis, sweep_model, sweep_plant
    from soft_inverse_ros.core.contact.basis_file import save_basis
    from soft_inverse_ros.core.contact.sweep import input_bounds, parse_sweep
    from soft_inverse_ros.core.control.actuator_limits import limits_from_description
    from soft_inverse_ros.core.model.linear_solvers import ConvergenceError
    from soft_inverse_ros.output_paths import writable_figure, writable_output

    _check(args)
    horizons = _horizons(args.model_check)
    out = writable_output(args.out, "--out", ".npz")
    figure = out if isinstance(out, str) else writable_figure(
        args.figure or out.with_name(out.stem + "_error_vs_k.png"), "--figure")
    for problem in (out, figure):
        if isinstance(problem, str):  # before the sweep, not after it
            print(f"soft-inverse-ros {NAME}: {problem}", file=sys.stderr)
            return 2
    if args.simulator == "plant":
        plant = sweep_plant(args.robot, dt=PLANT_DT if args.dt is None else args.dt,
                            cable_stiffness=PLANT_CABLE_STIFFNESS if args.cable_stiffness is None
                            else args.cable_stiffness)
    else:
        plant = sweep_model(args.robot)
    collision = plant.description.collision
    if collision is not None and collision.surface is not None:
        print(f"soft-inverse-ros {NAME}: robot {plant.description.name!r} detects contacts on a mapped "
              "collision surface (collision.surface): a reduced basis over it is not supported (the "
              "description could not load it); remove 'surface' to build a basis on the mesh boundary",
              file=sys.stderr)
        return 2
    kinds = dict(zip(plant.actuator_names, plant.actuator_kinds))
    sweep = parse_sweep(args.sweep, kinds, default_steps=args.steps, hold=args.hold,
                        efforts=args.simulator == "model",
                        bounds=input_bounds(plant.actuator_names, plant.actuator_kinds,
                                            limits_from_description(plant.description),
                                            efforts=args.simulator == "model"))
    t0 = time.perf_counter()
    try:
        built = build_basis(plant, sweep, args.k, kmax=args.kmax, method=args.nnmf,
                            iterations=args.nnmf_iterations, progress=_Progress())
    except ConvergenceError as exc:  # the plant diverged: the sweep went too far or too fast
        print(f"\nsoft-inverse-ros {NAME}: the simulated robot did not converge ({exc}): a smaller STEP, "
              "a shorter range or a smaller --dt", file=sys.stderr)
        return 1
    data = built.data
    out = save_basis(out, data)
    _figure(figure, data.error_vs_k, args.k, plant.description.name)
    print(f"{data.robot}: {built.snapshots} snapshots ({data.snapshots} with contact force), "
          f"{len(data.nodes)} potential contact vertices, at most {built.contacts_max} contacts")
    print("k  relative error ‖S − ΨB‖/‖S‖")
    for k, e in data.error_vs_k.items():
        print(f"{k:<2d} {e:.3e}{'   <- basis' if k == args.k else ''}")
    print(f"wrote {out} (k = {data.k}) and {figure}")
    check = _model_check(plant, data, built.states, horizons)
    if args.json:
        print(finite_json.dumps({
            "command": NAME, "robot": data.robot, "basis": str(out), "figure": str(figure), "k": data.k,
            "sweep": list(data.sweep), "simulator": data.simulator, "hold": data.hold, "snapshots": built.snapshots, "snapshots_with_contact": data.snapshots,
            "potential_contacts": int(len(data.nodes)), "contacts_max": built.contacts_max,
            "error_vs_k": {str(k): v for k, v in data.error_vs_k.items()},
            "model_check": check, "plant_steps_wall_s": built.wall_s, "wall_s": time.perf_counter() - t0}))
    return 0


def _model_check(plant, data, states, horizons) -> dict | None:
    """Print and return the controller's-model check of the basis (see --model-check) [mm]."""
    from soft_inverse_ros.core.contact.basis_builder import compare_on_model

    if not horizons or not states:
        return None
    check = compare_on_model(plant.description, data.basis(), states, horizons)
    mm = {str(n): None if d is None else 1e3 * d for n, d in check["tip_distance"].items()}
    text = ", ".join(f"{n} updates: {'no convergence' if d is None else f'{d:.3f} mm'}" for n, d in mm.items())
    print(f"controller's model from {len(states)} sweep states, tip with the basis vs full contact: {text} "
          f"(contact itself moves the tip {1e3 * check['contact_effect']:.3f} mm)")
    return {"states": len(states), "tip_distance_mm": mm, "contact_effect_mm": 1e3 * check["contact_effect"]}


def _figure(path: Path, errors: dict[int, float], k: int, robot: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    ks = sorted(errors)
    ax.semilogy(ks, [errors[i] for i in ks], "o-")
    if k in errors:
        ax.semilogy([k], [errors[k]], "o", color="tab:red", label=f"basis, k = {k}")
        ax.legend()
    ax.set_xlabel("basis size k")
    ax.set_ylabel("‖S − ΨB‖ / ‖S‖")
    ax.set_title(f"{robot}: NNMF of the contact-force snapshots")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
