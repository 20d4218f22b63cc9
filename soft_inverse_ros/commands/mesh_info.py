"""``soft-inverse-ros mesh-info [FILE] [--unit mm] [--robot NAME|FILE]``: inspect a mesh.

Prints the format detected from the file's content, node and tetrahedron counts, total
volume, bounding box (metres, after the transform), element quality (radius ratio, 1 for
a regular tetrahedron) and what loading dropped or reoriented.

With ``--robot``, FILE (if given) replaces the robot's mesh and is read with the robot's
unit and transform; the robot's fixed nodes, mass and mapped points are checked too.
Without FILE, the robot's own mesh (or built-in) is shown. Errors go to stderr with exit
code 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the command imports the model lazily
    from soft_inverse_ros.core.model.description import RobotDescription
    from soft_inverse_ros.core.model.mesh import TetMesh


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "mesh-info",
        help="print a tetrahedral mesh's size, volume, bounding box and quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", nargs="?", help="mesh file (VTK, VTK XML, Gmsh...; format read from content)")
    parser.add_argument("--unit", default=None, help="file length unit, e.g. mm (default m, or the robot's)")
    parser.add_argument(
        "--rotation-deg", type=float, nargs=3, metavar=("RX", "RY", "RZ"), default=None,
        help="rotate about x, then y, then z [deg] (default none, or the robot's)",
    )
    parser.add_argument(
        "--translation", type=float, nargs=3, metavar=("DX", "DY", "DZ"), default=None,
        help="translate after rotating [file units] (default none, or the robot's)",
    )
    parser.add_argument("--fix-inverted", action="store_true", help="swap the vertices of inverted tetrahedra")
    parser.add_argument("--robot", help="robot description name or YAML file")
    parser.set_defaults(func=run)


def _fmt(v) -> str:
    return "[" + ", ".join(f"{x:.6g}" for x in v) + "]"


def _robot_mesh_changes(args: argparse.Namespace) -> dict:
    """The robot mesh-spec fields the command line overrides (``unit_scale`` in m per file unit)."""
    from soft_inverse_ros.core.model import units

    changes = {}
    if args.unit is not None:
        changes["unit_scale"] = units.length_unit_scale(args.unit, key="--unit")
    if args.rotation_deg is not None:
        changes["rotation_deg"] = tuple(args.rotation_deg)
    if args.translation is not None:
        changes["translation"] = tuple(args.translation)
    if args.fix_inverted:
        changes["on_inverted"] = "fix"
    return changes


def _load_robot_and_mesh(args: argparse.Namespace) -> tuple[RobotDescription, TetMesh]:
    """Load ``--robot`` (its mesh replaced by FILE if given, overridden by the options) and its mesh."""
    import dataclasses
    from pathlib import Path

    from soft_inverse_ros.core.model.description import DescriptionError, load_robot_description

    robot = load_robot_description(args.robot, mesh_override=Path(args.file) if args.file else None)
    spec = robot.mesh
    changes = _robot_mesh_changes(args)
    if changes and spec.file is None:
        raise DescriptionError("--unit/--rotation-deg/--translation/--fix-inverted apply to mesh files only")
    if changes:
        robot = dataclasses.replace(robot, mesh=dataclasses.replace(spec, **changes))
    return robot, robot.load_mesh()


def _load_file_mesh(args: argparse.Namespace) -> TetMesh:
    """Load FILE alone (default unit m, no rotation [deg] or translation [file units])."""
    from soft_inverse_ros.core.model import units
    from soft_inverse_ros.core.model.mesh import load_mesh

    scale = units.length_unit_scale(args.unit, key="--unit") if args.unit else 1.0
    return load_mesh(
        args.file,
        unit_scale=scale,
        rotation_deg=tuple(args.rotation_deg or (0.0, 0.0, 0.0)),
        translation=tuple(args.translation or (0.0, 0.0, 0.0)),
        on_inverted="fix" if args.fix_inverted else "error",
    )


def _print_mesh_summary(mesh: TetMesh) -> float:
    """Print the mesh's format, counts, volume, box, quality and loading report.

    Returns the bounding-box diagonal [m].
    """
    import numpy as np

    rep = mesh.report
    lo, hi = mesh.bounding_box()
    q = mesh.quality()
    n_parts, _ = mesh.face_components()
    print(f"source:        {rep.source if rep.source else '(generated)'}")
    print(f"format:        {rep.file_format}")
    if rep.source is not None:
        print(
            f"transform:     unit {rep.unit_scale:g} m, rotation {_fmt(rep.rotation_deg)} deg, "
            f"translation {_fmt(rep.translation)} file units"
        )
    print(f"nodes:         {mesh.n_points}")
    print(f"tetrahedra:    {mesh.n_tets}")
    print(f"volume:        {mesh.total_volume:.6g} m^3")
    print(f"bounding box:  {_fmt(lo)} .. {_fmt(hi)} m (size {_fmt(hi - lo)})")
    print(f"quality:       min {q.min():.3f}, median {np.median(q):.3f} (radius ratio; 1 = regular)")
    print(f"connected:     {'yes' if n_parts == 1 else f'NO, {n_parts} face-connected parts'}")
    for line in rep.summary_lines() or ["nothing dropped or reoriented"]:
        print(f"loading:       {line}")
    return float(np.linalg.norm(hi - lo))


def _print_warnings(size: float, mass: float, young_modulus: float) -> None:
    """Print the plausibility warnings for a size [m], mass [kg] and Young's modulus [Pa]."""
    from soft_inverse_ros.core.model.description import plausibility_warnings

    for warning in plausibility_warnings(size, mass, young_modulus):
        print(f"warning:       {warning}")


