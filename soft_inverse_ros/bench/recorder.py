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
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

from soft_inverse_ros.bench._threads import process_cpu_seconds
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("recorder", help="recorder node CPU and loss", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--rate", type=float, default=1000.0, help="command rate [Hz] (default 1000)")
    parser.add_argument("--duration", type=float, default=10.0, help="publishing time [s]")
    parser.add_argument("--executors", default="events,single", help="comma-separated: events, single")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the bags in DIR (bag_<executor>)")
    parser.set_defaults(func=run)


def _one(executor: str, args: argparse.Namespace, env: dict, workdir: Path) -> dict:
    import rclpy
    from geometry_msgs.msg import PointStamped
    from rclpy.qos import QoSProfile
    from soft_inverse_ros_msgs.msg import ActuatorCommand, ComplianceSnapshot, InverseSolverStatus

    from soft_inverse_ros import topics as T
    from soft_inverse_ros.recording.bag_reader import BagReader

    bag = workdir / f"bag_{executor}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "soft_inverse_ros.nodes.recorder_node", "--ros-args",
         "-p", f"output:={bag}", "-p", f"executor:={executor}", "-p", "report_period:=0.0",
         "-p", "discovery_period:=0.1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("bench_recorder_publisher", context=context)
        qos = QoSProfile(depth=1000)
        pubs = {
            T.ACTUATOR_COMMAND: node.create_publisher(ActuatorCommand, T.ACTUATOR_COMMAND, qos),
            T.INVERSE_STATUS: node.create_publisher(InverseSolverStatus, T.INVERSE_STATUS, qos),
            T.TARGET: node.create_publisher(PointStamped, T.TARGET, qos),
            T.PLANT_EFFECTOR_TRUE: node.create_publisher(PointStamped, T.PLANT_EFFECTOR_TRUE, qos),
            T.COMPLIANCE: node.create_publisher(ComplianceSnapshot, T.COMPLIANCE, qos),
        }
        deadline = time.monotonic() + 30.0
        while not all(p.get_subscription_count() for p in pubs.values()):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the recorder did not subscribe to the bench topics")
            time.sleep(0.05)
        cmd = ActuatorCommand(names=[f"c{i}" for i in range(8)], modes=[0] * 8,
                              values=[0.0] * 8, efforts=[0.0] * 8, strokes=[0.0] * 8)
        status = InverseSolverStatus(effort_lower_active=[False] * 8, effort_upper_active=[False] * 8,
                                     stroke_lower_active=[False] * 8, stroke_upper_active=[False] * 8)
        snap = ComplianceSnapshot(actuator_names=cmd.names, actuator_kinds=[0] * 8,
                                  effector_names=["x", "y", "z"], w_ea=[0.0] * 24, w_aa=[0.0] * 64,
                                  w_ee=[0.0] * 9, effector_position=[0.0] * 3,
                                  actuator_stroke=[0.0] * 8, lambda0=[0.0] * 8)
        point = PointStamped()
        published = dict.fromkeys(pubs, 0)
        period = 1.0 / args.rate
        n_ticks = int(args.duration * args.rate)
        cpu0, t0 = process_cpu_seconds(proc.pid), time.monotonic()
        for k in range(n_ticks):
            now = node.get_clock().now().to_msg()
            cmd.header.stamp = status.header.stamp = now
            cmd.seq = k
            streams = [(T.ACTUATOR_COMMAND, cmd), (T.INVERSE_STATUS, status)]
            if k % 2 == 0:
                point.header.stamp = now
                streams.append((T.TARGET, point))
            if k % 5 == 0:
                streams.append((T.PLANT_EFFECTOR_TRUE, point))
            if k % 50 == 0:
                snap.header.stamp = now
                streams.append((T.COMPLIANCE, snap))
            for topic, msg in streams:
                pubs[topic].publish(msg)
                published[topic] += 1
            sleep = t0 + (k + 1) * period - time.monotonic()
            if sleep > 0:
                time.sleep(sleep)
        elapsed = time.monotonic() - t0
        cpu = process_cpu_seconds(proc.pid) - cpu0
        t_sig = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        close_s = time.monotonic() - t_sig
        node.destroy_node()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        rclpy.shutdown(context=context)
    with BagReader(bag) as reader:
        recorded = {t.lstrip("/"): i.count for t, i in reader.topics.items()}
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
        "returncode": proc.returncode,
    }


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
        print(json.dumps({"rate_hz": args.rate, "duration_s": args.duration, "results": results}))
    return 0
