"""``experiment inverse-contact``: inverse control of SOFA's finger with its notches closed.

Coevoet et al. (eq. 13–14) and Goury et al. 2021 §V on the finger (``config/robots/finger.yaml``,
self-collision of its boundary): the controller's model (:class:`RobotModel`, one Newton
step with the contact correction per update) is the robot, as in the papers' inverse
simulations; each control step takes the newest snapshot (with its contact block) and the
inverse solver's tick (``InverseSolver.solve``: the QP with complementarity constraints of
core/control/contact_inverse.py, or the contact-unaware QP with ``contacts: ignore``), then
advances the model under the commanded cable tension.

1. **Targets that need the notches closed.** The tip of the contact-aware model's
   equilibrium under each of ``--target-efforts`` (cable tensions beyond the first contact,
   where the notches touch: each target's contact forces are in the JSON), reached from
   rest by ``--steps`` control steps (model updates), with the contacts in the QP (``full``) and without
   (``ignore``: the contact-unaware controller, for comparison). ``target_error_mm`` is the
   tip's distance to the target after the last step; ``max_penetration_mm`` a fresh
   detection at the final states (3 mm deep).
   With ``--basis`` (default: the shipped ``config/robots/finger_model_basis.npz``, built by
   ``reduce-contacts --simulator model``) the same targets with the reduced contact basis
   (Goury §V) in the robot model and in the QP, with the contact model's per-point gap
   check (``ContactModel.enrich_tolerance``: a contact the reduced law Ψᵀδ ≥ 0 would let
   sink in gets a force of its own; their pattern is one more generalized contact): the
   snapshot's contact block is (k + 1) × (k + 1) whatever touches (``reduced_*`` keys,
   ``reduced_contact_variables_max``; the penetration by a full detection). The same runs
   with Goury's reduced law alone (no check; ``reduced_law_alone_*``) show what it leaves.
2. **QPCC vs enumeration.** The first and the last tick on each snapshot with ≤ 8 contacts
   are solved again by enumerating all contact states; ``qpcc_vs_enumeration_max_rel`` is
   the largest relative objective gap.
3. **Pressing with a force-sum limit** (eq. 14). A rigid plane (``--press-plane-y-mm``,
   normal −y) above the curling finger and a target beyond it (the no-plane tip under
   ``--press-target-effort``): the finger presses on the plane. Run once without a limit and
   once with ``1ᵀλ_c ≤ --press-limit-fraction`` × the unlimited run's final force sum; the
   JSON has both effector errors, the largest force sum the model carried (its own
   Signorini forces, not the QP's prediction) and ``force_sum_limit_violation`` (the most it
   went above the limit, 0 when never), and the largest force sum the QP predicted for its
   commands (``press_predicted_force_sum_max_with_limit_n``: at most the limit less the
   solver's ``contact_limit_feedback`` margin, the largest excess of the model's force sum
   over the prediction seen so far; the model's forces differ by what the linearization
   and the model's unsettled one-step update miss).
4. **Tick cost.** ``inverse_contact_tick_p99_us``: the solver's ticks with contacts, one core,
   ``--ticks-per-update`` ticks per snapshot as live (1 kHz ticks, 30 Hz snapshots);
   ``first_tick_of_snapshot_p99_us`` the first tick after a new snapshot alone (its warm
   start is the linearized LCP under the last command, not the previous tick's state).
   Wall-clock times include the time the OS gave other processes (on a shared machine the
   p99 is the load's); ``*_tick_cpu_p99_us`` is the same quantile of the thread's CPU time
   (``time.thread_time``), what a tick costs when it has a core.

Friction is not in the inverse problem (frictionless self-contact).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from soft_inverse_ros.cli_values import finite, positive

NAME = "inverse-contact"


def _model(contact=None, basis: Path | None = None, enrich: bool = True):
    """The finger's controller model with its description's self-collision (``contact``
    replaces it: a ContactModel, or False for none; ``basis``: the self-collision reduced
    to this ``reduce-contacts`` basis file, the description key ``collision.reduced_basis``;
    ``enrich`` False: without the per-point gap check, Goury's reduced law alone)."""
    import dataclasses

    import yaml

    from soft_inverse_ros.core.config_files import resolve_robot
    from soft_inverse_ros.core.model.description import parse_robot_description
    from soft_inverse_ros.core.model.robot_model import RobotModel

    source = resolve_robot("finger")
    data = yaml.safe_load(source.read_text())
    if basis is not None:
        from soft_inverse_ros.core.contact.basis_file import load_basis

        load_basis(basis)  # a defect of the file: one line naming it, not the finger's description
        data["collision"]["reduced_basis"] = str(Path(basis).resolve())
    desc = parse_robot_description(data, source=source)
    model = RobotModel.from_description(desc, contact=contact is not False)
    if contact not in (None, False):
        model.set_contact(contact)
    if not enrich and model.contact is not None:
        model.set_contact(dataclasses.replace(model.contact, enrich_tolerance=None))
    return model


def _settle(model, effort: float, updates: int) -> object:
    """``updates`` model updates under a fixed cable tension [N]; the last snapshot."""
    import numpy as np

    snap = None
    for i in range(updates):
        _, snap = model.update(np.array([effort]), i, 0.0)
    return snap


def _equilibrium(model, effort: float, ramp: int) -> object:
    """The model ramped from rest to ``effort`` [N] in ``ramp`` steps of 10 updates, then 60
    more: the snapshot of the (settled) state."""
    import numpy as np

    model.reset()
    for e in np.linspace(0.0, effort, ramp + 1):
        _settle(model, float(e), 10)
    return _settle(model, effort, 60)


def _penetration(model, full_detection=None) -> float:
    """The deepest interpenetration at the model's state [m] (fresh detection, 3 mm deep;
    ``full_detection``: that contact model's detection instead of the model's own)."""
    import numpy as np

    c, x = full_detection or model.contact, np.asarray(model.positions)
    gaps = [c.detect(x).gaps]
    if c.self_collision is not None:
        gaps.append(c.self_collision.contacts(x, c.alarm_distance, depth=3e-3).gaps)
    return float(max((np.maximum(-g, 0.0).max(initial=0.0) for g in gaps), default=0.0))


def _solver(config: dict, limits):
    from soft_inverse_ros.core.control.inverse_qp import InverseSolver, InverseSolverConfig

    return InverseSolver(InverseSolverConfig(**config), limits)


def _limits(model, args):
    """The description's limits with the experiment's stroke bound and per-tick tension step."""
    from soft_inverse_ros.core.control.actuator_limits import ActuatorLimits

    lim = model.actuator_limits()
    return ActuatorLimits(lim.effort_min, lim.effort_max, lim.stroke_min, [args.max_stroke_mm * 1e-3],
                          max_effort_step=[args.effort_step], names=lim.names)


def _track(model, solver, target, steps: int, ticks_per_update: int, check_enumeration: bool = False) -> dict:
    """From rest, ``steps`` control steps towards ``target`` (3,) [m]: per step one model
    update and ``ticks_per_update`` solver ticks on its snapshot (the live loop's 1 kHz
    ticks between 30 Hz snapshots), the last tick's command applied."""
    import numpy as np

    from soft_inverse_ros.core.control.contact_qp import enumerate_contact_qp

    model.reset()
    solver.reset()
    lam = np.zeros(model.n_actuators)
    ticks, first, states, not_ok, gaps, tips, sums, predicted = [], [], [], 0, [], [], [], [0.0]
    variables, cpu_ticks = 0, []
    for k in range(steps):
        _, snap = model.update(lam, k, 0.01 * k)
        tips.append(snap.effector_position.copy())
        c = snap.contacts
        variables = max(variables, 0 if c is None else c.size)
        sums.append(0.0 if c is None else float(c.force @ c.force_weight))
        solver.set_snapshot(snap)
        for j in range(ticks_per_update):
            t0, c0 = time.perf_counter(), time.thread_time()
            r = solver.solve(target)
            dt, cpu = time.perf_counter() - t0, time.thread_time() - c0
            tick = solver.contact_tick
            not_ok += not r.ok
            if tick is None:
                continue
            ticks.append(dt)
            cpu_ticks.append(cpu)
            states.append(r.iterations)
            if r.contact is not None:
                predicted.append(r.contact.force_sum)
            if j == 0:
                first.append(dt)
            if j in (0, ticks_per_update - 1):  # the snapshot's first (full search) and last tick
                if check_enumeration and tick.size <= 8 and tick.last_result.feasible:
                    ref = enumerate_contact_qp(tick.last_problem)
                    gaps.append(abs(tick.last_result.objective - ref.objective) / max(ref.objective, 1e-30))
        lam = np.array(r.efforts)
    tips = np.array(tips)
    return {"error_mm": 1e3 * float(np.linalg.norm(tips[-1] - target)),
            "spread_last_20_mm": 1e3 * float(np.ptp(tips[-20:], axis=0).max()),
            "penetration_mm": 1e3 * _penetration(model), "effort_n": float(lam[0]),
            "ticks_not_solved": int(not_ok), "tick_times": ticks, "tick_cpu_times": cpu_ticks,
            "first_tick_times": first, "tick_states": states,
            "enumeration_gaps": gaps, "force_sums": sums, "contact_variables_max": variables, "predicted_force_sum_max": max(predicted), "tips": tips}


def _targets(args) -> list[dict]:
    """The tips of the contact-aware equilibria under the target tensions."""
    model = _model()
    out = []
    for effort in args.target_efforts:
        snap = _equilibrium(model, effort, args.ramp)
        c = snap.contacts
        out.append({"effort_n": effort, "target": snap.effector_position.copy(),
                    "contacts": 0 if c is None else int((c.force > 0).sum()),
                    "force_sum_n": 0.0 if c is None else float(c.force.sum()),
                    "stroke_mm": 1e3 * float(snap.actuator_stroke[0])})
    return out


def _press(args, limits_of) -> dict:
    """The pressing task: target beyond a plane, without and with a force-sum limit."""
    import numpy as np

    from soft_inverse_ros.core.contact.correction import ContactModel
    from soft_inverse_ros.core.contact.geometry import Plane

    free = _model(False)
    target = _equilibrium(free, args.press_target_effort, args.ramp).effector_position.copy()
    base = _model()
    plane = Plane((0.0, args.press_plane_y_mm * 1e-3, 0.0), (0.0, -1.0, 0.0))
    model = _model(ContactModel(obstacles=(plane,), self_collision=base.contact.self_collision,
                                alarm_distance=base.contact.alarm_distance, solver="exact",
                                nodes=base.contact.nodes))
    lim = limits_of(model)
    unlimited = _track(model, _solver({}, lim), target, args.steps, args.ticks_per_update)
    limit = args.press_limit_fraction * unlimited["force_sums"][-1]
    if not limit > 0:
        raise RuntimeError("the pressing target does not press on the plane (no contact force): "
                           "lower --press-plane-y-mm or raise --press-target-effort")
    limited = _track(model, _solver({"contact_force_sum_max": limit}, lim), target, args.steps,
                     args.ticks_per_update)
    sums = np.array(limited["force_sums"])
    return {
        "press_plane_y_mm": args.press_plane_y_mm, "press_target_mm": (1e3 * target).tolist(),
        "press_force_sum_no_limit_n": unlimited["force_sums"][-1],
        "press_error_no_limit_mm": unlimited["error_mm"],
        "force_sum_limit_n": limit, "press_error_with_limit_mm": limited["error_mm"],
        "press_force_sum_max_with_limit_n": float(sums.max()),
        "force_sum_limit_violation": float(max(0.0, sums.max() - limit)),
        "press_predicted_force_sum_max_with_limit_n": limited["predicted_force_sum_max"],
        "press_ticks_not_solved_with_limit": limited["ticks_not_solved"],
        "press_penetration_mm": max(unlimited["penetration_mm"], limited["penetration_mm"]),
        "_press_runs": (unlimited, limited, limit),
    }


def measure(args: argparse.Namespace) -> dict:
    import numpy as np

    targets = _targets(args)
    model = _model()
    lim = _limits(model, args)
    top = float(lim.effort_max[0])
    beyond = [e for e in [*args.target_efforts, args.press_target_effort] if e > top]
    if beyond:  # a tension the controller may not command: no target it could reach
        raise SystemExit(f"experiment {NAME}: tensions {beyond} N exceed the finger cable's max_force {top:g} N "
                         "(--target-efforts, --press-target-effort: in N)")
    limits_of = lambda m: _limits(m, args)  # noqa: E731
    runs = {"full": [], "ignore": [], "reduced": [], "goury": []}
    reduced_models = {}
    if args.basis is not None:  # with the per-point gap check, and Goury's reduced law alone
        reduced_models = {"reduced": _model(basis=args.basis), "goury": _model(basis=args.basis, enrich=False)}
    for t in targets:
        runs["full"].append(_track(model, _solver({}, lim), t["target"], args.steps, args.ticks_per_update,
                                   check_enumeration=True))
        runs["ignore"].append(_track(model, _solver({"contacts": "ignore"}, lim), t["target"], args.steps,
                                     args.ticks_per_update))
        for name, reduced_model in reduced_models.items():
            run = _track(reduced_model, _solver({}, lim), t["target"], args.steps, args.ticks_per_update)
            run["penetration_mm"] = 1e3 * _penetration(reduced_model, full_detection=model.contact)
            runs[name].append(run)
    press = _press(args, limits_of)
    full = runs["full"]
    ticks = np.concatenate([r["tick_times"] for r in full]) if full else np.zeros(0)
    first = np.concatenate([r["first_tick_times"] for r in full]) if full else np.zeros(0)
    gaps = np.concatenate([r["enumeration_gaps"] for r in full]) if full else np.zeros(0)
    result = {
        "experiment": NAME, "robot": "finger", "steps": args.steps, "ticks_per_update": args.ticks_per_update,
        "effort_step_n": args.effort_step,
        "max_stroke_mm": args.max_stroke_mm,
        "targets": [{"effort_n": t["effort_n"], "target_mm": (1e3 * t["target"]).tolist(),
                     "contacts": t["contacts"], "force_sum_n": t["force_sum_n"], "stroke_mm": t["stroke_mm"]}
                    for t in targets],
        "target_error_mm": max(r["error_mm"] for r in full),
        "target_errors_mm": [r["error_mm"] for r in full],
        "settled_spread_mm": max(r["spread_last_20_mm"] for r in full),
        "max_penetration_mm": max(r["penetration_mm"] for r in full),
        "ticks_not_solved": sum(r["ticks_not_solved"] for r in full),
        "contact_unaware_target_errors_mm": [r["error_mm"] for r in runs["ignore"]],
        "contact_unaware_max_penetration_mm": max(r["penetration_mm"] for r in runs["ignore"]),
        "qpcc_checked_ticks": int(gaps.size),
        "qpcc_vs_enumeration_max_rel": float(gaps.max()) if gaps.size else None,
        "inverse_contact_ticks": int(ticks.size),
        "inverse_contact_tick_p50_us": 1e6 * float(np.median(ticks)) if ticks.size else None,
        "inverse_contact_tick_p99_us": 1e6 * float(np.quantile(ticks, 0.99)) if ticks.size else None,
        "inverse_contact_tick_cpu_p99_us": (1e6 * float(np.quantile(np.concatenate([r["tick_cpu_times"] for r in full]),
                                                                    0.99)) if ticks.size else None),
        "first_tick_of_snapshot_p99_us": 1e6 * float(np.quantile(first, 0.99)) if first.size else None,
        "inverse_contact_states_p99": (float(np.quantile(np.concatenate([r["tick_states"] for r in full]), 0.99))
                                       if ticks.size else None),
        **{k: v for k, v in press.items() if not k.startswith("_")},
    }
    if runs["reduced"]:
        red = runs["reduced"]
        rticks = np.concatenate([r["tick_times"] for r in red])
        result.update(
            basis_file=str(args.basis), reduced_target_errors_mm=[r["error_mm"] for r in red],
            reduced_target_error_mm=max(r["error_mm"] for r in red),
            reduced_max_penetration_mm=max(r["penetration_mm"] for r in red),
            reduced_ticks_not_solved=sum(r["ticks_not_solved"] for r in red),
            reduced_contact_tick_p99_us=1e6 * float(np.quantile(rticks, 0.99)) if rticks.size else None,
            reduced_contact_tick_cpu_p99_us=(1e6 * float(np.quantile(np.concatenate([r["tick_cpu_times"] for r in red]),
                                                                     0.99)) if rticks.size else None),
            basis_size=int(reduced_models["reduced"].basis.size),
            reduced_contact_variables_max=max(r["contact_variables_max"] for r in red))
        goury = runs["goury"]
        result.update(
            reduced_law_alone_target_errors_mm=[r["error_mm"] for r in goury],
            reduced_law_alone_max_penetration_mm=max(r["penetration_mm"] for r in goury),
            reduced_law_alone_ticks_not_solved=sum(r["ticks_not_solved"] for r in goury))
    if args.out is not None:
        result["figure"] = str(_figure(args.out, targets, runs, press["_press_runs"]))
    return result


def _figure(out: Path, targets, runs, press) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    for i, t in enumerate(targets):
        for mode, style in (("full", "-"), ("ignore", ":")):
            err = 1e3 * np.linalg.norm(runs[mode][i]["tips"] - t["target"], axis=1)
            axes[0].semilogy(np.maximum(err, 1e-4), style, color=f"C{i}",
                             label=f"{t['effort_n']:g} N target, {'contacts in the QP' if mode == 'full' else 'contact-unaware'}")
    axes[0].set_xlabel("control step")
    axes[0].set_ylabel("tip − target [mm]")
    axes[0].legend(fontsize=7)
    axes[0].set_title("reaching targets with the notches closed")
    for i, t in enumerate(targets):
        axes[1].plot(np.array(runs["full"][i]["force_sums"]), color=f"C{i}", label=f"{t['effort_n']:g} N target")
    axes[1].set_xlabel("control step")
    axes[1].set_ylabel("contact force sum [N]")
    axes[1].legend(fontsize=7)
    unlimited, limited, limit = press
    axes[2].plot(unlimited["force_sums"], label="no limit")
    axes[2].plot(limited["force_sums"], label="with the force-sum limit")
    axes[2].axhline(limit, color="k", ls="--", lw=0.8, label=f"limit {limit:.2f} N")
    axes[2].set_xlabel("control step")
    axes[2].set_ylabel("contact force sum [N]")
    axes[2].set_title("pressing on a plane (Coevoet eq. 14)")
    axes[2].legend(fontsize=7)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    path = out / "inverse_contact.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _efforts(text: str) -> list[float]:
    from soft_inverse_ros.cli_values import number_list

    values = number_list(text, "tensions in N")
    if not values or any(not (math.isfinite(v) and v > 0) for v in values):
        raise argparse.ArgumentTypeError(f"tensions must be finite numbers > 0 N, got {text!r}")
    return values


def _default_basis() -> Path | None:
    from soft_inverse_ros.core.config_files import resolve_robot

    try:
        path = resolve_robot("finger").parent / "finger_model_basis.npz"
    except (FileNotFoundError, OSError):
        return None
    return path if path.exists() else None


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, help="inverse control of the finger with its notches closed (QP with complementarity)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target-efforts", type=_efforts, default=None,
                        help="cable tensions [N] whose contact-aware equilibria are the targets "
                             "(default 3.5,4,4.5: the notches touch from ~3 N in the model; --quick: 3.5)")
    parser.add_argument("--steps", type=int, default=None,
                        help="control steps per target (default 300; --quick: 120)")
    parser.add_argument("--ramp", type=int, default=None,
                        help="ramp steps to a target's equilibrium (default 40; --quick: 15)")
    parser.add_argument("--ticks-per-update", type=int, default=33,
                        help="solver ticks per model update (default 33: 1 kHz ticks, 30 Hz snapshots)")
    parser.add_argument("--effort-step", type=float, default=0.0015,
                        help="per-tick limit of the cable tension change [N] (default 0.0015: 1.5 N/s at 1 kHz)")
    parser.add_argument("--max-stroke-mm", type=float, default=65.0,
                        help="stroke bound [mm] (default 65: the quasi-static model closes the notches "
                             "from ~55 mm of pull, the description's 55 mm bound is for the live plant)")
    parser.add_argument("--basis", type=Path, default=_default_basis(),
                        help="a reduce-contacts basis file for the reduced runs (default: the shipped "
                             "config/robots/finger_model_basis.npz, swept in the controller's model; "
                             "'none': no reduced runs)")
    parser.add_argument("--press-plane-y-mm", type=finite, default=25.0, help="height of the pressed plane [mm]")
    parser.add_argument("--press-target-effort", type=positive, default=3.0,
                        help="the pressing target: the no-plane tip under this tension [N]")
    parser.add_argument("--press-limit-fraction", type=float, default=0.5,
                        help="force-sum limit as a fraction of the unlimited run's final force sum")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--out", type=Path, default=None, help="write inverse-contact.json and the figure here")
    parser.add_argument("--quick", action="store_true", help="one target, 120 steps (for tests)")
    parser.set_defaults(func=main)
    return parser