def _print_mapped_points(robot: RobotDescription, mesh: TetMesh) -> None:
    """Print where each owner's mapped points lie (whether the model accepts a point outside
    is the model build's call: within three mean edge lengths of the mesh)."""
    for owner, pts in robot.mapped_points().items():
        inside = mesh.contains(pts)
        near = mesh.contains(pts, tol=0.05)
        state = "inside" if inside.all() else ("on the surface (within 5 %)" if near.all() else "outside the mesh")
        print(f"points {owner + ':':<14} {len(pts)} {state}")


def _check_collision(robot: RobotDescription, mesh: TetMesh) -> list[str]:
    """Build the robot's contact model as the model and the simulated robot do (its collision
    surface mapped into the mesh, the obstacles and self-collision checked at the rest shape);
    prints its size; the problems that would stop the build."""
    if robot.collision is None:
        return []
    from soft_inverse_ros.core.contact.correction import contact_model_from_description

    try:
        contact_model_from_description(robot, mesh.boundary_faces(), mesh.points, mesh.tets)
    except SystemExit as exc:  # the surface mapping's one-line refusal
        return [str(exc.code)]
    except ValueError as exc:
        return [str(exc)]
    c = robot.collision
    print(f"collision:     {'self-collision, ' if c.self_collision else ''}{len(c.obstacles)} obstacle(s), "
          f"alarm {1e3 * c.alarm_distance:g} mm; clear at rest")
    return []


def _build_problem(robot: RobotDescription, mesh: TetMesh) -> str | None:
    """Why the model of ``robot`` on ``mesh`` cannot be built (as every node and command
    builds it: support, mapped points, cavities, constraints), or None. Its contact model is
    :func:`_check_collision`'s; its plausibility warnings are printed by the caller."""
    import logging

    from soft_inverse_ros.core.model.robot_model import RobotModel

    log = logging.getLogger("soft_inverse_ros.core.model.robot_model")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        RobotModel.from_description(robot, mesh=mesh, contact=False)
    except ValueError as exc:
        return " ".join(str(exc).split())
    finally:
        log.setLevel(level)
    return None


def _check_robot(robot: RobotDescription, mesh: TetMesh) -> int:
    """Print the robot's fixed nodes, mass [kg], mapped points and plausibility warnings
    (:meth:`RobotDescription.plausibility_warnings`); exit code 2 if it cannot be built."""
    fixed = robot.fixed.node_indices(mesh.points)
    density = robot.material.mass_density(mesh.total_volume)
    mass = density * mesh.total_volume
    print(f"robot:         {robot.name} ({robot.source})")
    print(f"fixed nodes:   {fixed.size}")
    print(f"mass:          {mass:.6g} kg (density {density:.6g} kg/m^3)")
    _print_mapped_points(robot, mesh)
    for warning in robot.plausibility_warnings(mesh):
        print(f"warning:       {warning}")
    problems = _check_collision(robot, mesh)
    problem = _build_problem(robot, mesh)
    if problem:
        problems.append(problem)
    if problems:
        print(f"mesh-info: error: robot {robot.name!r} cannot be built: " + "; ".join(problems),
              file=sys.stderr)
        return 2
    return 0


def run(args: argparse.Namespace) -> int:
    from soft_inverse_ros.core.model import units
    from soft_inverse_ros.core.config_files import ConfigNotFoundError
    from soft_inverse_ros.core.model.description import (
        PLAUSIBLE_MASS_KG,
        PLAUSIBLE_YOUNG_PA,
        DescriptionError,
    )
    from soft_inverse_ros.core.model.mesh import MeshError

    if args.file is None and args.robot is None:
        print("mesh-info: give a mesh FILE, a --robot, or both", file=sys.stderr)
        return 2
    try:
        if args.robot is not None:
            robot, mesh = _load_robot_and_mesh(args)
        else:
            robot, mesh = None, _load_file_mesh(args)
    except (MeshError, DescriptionError, ConfigNotFoundError, units.UnitError) as exc:
        print(f"mesh-info: error: {exc}", file=sys.stderr)
        return 2

    size = _print_mesh_summary(mesh)
    if robot is None:
        _print_warnings(size, PLAUSIBLE_MASS_KG[0], PLAUSIBLE_YOUNG_PA[0])
        return 0
    return _check_robot(robot, mesh)
