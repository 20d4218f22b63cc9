"""``experiment self-collision``: the cable-driven finger pulled with and without self-collision.

Goury et al. 2021, Fig. 5 (and the snapshot run of §IV-A): SOFA's soft finger
(``finger.vtk``, its description ``config/robots/finger.yaml``) is pulled by its cable from
0 to 40 mm in 0.05 mm steps (800 steps) in a dynamic FEM simulation (implicit Euler, the
paper's scheme), once without contact and once with the self-collision of its boundary
surface (vertex–triangle contacts, Signorini's law solved by projected Gauss–Seidel, each
step: free motion, then the contact correction; core/contact/).

Per step with self-collision: the contacts, the penetration left after the correction
(measured by a fresh detection at the corrected positions, deeper band), the
complementarity residual of the Gauss–Seidel solve ‖min(δ, λ W_ii)‖∞ [m], and the same
contact problem (W, δ_free) solved exactly (the LCP as a QP) for comparison.

The cable is driven in displacement through a stiff spring (``--cable-stiffness``,
default 1e5 N/m: 20 µm of stretch per 2 N), the plant's cable law. The description caps
the stroke at 20 mm for the controller; the experiment pulls further, as the paper does.

JSON (``--json``): ``steps``, ``pull_mm``, ``max_penetration_mm``, ``complementarity_residual``
(GS, max over steps), ``complementarity_residual_exact``, ``gs_vs_exact_max_diff``
(relative, contact forces), ``tip_shift_vs_no_contact_mm`` (tip with vs without
self-collision at full pull), ``contacts_max``, ``first_contact_force_pull_mm`` (the pull at
which a contact first carries force; null if none), ``tip_mm`` (both runs) and the
figure's path with ``--out``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from soft_inverse_ros.cli_values import positive

NAME = "self-collision"


def _plant(cable_stiffness: float, dt: float):
    """The finger's dynamic FEM plant without contact (each run sets its own)."""
    from soft_inverse_ros.core.sim.plant import PlantConfig, SoftRobotPlant

    cfg = PlantConfig(robot="finger", model="fem", contact="off", dt=dt, newton_iterations=3, newton_rtol=1e-4,
                      cable_stiffness=cable_stiffness)
    return SoftRobotPlant.from_config(cfg)


def _run(args: argparse.Namespace, with_contact: bool) -> dict:
    import numpy as np

    from soft_inverse_ros.core.contact.correction import ContactModel
    from soft_inverse_ros.core.contact.geometry import SelfCollision
    from soft_inverse_ros.core.contact.signorini import solve_signorini_exact

    plant = _plant(args.cable_stiffness, args.dt)
    surface = _collision_surface(args.collision_surface, plant, args.refine)
    if surface is None:
        detector = SelfCollision(plant.surface_faces(), plant.fem.rest_points)
        at = lambda x: x  # noqa: E731  the detector's points are the FEM nodes
    else:
        detector = SelfCollision(surface.faces, surface.rest)
        at = surface.positions  # the mapped surface's vertices M x
    alarm = args.alarm_mm * 1e-3
    if with_contact:
        plant.set_contact(ContactModel(self_collision=detector, alarm_distance=alarm, tolerance=args.gs_tolerance,
                                       surface=surface))
    steps = int(round(args.pull_mm / args.step_mm))
    rows = []
    size = float(np.abs(plant.positions).max())
    t0 = time.perf_counter()
    for k in range(steps + 1):
        state = plant.step(cable_strokes=[k * args.step_mm * 1e-3])
        if not float(np.abs(state.positions).max()) < 10.0 * size:
            raise RuntimeError(f"the plant diverged at a pull of {k * args.step_mm:.2f} mm "
                               "(smaller --step-mm or --cable-stiffness)")
        row = {"pull_mm": k * args.step_mm, "tip": state.effector_position.copy(),
               "tension": float(state.cable_tensions[0])}
        c = plant.last_contact
        if with_contact and c is not None:
            after = detector.contacts(at(state.positions), alarm, depth=args.measure_depth_mm * 1e-3)
            row.update(contacts=c.contacts, force=float(c.forces.sum()) if c.contacts else 0.0,
                       gs_residual=c.complementarity_residual, gs_iterations=c.gs_iterations,
                       penetration=float(max(0.0, -after.gaps.min())) if after.size else 0.0)
            if c.w is not None and c.contacts:
                exact = solve_signorini_exact(c.w, c.delta_free)
                scale = max(float(np.abs(exact.forces).max()), 1e-12)
                row["exact_residual"] = exact.residual
                row["gs_vs_exact"] = float(np.abs(exact.forces - c.forces).max()) / scale
                row["forces"] = c.forces.copy()
                row["points"] = c.contact_set.points.copy()
        rows.append(row)
    return {"rows": rows, "positions": plant.positions.copy(),
            "faces": plant.surface_faces(), "detector_faces": detector.faces, "wall_s": time.perf_counter() - t0}


