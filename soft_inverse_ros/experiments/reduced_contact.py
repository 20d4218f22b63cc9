"""``experiment reduced-contact``: the finger's self-collision with a reduced NNMF contact basis.

Goury et al. 2021 §III–IV (Algorithm 1, eq. 17–23, Table II, Fig. 12) on SOFA's finger:

1. **Snapshots.** The finger is pulled in 0.05 mm steps (as the self-collision
   experiment) with full self-collision; after each step the normal contact force on every
   potential contact vertex (the n_c nodes of the boundary surface) is one column of S.
2. **Basis.** S ≈ Ψ B by NNMF (core/contact/nnmf.py, HALS; the paper's ALS is the
   ``--nnmf als`` option; nested in k: each k starts from k − 1's factorization,
   core/contact/basis_builder.py ``factorize``), Ψ ≥ 0 of ``--k`` columns (5 in the paper);
   the relative error ‖S − ΨB‖/‖S‖ for k = 1 … 30 (the paper's Fig. 12) is in the JSON and
   the figure.
3. **Reduced run.** The same pull with the contact forces restricted to λ = Ψ β, β ≥ 0
   (Signorini on the k-dimensional reduced gaps, eq. 21): the tip against the full run,
   the penetration left (fresh detection), and the speed of the three runs (no contact,
   full, reduced) in steps per second (the paper's Table II).

4. **Controller's model.** The basis in the controller's quasi-static model (RobotModel of
   finger.yaml, whose update then solves on β and snapshots the k × k reduced block):
   started at the full pull's plant states at 47, 51 and 55 mm and advanced by
   ``--model-updates`` updates under the plant's tension, with full contact and with the
   basis: the largest tip distance between the two per horizon, and the contact's own
   effect on the tip over the shortest horizon.

**Collision model.** By default the contact points are the mesh boundary's 155 nodes.
The paper's finger uses an "artificially fine" 495-point model (§IV-A, Fig. 6):
``--refine 1`` subdivides the boundary's triangles into four each (614 points, the same
shape), ``--collision-surface FILE`` maps another surface into the mesh. Then the basis is
over that surface's vertices, and the controller's-model comparison (step 4), whose model
detects on the mesh boundary, is skipped and says so.

``--basis FILE`` (a ``reduce-contacts`` basis) replaces the experiment's own basis in steps 3
and 4 (the NNMF figures stay the experiment's snapshots').

The paper's 0 → 40 mm pull closes no notch on this mesh (EXPERIMENTS.md, self-collision):
the default pull is 55 mm, where the notches touch from 50 mm; ``--pull-mm 40`` runs the
paper's range (then there is nothing to reduce and the JSON says so).

JSON: ``basis_size``, ``snapshots``, ``snapshots_with_contact``, ``tip_error_vs_full_mm``
(max over the steps), ``max_penetration_mm`` (reduced run), ``full_contact_steps_per_s``,
``reduced_contact_steps_per_s``, ``no_contact_steps_per_s``, ``speedup_vs_full``,
``speedup_bound_vs_full`` (no-contact over full-contact steps per second: the speed-up a
contact model costing nothing would give in this scene), and the same three in process CPU
time (``*_steps_per_cpu_s``, ``speedup_vs_full_cpu``, ``speedup_bound_vs_full_cpu``: the
sweeps run one after the other, so on a loaded machine the wall-clock ratios mix in the
load's changes); the same over the steps where the full run touches (Table II's "fully
bent" rows: ``steps_in_contact``, ``*_steps_per_s_in_contact``,
``*_steps_per_cpu_s_in_contact``, ``speedup_vs_full_in_contact``,
``speedup_vs_full_cpu_in_contact``, ``speedup_bound_vs_full_in_contact``); the collision
model (``collision_surface``, ``collision_refine``, ``collision_points``,
``collision_triangles``),
``error_vs_k`` ({k: relative error}), ``contacts_max``; ``model_states_mm``,
``model_tip_error_vs_full_mm`` ({updates: mm}), ``model_contact_effect_mm``, ``basis_file``
(with ``--basis``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from soft_inverse_ros.cli_values import positive
from soft_inverse_ros.experiments.self_collision import add_refine_option

NAME = "reduced-contact"
#: the full pull's plant states the controller's model is started from [mm of pull]
MODEL_STATES_MM = (47.0, 51.0, 55.0)


def _sweep(args, contact, *, plant=None, surface_nodes=None, detector=None, at=None, keep_mm=()) -> dict:
    """One pull of the finger (``plant``: a fresh one if None; core/contact/basis_builder.py
    drives it): the tips, the contacts, the wall time of the plant steps alone; with
    ``surface_nodes`` the contact forces summed per surface node after each step; with
    ``detector`` the largest penetration left after the steps that had contacts (a fresh
    detection down to 3 mm, not timed, at the points ``at(positions)``: the nodes, or a
    mapped collision surface's vertices) [m]; ``states``: (pull [mm], positions, efforts) at the
    pulls of ``keep_mm``."""
    import numpy as np

    from soft_inverse_ros.core.contact.basis_builder import drive
    from soft_inverse_ros.core.contact.sweep import parse_sweep
    from soft_inverse_ros.experiments.self_collision import _plant

    plant = _plant(args.cable_stiffness, args.dt) if plant is None else plant
    plant.set_contact(contact)
    spec = f"cable=0:{float(args.pull_mm)!r}:{float(args.step_mm)!r}mm"
    sweep = parse_sweep([spec], {"cable": plant.actuator_kinds[0]})
    (inputs, first), = sweep.ramps()
    penetration, states, step = [0.0], [], [first - 1]
    keep = {int(round(mm / args.step_mm)): mm for mm in keep_mm}

    def after_step(state, c) -> None:
        step[0] += 1
        if step[0] in keep:
            states.append((keep[step[0]], state.positions.copy(), state.efforts.copy()))
        if detector is not None and c is not None and c.contacts > 0:
            points = state.positions if at is None else at(state.positions)
            after = detector.contacts(points, contact.alarm_distance, depth=3e-3)
            if after.size:
                penetration[0] = max(penetration[0], float(np.maximum(-after.gaps, 0.0).max()))

    run = drive(plant, inputs, nodes=surface_nodes, record_from=first, on_step=after_step)
    return {"tips": run.tips, "forces": run.forces, "wall_s": run.wall_s, "cpu_s": run.cpu_s, "steps": run.steps,
            "step_wall_s": run.step_wall_s, "step_cpu_s": run.step_cpu_s,
            "contacts": run.contacts, "penetration": penetration[0], "states": states}


def _in_contact(runs: dict, bent) -> dict:
    """Steps per second (wall and process CPU) over the postures ``bent`` (bool per step:
    where the full run detected contact): Goury's Table II compares the "fully bent"
    robot, where the straight one's rate says nothing about contact."""
    out = {}
    for name, run in runs.items():
        n = int(bent.sum())
        out[f"{name}_steps_per_s_in_contact"] = n / float(run["step_wall_s"][bent].sum()) if n else None
        out[f"{name}_steps_per_cpu_s_in_contact"] = n / float(run["step_cpu_s"][bent].sum()) if n else None
    return out


def measure(args: argparse.Namespace) -> dict:
    from soft_inverse_ros.core.contact.basis_builder import active_snapshots, factorize
    from soft_inverse_ros.core.contact.correction import ContactModel, ReducedContactBasis
    from soft_inverse_ros.core.contact.geometry import SelfCollision
    from soft_inverse_ros.experiments.self_collision import _collision_surface, _plant

    import numpy as np

    if args.basis is not None and (args.collision_surface is not None or args.refine):
        raise SystemExit(f"experiment {NAME}: --basis: basis files hold mesh-node rows; they cannot be used with "
                         "--collision-surface or --refine")
    probe = _plant(args.cable_stiffness, args.dt)
    data = None
    if args.basis is not None:  # a basis file (reduce-contacts) in the reduced runs: checked before the sweeps
        from soft_inverse_ros.core.contact.basis_file import load_basis

        data = load_basis(args.basis)
        data.check_mesh(probe.fem.rest_points, where=f"--basis {args.basis}")
        data.check_collision(probe.description.collision, where=f"--basis {args.basis}")
    alarm = args.alarm_mm * 1e-3
    surface = _collision_surface(args.collision_surface, probe, args.refine, f"experiment {NAME}")
    if surface is None:  # the mesh boundary: contact points are mesh nodes
        detector, at = SelfCollision(probe.surface_faces(), probe.fem.rest_points), None
    else:  # contact points are the surface's vertices M x
        detector, at = SelfCollision(surface.faces, surface.rest), surface.positions
    nodes = detector.surface_nodes

    free = _sweep(args, None, plant=probe)
    keep_mm = [mm for mm in MODEL_STATES_MM if mm <= args.pull_mm] if surface is None else []
    full = _sweep(args, ContactModel(self_collision=detector, alarm_distance=alarm, surface=surface),
                  surface_nodes=nodes, keep_mm=keep_mm)
    s = full["forces"]
    active = active_snapshots(s)
    with_contact = int(active.shape[1])
    result = {
        "experiment": NAME, "robot": "finger", "pull_mm": args.pull_mm, "step_mm": args.step_mm,
        "collision_surface": str(args.collision_surface) if args.collision_surface else "mesh boundary",
        "collision_refine": args.refine, "collision_points": int(nodes.size),
        "collision_triangles": int(len(detector.faces)),
        "snapshots": int(s.shape[1]), "snapshots_with_contact": with_contact,
        "potential_contacts": int(s.shape[0]), "contacts_max": int(full["contacts"].max()),
        "no_contact_steps_per_s": free["steps"] / free["wall_s"],
        "full_contact_steps_per_s": full["steps"] / full["wall_s"],
        "no_contact_steps_per_cpu_s": free["steps"] / free["cpu_s"],
        "full_contact_steps_per_cpu_s": full["steps"] / full["cpu_s"],
    }
    if with_contact < args.k:
        result.update(basis_size=None, note=f"only {with_contact} snapshots carry contact forces "
                      f"(fewer than k = {args.k}): nothing to reduce at this pull")
        return result
    basis, errors = factorize(active, args.k, 30, method=args.nnmf, iterations=args.nnmf_iterations)
    used = ReducedContactBasis(nodes, basis.basis)
    if data is not None:  # the file's basis in the reduced runs instead
        used = data.basis()
        result["basis_file"] = {"file": str(args.basis), "k": data.k, "simulator": data.simulator,
                                "sweep": list(data.sweep)}
    reduced_model = ContactModel(self_collision=detector, alarm_distance=alarm, basis=used, surface=surface)
    reduced = _sweep(args, reduced_model, detector=detector, at=at)
    tip_error = 1e3 * float(np.linalg.norm(reduced["tips"] - full["tips"], axis=1).max())
    bent = full["contacts"] > 0
    in_contact = _in_contact({"no_contact": free, "full_contact": full, "reduced_contact": reduced}, bent)
    full_rate, reduced_rate = (in_contact[f"{n}_steps_per_s_in_contact"] for n in ("full_contact", "reduced_contact"))
    full_cpu, reduced_cpu = (in_contact[f"{n}_steps_per_cpu_s_in_contact"] for n in ("full_contact", "reduced_contact"))
    in_contact.update(
        steps_in_contact=int(bent.sum()),
        speedup_vs_full_in_contact=reduced_rate / full_rate if bent.any() else None,
        speedup_vs_full_cpu_in_contact=reduced_cpu / full_cpu if bent.any() else None,
        speedup_bound_vs_full_in_contact=(in_contact["no_contact_steps_per_s_in_contact"] / full_rate
                                          if bent.any() else None))
    result.update(
        # the basis of the reduced runs: the experiment's own (k = --k), or the --basis file's
        basis_size=args.k if data is None else data.k, nnmf=args.nnmf if data is None else data.nnmf,
        basis_relative_error=basis.relative_error if data is None else None,
        error_vs_k={str(k): v for k, v in errors.items()},
        tip_error_vs_full_mm=tip_error,
        # what the tip error measures: the paper's setup re-runs the pull the basis was
        # factorized from (in-sample); a --basis file of another sweep makes it out of sample
        tip_error_sample=("in-sample: the basis is the NNMF of this pull's own snapshots" if data is None
                          else f"the --basis file's ({data.simulator}, sweep {list(data.sweep)})"),
        tip_error_vs_no_contact_mm=1e3 * float(np.linalg.norm(free["tips"] - full["tips"], axis=1).max()),
        max_penetration_mm=1e3 * reduced["penetration"],
        reduced_contact_steps_per_s=reduced["steps"] / reduced["wall_s"],
        speedup_vs_full=(reduced["steps"] / reduced["wall_s"]) / (full["steps"] / full["wall_s"]),
        # the most any contact model could gain here: contact at no cost at all (Goury's
        # 90x comes from a scene where full contact dominates the step; here it does not)
        speedup_bound_vs_full=(free["steps"] / free["wall_s"]) / (full["steps"] / full["wall_s"]),
        reduced_contact_steps_per_cpu_s=reduced["steps"] / reduced["cpu_s"],
        speedup_vs_full_cpu=full["cpu_s"] / reduced["cpu_s"],
        speedup_bound_vs_full_cpu=full["cpu_s"] / free["cpu_s"],
        **in_contact,
    )
    if args.model_updates and full["states"]:
        result.update(_controller_model(full["states"], used, args.model_updates))
    elif args.model_updates and surface is not None:
        result["model_comparison"] = ("skipped: the controller's model (finger.yaml) detects contact on the mesh "
                                      "boundary, not on this collision surface")
    if args.out is not None:
        result["figure"] = str(_figure(args.out, errors, full, reduced, free, args))
    return result


def _controller_model(states, basis, updates) -> dict:
    """The basis in the controller's model (core/contact/basis_builder.py
    ``compare_on_model``: finger.yaml's RobotModel, its contact exact with a 1.5 mm alarm,
    full vs with the basis) from the full pull's plant states [mm]."""
    from soft_inverse_ros.core.contact.basis_builder import compare_on_model
    from soft_inverse_ros.core.model.description import load_robot_description

    check = compare_on_model(load_robot_description("finger"), basis, [(x, lam) for _, x, lam in states], updates)
    return {"model_states_mm": [mm for mm, _, _ in states],
            "model_tip_error_vs_full_mm": {str(n): None if d is None else 1e3 * d
                                           for n, d in check["tip_distance"].items()},
            "model_contact_effect_mm": 1e3 * check["contact_effect"]}


def _figure(out: Path, errors: dict, full: dict, reduced: dict, free: dict, args) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    ks = sorted(errors)
    axes[0].semilogy(ks, [errors[k] for k in ks], "o-")
    axes[0].set_xlabel("basis size k")
    axes[0].set_ylabel("‖S − ΨB‖ / ‖S‖")
    axes[0].set_title("NNMF of the contact-force snapshots (Goury Fig. 12)")
    axes[0].grid(True, alpha=0.3)
    pull = args.step_mm * np.arange(full["tips"].shape[0])
    reduced_label = f"reduced, k = {args.k}" if args.basis is None else f"reduced, {args.basis.name}"
    for run, label in ((free, "no contact"), (full, "full contact"), (reduced, reduced_label)):
        axes[1].plot(pull, 1e3 * run["tips"][:, 1], label=label)
    axes[1].set_xlabel("cable pull [mm]")
    axes[1].set_ylabel("tip y [mm]")
    axes[1].legend()
    axes[1].grid(True, alpha=0.3)
    fig.tight_layout()
    path = out / "reduced_contact.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, help="the finger's self-collision with a reduced NNMF contact basis (Goury 2021)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pull-mm", type=positive, default=55.0, help="total cable pull [mm] (default 55)")
    parser.add_argument("--step-mm", type=positive, default=None,
                        help="pull per time step [mm] (paper and default: 0.05; --quick: 0.25)")
    parser.add_argument("--dt", type=float, default=0.01, help="time step [s]")
    parser.add_argument("--alarm-mm", type=float, default=0.5, help="contact alarm distance [mm]")
    parser.add_argument("--cable-stiffness", type=float, default=1e5, help="cable spring stiffness [N/m]")
    parser.add_argument("--k", type=int, default=5, help="basis size (paper: 5)")
    parser.add_argument("--nnmf", choices=("hals", "als"), default="hals",
                        help="NNMF algorithm: hals (monotone) or als (the paper's Algorithm 1)")
    parser.add_argument("--nnmf-iterations", type=int, default=500, help="NNMF sweeps")
    parser.add_argument("--model-updates", type=_updates, default=(3, 100),
                        help="horizons (updates, comma-separated) of the controller's-model comparison "
                             "(default 3,100; 0: skip it)")
    parser.add_argument("--basis", type=Path, default=None,
                        help="a basis file (reduce-contacts) for the reduced pull and the controller's-model "
                             "comparison instead of the experiment's own basis")
    parser.add_argument("--collision-surface", type=Path, default=None,
                        help="collision surface file (STL/OBJ, the mesh's units: mm) mapped barycentrically into "
                             "the finger's mesh (default: the mesh boundary)")
    add_refine_option(parser, 0)
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--out", type=Path, default=None, help="write reduced-contact.json and the figure here")
    parser.add_argument("--quick", action="store_true", help="0.25 mm steps unless --step-mm is given (seconds, for tests)")
    parser.set_defaults(func=main)
    return parser


def _updates(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if values == (0,):
        return ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"updates must be >= 1 (or 0 alone: skip), got {text!r}")
    return tuple(sorted(set(values)))


def main(args: argparse.Namespace) -> int:
    import sys

    from soft_inverse_ros.experiments.self_collision import run_finger

    if not (args.k >= 1 and args.nnmf_iterations >= 1):
        print(f"experiment {NAME}: --k and --nnmf-iterations must be >= 1", file=sys.stderr)
        return 2
    return run_finger(NAME, args, measure, ("pull_mm", "step_mm", "dt", "alarm_mm", "cable_stiffness"))
