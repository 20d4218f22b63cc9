"""inverse_controller_node: the high-rate loop.

At ``rate_hz`` (default 1 kHz) it takes the newest target and the newest compliance
snapshot, solves the inverse QP (only δ_e_free changes between snapshots, no
factorization) and publishes the actuator command: displacement setpoints for cables
(servos), force setpoints for linear forces, pressure setpoints for cavities; for a hybrid
robot (``type: hybrid`` description, core/model/hybrid_description.py) joint position
setpoints [rad] in MODE_DISPLACEMENT (home + λ/k: the joint servos take them) and the soft
force actuators' efforts [N] in MODE_FORCE, with the
description's contact-force limits replacing ``qp.contact_force_sum_max`` and
``qp.contact_min_force_sum``. With
``answer_targets`` it also commands at once when a new target arrives (between ticks; the
ticks go on, ``diagnostics.answers`` counts these commands).

Safety: no snapshot yet, a snapshot older than ``snapshot_timeout``, no target yet, or
any failure inside a tick gives the safe command (status SAFE, which the drivers turn into
hold/release/vent) with a diagnostic; a QP failure holds the previous valid command
(status HELD) for at most ``max_held_time``, then SAFE. The first SAFE after live commands
resets the solver's per-tick reference to the safe command (a hybrid robot's joints: to
their last command, which their servos hold), so the commands after it ramp up from what
the actuators hold. Control resumes by itself when fresh data arrive. Nothing raised inside a
tick escapes it; the fall from OK commands to SAFE is logged once, with its reason.
Inputs are checked before use: snapshots and targets stamped ahead of the node clock by
more than ``max_clock_skew`` or at time ≤ 0 are refused (a snapshot's age counts from
min(stamp, receive time)), so are snapshots already older than ``snapshot_timeout`` or
older than the one in use, targets older than ``max_target_age``, beyond ten robot sizes
or in another frame than ``frame_id`` (when newer targets are refused, the held one is
tracked until it is ``max_target_age`` old, then the commands are SAFE), and snapshots are
validated physically against the robot description
(:mod:`soft_inverse_ros.core.control.snapshot_check`). The node clock is used throughout,
so the controller follows ``/clock`` under ``use_sim_time``; ``diagnostics.missed``
counts 1 ms slots without a command.

With ``snapshot_thread`` (the default) snapshots are converted, checked and prepared in a
thread of their own (:class:`~soft_inverse_ros.nodes.latest_worker.LatestWorker`, at the
lowest SCHED_FIFO priority, :data:`SNAPSHOT_THREAD_PRIORITY`), not in the thread that runs
the ticks: inside the
main job's graph that work takes 0.5-1.2 ms per snapshot and, in the ticks' thread, delayed
one tick in two out of its slot. The process's interpreter switch interval is
:data:`GIL_SWITCH_INTERVAL_S` instead of Python's 5 ms, so a due tick takes the GIL from
that thread within about that time. The thread works in six steps of 0.1-0.4 ms, each
started when a tick ends (:meth:`InverseSolver.set_snapshot_steps`), so it does not hold
the GIL when the next tick is due: beside the ticks, three quarters of the slots the
controller lost were lost while a snapshot was being handled. Without the thread
(``snapshot_thread: false``) the ticks' own thread runs the same steps, one after each
tick. The hybrid arm's graph turns it off
(``config/sim_hybrid.yaml``): its ticks call the QP solver's C code several times, each
call hands the GIL over, and while a 4 ms hybrid snapshot was prepared beside them the
ticks' p99 solve time grew from 0.4 to 0.8 ms and the runs went SAFE (BENCHMARKS.md,
seventeenth session).

With ``closed_loop`` (switchable at run time with ``ros2 param set``) the measured
effector position (mocap/effector) corrects the target by an integral law with
anti-windup; a stale measurement falls back to open loop.

Effector points: a robot whose effector rows belong to one point (``tip.x``, ``tip.y``,
``tip.z``, or a subset of the axes) takes its target on ``target``; a robot with several
points (several effectors, or an effector in ``points`` mode: ``tip[0]``, ``tip[1]``)
takes one target per point on ``target/<point>`` (``tip[1]`` → ``target/tip_1``), each a
PointStamped in ``frame_id``, and is commanded once every point has a target (each
point's newest; until then the safe command, "no target yet for effector point(s) …").
The closed loop corrects one measured point, so it is refused for several.

Subscribes: target or target/<point> (PointStamped), compliance (ComplianceSnapshot),
mocap/effector (PointStamped; one effector point). Publishes: actuator_command
(ActuatorCommand), inverse_status (InverseSolverStatus, every ``status_every`` ticks),
/diagnostics.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
from geometry_msgs.msg import PointStamped
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from soft_inverse_ros_msgs.msg import (
    ActuatorCommand,
    ComplianceSnapshot,
    InverseSolverStatus,
)

from soft_inverse_ros import topics
from soft_inverse_ros.core.control.actuator_limits import limits_from_description
from soft_inverse_ros.core.control.kernel_warm_up import warm_up_solver
from soft_inverse_ros.core.control.deadlines import SlotCounter
from soft_inverse_ros.core.control.snapshot_check import SnapshotExpectations, check_snapshot
from soft_inverse_ros.core.model.description import RobotDescription
from soft_inverse_ros.core.model.hybrid_description import command_period_mismatch, load_any_description
from soft_inverse_ros.core.control.feedback import (
    FeedbackConfig,
    FeedbackMode,
    TargetFeedback,
    qp_saturated,
)
from soft_inverse_ros.core.control.inverse_qp import (
    BACKING_OFF,
    CommandStatus,
    InverseSolver,
    InverseSolverConfig,
)
from soft_inverse_ros.core.model.snapshot import ActuatorKind, effector_points
from soft_inverse_ros.nodes import diagnostics as diag
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.command_cdr import CommandEncoder
from soft_inverse_ros.nodes.conversions import (
    now_seconds,
    snapshot_from_msg,
    to_seconds,
)
from soft_inverse_ros.nodes.latest_worker import LatestWorker
from soft_inverse_ros.nodes.periodic import create_periodic
from soft_inverse_ros.nodes.scheduling import set_fifo_priority
from soft_inverse_ros.nodes.node_runtime import (
    NodeConfigError,
    check_known_parameters,
    config_parameter_names,
    declare_config,
    main_for,
)

_MODE = {
    ActuatorKind.CABLE: ActuatorCommand.MODE_DISPLACEMENT,
    ActuatorKind.FORCE: ActuatorCommand.MODE_FORCE,
    ActuatorKind.PRESSURE: ActuatorCommand.MODE_PRESSURE,
}
_STATUS = {
    CommandStatus.OK: ActuatorCommand.STATUS_OK,
    CommandStatus.HELD: ActuatorCommand.STATUS_HELD,
    CommandStatus.SAFE: ActuatorCommand.STATUS_SAFE,
}
#: logged once, with the first OK command (a readiness mark for logs and experiments)
FIRST_OK_LOG = "commanding: first OK command"
#: SAFE commands this long [s] after the first tick, without an OK one yet, are logged
STILL_SAFE_AFTER = 15.0
#: The controller process's interpreter switch interval [s] (Python's default: 5 ms): how
#: long a due tick may wait for the GIL held by the snapshot thread before that thread must
#: hand it over (sys.setswitchinterval; it only acts when two threads want the GIL).
GIL_SWITCH_INTERVAL_S = 1e-4
#: SCHED_FIFO priority of the snapshot thread when the controller runs at SCHED_FIFO: the
#: lowest. At one below the ticks (19) it could hold the second core while the command's receiver
#: (the servo driver, 8) waited: bench pipeline 0.16-0.29 % empty slots and 1.46-2.02 ms
#: end-to-end p99 against 0.05-0.15 % and 1.29-1.69 ms at 1 (BENCHMARKS.md, seventeenth session).
SNAPSHOT_THREAD_PRIORITY = 1
SNAPSHOT_STEP_WAIT_S = 0.005  # [s] longest wait for the end of a tick before a snapshot step


@dataclass(frozen=True)
class ControllerConfig:
    robot: str = field(default="builtin_diamond", metadata={
        "description": "robot description (actuator names, kinds, limits, effector rows)"})
    rate_hz: float = field(default=1000.0, metadata={
        "description": "command rate [Hz]", "range": (1.0, 5000.0)})
    snapshot_timeout: float = field(default=0.5, metadata={
        "description": "oldest usable compliance snapshot [s]; older: safe command",
        "range": (0.001, 60.0)})
    loop: str = field(default="timer", metadata={
        "description": "tick source: an executor timer, or a dedicated thread with absolute "
                       "deadlines (subscriptions stay on the executor)",
        "choices": ("timer", "thread")})
    snapshot_thread: bool = field(default=True, metadata={
        "description": "convert, check and prepare compliance snapshots in a thread of their "
                       "own, in steps started as ticks end, at SCHED_FIFO 1 when the "
                       "controller runs at SCHED_FIFO (false: the ticks' thread runs the "
                       "steps, one after each tick)"})
    realtime_priority: int = field(default=0, metadata={
        "description": "SCHED_FIFO priority of the controller process's threads (1-99; 0: "
                       "normal scheduling). Needs "
                       "CAP_SYS_NICE/root or an rtprio limit; refused: warning, normal scheduling",
        "range": (0, 99)})
    max_clock_skew: float = field(default=0.1, metadata={
        "description": "targets and snapshots stamped further ahead of this node's clock "
                       "than this [s] are refused (a future stamp would defeat the staleness "
                       "check); snapshot ages count from min(stamp, receive time)",
        "range": (0.0, 10.0)})
    max_target_age: float = field(default=1.0, metadata={
        "description": "a target stamped longer than this before this node's clock when it "
                       "arrives is refused (a replayed or mis-clocked target) [s]",
        "range": (0.01, 3600.0)})
    max_held_time: float = field(default=0.5, metadata={
        "description": "longest run of HELD commands (the QP failed, the last command held) "
                       "before the commands go SAFE [s]: a held command was computed for an "
                       "older snapshot and target, and a QP that keeps failing holds it for good",
        "range": (0.001, 60.0)})
    answer_targets: bool = field(default=True, metadata={
        "description": "also solve and publish at once when a new target arrives (the "
                       "fixed-rate ticks go on): target-to-command latency without waiting "
                       "up to one period for the next tick"})
    status_every: int = field(default=10, metadata={
        "description": "publish inverse_status every N ticks", "range": (1, 100000)})
    command_throttle_hz: float = field(default=100.0, metadata={
        "description": "rate [Hz] of the copy of the commands on actuator_command_throttle "
                       "(the low-rate loop's input; also at each change of status); 0: no copy",
        "range": (0.0, 5000.0)})
    frame_id: str = field(default=topics.BASE_FRAME, metadata={"description": "robot base frame"})
    closed_loop: bool = field(default=False, metadata={
        "description": "correct the target with the measured effector (mocap/effector; "
                       "robots with one effector point)",
        "dynamic": True})
    feedback_ki: float = field(default=2.0, metadata={
        "description": "integral gain of the closed-loop correction [1/s]", "range": (0.0, 100.0)})
    feedback_kp: float = field(default=0.0, metadata={
        "description": "proportional gain of the closed-loop correction", "range": (0.0, 10.0)})
    feedback_max_correction: float = field(default=0.01, metadata={
        "description": "largest target correction [m]", "range": (0.0, 1.0)})
    feedback_stale_after: float = field(default=0.1, metadata={
        "description": "oldest usable effector measurement [s]", "range": (0.001, 10.0)})
    feedback_anti_windup: str = field(default="freeze", metadata={
        "description": "anti-windup at active actuator bounds",
        "choices": ("freeze", "back_calculation", "none")})


class InverseControllerNode(Node):
    def __init__(self, node_name: str = "inverse_controller_node", **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, ControllerConfig)
        qp_config = declare_config(self, InverseSolverConfig, prefix="qp.")
        check_known_parameters(self, config_parameter_names(ControllerConfig)
                               + config_parameter_names(InverseSolverConfig, "qp."))

        desc = load_any_description(self.config.robot)
        self._hybrid = getattr(desc, "is_hybrid", False)
        if self._hybrid:  # the description's contact limits (eq. 14 and stay-in-contact)
            import dataclasses

            if self.config.closed_loop:
                raise NodeConfigError(f"{node_name}: closed_loop corrects a measured effector point; a hybrid "
                                      "robot's effector rows are the probe alignment (no closed loop)")
            if problem := command_period_mismatch(desc, self.config.rate_hz):
                raise NodeConfigError(f"{node_name}: {problem}")

            if math.isfinite(qp_config.contact_force_sum_max) or qp_config.contact_min_force_sum > 0:
                raise NodeConfigError(f"{node_name}: qp.contact_force_sum_max / qp.contact_min_force_sum: a "
                                      "hybrid robot takes them from its description's contact section (these "
                                      "would be replaced)")
            qp_config = dataclasses.replace(qp_config, contact_force_sum_max=desc.force_sum_max,
                                            contact_min_force_sum=desc.min_force_sum)
        elif getattr(desc, "collision", None) is None:
            limited = qp_config.contact_limits_set()
            if limited:  # no snapshot of this robot carries contacts
                raise NodeConfigError(f"{node_name}: robot {desc.name!r} has no collision section: "
                                      f"qp.{', qp.'.join(limited)} would do nothing")
        self._setup_solver(desc, qp_config)
        rows = self._setup_effector(desc, node_name)
        self._warm_up(desc, qp_config)
        self._init_loop_state()
        self._create_interfaces()
        self._start_loop()
        self.get_logger().info(
            f"{len(self.names)} actuators {self.names}, effector rows {rows}, "
            f"QP: {self.solver.qp_call}, {self.config.rate_hz:g} Hz"
        )

    # ------------------------------------------------------------------ set-up
    def _setup_solver(self, desc: RobotDescription, qp_config: InverseSolverConfig) -> None:
        """Actuator limits, snapshot expectations (robot size [m] from the mesh's bounding
        box, largest effort magnitudes), the QP solver and the per-actuator command modes."""
        self.limits = limits_from_description(desc)
        if self.config.answer_targets and (self.limits.has_effort_step or self.limits.has_stroke_step):
            raise NodeConfigError(
                f"{self.get_name()}: answer_targets adds commands between the ticks, and robot "
                f"{desc.name!r}'s per-tick limits (max_*_step) count per command: its actuators "
                "would move faster than the limits allow; set answer_targets: false")
        if self._hybrid:
            size = desc.size_m()
        else:
            lo, hi = desc.load_mesh().bounding_box()
            size = float(np.linalg.norm(hi - lo))
        self._expect = SnapshotExpectations(
            tuple(desc.actuator_names), tuple(desc.actuator_kinds),
            desc.effector_row_names,
            size,
            np.maximum(np.abs(self.limits.effort_min), np.abs(self.limits.effort_max)))
        self.solver = InverseSolver(qp_config, self.limits)
        self.names = list(desc.actuator_names)
        kinds = desc.actuator_kinds
        self.modes = [_MODE[k] for k in kinds]
        self._pressure = np.array([k is ActuatorKind.PRESSURE for k in kinds])
        self._force = np.array([k is ActuatorKind.FORCE for k in kinds])
        self._effort_valued = self._pressure | self._force  # setpoint = effort, else stroke
        # a hybrid robot's joints: position setpoints [rad] home + λ/k for the joint servos;
        # its soft force actuators: their efforts [N]
        self._joint_positions = desc.joint_positions if self._hybrid else None
        # actuators the drivers hold where they were on a SAFE command: the joint servos
        self._held_on_safe = (np.arange(len(self.names)) < desc.n_joints) if self._hybrid else None
        if self._hybrid:
            self._n_joints = desc.n_joints
            self.modes = ([ActuatorCommand.MODE_DISPLACEMENT] * desc.n_joints
                          + [ActuatorCommand.MODE_FORCE] * (len(kinds) - desc.n_joints))

    def _warm_up(self, desc: RobotDescription, qp_config: InverseSolverConfig) -> None:
        """Compile the solver's kernels now, before the loop starts: the first snapshot
        would otherwise compile them in the executor thread the ticks share, stopping the
        ticks for seconds on a cold start (core/control/kernel_warm_up.py)."""
        with_contact = self._hybrid or getattr(desc, "collision", None) is not None
        seconds = warm_up_solver(qp_config, self.limits, desc.actuator_kinds, desc.effector_row_names,
                                 actuator_names=desc.actuator_names, with_contact=with_contact)
        if seconds > 1.0:
            self.get_logger().info(f"compiled the solver's kernels in {seconds:.1f} s (numba cache cold)")

    def _setup_effector(self, desc: RobotDescription, node_name: str) -> list[str]:
        """The effector points (their rows and axes), the target topics and the closed-loop
        feedback; the row names.

        Raises:
            ValueError: rows not named POINT.x/y/z.
            NodeConfigError: ``closed_loop`` with several effector points.
        """
        rows = list(desc.effector_row_names)
        try:
            self.points = effector_points(rows)
        except ValueError as exc:
            raise ValueError(f"{node_name}: robot '{desc.name}': {exc}") from None
        if len(self.points) == 1:  # the target topic and mocap/effector
            self.row_axes = self.points[0].axes
            self.target_topics = [topics.TARGET]
        else:  # one target topic per point, no measured effector
            self.row_axes = None
            self.target_topics = [f"{topics.TARGET}/{p.topic_token}" for p in self.points]
            if self.config.closed_loop:
                raise NodeConfigError(
                    f"{node_name}: closed_loop corrects one measured effector point "
                    f"({topics.MOCAP_EFFECTOR}); robot '{desc.name}' has "
                    f"{len(self.points)}: {[p.name for p in self.points]}")
        self.feedback = TargetFeedback(FeedbackConfig(
            ki=self.config.feedback_ki, kp=self.config.feedback_kp,
            max_correction=self.config.feedback_max_correction,
            stale_after=self.config.feedback_stale_after,
            anti_windup=self.config.feedback_anti_windup, enabled=self.config.closed_loop,
        ), len(rows))
        return rows

    def _init_loop_state(self) -> None:
        """Inputs (stamps in s of the node clock), counters and timing of the loop."""
        self._target: np.ndarray | None = None  # (n_e,) [m], every point's newest
        self._point_targets: list[np.ndarray | None] = [None] * len(self.points)  # several points
        self._target_stamp = None
        self._measured: np.ndarray | None = None
        self._measured_stamp = -math.inf
        self._snapshot_stamp = -math.inf
        self._snapshot_seq = -1
        self._saturated = False
        self._feedback = None  # the last FeedbackOutput (diagnostics)
        self._qp_residual: np.ndarray | None = None  # of the last solved tick (back-calculation)
        self._seq = 0
        self._commanding = False  # an OK command was sent (logged once: FIRST_OK_LOG)
        self._first_tick: float | None = None  # node time of the first SAFE tick before any OK
        # per effector point: why a target newer than the held one was refused ("" none), and
        # the stamp of its held target (a refused point is not excused by another's targets)
        self._point_refusals: list[str] = [""] * len(self.points)
        self._point_stamps: list = [None] * len(self.points)
        self._held_since: float | None = None  # node time of the first HELD of the current run
        self._reset_pending = False  # a SAFE command must reset the solver's per-tick reference
        self._ok_now = False  # the last command was OK (a fall to SAFE is logged once)
        self._stats = {"ticks": 0, "answers": 0, "safe": 0, "held": 0, "errors": 0,
                       "rejected_snapshots": 0, "rejected_targets": 0, "rejected_measurements": 0,
                       "snapshots": 0}
        self._solve_times: list[float] = []
        self._command_lock = threading.Lock()  # ticks and target answers: one at a time
        self._tick_ended = threading.Event()  # set at the end of each tick (snapshot steps)
        self._snapshot_pending: Iterator[None] | None = None  # steps left (no snapshot thread)
        self._snapshots_superseded = 0  # replaced before their last step (no snapshot thread)
        self._period = 1.0 / self.config.rate_hz  # [s]
        self._slots = SlotCounter(self._period)  # missed 1 ms slots (diagnostics "missed")
        self._reason = ""
        self._last_variation = (math.nan, math.nan)

    def _create_interfaces(self) -> None:
        """Publishers (with the reused command message), subscriptions, the parameter
        callback and diagnostics."""
        self._cmd_pub = self.create_publisher(ActuatorCommand, topics.ACTUATOR_COMMAND,
                                              qos.HIGH_RATE)
        # a copy at command_throttle_hz for the low-rate loop (topics.ACTUATOR_COMMAND_THROTTLE)
        self._throttle_pub = None
        if self.config.command_throttle_hz > 0.0:
            self._throttle_pub = self.create_publisher(
                ActuatorCommand, topics.ACTUATOR_COMMAND_THROTTLE, qos.HIGH_RATE)
        self._throttle_period = (1.0 / self.config.command_throttle_hz
                                 if self.config.command_throttle_hz > 0.0 else math.inf)
        self._throttle_last = -math.inf  # node-clock time of the last copy [s]
        self._throttle_status = -1  # command status of the last copy
        # the command's CDR bytes written directly (command_cdr.py: ~60 µs less per command
        # than rclpy's conversion of a message), or the reused message on another encoding
        self._cmd_encoder: CommandEncoder | None = CommandEncoder(
            self.config.frame_id, self.names, self.modes)
        self._cmd_msg: ActuatorCommand | None = None
        if not self._cmd_encoder.matches_rclpy(ActuatorCommand):
            self.get_logger().warning("this rmw serializes ActuatorCommand differently: "
                                      "commands are published as messages (slower)")
            self._cmd_encoder = None
            self._cmd_msg = ActuatorCommand()
            self._cmd_msg.header.frame_id = self.config.frame_id
            self._cmd_msg.names = self.names
            self._cmd_msg.modes = self.modes
        self._status_pub = self.create_publisher(InverseSolverStatus, topics.INVERSE_STATUS,
                                                 qos.HIGH_RATE)
        if len(self.points) == 1:
            self.create_subscription(PointStamped, topics.TARGET, self._on_target, qos.HIGH_RATE)
            self.create_subscription(PointStamped, topics.MOCAP_EFFECTOR, self._on_measured,
                                     qos.HIGH_RATE)
        else:
            for index, topic in enumerate(self.target_topics):
                self.create_subscription(PointStamped, topic,
                                         lambda msg, index=index: self._on_point_target(index, msg),
                                         qos.HIGH_RATE)
        self.create_subscription(ComplianceSnapshot, topics.COMPLIANCE, self._on_snapshot,
                                 qos.LATCHED)
        self.add_on_set_parameters_callback(self._on_parameters)
        self._diag = diag.DiagnosticsPublisher(self, self._diagnostics)

    def _start_loop(self) -> None:
        """Start the ticks: a dedicated thread (``loop: thread``, wall clock only) or an
        executor timer every ``1 / rate_hz`` s.

        Raises:
            NodeConfigError: ``loop: thread`` with ``use_sim_time``.
        """
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._scheduling = "normal"
        if self.config.loop == "thread" and self.get_parameter("use_sim_time").value:
            raise NodeConfigError(
                f"{self.get_name()}: loop: thread paces itself on the wall clock; with "
                "use_sim_time use loop: timer (it follows /clock)")
        # every thread so far (executor, DDS), and the ones made below inherit it
        self._set_realtime_priority()
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        self._snapshot_worker: LatestWorker | None = None
        if self.config.snapshot_thread:
            # the lowest real-time priority: ahead of every normal process (fem_node), behind
            # every real-time thread, the ticks and the drivers that receive the commands
            lowest = SNAPSHOT_THREAD_PRIORITY if self._scheduling != "normal" else 0
            self._snapshot_worker = LatestWorker(
                self._snapshot_steps, "snapshots", fifo_priority=lowest, pause=self._between_ticks,
                on_error=lambda exc: self.get_logger().error(
                    f"snapshot handling failed: {type(exc).__name__}: {exc}",
                    throttle_duration_sec=1.0))
        if self.config.loop == "thread":
            self._thread = threading.Thread(target=self._run_loop, name="inverse_qp_loop",
                                            daemon=True)
            self._thread.start()
        else:  # the executor thread runs the timer
            create_periodic(self, self._period, self._tick)

    # ------------------------------------------------------------------ inputs
    def _checked_target(self, msg: PointStamped, index: int = 0) -> np.ndarray | None:
        """The target point (3,) [m], or None (counted and logged, with the reason) when it
        is not finite, beyond the robot's scale, stamped at time ≤ 0, ahead of the clock or
        older than ``max_target_age``, or in another frame."""
        point = np.array([msg.point.x, msg.point.y, msg.point.z])
        reach = self._expect.reach()
        problem = ""
        if not np.all(np.isfinite(point)):
            problem = f"target {point.tolist()} is not finite"
        elif np.any(np.abs(point) > reach):
            problem = (f"target {point.tolist()} m is beyond the robot's scale ({reach:.3g} m from "
                       f"'{self.config.frame_id}'): a unit or frame mistake?")
        if not problem:
            problem = self._stamp_problem(msg.header.stamp, "target")
        if not problem:
            age = now_seconds(self) - to_seconds(msg.header.stamp)
            if age > self.config.max_target_age:
                problem = (f"target stamped {age:.3f} s before this node's clock (max_target_age "
                           f"{self.config.max_target_age} s): replayed, or another clock")
        if not problem and msg.header.frame_id != self.config.frame_id:
            problem = (f"target in frame '{msg.header.frame_id}', expected "
                       f"'{self.config.frame_id}' (no transform is applied)")
        if problem:
            self._stats["rejected_targets"] += 1
            self._reason = f"ignored a target: {problem}"
            self._point_refusals[index] = problem  # its held target is now an older one than asked
            self.get_logger().warning(self._reason, throttle_duration_sec=1.0)
            return None
        return point

    def _on_target(self, msg: PointStamped) -> None:
        """The target of a robot with one effector point (topic ``target``)."""
        point = self._checked_target(msg)
        if point is None:
            return
        self._target = point[self.row_axes]
        self._target_stamp = self._point_stamps[0] = msg.header.stamp
        self._point_refusals[0] = ""
        if self.config.answer_targets:
            self._answer()

    def _on_point_target(self, index: int, msg: PointStamped) -> None:
        """The target of effector point ``index`` (topic ``target/<point>``): the target
        vector holds every point's newest, from the moment each point has one."""
        point = self._checked_target(msg, index)
        if point is None:
            return
        p = self.points[index]
        self._point_targets[index] = point[p.axes]
        self._point_stamps[index] = msg.header.stamp
        self._point_refusals[index] = ""
        if any(t is None for t in self._point_targets):
            return  # "no target yet" names the points still missing
        target = np.empty(sum(q.rows.size for q in self.points))
        for q, t in zip(self.points, self._point_targets):
            target[q.rows] = t
        self._target = target
        self._target_stamp = msg.header.stamp
        if self.config.answer_targets:
            self._answer()

    def _no_target_reason(self) -> str:
        missing = [p.name for p, t in zip(self.points, self._point_targets) if t is None]
        if len(self.points) == 1 or not missing:
            return "no target yet"
        return f"no target yet for effector point(s) {missing} (topics {topics.TARGET}/<point>)"

    def _answer(self) -> None:
        """A command for the new target now, besides the ticks (not a slot of its own, but
        it fills the slot it starts in: ``diagnostics.missed`` counts slots without a
        command, as the bag's analysis does)."""
        with self._command_lock:
            now = now_seconds(self)
            self._stats["answers"] += 1
            self._slots.tick(now)
            try:
                self._command(now)
            except Exception as exc:  # noqa: BLE001 -- the next tick tries again (and reports)
                self._stats["errors"] += 1
                self._reason = f"answer to a target failed: {type(exc).__name__}: {exc}"

    def _stamp_problem(self, stamp, what: str) -> str:
        """Why a message stamp is unusable ("" when it is fine): zero or negative, or
        further ahead of this node's clock than ``max_clock_skew``."""
        t = to_seconds(stamp)
        if t <= 0.0:
            return f"{what} stamp {t:.3f} s is not a time"
        ahead = t - now_seconds(self)
        if ahead > self.config.max_clock_skew:
            return (f"{what} stamped {ahead:.3f} s ahead of this node's clock (max_clock_skew "
                    f"{self.config.max_clock_skew} s)")
        return ""

    def _on_measured(self, msg: PointStamped) -> None:
        point = np.array([msg.point.x, msg.point.y, msg.point.z])
        if not np.all(np.isfinite(point)):
            return
        reach = self._expect.reach()
        problem = ""
        if np.any(np.abs(point) > reach):  # mm published as m, or another frame: no feedback
            problem = f"{point.tolist()} m beyond the robot's scale ({reach:.3g} m): a unit or frame mistake?"
        elif msg.header.frame_id != self.config.frame_id:
            problem = (f"in frame '{msg.header.frame_id}', expected '{self.config.frame_id}' (no "
                       "transform is applied)")
        else:
            problem = self._stamp_problem(msg.header.stamp, "measurement")
        if problem:
            self._stats["rejected_measurements"] += 1
            self.get_logger().warning(f"ignored a measurement: {problem}", throttle_duration_sec=5.0)
            return
        self._measured = point[self.row_axes]
        self._measured_stamp = to_seconds(msg.header.stamp)

    def _on_snapshot(self, msg: ComplianceSnapshot) -> None:
        """Hand the snapshot to the snapshot thread (module doc): the ticks' thread only
        queues it; without one, the ticks' thread runs its steps, one after each tick."""
        if self._snapshot_worker is not None:
            self._snapshot_worker.put(msg)
        else:  # see _tick
            with self._command_lock:
                if self._snapshot_pending is not None:
                    self._snapshots_superseded += 1
                self._snapshot_pending = self._snapshot_steps(msg)

    def _snapshot_steps(self, msg: ComplianceSnapshot) -> Iterator[None]:
        """Convert, check and install a snapshot in steps (the snapshot thread runs one
        between two ticks, :meth:`_between_ticks`; without it the ticks' thread runs one
        after each tick, :meth:`_snapshot_step`)."""
        update = None
        reason = self._stamp_problem(msg.header.stamp, "snapshot")
        if not reason and msg.header.frame_id != self.config.frame_id:
            reason = (f"in frame '{msg.header.frame_id}', expected '{self.config.frame_id}' (its "
                      "effector rows would be compared with targets of another frame)")
        if not reason:
            stamp, now = to_seconds(msg.header.stamp), now_seconds(self)
            age = now - stamp
            if age > self.config.snapshot_timeout:
                reason = (f"already stale on arrival ({age:.3f} s old > snapshot_timeout "
                          f"{self.config.snapshot_timeout} s)")
            elif stamp < self._snapshot_stamp <= now:  # (a clock that went back: not refused)
                reason = (f"older than the snapshot in use (stamped {self._snapshot_stamp - stamp:.3f} s "
                          "before it): out of order")
        if not reason:
            try:
                snapshot = snapshot_from_msg(msg)
            except ValueError as exc:
                reason = str(exc)
            else:
                yield
                reason = check_snapshot(snapshot, self._expect)
                if not reason:
                    yield
                    update = yield from self.solver.set_snapshot_steps(snapshot)
                    reason = update.reason
        if update is None or not update.accepted:
            self._stats["rejected_snapshots"] += 1
            self._reason = f"rejected snapshot {msg.seq}: {reason}"
            self.get_logger().warning(self._reason, throttle_duration_sec=1.0)
            return
        with self._command_lock:  # a tick sees the stamp and sequence number together
            self._stats["snapshots"] += 1
            # the age counts from the state's time, or from now if the stamp is (slightly) ahead
            self._snapshot_stamp = min(snapshot.stamp, now_seconds(self))
            self._snapshot_seq = snapshot.seq
            if update.variation is not None:
                self._last_variation = (update.variation.percent,
                                        update.variation.percent_per_second)

    def _between_ticks(self) -> None:
        """The snapshot thread's pause before each step: until a tick ends, for at most two
        periods and :data:`SNAPSHOT_STEP_WAIT_S` of wall time (slow ticks leave gaps long
        enough anyway, and the steps go on while the ticks stop, e.g. a paused /clock)."""
        self._tick_ended.clear()
        self._tick_ended.wait(min(2.0 * self._period, SNAPSHOT_STEP_WAIT_S))

    def _on_parameters(self, params) -> SetParametersResult:
        for param in params:
            if param.name == "closed_loop":
                if self._hybrid and param.value:
                    return SetParametersResult(successful=False,
                                               reason="no closed loop on a hybrid robot's alignment rows")
                if len(self.points) > 1 and param.value:
                    return SetParametersResult(successful=False,
                                               reason="closed_loop corrects one measured effector point; "
                                                      f"this robot has {len(self.points)}")
                self.feedback.set_enabled(bool(param.value))
                self.get_logger().info(f"closed loop {'on' if param.value else 'off'}")
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------ the tick
    def _set_realtime_priority(self) -> None:
        """SCHED_FIFO for every thread of this process (the tick, the executor and the DDS
        receive threads that deliver targets and snapshots) when ``realtime_priority`` > 0."""
        priority = self.config.realtime_priority
        if priority <= 0:
            return
        try:
            self._scheduling = set_fifo_priority(priority)
        except (PermissionError, OSError, AttributeError) as exc:
            self.get_logger().warning(
                f"realtime_priority {priority} refused ({exc}); normal scheduling")

    def _run_loop(self) -> None:
        """Dedicated loop thread (scheduling inherited from :meth:`_start_loop`): ticks at
        absolute deadlines; when it falls more than a period behind it skips the lost
        periods but keeps the phase, as a timer does (the misses are counted by _tick's
        slot counter)."""
        deadline = time.perf_counter()
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception as exc:  # noqa: BLE001 -- the tick's own handler failed too (its
                # safe command could not be published): the thread must not end silently
                self._stats["errors"] += 1
                self._reason = f"tick failed twice: {type(exc).__name__}: {exc}"
                self.get_logger().error(self._reason, throttle_duration_sec=1.0)
            deadline += self._period
            delay = deadline - time.perf_counter()
            if delay > 0:
                self._stop.wait(delay)
            elif delay < -self._period:
                deadline += math.floor(-delay / self._period) * self._period

    def close(self) -> None:
        """Stop the loop and snapshot threads (called by the node runtime before
        destruction) and restore the interpreter's switch interval."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        if self._snapshot_worker is not None:
            self._snapshot_worker.close()
        sys.setswitchinterval(self._switch_interval)

    def _tick(self) -> None:
        with self._command_lock:  # a target's answer (executor thread) may run meanwhile
            now = now_seconds(self)  # the node clock: simulated time under use_sim_time
            self._slots.tick(now)
            self._stats["ticks"] += 1
            try:
                self._command(now)
            except Exception as exc:  # noqa: BLE001 -- a tick must never take the loop down
                self._stats["errors"] += 1
                self._reason = f"tick failed: {type(exc).__name__}: {exc}"
                self.get_logger().error(self._reason, throttle_duration_sec=1.0)
                self._publish_safe(now, self._reason, "error")
        self._tick_ended.set()
        if self._snapshot_pending is not None:
            self._snapshot_step()

    def _snapshot_step(self) -> None:
        """One step of the pending snapshot (``snapshot_thread: false``), after a tick."""
        with self._command_lock:
            steps = self._snapshot_pending
        try:
            next(steps)
            return
        except StopIteration:
            pass
        except Exception as exc:  # noqa: BLE001 -- a bad snapshot must not stop the ticks
            self._reason = f"snapshot handling failed: {type(exc).__name__}: {exc}"
            self.get_logger().error(self._reason, throttle_duration_sec=1.0)
        with self._command_lock:  # done with it (unless a newer one replaced it meanwhile)
            if self._snapshot_pending is steps:
                self._snapshot_pending = None

    def _safe_reason(self, now: float) -> str:
        """Why this command must be SAFE before any solve ("" when it may be solved): no
        target, a superseded one, no snapshot, a stale one, or a clock that went back behind
        the snapshot's stamp (its age negative beyond ``max_clock_skew``: it would look
        fresh for as long as the clock stepped back)."""
        age = now - self._snapshot_stamp
        if self._target is None:
            return self._no_target_reason()
        if superseded := self._superseded_target(now):
            return superseded
        if not math.isfinite(age):
            return "no compliance snapshot yet"
        if age > self.config.snapshot_timeout:
            return f"compliance snapshot stale ({age:.3f} s > {self.config.snapshot_timeout} s)"
        if age < -self.config.max_clock_skew:
            return (f"the clock went back {-age:.3f} s behind the compliance snapshot's stamp "
                    f"(max_clock_skew {self.config.max_clock_skew} s): its age is unknown")
        return ""

    def _command(self, now: float) -> None:
        reason = self._safe_reason(now)
        if reason:
            self._go_safe(now, reason, "not solved")
            return
        fb = self.feedback.update(now, self._target, self._measured, self._measured_stamp,
                                  saturated=self._saturated, qp_residual=self._qp_residual)
        self._feedback = fb
        result = self.solver.solve(fb.target, stamp=now)
        # a failed QP (HELD) freezes the integrator too: the correction must not wind up
        # while no command follows it
        self._saturated = qp_saturated(result.ok, result.effector_error) or not result.ok
        self._qp_residual = result.effector_residual if result.ok else None
        self._solve_times.append(result.solve_time)
        if len(self._solve_times) > 2000:
            del self._solve_times[:1000]
        status = _STATUS[result.command_status]
        if status == ActuatorCommand.STATUS_HELD and result.backend_status == BACKING_OFF:
            self._stats["held"] += 1  # a new command each tick, toward the safe one: no hold
            self._held_since = None
        elif status == ActuatorCommand.STATUS_HELD:
            self._stats["held"] += 1
            self._held_since = now if self._held_since is None else self._held_since
            if now - self._held_since > self.config.max_held_time:
                self._go_safe(now, f"the QP failed for {now - self._held_since:.3f} s (> max_held_time "
                                   f"{self.config.max_held_time:g} s): {result.message}",
                              result.backend_status, level="error")
                return
        else:
            self._held_since = None
        if status == ActuatorCommand.STATUS_SAFE:
            self._go_safe(now, result.message, result.backend_status, result, fb)
            return
        if status == ActuatorCommand.STATUS_OK:  # (a HELD command is not)
            if not self._commanding:
                self._commanding = True
                self.get_logger().info(f"{FIRST_OK_LOG} (command {self._seq + 1}, snapshot "
                                       f"{self._snapshot_seq})")
            elif not self._ok_now:
                self.get_logger().info(f"commands OK again (command {self._seq + 1}, snapshot "
                                       f"{self._snapshot_seq})")
            self._ok_now = True
        if result.message:
            self._reason = result.message
        self._reset_pending = True  # a live command: the next SAFE resets the reference
        self._publish(now, result.efforts, result.strokes, status, result.message, result,
                      result.backend_status, fb)

    def _go_safe(self, now: float, reason: str, solver_status: str, result=None, fb=None, *,
                 level: str = "warning") -> None:
        """A SAFE command for ``reason``: counted, the node's reason, the fall from OK
        commands logged once (at ``level``; before the first OK, :meth:`_say_still_safe`),
        then published (:meth:`_publish_safe`)."""
        self._stats["safe"] += 1
        self._reason = reason
        if self._ok_now:  # logged once per fall from OK commands to SAFE
            self._ok_now = False
            if level == "error":  # (one call site per severity: rclpy's logger wants that)
                self.get_logger().error(f"commands SAFE: {reason}")
            else:
                self.get_logger().warning(f"commands SAFE: {reason}")
        elif not self._commanding:
            self._say_still_safe(now, reason)
        self._publish_safe(now, reason, solver_status, result, fb)

    def _publish_safe(self, now: float, reason: str, solver_status: str, result=None, fb=None) -> None:
        """Publish the safe command; the first SAFE after live commands resets the solver's
        per-tick reference and its held command, so that the commands after the SAFE spell
        ramp up from the safe command (they jumped back to the command before it, 80x a
        per-tick limit) and a failed QP then gives SAFE, not the old command HELD. A hybrid
        robot's joints restart from their last command: their servos hold it on SAFE (from
        the home pose, the contact QP found no state within one step of the held pose and
        the arm stayed HELD and SAFE for good)."""
        if self._reset_pending:
            self._reset_pending = False
            self._held_since = None
            self.solver.reset(hold=self._held_on_safe)
        safe = self.solver.safe_command()
        self._publish(now, safe.efforts, safe.strokes, ActuatorCommand.STATUS_SAFE, reason,
                      result, solver_status, fb)

    def _superseded_target(self, now: float) -> str:
        """Why the held target may no longer be tracked, or "": newer targets of a point
        were refused and its held one is older than ``max_target_age`` (a goal beyond the
        robot's scale was refused every time while OK commands went on towards the last one
        accepted; with several points, another point's accepted targets are no excuse). A
        single bad target, or a target published once and held, is no reason."""
        for i, (refusal, stamp) in enumerate(zip(self._point_refusals, self._point_stamps)):
            if not refusal or stamp is None:
                continue
            age = now - to_seconds(stamp)
            if age <= self.config.max_target_age:
                continue
            which = f" of effector point {self.points[i].name}" if len(self.points) > 1 else ""
            return (f"newer targets{which} refused for {age:.1f} s (> max_target_age "
                    f"{self.config.max_target_age:g} s): {refusal}")
        return ""

    def _say_still_safe(self, now: float, reason: str) -> None:
        """Before the first OK command: after ``STILL_SAFE_AFTER`` [s] of ticks, say why the
        commands are SAFE (every 30 s): a low-rate loop on another computer that never
        connected, or a dead target node, left the controller SAFE without a word."""
        if self._first_tick is None:
            self._first_tick = now
        elif now - self._first_tick >= STILL_SAFE_AFTER:
            self.get_logger().warning(f"no OK command yet, {now - self._first_tick:.0f} s after the first "
                                      f"tick: commands SAFE: {reason}", throttle_duration_sec=30.0)

    def _publish(self, now, efforts, strokes, status, text, result, solver_status, fb=None):
        """Encode the command (or fill the reused message: names, modes and frame set once)
        and publish it; callers hold ``_command_lock`` (ticks and target answers), so the
        encoder's buffer or the message has one writer at a time."""
        self._seq += 1
        sec = math.floor(now)
        stamp = (sec, min(int((now - sec) * 1e9), 999_999_999))
        target = self._target_stamp
        target_stamp = (0, 0) if target is None else (target.sec, target.nanosec)
        snapshot_seq = max(self._snapshot_seq, 0)
        if self._joint_positions is not None:
            values = np.concatenate([self._joint_positions(efforts),
                                     np.asarray(efforts, dtype=np.float64)[self._n_joints:]])
        else:
            values = np.where(self._effort_valued, efforts, strokes)
        if self._cmd_encoder is not None:
            payload = self._cmd_encoder.encode(stamp, target_stamp, self._seq, snapshot_seq,
                                               values, efforts, strokes, status, text)
        else:
            payload = msg = self._cmd_msg
            msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
            msg.target_stamp.sec, msg.target_stamp.nanosec = target_stamp
            msg.seq = self._seq
            msg.snapshot_seq = snapshot_seq
            msg.values = np.ascontiguousarray(values, dtype=np.float64)
            msg.efforts = np.ascontiguousarray(efforts, dtype=np.float64)
            msg.strokes = np.ascontiguousarray(strokes, dtype=np.float64)
            msg.status = status
            msg.status_text = text
        self._cmd_pub.publish(payload)
        if self._throttle_pub is not None and (
                status != self._throttle_status
                or not 0.0 <= now - self._throttle_last < self._throttle_period):
            self._throttle_pub.publish(payload)
            self._throttle_last, self._throttle_status = now, status
        if self._seq % self.config.status_every == 0:
            self._publish_status(stamp, snapshot_seq, status, now, result, solver_status, fb)

    def _publish_status(self, stamp, snapshot_seq, command_status, now, result, solver_status,
                        fb) -> None:
        """The solver's status for the command just published (``stamp`` (sec, nanosec),
        sequence number ``self._seq``)."""
        st = InverseSolverStatus()
        st.header.frame_id = self.config.frame_id
        st.header.stamp.sec, st.header.stamp.nanosec = stamp
        st.command_seq = self._seq
        st.snapshot_seq = snapshot_seq
        st.snapshot_age = now - self._snapshot_stamp if self._snapshot_seq >= 0 else math.inf
        st.solver_status = str(solver_status)
        st.command_status = command_status
        if result is not None:
            st.solve_time = float(result.solve_time)
            st.iterations = int(result.iterations)
            st.objective = float(result.objective)
            st.effector_error = float(result.effector_error)
            if result.ok:
                active = result.active
                st.effort_lower_active = active.effort_lower.tolist()
                st.effort_upper_active = active.effort_upper.tolist()
                st.stroke_lower_active = active.stroke_lower.tolist()
                st.stroke_upper_active = active.stroke_upper.tolist()
            if (c := result.contact) is not None:
                st.contact_ids = np.ascontiguousarray(c.ids, dtype=np.int64)
                st.contact_active = c.active.tolist()
                st.contact_force = np.ascontiguousarray(c.forces, dtype=np.float64)
                st.contact_gap = np.ascontiguousarray(c.gaps, dtype=np.float64)
                st.contact_force_sum = float(c.force_sum)
                st.contact_states_solved = int(c.states_solved)
        else:
            st.objective = st.effector_error = math.nan
        if self._measured is not None and self._target is not None:
            st.measured_effector_error = float(np.linalg.norm(self._measured - self._target))
        else:
            st.measured_effector_error = math.nan
        st.qp_variation_percent, st.qp_variation_rate = map(float, self._last_variation)
        st.closed_loop_active = fb is not None and fb.mode is FeedbackMode.CLOSED_LOOP
        self._status_pub.publish(st)

    # ------------------------------------------------------------------ health
    def _diagnostics(self):
        now = now_seconds(self)
        age = now - self._snapshot_stamp
        times = np.asarray(self._solve_times[-1000:]) if self._solve_times else np.zeros(1)
        level = diag.OK
        message = "ok"
        if not math.isfinite(age) or age > self.config.snapshot_timeout:
            level, message = diag.ERROR, self._reason or "no fresh compliance snapshot"
        elif self._target is None:
            level, message = diag.WARN, self._no_target_reason()
        elif self._reason:
            level, message = diag.WARN, self._reason
        self._reason = ""
        values = {**self._stats, "missed": self._slots.missed, "snapshot_age_s": age,
                  "rate_hz": self.config.rate_hz,
                  "snapshot_seq": self._snapshot_seq,
                  "solve_time_p50_us": 1e6 * float(np.median(times)),
                  "solve_time_p99_us": 1e6 * float(np.quantile(times, 0.99)),
                  "backend": self.solver.backend_name, "qp_call": self.solver.qp_call,
                  "scheduling": self._scheduling,
                  "snapshot_thread": ("off" if self._snapshot_worker is None
                                      else self._snapshot_worker.scheduling),
                  "snapshots_superseded": (self._snapshots_superseded
                                           if self._snapshot_worker is None
                                           else self._snapshot_worker.superseded),
                  "closed_loop": self.feedback.enabled}
        contact_ticks, cut = self.solver.contact_ticks
        if contact_ticks:
            values.update({"contact_ticks": contact_ticks, "contact_ticks_cut_by_budget": cut,
                           "contact_ticks_reused": self.solver.contact_ticks_reused})
        if (fb := self._feedback) is not None:
            values.update({"feedback_mode": fb.mode.value,
                           "feedback_correction_mm": 1e3 * float(np.linalg.norm(fb.correction)),
                           "feedback_measurement_age_ms": 1e3 * fb.measurement_age,
                           # the QP's saturation feeds the anti-windup only with the loop closed
                           "feedback_saturated": fb.saturated and fb.mode is not FeedbackMode.DISABLED})
        return [diag.status(f"{self.get_name()}: inverse QP", level, message, values)]


def main(args=None) -> int:
    return main_for(InverseControllerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