def _quick(args: argparse.Namespace) -> None:
    """--quick: one target, 120 steps, a 15-step ramp, for what was not given."""
    args.target_efforts = [3.5] if args.target_efforts is None else args.target_efforts
    args.steps = 120 if args.steps is None else args.steps
    args.ramp = 15 if args.ramp is None else args.ramp


def main(args: argparse.Namespace) -> int:
    import sys

    from soft_inverse_ros.experiments.self_collision import run_finger

    if not 0 < args.press_limit_fraction < 1:
        print(f"experiment {NAME}: --press-limit-fraction must be in (0, 1)", file=sys.stderr)
        return 2
    args.target_efforts = [3.5, 4.0, 4.5] if args.target_efforts is None and not args.quick else args.target_efforts
    if not args.quick:
        args.steps = 300 if args.steps is None else args.steps
        args.ramp = 40 if args.ramp is None else args.ramp
    if args.basis is not None and str(args.basis).lower() == "none":
        args.basis = None
    if args.basis is not None and not args.basis.exists():
        print(f"experiment {NAME}: --basis {args.basis}: no such file", file=sys.stderr)
        return 2
    return run_finger(NAME, args, measure, ("steps", "ticks_per_update", "ramp", "effort_step", "max_stroke_mm",
                                             "press_target_effort"), quick=_quick)
