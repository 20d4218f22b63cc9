"""``soft-inverse-ros experiment distributed``: the FEM on a workstation, the controller on
the robot, over a real (emulated) network link. Root only.

The two-rate design exists so that the heavy FEM can run on another computer. This
experiment runs the simulated-robot graph split across two Linux network namespaces
joined by an emulated link (:mod:`soft_inverse_ros.experiments.netns`: TUN devices and a
relay with delay, jitter and loss, since these kernels lack ``tc netem``):

- "workstation" (10.200.0.1): ``fem_node`` with the compliance fused in;
- "robot" (10.200.0.2): target, inverse controller, simulated servos, simulated robot,
  simulated motion capture and the recorder;

with DDS discovery across the link (``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET``, each side's
``ROS_STATIC_PEERS`` = the other's address, the graph's own QoS: ``fem_state`` reliable,
``compliance`` reliable + transient local). The link emulator gives each condition, in each direction:
``no_delay``, ``delay_5ms`` (5 ± 2 ms, normal jitter), ``delay_20ms`` (20 ± 5 ms) and
``loss_1pct`` (1 % of the packets dropped).
For each condition the graph starts, the measured ``--duration`` s begin when the robot
side's controller sends its first OK command, i.e. has a snapshot that crossed the link (at
most ``--startup`` s after the start: a slow start-up does not eat the measured time), and
the robot side's bag is analysed like ``soft-inverse-ros analyze``: command rate (the 1 kHz loop
lives on the robot: it must not depend on the network), plant tracking error over the
tracking window, compliance rate and snapshot age at use. With ``--json`` the last line is
one JSON object (``namespaces``, ``command_rate_hz`` and ``plant_mean_error_mm`` per
condition, ``plant_mean_error_mm_no_delay``, ``error_ratio_5ms``, ``conditions``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from soft_inverse_ros import finite_json
from soft_inverse_ros.cli_values import positive

NAME = "distributed"
#: (label, delay [ms], jitter [ms], loss [%])
CONDITIONS = (("no_delay", 0.0, 0.0, 0.0), ("delay_5ms", 5.0, 2.0, 0.0),
              ("delay_20ms", 20.0, 5.0, 0.0), ("loss_1pct", 0.0, 0.0, 1.0))


def run_condition(ns, condition, index: int, args: argparse.Namespace, out: Path) -> dict:
    """One condition: set the link, run both halves, analyse the robot side's bag."""
    from soft_inverse_ros.analysis.report import write_report
    from soft_inverse_ros.experiments.netns import ADDRESSES
    from soft_inverse_ros.graph import build_graph
    from soft_inverse_ros.nodes.inverse_controller_node import FIRST_OK_LOG
    from soft_inverse_ros.process_launcher import GraphProcesses

    label, delay, jitter, loss = condition
    ns.set_link(delay, jitter, loss)
    bag = out / f"bag_{index}"
    graph = {"combined": "true", "record": str(bag), "robot": args.robot}
    # the two computers' halves as a user starts them: launch sim side:=fem / side:=robot
    halves = tuple(build_graph("sim", {**graph, "side": side}) for side in ("fem", "robot"))
    base = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="SUBNET",
                ROS_DOMAIN_ID=os.environ.get("ROS_DOMAIN_ID", "42"))
    graphs = []
    try:
        for side, half in enumerate(halves):
            env = dict(base, ROS_STATIC_PEERS=ADDRESSES[1 - side])
            graphs.append(GraphProcesses(half, output=None, env=env, prefix=ns.exec_prefix(side),
                                         log_dir=out / f"logs_{index}_{ns.names[side]}").start())
        controller_log = out / f"logs_{index}_{ns.names[1]}" / "inverse_controller_node.log"
        start = time.monotonic()
        end, ready = start + args.startup + args.duration, False
        while time.monotonic() < end:
            time.sleep(0.5)
            dead = [e for g in graphs for e in g.poll() if e.required]
            if dead:
                raise RuntimeError(f"{label}: required node(s) died: {dead} (logs in {out})")
            if not ready and _log_has(controller_log, FIRST_OK_LOG):
                ready, end = True, time.monotonic() + args.duration
        if not ready:
            print(f"[distributed] {label}: the controller sent no OK command within "
                  f"{args.startup:.0f} s of the start (logs in {out})", flush=True)
    finally:
        for graph in reversed(graphs):
            graph.shutdown()
    report = write_report(bag, out / f"report_{index}", nominal_command_hz=1000.0,
                          plots_enabled=False)
    summary = report.metrics["summary"]
    validity = report.metrics.get("validity") or {}
    # the age of the snapshots OK commands used, over the tracking window (not start-up's)
    age = {"p50_ms": validity.get("snapshot_age_p50_ms"), "p99_ms": validity.get("snapshot_age_p99_ms")}
    row = {"condition": label, "delay_ms": delay, "jitter_ms": jitter, "loss_percent": loss,
           "command_rate_hz": summary["command_rate_hz"],
           "plant_mean_error_mm": summary["plant_mean_error_mm"],
           "plant_max_error_mm": summary["plant_max_error_mm"],
           "compliance_rate_hz": summary["compliance_rate_hz"],
           "snapshot_age_p50_ms": age.get("p50_ms"), "snapshot_age_p99_ms": age.get("p99_ms"),
           "safe_command_fraction": summary["safe_command_fraction"],
           "plant_real_time_factor_p5": summary["plant_real_time_factor_p5"],
           "valid": summary["valid"], "invalid_reasons": summary["invalid_reasons"]}
    print(f"[distributed] {label:>11}: commands {row['command_rate_hz'] or 0:7.1f} Hz, plant "
          f"error {row['plant_mean_error_mm'] or float('nan'):.2f} mm mean, snapshots "
          f"{row['compliance_rate_hz'] or 0:.1f} Hz, age p50 {age.get('p50_ms') or float('nan'):.1f} ms"
          f"{'' if row['valid'] else ' (INVALID: ' + '; '.join(row['invalid_reasons']) + ')'}",
          flush=True)
    return row


