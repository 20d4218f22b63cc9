"""``soft-inverse-ros demo``: the main job, with no hardware and no external files.

Runs the simulated-robot graph (the same one as ``soft-inverse-ros launch sim`` and
``ros2 launch soft_inverse_ros sim.launch.py``) on the built-in robot: the effector
tracks the ICRA 2015 square trajectory, the simulated servos pull the cables of a
dynamic FEM plant that is not the controller's model, a simulated motion-capture system
measures it. Everything is recorded to an MCAP rosbag2, then a report folder is written
(plots and a metrics table). Prints a progress line every second and, at the end, where
the outputs are.

``--robot snake`` runs the pneumatic soft snake's live graph instead (graph ``snake``,
config/sim_snake.yaml): the eq. 9 gait → the simulated valves → the snake plant → the
simulated mocap of its plates → the bag; the report plots the centre-of-mass path and the
per-link curvature and states the forward speed. It runs on the wall clock like the main
job (its plant, compiled and at SCHED_FIFO 10, keeps real time on this 2-core machine; a run
whose plant falls behind is reported invalid); ``--clock sim`` makes the plant the graph's
clock, in lockstep with the valve driver (valid whatever the machine's load).

``--robot hybrid_arm`` (any ``type: hybrid`` description) runs the hybrid graph instead
(``soft-inverse-ros launch hybrid``, graph.py): a 5-joint arm carrying a soft rod aligns its
probe with four targets inside a soft block in sequence (sim_hybrid.yaml: each held 10 s),
the inverse QP with joints and contacts sends joint position setpoints to the simulated joint
servos, and the report gives the alignment error per held target, the contact force sum
against the description's limit and the run's validity; wall clock
by default (its plant and controller at SCHED_FIFO 10 / 20, its model node at nice −20:
sim_hybrid.yaml; they keep real time on 2 cores), ``--clock sim`` in the plant's time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from soft_inverse_ros import finite_json
from soft_inverse_ros.cli_values import positive
from soft_inverse_ros.core.yaml_files import load_yaml

if TYPE_CHECKING:  # annotations only: the launcher is imported when the demo runs
    from soft_inverse_ros.graph import NodeSpec
    from soft_inverse_ros.process_launcher import GraphProcesses


#: ``--robot snake``: the pneumatic soft snake's graph (graph.py "snake") instead of "sim"
SNAKE = "snake"
#: the snake's gait setpoint rate in config/sim_snake.yaml [Hz] (the report's nominal rate)
SNAKE_COMMAND_HZ = 100.0


class _Progress:
    """A probe node printing the tracking state once per second.

    It reads only low-rate topics (solver status every 10th tick, the plant's effector,
    snapshots), and polls them (nodes/polled_subscription.py): once per :meth:`spin` it
    takes the newest message of each, so no callback runs for the ~220 messages/s in
    between (a callback per message took 5 % of a core of the graph it watches). Rates
    come from sequence numbers (the status's command count, the snapshots' ``seq``).
    """

    _executor = None  # made at the first spin (subclasses build their own node)
    _polled: tuple = ()  # (PolledSubscription, what to do with its newest message)

    def __init__(self, use_sim_time: bool = False, hybrid: bool = False) -> None:
        import rclpy
        from rclpy.parameter import Parameter
        from geometry_msgs.msg import PointStamped
        from rclpy.node import Node
        from soft_inverse_ros_msgs.msg import ComplianceSnapshot, InverseSolverStatus

        from soft_inverse_ros import topics
        from soft_inverse_ros.nodes import qos
        from soft_inverse_ros.nodes.polled_subscription import PolledSubscription

        rclpy.init()
        self._rclpy = rclpy
        self.node = Node("demo_progress", parameter_overrides=[
            Parameter("use_sim_time", Parameter.Type.BOOL, use_sim_time)])
        self.effector = None
        self.status = None
        self.snapshots = 0  # snapshots since the last line (sequence numbers)
        self._snapshot_seq: int | None = None  # newest snapshot's seq
        self._last_seq = None
        self.hybrid = hybrid
        self.plant_values: dict[str, str] = {}  # the hybrid plant's last diagnostics
        n = self.node
        if hybrid:
            from diagnostic_msgs.msg import DiagnosticArray

            n.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, self._on_diagnostics,
                                  qos.DIAGNOSTICS)
        self._polled = (
            (PolledSubscription(n, PointStamped, topics.PLANT_EFFECTOR_TRUE, qos.HIGH_RATE),
             self._on_effector),
            (PolledSubscription(n, InverseSolverStatus, topics.INVERSE_STATUS, qos.HIGH_RATE),
             self._on_status),
            (PolledSubscription(n, ComplianceSnapshot, topics.COMPLIANCE, qos.LATCHED),
             self._on_snapshot))

    def _poll(self) -> None:
        """Take the newest message of each polled topic."""
        for subscription, take in self._polled:
            subscription.deliver_newest(take)

    def _on_diagnostics(self, msg) -> None:
        for status in msg.status:
            if status.name.endswith(": plant"):
                self.plant_values = {kv.key: kv.value for kv in status.values}

    def _on_effector(self, msg) -> None:
        self.effector = (msg.point.x, msg.point.y, msg.point.z)

    def ready(self) -> bool:
        """The plant runs, a snapshot is out and the controller ticks (its status arrives).

        The controller is the slowest node to start on a cold numba cache (its kernels and
        the FEM's compile while every other node starts: 22 s on two cores), and
        ``--duration`` counts from here: before, a first 30 s run tracked for 12 s of it."""
        return bool(self.snapshots) and self.effector is not None and self.status is not None

    def _on_status(self, msg) -> None:
        self.status = msg

    def _on_snapshot(self, msg) -> None:
        seq = int(msg.seq)
        # the first one counts one; a restarted sequence (a new fem_node) counts from it
        newer = seq - self._snapshot_seq if self._snapshot_seq is not None else 1
        self.snapshots += newer if newer > 0 else 1
        self._snapshot_seq = seq

    def now(self) -> float:
        """The graph's time [s]: wall clock, or the simulated robot's /clock in sim time."""
        return self.node.get_clock().now().nanoseconds * 1e-9

    def spin(self, seconds: float) -> None:
        """Deliver the probe's messages for ``seconds`` [s] (wall), on the nodes' executor
        (an EventsExecutor: rclpy's default one cost this probe ~7 % of a core at the
        ~200 messages/s it takes, CPU the graph under test needs)."""
        from soft_inverse_ros.nodes.node_runtime import make_executor

        if self._executor is None:
            self._executor = make_executor()
            self._executor.add_node(self.node)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._executor.spin_once(timeout_sec=0.02)
        self._poll()

    def line(self, elapsed: float, duration: float, dt: float) -> str:
        from soft_inverse_ros_msgs.msg import ActuatorCommand

        st = self.status
        seq = st.command_seq if st else None
        rate = (seq - self._last_seq) / dt if seq is not None and self._last_seq is not None \
            else float("nan")
        self._last_seq = seq
        pos = ("(" + ", ".join(f"{1e3 * v:6.1f}" for v in self.effector) + ") mm"
               if self.effector else "(no plant yet)")
        err = 1e3 * st.measured_effector_error if st else float("nan")
        state = {ActuatorCommand.STATUS_OK: "ok", ActuatorCommand.STATUS_HELD: "held",
                 ActuatorCommand.STATUS_SAFE: "SAFE"}.get(st.command_status, "?") if st else "-"
        if self.hybrid:
            v = self.plant_values
            text = (f"[demo] {elapsed:5.1f}/{duration:.0f} s  probe tip {pos}  alignment error "
                    f"{float(v.get('alignment_error_mm', 'nan')):6.2f} mm  contact force sum "
                    f"{float(v.get('contact_force_sum_n', 'nan')):5.2f} N (limit "
                    f"{float(v.get('contact_force_sum_limit_n', 'nan')):.2f})  commands {rate:6.0f}/s  "
                    f"snapshots {self.snapshots / dt:4.1f}/s  command {state}")
        else:
            text = (f"[demo] {elapsed:5.1f}/{duration:.0f} s  effector {pos}  "
                    f"measured error {err:5.2f} mm  commands {rate:6.0f}/s  "
                    f"snapshots {self.snapshots / dt:4.1f}/s  command {state}")
        self.snapshots = 0
        return text

    def close(self) -> None:
        if self._executor is not None:  # before the node (node_runtime.run_nodes)
            self._executor.shutdown()
            self._executor = None
        self.node.destroy_node()
        self._rclpy.try_shutdown()


class _SnakeProgress(_Progress):
    """The probe of the snake graph: the true CoM and the gait's command rate, once per
    second (low-rate topics only)."""

    def __init__(self, use_sim_time: bool = False) -> None:
        import rclpy
        from geometry_msgs.msg import PointStamped
        from rclpy.node import Node
        from rclpy.parameter import Parameter
        from soft_inverse_ros_msgs.msg import ActuatorCommand

        from soft_inverse_ros import topics
        from soft_inverse_ros.nodes import qos

        rclpy.init()
        self._rclpy = rclpy
        self.node = Node("demo_progress", parameter_overrides=[
            Parameter("use_sim_time", Parameter.Type.BOOL, use_sim_time)])
        self.com = self.com0 = None
        self.command = None
        self._last_seq = None
        self.node.create_subscription(PointStamped, topics.PLANT_COM_TRUE, self._on_com, qos.HIGH_RATE)
        self.node.create_subscription(ActuatorCommand, topics.ACTUATOR_COMMAND, self._on_command,
                                      qos.HIGH_RATE)

    def _on_com(self, msg) -> None:
        self.com = (msg.point.x, msg.point.y)
        if self.com0 is None:
            self.com0 = self.com

    def _on_command(self, msg) -> None:
        self.command = msg

    def ready(self) -> bool:
        return self.com is not None and self.command is not None

    def line(self, elapsed: float, duration: float, dt: float) -> str:
        seq = self.command.seq if self.command else None
        rate = (seq - self._last_seq) / dt if seq is not None and self._last_seq is not None \
            else float("nan")
        self._last_seq = seq
        if self.com is None:
            return f"[demo] {elapsed:5.1f}/{duration:.0f} s  (no snake yet)"
        dx, dy = (1e3 * (a - b) for a, b in zip(self.com, self.com0))
        peak = max(self.command.values) if self.command and self.command.values else float("nan")
        return (f"[demo] {elapsed:5.1f}/{duration:.0f} s  CoM ({1e3 * self.com[0]:7.2f}, "
                f"{1e3 * self.com[1]:6.2f}) mm, moved ({dx:+6.2f}, {dy:+6.2f}) mm  gait "
                f"{rate:4.0f} setpoints/s, peak {peak / 1e3:5.1f} kPa")


def _log_tail(log_dir: Path, name: str, lines: int = 15) -> str:
    """The last ``lines`` lines of a node's log, indented, for the console."""
    path = log_dir / f"{name}.log"
    try:
        text = path.read_text(errors="replace").rstrip().splitlines()[-lines:]
    except OSError:
        return f"    (no log at {path})"
    return "\n".join(f"    {line}" for line in text) or f"    ({path} is empty)"


class _NodeDied(RuntimeError):
    """A required node exited: the message carries the tail of its log."""


def _dead_nodes_message(what: str, exits, log_dir: Path) -> str:
    parts = [f"{what}: " + ", ".join(f"{e.name} (exit code {e.returncode})" for e in exits)]
    for e in exits:
        parts.append(f"  last lines of {log_dir / (e.name + '.log')}:\n{_log_tail(log_dir, e.name)}")
    return "\n".join(parts)


def _graph_overrides(args: argparse.Namespace, bag: Path) -> dict[str, str]:
    """The sim graph's launch arguments for this demo (recording to ``bag``)."""
    overrides = {"record": str(bag), "robot": args.robot, "clock": args.clock,
                 "combined": "false" if args.separate else "true", "params_file": args.params_file}
    if args.closed_loop:
        overrides["closed_loop"] = "true"
    if args.plant_model:
        overrides["plant_model"] = args.plant_model
    return overrides


def _wait_for_pipeline(progress: _Progress, graph: GraphProcesses, timeout_s: float,
                       log_dir: Path) -> float:
    """Spin until the plant's effector, a snapshot and the controller's status have
    arrived (:meth:`_Progress.ready`); the wait [s].

    Raises:
        _NodeDied: a required node exited during start-up.
        RuntimeError: the pipeline was not up within ``timeout_s`` [s].
    """
    t_wait = time.monotonic()
    while True:  # the FEM models take a few seconds to build
        progress.spin(0.5)
        if graph.poll() and any(e.required for e in graph.exits):
            raise _NodeDied(_dead_nodes_message("a node exited during start-up",
                                                graph.exits, log_dir))
        if progress.ready():
            return time.monotonic() - t_wait
        if time.monotonic() - t_wait > timeout_s:
            raise RuntimeError(f"the pipeline did not start within {timeout_s} s "
                               f"(see {log_dir})")


def _track(progress: _Progress, graph: GraphProcesses, duration: float, stall_s: float,
           log_dir: Path) -> None:
    """Print a progress line per second of graph time until ``duration`` [s] has passed.

    Raises:
        _NodeDied: a required node died.
        RuntimeError: the graph's clock stood still for ``stall_s`` [s] of wall time.
    """
    t_start = last = progress.now()
    last_wall = time.monotonic()
    while (elapsed := progress.now() - t_start) < duration:
        progress.spin(1.0)
        now = progress.now()
        if now - last > 0:
            print(progress.line(elapsed, duration, now - last), flush=True)
            last, last_wall = now, time.monotonic()
        elif time.monotonic() - last_wall > stall_s:
            raise RuntimeError(f"the simulated clock stood still for "
                               f"{stall_s:.0f} s (see {log_dir})")
        dead = graph.poll()
        if any(e.required for e in dead):
            raise _NodeDied(_dead_nodes_message("a required node died", dead, log_dir))


def _run_graph(args: argparse.Namespace, nodes: Sequence[NodeSpec], log_dir: Path) -> tuple[int, bool]:
    """Start the graph, wait for it, track for ``--duration``, shut it down.

    Returns the exit status so far (1 after an error) and whether a required node died.
    """
    from soft_inverse_ros.process_launcher import GraphProcesses

    graph = GraphProcesses(nodes, output=None, log_dir=log_dir).start()
    if args.robot == SNAKE:
        progress = _SnakeProgress(use_sim_time=args.clock == "sim")
    else:
        progress = _Progress(use_sim_time=args.clock == "sim", hybrid=args.hybrid)
    status = 0
    died = False
    try:
        waited = _wait_for_pipeline(progress, graph, args.startup_timeout, log_dir)
        print(f"[demo] pipeline up after {waited:.1f} s", flush=True)
        _track(progress, graph, args.duration, args.startup_timeout, log_dir)
    except _NodeDied as exc:
        print(f"[demo] error: {exc}", file=sys.stderr)
        died = True
    except RuntimeError as exc:
        print(f"[demo] error: {exc}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        print("[demo] interrupted: closing the bag and writing the report", file=sys.stderr)
    finally:
        progress.close()
        graph.shutdown()
    return status, died


def _hybrid_report(args: argparse.Namespace, bag: Path, out: Path, status: int) -> int:
    """The hybrid robot's report (analysis/hybrid_report.py) into ``out/report``."""
    from soft_inverse_ros.analysis.hybrid_report import write_hybrid_report
    from soft_inverse_ros.analysis.validity import RunValidity, headline

    print("[demo] writing the report ...", flush=True)
    report_dir = out / "report"
    metrics = write_hybrid_report(bag, report_dir)
    validity = RunValidity(**metrics["validity"])
    print((report_dir / "metrics.md").read_text())
    print(f"[demo] bag:    {bag}")
    print(f"[demo] report: {report_dir}")
    for line in headline(validity):
        print(f"[demo] {line}", file=sys.stderr if not validity.valid else sys.stdout)
    if args.json:
        flat = {k: v for k, v in metrics.items() if k != "validity"}
        flat.update({k: metrics["validity"][k] for k in ("valid", "invalid_reasons", "clock",
                                                        "plant_real_time_factor_p5", "safe_command_fraction",
                                                        "compliance_rate_hz", "controller_missed_slot_fraction",
                                                        "snapshot_age_p99_ms", "qp_unreachable_fraction",
                                                        "qp_predicted_residual_p50_mm", "notes")})
        print(finite_json.dumps(flat), flush=True)
    if args.strict and not validity.valid:
        return status or 3
    return status


def _report(args: argparse.Namespace, bag: Path, out: Path, status: int) -> int:
    """Write the report of ``bag`` into ``out/report``, print it; the command's exit status."""
    from soft_inverse_ros.analysis.report import write_report
    from soft_inverse_ros.analysis.validity import RunValidity, headline

    if args.hybrid:
        return _hybrid_report(args, bag, out, status)

    print("[demo] writing the report ...", flush=True)
    report = write_report(bag, out / "report",
                          nominal_command_hz=SNAKE_COMMAND_HZ if args.robot == SNAKE else 1000.0)
    validity = RunValidity(**report.metrics["validity"])
    for line in headline(validity):  # first, so that nobody reads the tables without it
        print(f"[demo] {line}", flush=True)
    print((report.out_dir / "metrics.md").read_text())
    if snake := report.metrics.get("snake"):
        v = validity
        rtf = ("–" if v.plant_real_time_factor_median is None else
               f"median {v.plant_real_time_factor_median:.2f}, p5 {v.plant_real_time_factor_p5:.2f}")
        speed = snake["forward_speed_mm_s"]
        print(f"[demo] snake forward speed ({snake['source']}): "
              f"{'–' if speed is None else f'{speed:.3f}'} mm/s; plant real-time factor {rtf} "
              f"(clock: {v.clock})", flush=True)
    print(f"[demo] bag:    {bag}")
    print(f"[demo] report: {report.out_dir} ({len(report.files)} files)")
    for line in headline(validity):  # and last, after the long tables
        print(f"[demo] {line}", file=sys.stderr if not validity.valid else sys.stdout)
    if args.json:
        print(finite_json.dumps(report.metrics["summary"]), flush=True)
    if args.strict and not validity.valid:
        return status or 3
    return status


def _run(args: argparse.Namespace) -> int:
    import os

    from soft_inverse_ros.core.jit_warm_up import prebuild_graph_plant
    from soft_inverse_ros.graph import build_graph

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    out = Path(args.out).resolve()
    bag = out / "bag"
    if bag.exists():
        print(f"soft-inverse-ros demo: {bag} exists; choose another --out", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    if args.robot == SNAKE:
        nodes = build_graph("snake", {"record": str(bag), "clock": args.clock,
                                      "params_file": args.params_file})
    elif args.hybrid:
        nodes = build_graph("hybrid", {"record": str(bag), "robot": args.robot, "clock": args.clock,
                                       "params_file": args.params_file})
    else:
        nodes = build_graph("sim", _graph_overrides(args, bag))
        try:
            prebuild_graph_plant(nodes, lambda line: print(f"[demo] {line}", flush=True))
        except KeyboardInterrupt:
            print("[demo] interrupted while preparing the simulated robot: nothing was run", file=sys.stderr)
            return 130
    what = "gait" if args.robot == SNAKE else "trajectory"
    print(f"[demo] robot '{args.robot}', {args.duration:.0f} s of {args.params_file}'s {what} "
          f"({'simulated' if args.clock == 'sim' else 'wall-clock'} time); "
          f"nodes: {', '.join(n.name for n in nodes)}; logs in {out / 'logs'}", flush=True)
    status, died = _run_graph(args, nodes, out / "logs")
    if died:
        print("[demo] no report: the graph did not run to the end (the partial bag, if any, "
              f"is in {bag})", file=sys.stderr)
        return 1
    if not (bag / "metadata.yaml").exists():
        print(f"[demo] no bag was written (see {out / 'logs'})", file=sys.stderr)
        return status or 1
    return _report(args, bag, out, status)


def _is_hybrid(robot: str) -> bool | None:
    """Whether ``robot`` is a hybrid description (``type: hybrid``); None after printing one
    line when it cannot be read."""
    from soft_inverse_ros.core.config_files import ConfigNotFoundError, resolve_robot

    try:
        import yaml

        path = resolve_robot(robot)
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (ConfigNotFoundError, OSError) as exc:
        print(f"demo: {str(exc).splitlines()[0]}", file=sys.stderr)
        return None
    except UnicodeDecodeError:
        print(f"demo: the robot description {path} is not UTF-8 text", file=sys.stderr)
        return None
    except yaml.YAMLError as exc:
        print(f"demo: cannot read the robot description {robot}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return None
    from soft_inverse_ros.core.model.hybrid_description import is_hybrid_data

    if not is_hybrid_data(data):
        return False
    from soft_inverse_ros.core.model.description import DescriptionError
    from soft_inverse_ros.core.model.hybrid_description import parse_hybrid_description

    try:
        parse_hybrid_description(data, source=path)
    except DescriptionError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return None
    return True


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="simulated robot tracking the square trajectory (or --scene self-collision, --robot snake: "
                     "the soft snake crawling, --robot hybrid_arm: the hybrid arm aligning its probe): bag + report",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=positive, default=None,
                        help="tracking time after start-up [s] (default 45; 20 with --robot "
                             "snake; 52 with a hybrid robot, sim_hybrid.yaml's four targets; "
                             "simulated s with --clock sim)")
    parser.add_argument("--out", default=None,
                        help="output folder (default: ./demo_output/<date-time>)")
    parser.add_argument("--robot", default="builtin_diamond",
                        help="robot description, or 'snake': the pneumatic soft snake's live graph "
                             "(gait -> simulated valves -> snake plant -> plate mocap -> bag; the "
                             "report gives the CoM path, per-link curvature and forward speed); "
                             "hybrid_arm (a type: hybrid description) runs the hybrid graph: a 5-joint "
                             "arm carrying a soft rod aligns its probe with a target in a soft block, "
                             "joint setpoints to the simulated joint servos")
    parser.add_argument("--params-file", default=None,
                        help="the graph's parameter file in config/ (or a path): sim.yaml (default, "
                             "the Diamond-shaped robots and the square), sim_finger.yaml (SOFA's "
                             "finger with self-collision: --robot finger --plant-model fem), "
                             "sim_snake.yaml (default with --robot snake) or sim_hybrid.yaml "
                             "(default for a hybrid robot)")
    parser.add_argument("--scene", choices=("default", "self-collision"), default="default",
                        help="self-collision: SOFA's finger closing its notches, controlled with the "
                             "contacts in the inverse QP (same as --robot finger --params-file "
                             "sim_finger.yaml --plant-model fem)")
    parser.add_argument("--clock", choices=("wall", "sim"), default=None,
                        help="wall (default): real time, what a robot sees: the run is invalid "
                             "when the simulated robot falls behind; sim: the simulated robot "
                             "publishes /clock and the graph follows it, the clock waiting for "
                             "the slow nodes (lockstep: valid however busy the machine, slower "
                             "than real time; --duration in simulated s)")
    parser.add_argument("--separate", action="store_true",
                        help="run compliance_node beside fem_node (default: the compliance "
                             "fused into fem_node, measured faster on 2 cores)")
    parser.add_argument("--plant-model", choices=("fem", "reduced", "modal", "mujoco"), default=None,
                        help="simulated robot model (default: config/sim.yaml's): reduced = POD-reduced co-rotational FEM, "
                             "modal = linear modal model (cheapest), fem = full dynamic FEM, mujoco = the MuJoCo engine "
                             "(optional extra: pip install -r requirements/mujoco.txt)")
    parser.add_argument("--closed-loop", action="store_true",
                        help="correct the target with the simulated motion capture")
    parser.add_argument("--json", action="store_true",
                        help="print the run's summary (tracking, real-time factor, SAFE "
                             "fraction, compliance rate, clock, validity) as one JSON object, "
                             "last")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 3 when the run is invalid (e.g. the plant behind "
                             "real time or its servo inputs old in wall-clock mode, SAFE commands "
                             "after start-up, empty command slots, a stalled stream: the README's "
                             "list, and the report's first lines say which)")
    parser.add_argument("--startup-timeout", type=positive, default=180.0,
                        help="give up when the pipeline is not up after this many seconds")

    def func(args: argparse.Namespace) -> int:
        args.hybrid = False
        if args.robot == SNAKE:
            given = [flag for flag, on in (("--scene", args.scene != "default"),
                                           ("--closed-loop", args.closed_loop),
                                           ("--plant-model", args.plant_model),
                                           ("--separate", args.separate)) if on]
            if given:
                print(f"demo: {', '.join(given)}: not used by --robot snake (an open-loop "
                      "gait, no controller)", file=sys.stderr)
                return 2
            args.params_file = args.params_file or "sim_snake.yaml"
            args.duration = 20.0 if args.duration is None else args.duration
        else:
            args.hybrid = _is_hybrid(args.robot)
            if args.hybrid is None:
                return 2
        if args.hybrid:
            extra = [flag for flag, on in (("--scene", args.scene != "default"), ("--separate", args.separate),
                                           ("--plant-model", args.plant_model), ("--closed-loop", args.closed_loop)) if on]
            if extra:
                print(f"demo: {', '.join(extra)}: not available for a hybrid robot ({args.robot})", file=sys.stderr)
                return 2
            args.params_file = args.params_file or "sim_hybrid.yaml"
            args.duration = 52.0 if args.duration is None else args.duration
        args.params_file = args.params_file or "sim.yaml"
        args.duration = 45.0 if args.duration is None else args.duration
        args.clock = args.clock or "wall"
        if args.scene == "self-collision":
            if args.robot not in ("builtin_diamond", "finger") or args.params_file not in ("sim.yaml", "sim_finger.yaml"):
                print("demo: --scene self-collision runs the finger with sim_finger.yaml; "
                      "leave out --robot/--params-file or give --robot finger", file=sys.stderr)
                return 2
            args.robot, args.params_file = "finger", "sim_finger.yaml"
            args.plant_model = args.plant_model or "fem"
        if args.out is None:
            args.out = str(Path("demo_output") / time.strftime("%Y%m%d-%H%M%S"))
        return _run(args)

    parser.set_defaults(func=func)
