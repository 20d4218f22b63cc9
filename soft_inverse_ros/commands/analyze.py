"""``soft-inverse-ros analyze BAG``: metrics and plots of a recorded run.

Reads a rosbag2 bag (MCAP or sqlite3; from the recorder node or ``ros2 bag record``),
writes a report folder (metrics.json, metrics.md, PNG plots) and prints the tables.
With ``--json`` the last output line is the metrics as one JSON object. A bag of the soft
snake (``mocap/plate<k>/pose``, ``plant/plate_poses``) also gets its centre-of-mass path,
per-link curvature and forward speed (snake_com_path.png, snake_curvature.png).
"""

from __future__ import annotations

import argparse

from soft_inverse_ros.cli_values import non_negative, non_negative_count, positive


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "analyze", help="metrics and plots of a recorded bag", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("bag", help="bag folder (or its .mcap / .db3 file)")
    parser.add_argument("--out", help="report folder (default: <bag>_report)")
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON last")
    parser.add_argument("--namespace", help="namespace of the graph topics (default: auto)")
    parser.add_argument("--command-rate", type=positive, metavar="HZ",
                        help="nominal actuator command rate for the tables, and for the verdict's "
                             "missed slots when the bag does not hold the controller's own rate "
                             "(default: the controller's rate from its diagnostics, else 1 / median "
                             "period in the tables and 1 kHz in the verdict)")
    parser.add_argument("--snapshot-rate", type=positive, metavar="HZ",
                        help="nominal compliance snapshot rate (default: 1 / median period)")
    parser.add_argument("--target-interp", choices=("linear", "hold"), default="linear",
                        help="target at effector times: interpolated or last published")
    parser.add_argument("--moving-threshold", type=non_negative, default=1e-3, metavar="M_PER_S",
                        help="target speed separating the moving and holding phases [m/s]")
    parser.add_argument("--snapshots", type=non_negative_count, default=3,
                        help="3D robot images rendered from the MarkerArray topic")
    parser.add_argument("--no-plots", action="store_true", help="metrics only")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 3 when the run is INVALID (as demo --strict)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from rosbags.rosbag2.errors import ReaderError

    from soft_inverse_ros.analysis.report import metrics_markdown, write_report

    try:
        report = write_report(
            args.bag, args.out, namespace=args.namespace,
            nominal_command_hz=args.command_rate, nominal_snapshot_hz=args.snapshot_rate,
            target_interp=args.target_interp,
            moving_threshold=args.moving_threshold, snapshots=args.snapshots,
            plots_enabled=not args.no_plots,
        )
    except (OSError, ValueError, ReaderError) as err:
        print(f"analyze: {err}", file=sys.stderr)
        return 2
    print(metrics_markdown(report.metrics))
    print(f"report written to {report.out_dir}: " + ", ".join(p.name for p in report.files))
    if args.json:
        print(json.dumps(report.metrics))
    if args.strict and not report.metrics["validity"]["valid"]:
        return 3
    return 0