def _collision_surface(path: Path | None, plant, refine: int = 0, name: str = NAME):
    """The collision surface mapped into the plant's mesh, or None for the mesh boundary
    itself: the ``--collision-surface`` file (the finger's mesh units, mm), or the mesh
    boundary, subdivided ``refine`` times (``mapped_surface.subdivide``: the same shape, a
    finer collision model, as the paper's 495-point finger)."""
    if path is None and not refine:
        return None
    import numpy as np

    from soft_inverse_ros.core.contact.mapped_surface import load_surface, map_surface, subdivide

    try:
        if path is None:
            faces = plant.surface_faces()
            used, local = np.unique(faces, return_inverse=True)
            faces, points = local.reshape(-1, 3), plant.fem.rest_points[used]
        else:
            faces, points = load_surface(path, plant.description.mesh.unit_scale,
                                         rotation_deg=plant.description.mesh.rotation_deg,
                                         translation=plant.description.mesh.translation)
        faces, points = subdivide(faces, points, refine)
        return map_surface(faces, points, plant.fem.rest_points, plant.fem.tets)
    except ValueError as exc:
        raise SystemExit(f"{name}: {'--collision-surface' if path is not None else '--refine'}: {exc}") from None


def measure(args: argparse.Namespace) -> dict:
    import numpy as np

    free = _run(args, with_contact=False)
    contact = _run(args, with_contact=True)
    rows = contact["rows"]
    tip_free = free["rows"][-1]["tip"]
    tip_contact = rows[-1]["tip"]
    forced = [r["pull_mm"] for r in rows if r.get("force", 0.0) > 0.0]
    with_force = [r for r in rows if "gs_vs_exact" in r]
    result = {
        "experiment": NAME,
        "robot": "finger",
        "collision_surface": str(args.collision_surface) if args.collision_surface else "mesh boundary",
        "collision_refine": args.refine,
        "collision_triangles": len(contact["detector_faces"]),
        "steps": len(rows) - 1,
        "pull_mm": args.pull_mm,
        "step_mm": args.step_mm,
        "dt_s": args.dt,
        "alarm_mm": args.alarm_mm,
        "max_penetration_mm": 1e3 * max(r.get("penetration", 0.0) for r in rows),
        "complementarity_residual": max((r.get("gs_residual", 0.0) for r in rows), default=0.0),
        "complementarity_residual_exact": max((r.get("exact_residual", 0.0) for r in rows), default=0.0),
        "gs_vs_exact_max_diff": max((r["gs_vs_exact"] for r in with_force), default=0.0),
        "tip_shift_vs_no_contact_mm": 1e3 * float(np.linalg.norm(tip_contact - tip_free)),
        "contacts_max": max(r.get("contacts", 0) for r in rows),
        "first_contact_force_pull_mm": forced[0] if forced else None,
        "tip_mm": {"no_contact": (1e3 * tip_free).tolist(), "self_collision": (1e3 * tip_contact).tolist()},
        "max_gs_iterations": max(r.get("gs_iterations", 0) for r in rows),
        "wall_s": {"no_contact": free["wall_s"], "self_collision": contact["wall_s"]},
    }
    if args.out is not None:
        result["figure"] = str(_figure(args.out, free, contact))
    return result


