"""``soft-inverse-ros bench recorder``: CPU load and message loss of the recorder node.

Starts the real recorder node (``python -m soft_inverse_ros.nodes.recorder_node``) as a
separate process for each executor, publishes the control-loop streams from this process
over DDS for ``--duration`` seconds — ActuatorCommand and InverseSolverStatus at
``--rate`` Hz, target at rate/2, plant effector at rate/5, ComplianceSnapshot at rate/50
(8 actuators, 3 effector rows) — then sends SIGINT and counts what the bag holds.
Reported per executor: recorder CPU [% of one core] over the publishing window (from
/proc), messages published / recorded / lost, and the time from SIGINT to exit.

Runs on ROS_DOMAIN_ID (a random one in 10..99 when unset), localhost discovery only.
With ``--json`` the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soft_inverse_ros import finite_json
from soft_inverse_ros import topics as T  # plain constants, no ROS import
from soft_inverse_ros.bench._threads import process_cpu_seconds
from soft_inverse_ros.cli_values import positive

if TYPE_CHECKING:  # annotations only: rclpy is imported when the bench runs
    from rclpy.node import Node
    from rclpy.publisher import Publisher


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("recorder", help="recorder node CPU and loss", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--rate", type=positive, default=1000.0, help="command rate [Hz] (default 1000)")
    parser.add_argument("--duration", type=positive, default=10.0, help="publishing time [s]")
    parser.add_argument("--executors", default="poll,events,single",
                        help="comma-separated: poll, events, single")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the bags in DIR (bag_<executor>)")
    parser.set_defaults(func=run)


_N_ACTUATORS = 8
_EFFECTOR_ROWS = 3


@dataclass
class _BenchMessages:
    """The messages published every tick, reused (only stamps and ``cmd.seq`` change)."""

    cmd: Any  # ActuatorCommand
    status: Any  # InverseSolverStatus
    snap: Any  # ComplianceSnapshot
    point: Any  # PointStamped (target and plant effector)


def _start_recorder(executor: str, bag: Path, env: dict) -> subprocess.Popen:
    """Start the recorder node as a separate process writing ``bag`` (output discarded)."""
    return subprocess.Popen(
        [sys.executable, "-m", "soft_inverse_ros.nodes.recorder_node", "--ros-args",
         "-p", f"output:={bag}", "-p", f"executor:={executor}", "-p", "report_period:=0.0",
         "-p", "discovery_period:=0.1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def _create_publishers(node: Node) -> dict[str, Publisher]:
    """One publisher (queue depth 1000) per control-loop stream, keyed by topic."""
    from geometry_msgs.msg import PointStamped
    from rclpy.qos import QoSProfile
    from soft_inverse_ros_msgs.msg import ActuatorCommand, ComplianceSnapshot, InverseSolverStatus

    qos = QoSProfile(depth=1000)
    return {
        T.ACTUATOR_COMMAND: node.create_publisher(ActuatorCommand, T.ACTUATOR_COMMAND, qos),
        T.INVERSE_STATUS: node.create_publisher(InverseSolverStatus, T.INVERSE_STATUS, qos),
        T.TARGET: node.create_publisher(PointStamped, T.TARGET, qos),
        T.PLANT_EFFECTOR_TRUE: node.create_publisher(PointStamped, T.PLANT_EFFECTOR_TRUE, qos),
        T.COMPLIANCE: node.create_publisher(ComplianceSnapshot, T.COMPLIANCE, qos),
    }


def _wait_for_subscriptions(pubs: dict[str, Publisher], proc: subprocess.Popen, timeout_s: float) -> None:
    """Wait until the recorder subscribes to every topic; raise if it exits or ``timeout_s`` [s] passes."""
    deadline = time.monotonic() + timeout_s
    while not all(p.get_subscription_count() for p in pubs.values()):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("the recorder did not subscribe to the bench topics")
        time.sleep(0.05)


def _bench_messages() -> _BenchMessages:
    """The messages published (8 actuators, 3 effector rows), zero-filled; stamps set per tick."""
    from geometry_msgs.msg import PointStamped
    from soft_inverse_ros_msgs.msg import ActuatorCommand, ComplianceSnapshot, InverseSolverStatus

    n, m = _N_ACTUATORS, _EFFECTOR_ROWS
    cmd = ActuatorCommand(names=[f"c{i}" for i in range(n)], modes=[0] * n,
                          values=[0.0] * n, efforts=[0.0] * n, strokes=[0.0] * n)
    status = InverseSolverStatus(effort_lower_active=[False] * n, effort_upper_active=[False] * n,
                                 stroke_lower_active=[False] * n, stroke_upper_active=[False] * n)
    snap = ComplianceSnapshot(actuator_names=cmd.names, actuator_kinds=[0] * n,
                              effector_names=["x", "y", "z"], w_ea=[0.0] * (m * n), w_aa=[0.0] * (n * n),
                              w_ee=[0.0] * (m * m), effector_position=[0.0] * 3,
                              actuator_stroke=[0.0] * n, lambda0=[0.0] * n)
    return _BenchMessages(cmd=cmd, status=status, snap=snap, point=PointStamped())


def _tick_streams(k: int, now: Any, msgs: _BenchMessages) -> list[tuple[str, Any]]:
    """Stamp and list the (topic, message) pairs due at tick ``k``.

    Command and status every tick, target every 2nd, plant effector every 5th, compliance
    every 50th.
    """
    msgs.cmd.header.stamp = msgs.status.header.stamp = now
    msgs.cmd.seq = k
    streams = [(T.ACTUATOR_COMMAND, msgs.cmd), (T.INVERSE_STATUS, msgs.status)]
    if k % 2 == 0:
        msgs.point.header.stamp = now
        streams.append((T.TARGET, msgs.point))
    if k % 5 == 0:
        streams.append((T.PLANT_EFFECTOR_TRUE, msgs.point))
    if k % 50 == 0:
        msgs.snap.header.stamp = now
        streams.append((T.COMPLIANCE, msgs.snap))
    return streams


def _publish_ticks(node: Node, pubs: dict[str, Publisher], msgs: _BenchMessages,
                   period: float, n_ticks: int, t0: float) -> dict[str, int]:
    """Publish ``n_ticks`` ticks every ``period`` [s] from monotonic time ``t0`` [s].

    Returns the number of messages published per topic.
    """
    published = dict.fromkeys(pubs, 0)
    for k in range(n_ticks):
        now = node.get_clock().now().to_msg()
        for topic, msg in _tick_streams(k, now, msgs):
            pubs[topic].publish(msg)
            published[topic] += 1
        sleep = t0 + (k + 1) * period - time.monotonic()
        if sleep > 0:
            time.sleep(sleep)
    return published


def _stop_recorder(proc: subprocess.Popen) -> float:
    """Send SIGINT and wait (60 s at most) for the recorder to exit; the time taken [s]."""
    t_sig = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    return time.monotonic() - t_sig


def _count_recorded(bag: Path) -> dict[str, int]:
    """Messages per topic (without the leading slash) in the bag."""
    from soft_inverse_ros.recording.bag_reader import BagReader

    with BagReader(bag) as reader:
        return {t.lstrip("/"): i.count for t, i in reader.topics.items()}


def _result_row(executor: str, published: dict[str, int], recorded: dict[str, int], elapsed: float,
                cpu: float, close_s: float, returncode: int | None) -> dict:
    """One executor's report entry: publishing time ``elapsed`` [s], recorder CPU time ``cpu`` [s]
    (reported in % of one core), counts and losses, SIGINT-to-exit time ``close_s`` [s]."""
    total_pub = sum(published.values())
    total_rec = sum(recorded.get(t, 0) for t in published)
    return {
        "executor": executor,
        "publish_seconds": round(elapsed, 3),
        "messages_per_s": round(total_pub / elapsed, 1),
        "recorder_cpu_percent": round(100.0 * cpu / elapsed, 1),
        "published": total_pub,
        "recorded": total_rec,
        "lost": total_pub - total_rec,
        "lost_per_topic": {t: n - recorded.get(t, 0) for t, n in published.items()},
        "sigint_to_exit_s": round(close_s, 3),
        "returncode": returncode,
    }


def _one(executor: str, args: argparse.Namespace, env: dict, workdir: Path) -> dict:
    """Run and measure one recorder process with ``executor``; its report entry."""
    import rclpy

    bag = workdir / f"bag_{executor}"
    proc = _start_recorder(executor, bag, env)
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("bench_recorder_publisher", context=context)
        pubs = _create_publishers(node)
        _wait_for_subscriptions(pubs, proc, timeout_s=30.0)
        msgs = _bench_messages()
        period = 1.0 / args.rate
        n_ticks = int(args.duration * args.rate)
        cpu0, t0 = process_cpu_seconds(proc.pid), time.monotonic()
        published = _publish_ticks(node, pubs, msgs, period, n_ticks, t0)
        elapsed = time.monotonic() - t0
        cpu = process_cpu_seconds(proc.pid) - cpu0
        close_s = _stop_recorder(proc)
        node.destroy_node()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        rclpy.shutdown(context=context)
    return _result_row(executor, published, _count_recorded(bag), elapsed, cpu, close_s, proc.returncode)


def run(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.setdefault("ROS_DOMAIN_ID", str(random.randint(10, 99)))
    os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID")})
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_recorder_") as tmp:
        workdir = args.keep if args.keep is not None else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for executor in args.executors.split(","):
            result = _one(executor.strip(), args, env, workdir)
            results.append(result)
            print(f"{result['executor']:>7}: {result['messages_per_s']:.0f} msg/s for "
                  f"{result['publish_seconds']:.1f} s, recorder CPU {result['recorder_cpu_percent']:.1f} %, "
                  f"lost {result['lost']} of {result['published']}, SIGINT->exit "
                  f"{result['sigint_to_exit_s']:.2f} s", flush=True)
    if args.json:
        print(finite_json.dumps({"rate_hz": args.rate, "duration_s": args.duration, "results": results}))
    return 0
