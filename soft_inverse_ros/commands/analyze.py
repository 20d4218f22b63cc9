"""``soft-inverse-ros analyze BAG``: metrics and plots of a recorded run.

Reads a rosbag2 bag (MCAP or sqlite3; from the recorder node or ``ros2 bag record``),
writes a report folder (metrics.json, metrics.md, PNG plots) and prints the tables.
With ``--json`` the last output line is the metrics as one JSON object. A bag of the soft
snake (``mocap/plate<k>/pose``, ``plant/plate_poses``) also gets its centre-of-mass path,
per-link curvature and forward speed (snake_com_path.png, snake_curvature.png). A bag of
the hybrid arm (its model node's status on /diagnostics) gets the hybrid report instead
(metrics.json, metrics.md, hybrid.png: the probe's alignment with each held target, contact
forces, joint limits; analysis/hybrid_report.py): the options of the tracking tables do not
apply to it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from soft_inverse_ros import finite_json
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
    import sys

    from rosbags.rosbag2.errors import ReaderError

    from soft_inverse_ros.analysis.hybrid_report import is_hybrid_bag
    from soft_inverse_ros.analysis.report import metrics_markdown, write_report

    try:
        if is_hybrid_bag(args.bag):
            return _hybrid(args)
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
        print(finite_json.dumps(report.metrics))
    if args.strict and not report.metrics["validity"]["valid"]:
        return 3
    return 0


#: options of the tracking tables, and their defaults: a hybrid bag's report has none of them
_TRACKING_OPTIONS = {"namespace": None, "command_rate": None, "snapshot_rate": None,
                     "target_interp": "linear", "moving_threshold": 1e-3, "snapshots": 3}


def _hybrid(args: argparse.Namespace) -> int:
    """The hybrid arm's report of ``args.bag`` (:func:`analysis.hybrid_report.write_hybrid_report`)."""
    import sys

    from soft_inverse_ros.analysis.hybrid_report import write_hybrid_report
    from soft_inverse_ros.analysis.report import default_report_dir

    given = [f"--{k.replace('_', '-')}" for k, default in _TRACKING_OPTIONS.items()
             if getattr(args, k) != default]
    if given:
        print(f"analyze: {args.bag} records the hybrid arm, whose report has no tracking tables: "
              f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply", file=sys.stderr)
        return 2
    out = args.out if args.out is not None else default_report_dir(args.bag)
    metrics = write_hybrid_report(args.bag, out, plot=not args.no_plots)
    print((Path(out) / "metrics.md").read_text())
    print(f"report written to {out}: metrics.json, metrics.md"
          + (", hybrid.png" if (Path(out) / "hybrid.png").exists() else ""))
    if args.json:
        print(finite_json.dumps(metrics))
    if args.strict and not metrics["validity"]["valid"]:
        return 3
    return 0