def _figure(out: Path, free: dict, contact: dict) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, run, title in ((axes[0], free, "without self-collision"), (axes[1], contact, "with self-collision")):
        x = 1e3 * run["positions"]
        faces = run["faces"]
        edges = np.unique(np.sort(faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1), axis=0)
        for a, b in edges:
            ax.plot(x[[a, b], 0], x[[a, b], 1], color="0.6", lw=0.5)
        last = run["rows"][-1]
        if "points" in last and len(last["points"]):
            p = 1e3 * last["points"]
            ax.scatter(p[:, 0], p[:, 1], color="tab:red", s=12, label="contacts")
            ax.legend(loc="lower left")
        ax.set_title(f"{title}, pull {last['pull_mm']:.1f} mm")
        ax.set_xlabel("x [mm]")
        ax.set_ylabel("y [mm]")
        ax.set_aspect("equal")
    rows = contact["rows"]
    pull = [r["pull_mm"] for r in rows]
    axes[2].plot(pull, [r.get("force", 0.0) for r in rows], label="total contact force [N]")
    axes[2].plot(pull, [r["tension"] for r in rows], label="cable tension [N]")
    axes[2].plot([r["pull_mm"] for r in free["rows"]], [r["tension"] for r in free["rows"]], "--",
                 label="cable tension, no contact [N]")
    axes[2].set_xlabel("cable pull [mm]")
    axes[2].legend()
    fig.tight_layout()
    path = out / "self_collision.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, help="SOFA's finger pulled with and without self-collision (Goury 2021 Fig. 5)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pull-mm", type=positive, default=40.0, help="total cable pull [mm] (paper: 40)")
    parser.add_argument("--step-mm", type=positive, default=None,
                        help="pull per time step [mm] (paper and default: 0.05; --quick: 0.25)")
    parser.add_argument("--dt", type=positive, default=0.01, help="time step [s]")
    parser.add_argument("--alarm-mm", type=positive, default=0.5,
                        help="contacts are created below this gap [mm] (above the motion per step)")
    parser.add_argument("--measure-depth-mm", type=positive, default=3.0,
                        help="penetration measured down to this depth after each correction [mm]")
    parser.add_argument("--cable-stiffness", type=positive, default=1e5, help="cable spring stiffness [N/m]")
    parser.add_argument("--gs-tolerance", type=positive, default=1e-10,
                        help="Gauss-Seidel complementarity tolerance [m]")
    parser.add_argument("--collision-surface", type=Path, default=None,
                        help="collision surface file (STL/OBJ, the mesh's units: mm) mapped barycentrically "
                             "into the finger's mesh (default: the mesh boundary)")
    add_refine_option(parser, 0)
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--out", type=Path, default=None, help="write self-collision.json and the figure here")
    parser.add_argument("--quick", action="store_true", help="0.25 mm steps unless --step-mm is given (seconds, for tests)")
    parser.set_defaults(func=main)
    return parser


def add_refine_option(parser: argparse.ArgumentParser, default: int) -> None:
    """``--refine N``: the collision surface subdivided N times (each triangle into four)."""
    def levels(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
        if not 0 <= value <= 3:
            raise argparse.ArgumentTypeError(f"must be 0 to 3 (each level quadruples the triangles), got {value}")
        return value

    parser.add_argument("--refine", type=levels, default=default,
                        help="subdivide the collision surface N times, each triangle into four through its edge "
                             "midpoints: the same shape, a finer collision model (the paper's finger uses an "
                             f"'artificially fine' 495-point one; the boundary has 155 vertices, 1 level 614) "
                             f"(default {default})")


def _quick_steps(args: argparse.Namespace) -> None:
    """--quick: 0.25 mm steps, unless --step-mm was given (it sizes only what is not)."""
    if args.step_mm is None:
        args.step_mm = 0.25


def run_finger(name: str, args: argparse.Namespace, measure, positive: tuple[str, ...],
               quick=_quick_steps) -> int:
    """The command of a finger experiment: options in ``positive`` must be > 0 (exit 2),
    ``--quick`` applies ``quick(args)`` (default: 0.25 mm steps), a missing finger mesh is
    one line (exit 2), a diverging plant one line (exit 1); else the JSON/--out of
    ``measure(args)``."""
    import sys

    from soft_inverse_ros.experiments import emit, limit_threads

    if args.quick:
        quick(args)
    if getattr(args, "step_mm", 0.0) is None:
        args.step_mm = 0.05  # the paper's
    for key in positive:
        if not getattr(args, key) > 0:
            print(f"experiment {name}: --{key.replace('_', '-')} must be > 0", file=sys.stderr)
            return 2
    if hasattr(args, "step_mm") and hasattr(args, "pull_mm") and args.step_mm > args.pull_mm:
        print(f"experiment {name}: --step-mm {args.step_mm:g} is more than --pull-mm {args.pull_mm:g}: "
              "no step would be taken", file=sys.stderr)
        return 2
    limit_threads()
    try:
        result = measure(args)
    except FileNotFoundError as exc:
        print(f"experiment {name}: {exc} (the finger mesh lives in ../shared/data/sofa-softrobots "
              "or $SOFA_SOFTROBOTS_DATA)", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"experiment {name}: {exc}", file=sys.stderr)
        return 1
    emit(result, args, name)
    return 0


def main(args: argparse.Namespace) -> int:
    return run_finger(NAME, args, measure, ("pull_mm", "step_mm", "dt", "alarm_mm", "measure_depth_mm",
                                             "cable_stiffness", "gs_tolerance"))
