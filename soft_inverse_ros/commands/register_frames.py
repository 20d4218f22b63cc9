"""``soft-inverse-ros register-frames PAIRS.csv``: fit the mocap → robot transform.

PAIRS.csv holds the same points measured by the mocap and known in the robot frame
(columns ``mocap_x, mocap_y, mocap_z, robot_x, robot_y, robot_z``, optional ``weight``;
robot coordinates in metres, mocap coordinates in ``--mocap-unit``). The least-squares
rigid transform (no scale) and its residuals are printed and saved as a
``mocap_registration`` YAML block, either to its own file (``--out``) or into an existing
configuration (``--robot``/``--config``, e.g. ``config/mocap_vicon.yaml``), which the mocap
configuration loader applies. An updated configuration is loaded with its loader (the mocap
configuration loader for a file with a ``mocap`` block) before it replaces the file: a result
it would refuse or not read (a ``--robot-frame`` other than its ``mocap.robot_frame``, a
``mocap.registration`` entry taking precedence) is refused and nothing is written.

A residual RMS above ``--max-rms`` (default 10 mm) is refused, nothing written: a wrong unit
(mm read as m) shows up as a residual of the order of the points' spread, metres.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Callable

from soft_inverse_ros import finite_json
from soft_inverse_ros.cli_values import non_negative

MOCAP_UNITS = {"m": 1.0, "cm": 1e-2, "mm": 1e-3}
#: default --max-rms [m]: motion capture measures markers to ~0.1-1 mm and points touched
#: with a probe add a few mm at worst, while a wrong unit (mm or cm read as m) leaves a
#: residual of the order of the points' spread (centimetres to metres)
DEFAULT_MAX_RMS_M = 0.01


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "register-frames",
        help="estimate the mocap → robot frame transform from paired points",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("pairs", help="CSV of paired points (mocap_*, robot_* columns)")
    dest = parser.add_mutually_exclusive_group(required=True)
    dest.add_argument("--out", help="write the registration to this YAML file")
    dest.add_argument(
        "--robot", "--config", dest="robot", metavar="CONFIG",
        help="update the top-level mocap_registration block of this existing YAML config "
        "in place (e.g. config/mocap_vicon.yaml), keeping its other keys and comments",
    )
    parser.add_argument(
        "--mocap-unit", choices=sorted(MOCAP_UNITS), default="m",
        help="unit of the mocap columns (default m)",
    )
    parser.add_argument("--robot-frame", default="base_link", help="robot frame name")
    parser.add_argument("--mocap-frame", default="mocap", help="mocap frame name")
    parser.add_argument(
        "--max-rms", type=non_negative, default=DEFAULT_MAX_RMS_M,
        help=f"fail (exit 1, nothing written) when the residual RMS exceeds this [m] (default "
        f"{DEFAULT_MAX_RMS_M:g}: larger is implausible for motion capture, a wrong unit; give a larger "
        "value to accept a coarse calibration)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from soft_inverse_ros.core.mocap.registration import (
        RegistrationError,
        estimate_rigid_transform,
        read_point_pairs,
        save_registration,
    )

    try:
        mocap, robot, weights = read_point_pairs(args.pairs)
        result = estimate_rigid_transform(
            mocap, robot, weights,
            mocap_unit_scale=MOCAP_UNITS[args.mocap_unit],
            parent_frame=args.robot_frame,
            child_frame=args.mocap_frame,
        )
    except (OSError, RegistrationError) as exc:
        print(f"register-frames: {exc}", file=sys.stderr)
        return 2
    reg = result.registration
    summary = reg.to_dict()
    summary["residuals"] = [float(r) for r in result.residuals]
    summary["rotation_angle_deg"] = float(reg.transform.rotation_angle() * 180.0 / 3.141592653589793)
    if args.json:
        print(finite_json.dumps(summary))
    else:
        print(f"pairs: {reg.n_points}")
        print(f"translation [m]: {summary['translation']}")
        print(f"rotation (x, y, z, w): {summary['rotation_xyzw']} "
              f"({summary['rotation_angle_deg']:.3f} deg)")
        print(f"residual RMS: {reg.residual_rms * 1e3:.4f} mm, max: {reg.residual_max * 1e3:.4f} mm")
    if reg.residual_rms > args.max_rms:
        print(
            f"register-frames: residual RMS {reg.residual_rms:.6g} m exceeds --max-rms "
            f"{args.max_rms:.6g} m (check --mocap-unit and that the robot columns are in m); nothing written",
            file=sys.stderr,
        )
        return 1
    target = pathlib.Path(args.out or args.robot)
    try:
        path = save_registration(reg, target, update=args.robot is not None, check=_loads_as_written(target, reg))
    except (OSError, ValueError) as exc:
        print(f"register-frames: {' '.join(str(exc).split())}; nothing written", file=sys.stderr)
        return 2
    if not args.json:
        print(f"written: {path}")
    return 0


def _loads_as_written(target: pathlib.Path, registration) -> Callable[[pathlib.Path], None]:
    """A check of the updated ``target`` (written to a draft next to it): its loader must read
    ``registration`` back; the refusal names ``target``, not the draft."""
    from soft_inverse_ros.core.mocap.config import check_written_registration

    def check(draft: pathlib.Path) -> None:
        try:
            check_written_registration(draft, registration)
        except ValueError as exc:
            message = str(exc).replace(str(draft), str(target))
            raise ValueError(f"{target} as updated would not load as written: {message}") from None

    return check
