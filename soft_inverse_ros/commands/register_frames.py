"""``soft-inverse-ros register-frames PAIRS.csv``: fit the mocap → robot transform.

PAIRS.csv holds the same points measured by the mocap and known in the robot frame
(columns ``mocap_x, mocap_y, mocap_z, robot_x, robot_y, robot_z``, optional ``weight``;
robot coordinates in metres, mocap coordinates in ``--mocap-unit``). The least-squares
rigid transform (no scale) and its residuals are printed and saved as a
``mocap_registration`` YAML block, either to its own file (``--out``) or into an existing
configuration (``--robot``/``--config``, e.g. ``config/mocap_vicon.yaml``), which the mocap
configuration loader applies.
"""

from __future__ import annotations

import argparse
import sys

from soft_inverse_ros import finite_json
from soft_inverse_ros.cli_values import non_negative

MOCAP_UNITS = {"m": 1.0, "cm": 1e-2, "mm": 1e-3}


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
        "--max-rms", type=non_negative, default=None,
        help="fail (exit 1, nothing written) when the residual RMS exceeds this [m]",
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
    if args.max_rms is not None and reg.residual_rms > args.max_rms:
        print(
            f"register-frames: residual RMS {reg.residual_rms:.6g} m exceeds --max-rms "
            f"{args.max_rms:.6g} m; nothing written",
            file=sys.stderr,
        )
        return 1
    try:
        path = save_registration(reg, args.out or args.robot, update=args.robot is not None)
    except (OSError, ValueError) as exc:
        print(f"register-frames: {exc}", file=sys.stderr)
        return 2
    if not args.json:
        print(f"written: {path}")
    return 0
