"""``soft-inverse-ros bench pipeline``: the two-rate pipeline as separate processes.

Runs target_node, fem_node computing the compliance too (or fem_node and compliance_node
with ``--separate``) and inverse_controller_node (``--full`` adds the simulated servos,
plant and motion capture) for a fixed time, with a probe node subscribed to the commands
and snapshots, and reports the figures below. By default everything runs as the main job
ships it (``config/sim.yaml``: the target at 100 Hz and SCHED_FIFO 6, the controller at
SCHED_FIFO 20 on its timer loop, fem_node at nice -20; the probe, which stands in for the
driver side, at the servo driver's 8); the
options change one thing at a time, and the JSON names what was used.

- ``command_rate_hz``: commands the controller published, its 1 kHz ticks and its answers
  to new targets (sequence numbers over time);
  ``delivered_rate_hz``: commands the probe (another process: the driver's side)
  received; ``probe_loss_fraction``: sequence numbers the probe never saw;
- ``missed_slot_fraction``: 1 ms slots in which no command started
  (:mod:`soft_inverse_ros.core.control.deadlines`; commands the probe lost were sent and
  are not counted as missed);
- ``end_to_end_latency_*``: for each new target, from the target's stamp to the moment
  the probe received the first command answering it (wall clock, same machine), split
  into ``answer_delay_*`` (target stamp → start of the answering tick) and
  ``tick_to_delivery_*`` (tick start → received: solve, publish, DDS delivery);
- snapshot rate; FEM-state→snapshot delay split into the compliance computation and the
  rest (transport of the FEM state and of the snapshot, queueing);
- CPU of each node process (from /proc, user + system) and the probe's own.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

from soft_inverse_ros import finite_json
from soft_inverse_ros.bench._threads import process_cpu_seconds
from soft_inverse_ros.cli_values import non_negative, positive, priority_or_normal


def _percentiles(values, qs=(50, 99)) -> dict[str, float]:
    import numpy as np

    if len(values) == 0:
        return {f"p{q}": float("nan") for q in qs}
    return {f"p{q}": float(np.percentile(values, q)) for q in qs}


def _graph_specs(args: argparse.Namespace) -> list:
    """The pipeline's node specs (or the full sim graph's with ``--full``) at the bench's
    rates: fem_node at ``--fem-rate``, the controller at ``--rate`` with ``--loop`` and
    ``--realtime-priority``, the target with no start delay (at ``--target-rate`` when
    given)."""
    from soft_inverse_ros.graph import build_graph

    overrides = {"robot": args.robot, "combined": "false" if args.separate else "true"}
    keep = None if args.full else {"target_node", "fem_node", "compliance_node",
                                   "inverse_controller_node"}
    specs = []
    for spec in build_graph("sim", overrides):
        if keep is not None and spec.name not in keep:
            continue
        params = dict(spec.parameters)
        if spec.name == "fem_node":
            params["rate_hz"] = args.fem_rate
        if spec.name == "inverse_controller_node":
            params["rate_hz"] = args.rate
            if args.loop is not None:
                params["loop"] = args.loop
            if args.realtime_priority is not None:
                params["realtime_priority"] = args.realtime_priority
        if spec.name == "target_node":
            params["start_delay"] = 0.0
            if args.target_rate is not None:
                params["publish_rate_hz"] = args.target_rate
        specs.append(dataclasses.replace(spec, parameters=params))
    return specs


@dataclasses.dataclass
class Recording:
    """What the probe recorded: (wall receive time [s], serialized ActuatorCommand) per
    command, (receive time, stamp [s], compliance_time [s]) per snapshot, and the CPU of
    each node process and of the probe over ``elapsed`` [s]."""

    received: list
    snapshots: list
    elapsed: float
    cpu_percent: dict
    probe_cpu_percent: float
    exits: list
    probe_scheduling: str  # e.g. "SCHED_FIFO 8", or "normal" (none asked, or refused)


def shipped_settings(args: argparse.Namespace) -> dict:
    """The target rate, the controller's loop and priority and the probe's priority this run
    uses: the options given, else those ``config/sim.yaml`` ships (the target's, the
    controller's, and the servo driver's for the probe, which stands in for the driver
    side)."""
    import yaml

    from soft_inverse_ros.graph import build_graph, resolve_params_file

    def parameters(spec) -> dict:  # the parameter files' section, then the overrides
        merged: dict = {}
        for name in spec.params_files:
            data = yaml.safe_load(resolve_params_file(name).read_text()) or {}
            merged.update((data.get(spec.name) or {}).get("ros__parameters") or {})
        return {**merged, **spec.parameters}

    specs = {s.name: parameters(s) for s in build_graph("sim", {"robot": args.robot})}
    controller = specs.get("inverse_controller_node", {})
    driver = specs.get("servo_driver_node", {})
    target = specs.get("target_node", {})
    return {
        "target_rate_hz": (args.target_rate if args.target_rate is not None
                           else float(target.get("publish_rate_hz", 1000.0))),
        "controller_loop": args.loop if args.loop is not None else controller.get("loop", "timer"),
        "controller_realtime_priority": (args.realtime_priority if args.realtime_priority is not None
                                         else int(controller.get("realtime_priority", 0))),
        "probe_priority": (args.probe_priority if args.probe_priority is not None
                           else int(driver.get("realtime_priority", 0))),
    }


def _record(specs: list, args: argparse.Namespace, probe_priority: int) -> Recording:
    """Start the graph, wait for snapshots, record ``--duration`` s with the probe."""
    import rclpy
    from rclpy.node import Node
    from soft_inverse_ros_msgs.msg import ActuatorCommand, ComplianceSnapshot

    from soft_inverse_ros.nodes import qos
    from soft_inverse_ros.nodes.conversions import to_seconds
    from soft_inverse_ros.process_launcher import GraphProcesses

    from soft_inverse_ros.core.jit_warm_up import prebuild_graph_plant

    received: list[tuple[float, bytes]] = []
    snapshots: list[tuple[float, float, float]] = []
    prebuild_graph_plant(specs, lambda line: print(f"[bench pipeline] {line}", file=sys.stderr, flush=True))
    graph = GraphProcesses(specs, output=sys.stderr if args.verbose else None).start()
    rclpy.init()
    probe = Node("bench_pipeline_probe")
    from soft_inverse_ros.nodes.scheduling import scheduling_restorer, set_fifo_priority

    restore_scheduling = scheduling_restorer()  # called when the recording ends (below)
    recording = {"on": False}

    def on_command(data: bytes) -> None:
        # raw: the probe only stores bytes and the receive time (decoded after the run), so
        # it keeps up with 1 kHz and biases nothing
        seen["commands"] += 1
        if recording["on"]:
            received.append((time.time(), data))

    def on_snapshot(msg: ComplianceSnapshot) -> None:
        seen["n"] += 1
        if recording["on"]:
            snapshots.append((time.time(), to_seconds(msg.header.stamp), msg.compliance_time))

    seen = {"n": 0, "commands": 0}
    probe.create_subscription(ActuatorCommand, "actuator_command", on_command, qos.HIGH_RATE,
                              raw=True)
    probe.create_subscription(ComplianceSnapshot, "compliance", on_snapshot, qos.LATCHED)
    try:
        try:
            probe_scheduling = set_fifo_priority(probe_priority)
        except PermissionError as exc:  # no root / rtprio limit: normal scheduling, said
            probe_scheduling = "normal"
            print(f"bench pipeline: the probe's SCHED_FIFO {probe_priority} was refused ({exc}); "
                  "it runs at normal scheduling", file=sys.stderr)
        # warm-up: until snapshots and commands flow (model construction and the solver's
        # kernels take seconds; a controller still starting is not a missed deadline)
        deadline = time.monotonic() + args.startup_timeout
        while (seen["n"] < 3 or seen["commands"] < 100) and time.monotonic() < deadline:
            rclpy.spin_once(probe, timeout_sec=0.1)
            if graph.poll():
                raise RuntimeError(f"a node exited during start-up: {graph.exits}")
        if seen["n"] < 3:
            raise RuntimeError(f"no compliance snapshots within {args.startup_timeout} s")
        if seen["commands"] < 100:
            raise RuntimeError(f"the controller did not command within {args.startup_timeout} s")
        time.sleep(args.settle)
        pids = {spec.name: graph.pid(spec.name) for spec in specs}
        cpu0 = {name: process_cpu_seconds(pid) for name, pid in pids.items()}
        probe_cpu0 = time.process_time()
        recording["on"] = True
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.duration:
            rclpy.spin_once(probe, timeout_sec=0.01)
        elapsed = time.monotonic() - t0
        recording["on"] = False
        cpu = {name: 100.0 * (process_cpu_seconds(pid) - cpu0[name]) / elapsed
               for name, pid in pids.items()}
        probe_cpu = 100.0 * (time.process_time() - probe_cpu0) / elapsed
        exits = graph.poll()
    finally:
        restore_scheduling()
        probe.destroy_node()
        rclpy.try_shutdown()
        graph.shutdown()
    return Recording(received, snapshots, elapsed, cpu, probe_cpu, exits, probe_scheduling)


def command_figures(receive, seq, stamps, target_stamps, period: float) -> dict:
    """Rates, missed slots and latencies from the commands a receiver got.

    Args:
        receive: receipt times [s, wall clock]; seq: sequence numbers; stamps: the commands'
            header stamps (start of their tick) [s]; target_stamps: stamps of the targets
            they answer [s]; period: nominal tick period [s].
    """
    import numpy as np

    from soft_inverse_ros.core.control.deadlines import missed_slots_seq

    receive, seq = np.asarray(receive, float), np.asarray(seq)
    stamps, target_stamps = np.asarray(stamps, float), np.asarray(target_stamps, float)
    missed_n, slots = missed_slots_seq(stamps, seq, period)
    span = stamps[-1] - stamps[0]
    new_target = np.concatenate([[False], np.diff(target_stamps) > 0])
    latency_ms = 1e3 * (receive[new_target] - target_stamps[new_target])
    answer = _percentiles(1e3 * (stamps[new_target] - target_stamps[new_target]))
    delivery = _percentiles(1e3 * (receive[new_target] - stamps[new_target]))
    lat = _percentiles(latency_ms)
    return {
        "command_rate_hz": float((seq[-1] - seq[0]) / span) if span > 0 else float("nan"),
        "delivered_rate_hz": float((len(seq) - 1) / (receive[-1] - receive[0])),
        "missed_slot_fraction": missed_n / slots if slots > 1 else float("nan"),
        "missed_slots": int(missed_n),
        "probe_loss_fraction": float(1.0 - (len(seq) - 1) / max(seq[-1] - seq[0], 1)),
        "end_to_end_latency_p50_ms": lat["p50"],
        "end_to_end_latency_p99_ms": lat["p99"],
        "end_to_end_latency_max_ms": (float(latency_ms.max()) if latency_ms.size
                                      else float("nan")),
        "answer_delay_p50_ms": answer["p50"],
        "answer_delay_p99_ms": answer["p99"],
        "tick_to_delivery_p50_ms": delivery["p50"],
        "tick_to_delivery_p99_ms": delivery["p99"],
    }


def run(args: argparse.Namespace) -> dict:
    import numpy as np
    from rclpy.serialization import deserialize_message
    from soft_inverse_ros_msgs.msg import ActuatorCommand

    from soft_inverse_ros.nodes.conversions import to_seconds

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    settings = shipped_settings(args)
    rec = _record(_graph_specs(args), args, settings["probe_priority"])
    if len(rec.received) < 2:
        raise RuntimeError("the probe received fewer than 2 commands")
    decoded = [deserialize_message(data, ActuatorCommand) for _, data in rec.received]
    figures = command_figures([r[0] for r in rec.received], [c.seq for c in decoded],
                              [to_seconds(c.header.stamp) for c in decoded],
                              [to_seconds(c.target_stamp) for c in decoded], 1.0 / args.rate)
    snap = np.array(rec.snapshots) if rec.snapshots else np.zeros((0, 3))
    snapshot_rate = (len(snap) - 1) / (snap[-1, 1] - snap[0, 1]) if len(snap) > 2 else 0.0
    delay_ms = 1e3 * (snap[:, 0] - snap[:, 1]) if len(snap) else np.zeros(0)
    compute_ms = 1e3 * snap[:, 2] if len(snap) else np.zeros(0)
    rounded = {k: (round(v, 6) if k.endswith("fraction") else round(v, 3 if "ms" in k else 1))
               if isinstance(v, float) else v for k, v in figures.items()}
    return {
        "robot": args.robot,
        "mode": "separate" if args.separate else "combined",
        **settings,
        "full_graph": bool(args.full),
        "duration_s": round(rec.elapsed, 2),
        "command_rate_nominal_hz": args.rate,
        **rounded,
        "snapshot_rate_hz": round(float(snapshot_rate), 2),
        "fem_rate_nominal_hz": args.fem_rate,
        "state_to_snapshot_p50_ms": round(_percentiles(delay_ms)["p50"], 2),
        "compliance_compute_p50_ms": round(_percentiles(compute_ms)["p50"], 2),
        "cpu_percent": {name: round(v, 1) for name, v in rec.cpu_percent.items()},
        "probe_cpu_percent": round(rec.probe_cpu_percent, 1),
        "probe_scheduling": rec.probe_scheduling,
        "nodes_exited": [dataclasses.asdict(e) for e in rec.exits],
    }


def _main(args: argparse.Namespace) -> int:
    try:
        result = run(args)
    except RuntimeError as exc:
        print(f"bench pipeline: {exc}", file=sys.stderr)
        return 1
    for key, value in result.items():
        if key != "cpu_percent":
            print(f"{key:>28}: {value}")
    for name, value in result["cpu_percent"].items():
        print(f"{'cpu ' + name:>28}: {value} %")
    if args.json:
        print(finite_json.dumps(result))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("pipeline", help="rates, deadlines, latency, CPU of the "
                                   "two-rate pipeline", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="builtin_diamond", help="robot description")
    parser.add_argument("--duration", type=positive, default=20.0, help="measured time [s]")
    parser.add_argument("--rate", type=positive, default=1000.0, help="command rate [Hz]")
    parser.add_argument("--target-rate", type=positive, default=None,
                        help="target_node publish rate [Hz] (default: config/sim.yaml's, 100)")
    parser.add_argument("--fem-rate", type=non_negative, default=30.0,
                        help="fem_node update rate [Hz] (0: as fast as possible)")
    parser.add_argument("--loop", choices=("timer", "thread"), default=None,
                        help="inverse controller tick source (default: config/sim.yaml's)")
    parser.add_argument("--realtime-priority", type=priority_or_normal, default=None,
                        help="SCHED_FIFO priority of the controller (0: normal; default: "
                             "config/sim.yaml's, 20)")
    parser.add_argument("--probe-priority", type=priority_or_normal, default=None,
                        help="SCHED_FIFO priority of the probe, which stands in for the driver "
                             "side (0: normal; default: config/sim.yaml's servo_driver_node "
                             "priority, 8)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--separate", action="store_true",
                      help="fem_node and compliance_node as two processes (the launch files' "
                           "default); default: one fem_node computing the compliance too, as "
                           "the main job (soft-inverse-ros demo) runs")
    mode.add_argument("--combined", action="store_true",
                      help="the default (fused compliance); accepted for the commands in "
                           "BENCHMARKS.md")
    parser.add_argument("--full", action="store_true",
                        help="also run the simulated servos, plant and motion capture")
    parser.add_argument("--settle", type=non_negative, default=2.0, help="wait after start-up [s]")
    parser.add_argument("--startup-timeout", type=positive, default=120.0)
    parser.add_argument("--verbose", action="store_true", help="show the nodes' output")
    parser.add_argument("--json", action="store_true", help="print a JSON object last")
    parser.set_defaults(func=_main)