def _log_has(path: Path, text: str) -> bool:
    try:
        return text in path.read_text(errors="replace")
    except FileNotFoundError:
        return False


def measure(args: argparse.Namespace) -> dict:
    from soft_inverse_ros.experiments.netns import LinkedNamespaces

    conditions = [c for c in CONDITIONS if c[0] in args.conditions] if args.conditions else \
        list(CONDITIONS)
    from soft_inverse_ros.core.jit_warm_up import prebuild_graph_plant
    from soft_inverse_ros.graph import build_graph

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="distributed_"))
    out.mkdir(parents=True, exist_ok=True)
    # the simulated robot into the build cache first: built inside the first condition's
    # graph (after a code change) it starved that condition's start (2.5 % SAFE, RTF p5 0.94)
    prebuild_graph_plant(build_graph("sim", {"combined": "true", "robot": args.robot}),
                         lambda line: print(f"[distributed] {line}", flush=True))
    with LinkedNamespaces() as ns:
        rows = [run_condition(ns, c, i, args, out) for i, c in enumerate(conditions)]
    by = {r["condition"]: r for r in rows}
    base = by.get("no_delay", {}).get("plant_mean_error_mm")
    five = by.get("delay_5ms", {}).get("plant_mean_error_mm")
    # a ratio of two runs means something only when both runs were valid
    ratio_valid = bool(by.get("no_delay", {}).get("valid")) and bool(by.get("delay_5ms", {}).get("valid"))
    return {
        "experiment": NAME, "robot": args.robot, "namespaces": 2,
        "split": {side: [n.name for n in build_graph("sim", {"combined": "true", "robot": args.robot,
                                                             "side": side})]
                  for side in ("fem", "robot")},
        "duration_s": args.duration, "output": str(out),
        "command_rate_hz": {r["condition"]: r["command_rate_hz"] for r in rows},
        "plant_mean_error_mm": {r["condition"]: r["plant_mean_error_mm"] for r in rows},
        "plant_mean_error_mm_no_delay": base,
        "error_ratio_5ms": (five / base) if base and five and ratio_valid else None,
        "error_ratio_5ms_note": None if ratio_valid else
        "not computed: the no_delay or delay_5ms run was invalid (see conditions)",
        "conditions": rows,
    }


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, help="FEM and controller in two network namespaces over a delayed/lossy link "
                   "(root)", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="builtin_diamond", help="robot description")
    parser.add_argument("--duration", type=positive, default=20.0,
                        help="measured time per condition after start-up [s] (default 20)")
    parser.add_argument("--startup", type=positive, default=60.0,
                        help="longest wait per condition for the robot side's first OK "
                             "command, before the measured time [s] (default 60)")
    parser.add_argument("--conditions", nargs="*", default=None,
                        choices=[c[0] for c in CONDITIONS], metavar="LABEL",
                        help=f"subset of the conditions ({', '.join(repr(c[0]) for c in CONDITIONS)})")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--out", default=None, help="folder for bags, logs and reports")
    parser.set_defaults(func=main)
    return parser


def main(args: argparse.Namespace) -> int:
    import sys

    from soft_inverse_ros.experiments.netns import NetnsError

    try:
        result = measure(args)
    except NetnsError as exc:
        print(f"experiment distributed: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"experiment distributed: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(finite_json.dumps(result))
    return 0
