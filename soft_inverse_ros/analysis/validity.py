"""Is a recorded run of the simulated robot valid? The checks a reader of the figures needs.

A tracking figure means something only when the simulated robot kept its clock and the
controller was really commanding it. From a bag this module derives:

* the plant's **real-time factor** per diagnostics window (simulated seconds per wall
  second, published by ``plant_sim_node`` on /diagnostics as ``real_time_factor``), its
  5th percentile and minimum over the run (after start-up);
* the **clock** the graph ran on (``clock`` key of the plant's diagnostics: ``wall`` or
  ``sim``; bags recorded before the key existed count as ``wall``);
* the **SAFE command fraction after start-up**: start-up ends at the first command with
  status OK (the first tick that had a snapshot and a target); SAFE commands before it are
  counted apart;
* the **compliance snapshot rate** after start-up: snapshots published, from their
  sequence numbers (a starved recorder loses some: ``recorded_snapshot_fraction``);
* the **tracking window**: from the moment the controller commands (first OK command) and
  the simulated robot runs (first true effector sample), plus ``settle_s`` (the plant
  starts from its slack equilibrium, not on the trajectory), to the end. The summary's
  plant errors are taken over it (``tracking_start_s`` says where it starts,
  ``tracking_window_s`` how long it lasts).

* the **controller's missed slots after start-up**: slots of the nominal command period
  in which no command started (:func:`analysis.metrics.rate_stats` with the commands'
  sequence numbers, so commands the recorder lost count as sent);
* the **age of the plant's newest servo state** (or command; the snake's: chamber state)
  at each of its diagnostics windows (``last_input_age_s``, wall time), p90 over the
  tracking window (without one, the snake's or the hybrid arm's run: from ``settle_s``
  after start-up);
* with the closed loop on, the **fraction of the controller's status samples in which the
  loop ran open** because the motion-capture measurement was stale
  (``InverseSolverStatus.closed_loop_active`` false on an OK command).

A run is **invalid** when, in wall-clock mode, the plant fell behind real time (p5 of the
real-time factor below ``min_real_time_factor``: the effector stood still while the target
moved on), when commands went SAFE after start-up beyond ``max_safe_fraction``, when the
controller never commanded, when it missed more than ``max_missed_slot_fraction`` of its
slots after start-up (a starved controller: the drivers held old setpoints), or when a
closed-loop run ran open more than ``max_open_loop_fraction`` of the time (a starved
motion capture: the figure would be an open-loop one), or when in wall-clock mode the
plant's servo inputs were older than ``max_plant_input_age_s`` at p90 (starved simulated
servos: the robot did not follow the commands). A run is invalid too when
a stream stalled or stopped (``max_stream_gap_s`` without a command after start-up, or
without a sample of the simulated robot in the tracking window, to the end of the
recording), when the target covers less than ``min_target_coverage`` of the window's
effector samples, when a sample of the window is not finite, when the window is shorter
than ``min_tracking_window_s``, when two nodes published commands (their sequence
numbers go back) or the controller's sequence numbers started again (a restarted
controller, two runs in one bag), or when a series' clock went back (``RunData.clock_jumps``);
and when evidence the verdict needs is missing ("cannot tell": the
plant's or the controller's /diagnostics, the target, the simulated robot's effector when
its clock is there). A bag without a simulated robot (no plant effector, no plant clock) is
judged as a hardware run: its commands and controller only. The real-time factor's
percentiles weigh each diagnostics window by its duration, over the windows that end in the
tracking window. Missed slots are counted at the controller's own rate when its diagnostics
hold it (``rate_hz``). In sim-time mode the whole graph
follows the plant's clock, so a slow plant is not an error, and missed slots are reported,
not judged (the controller's timer follows /clock messages, which arrive in bursts around
each plant step, so simulated slots go empty without a starved controller). The clock's
lockstep counters (``lockstep_waits``: ticks held for a slower node; ``lockstep_timeouts``:
waits given up after the plant's ``input_wait_timeout``, the clock then stepping on
without that node) are reported, not judged: what a timeout costs shows in the SAFE
fraction. The compliance rate is reported, not judged here: a slow low-rate loop degrades
tracking but the run still measures it truthfully. What it cost is said, though: the **age
of the snapshot each controller status sample used** (``InverseSolverStatus.snapshot_age``:
the controller's clock minus the snapshot's FEM-state stamp) on OK commands over the
tracking window, p99 and max; above ``note_snapshot_age_s`` at p99 the headline adds a
note (the low-rate loop was short of CPU, and the error figures include what an old
linearization costs), valid run or not. The same window gives the **share of status
samples whose QP could not reach its target** (``InverseSolverStatus.effector_error``, the
predicted residual, above ``unreachable_residual_m``) and that residual's median; above
``note_unreachable_fraction`` the headline says that the target (with the closed loop's
correction) lies partly outside what the actuators reach within their bounds, a part of the
error no controller gain removes.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from soft_inverse_ros import topics as T
from soft_inverse_ros.analysis.metrics import (error_stats, rate_stats, sequence_restarts,
                                              sequence_span, tracking_error)
from soft_inverse_ros.analysis.run_data import RunData, find_topic
from soft_inverse_ros.recording.bag_reader import BagReader

#: ActuatorCommand status values (msg constants; the analysis does not import rclpy).
STATUS_OK, STATUS_HELD, STATUS_SAFE = 0, 1, 2
#: the plant inputs whose age (``last_input_age_s``) the verdict judges: the simulated
#: servos' states, the controller's commands, the valve driver's chamber states (the snake)
PLANT_INPUTS = ("servo_states", "command", "chamber_states")
#: Diagnostic status name suffix of the plant (``"<node>: plant"``).
PLANT_STATUS_SUFFIX = ": plant"


@dataclass(frozen=True)
class ValidityLimits:
    """Thresholds of :func:`assess_run`.

    Attributes:
        min_real_time_factor: p5 of the plant's real-time factor below this makes a
            wall-clock run invalid.
        max_safe_fraction: SAFE commands after start-up above this fraction make a run
            invalid.
        max_missed_slot_fraction: the controller's missed slots after start-up above
            this fraction make a run invalid.
        nominal_command_hz: the command rate the slots are counted at [Hz].
        max_open_loop_fraction: with the closed loop on, OK commands sent open-loop (stale
            measurement) above this fraction make a run invalid.
        max_plant_input_age_s: the p90 over the tracking window of the age of the plant's
            newest servo state (or command) above this [s] makes a wall-clock run invalid.
        settle_s: time after start-up before the tracking window opens [s].
        note_snapshot_age_s: p99 of the snapshot age over the tracking window above this
            [s] gives a note in the headline, not an invalid run (half the shipped
            controllers' 0.5 s ``snapshot_timeout``).
        unreachable_residual_m: a QP whose predicted effector residual exceeds this [m]
            did not reach its target: 0.1 mm, five times the closed loop's own saturation
            threshold (20 µm, which the ε energy term and the per-tick limits reach alone
            while the target moves: the main job's open-loop runs stay under 0.02 mm).
        note_unreachable_fraction: share of the tracking window's status samples whose QP
            could not reach its target above this gives a note in the headline.
        max_stream_gap_s: a stretch longer than this [s] without a command after start-up,
            or without a sample of the simulated robot's effector inside the tracking window
            (both counted to the end of the recording: a stream that stopped early) makes a
            run invalid (a stalled plant or controller is not averaged away).
        min_tracking_window_s: a tracking window shorter than this [s] measures nothing.
        min_target_coverage: the share of the window's effector samples that have a target
            to compare with (a target stream that stopped) below this makes a run invalid.
        note_held_fraction: HELD commands (the QP failed, the previous command held) after
            start-up above this share give a note (the controller's own outcome, measured).
    """

    min_real_time_factor: float = 0.95
    max_safe_fraction: float = 0.005
    max_missed_slot_fraction: float = 0.05
    nominal_command_hz: float = 1000.0
    max_open_loop_fraction: float = 0.05
    max_plant_input_age_s: float = 0.1
    settle_s: float = 1.0
    note_snapshot_age_s: float = 0.25
    unreachable_residual_m: float = 1e-4
    note_unreachable_fraction: float = 0.25
    max_stream_gap_s: float = 0.5
    min_tracking_window_s: float = 2.0
    min_target_coverage: float = 0.95
    note_held_fraction: float = 0.005


@dataclass(frozen=True)
class PlantClockSeries:
    """The plant's clock figures from /diagnostics: one sample per diagnostics window.

    Attributes:
        stamp_ns: header stamps of the diagnostics messages [ns of ROS time].
        real_time_factor: simulated s per wall s over each window.
        sim_time: the plant's simulated time at each window end [s].
        skipped_steps: cumulative steps skipped to keep up with the wall clock.
        clock: ``wall`` or ``sim`` (the last value published).
        input_age: age of the plant's newest servo state or command at each window end
            [s of wall time] (NaN where the plant does not report it: its ``input`` is not
            ``servo_states`` or ``command``).
        lockstep_waits, lockstep_timeouts: sim clock in lockstep: /clock ticks held back
            for a slower node, and waits given up after the wall-clock timeout (the last
            values published; None without a lockstep).
    """

    stamp_ns: np.ndarray
    real_time_factor: np.ndarray
    sim_time: np.ndarray
    skipped_steps: np.ndarray
    clock: str
    input_age: np.ndarray | None = None
    lockstep_waits: int | None = None
    lockstep_timeouts: int | None = None


def _float(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return float("nan")


DIAGNOSTIC_ARRAY = "diagnostic_msgs/msg/DiagnosticArray"


def diagnostic_statuses(bag: str | Path, suffixes: tuple[str, ...], namespace: str | None = None):
    """(receive time [ns], header stamp [ns], status) of every status on the bag's
    /diagnostics whose name ends in one of ``suffixes``, in bag order. A node in a namespace
    prefixes its statuses with it (``r1/plant_sim_node: plant``,
    :class:`nodes.diagnostics.DiagnosticsPublisher`): with ``namespace`` only that
    namespace's statuses count, or the unprefixed ones when none has the prefix (a bag of
    one robot recorded before the prefix). A /diagnostics of another type yields nothing."""
    with BagReader(bag) as reader:
        topic = find_topic(reader.topics, T.DIAGNOSTICS, namespace)
        if topic is None:
            return
        if reader.topics[topic].msgtype != DIAGNOSTIC_ARRAY:
            warnings.warn(f"{topic} has type {reader.topics[topic].msgtype}, expected "
                          f"{DIAGNOSTIC_ARRAY}: ignored (no node status from it)")
            return
        prefix = f"{namespace.strip('/')}/" if namespace and namespace.strip("/") else None
        found: list = []
        prefixed = False
        for receive_ns, msg in reader.read_topic(topic):
            stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            for status in msg.status:
                if status.name.endswith(suffixes):
                    found.append((receive_ns, stamp_ns, status))
                    prefixed |= prefix is not None and status.name.startswith(prefix)
    if prefixed:
        found = [f for f in found if f[2].name.startswith(prefix)]
    yield from found


def plant_statuses(bag: str | Path, namespace: str | None = None):
    """(receive time [ns], header stamp [ns], key → value) of every plant status in the
    bag's /diagnostics (``plant_sim_node``'s, name ending in ``: plant``), in bag order."""
    for receive_ns, stamp_ns, status in diagnostic_statuses(bag, (PLANT_STATUS_SUFFIX,), namespace):
        yield receive_ns, stamp_ns, {kv.key: kv.value for kv in status.values}


def load_plant_clock(bag: str | Path, namespace: str | None = None) -> PlantClockSeries | None:
    """The plant's real-time factor series from the bag's /diagnostics (None: no plant)."""
    t, rtf, sim, skipped, age = [], [], [], [], []
    clock = "wall"
    lockstep: dict[str, int] = {}
    for receive_ns, stamp_ns, values in plant_statuses(bag, namespace):
        if "real_time_factor" not in values:
            continue
        t.append(stamp_ns or receive_ns)
        rtf.append(_float(values["real_time_factor"]))
        sim.append(_float(values.get("sim_time_s", "nan")))
        skipped.append(_float(values.get("skipped_steps", "0")))
        driven = values.get("input") in PLANT_INPUTS
        age.append(_float(values.get("last_input_age_s", "nan")) if driven else float("nan"))
        clock = values.get("clock", clock)
        for key in ("lockstep_waits", "lockstep_timeouts"):
            if key in values:
                lockstep[key] = int(_float(values[key]))
    if not t:
        return None
    return PlantClockSeries(np.asarray(t, dtype=np.int64), np.asarray(rtf), np.asarray(sim),
                            np.asarray(skipped), clock, np.asarray(age),
                            lockstep.get("lockstep_waits"), lockstep.get("lockstep_timeouts"))


#: Diagnostic status name suffix of the inverse controller (``"<node>: inverse QP"``).
CONTROLLER_STATUS_SUFFIX = ": inverse QP"
#: the /diagnostics status of the node commanding the actuators when no inverse QP does
#: (the snake's gait_node): its ``rate_hz`` sets the slots too
GAIT_STATUS_SUFFIX = ": gait"


@dataclass(frozen=True)
class ControllerStatus:
    """The controller's /diagnostics, one sample per window.

    Attributes:
        stamp_ns: header stamps [ns of ROS time]; closed_loop: whether the closed loop was
            on in the window.
    """

    stamp_ns: np.ndarray
    closed_loop: np.ndarray
    rate_hz: float | None = None  #: the controller's configured tick rate (newer bags)


def load_controller_status(bag: str | Path, namespace: str | None = None) -> ControllerStatus | None:
    """The controller's closed-loop flag per /diagnostics window and its tick rate (None:
    no controller status); the snake's gait_node stands for the controller (its rate sets
    the slots, its loop is open)."""
    t, closed, rate = [], [], None
    for receive_ns, stamp_ns, status in diagnostic_statuses(
            bag, (CONTROLLER_STATUS_SUFFIX, GAIT_STATUS_SUFFIX), namespace):
        values = {kv.key: kv.value for kv in status.values}
        t.append(stamp_ns or receive_ns)
        closed.append(values.get("closed_loop", "False") == "True")
        if "rate_hz" in values:
            rate = _float(values["rate_hz"])
    if not t:
        return None
    return ControllerStatus(np.asarray(t, dtype=np.int64), np.asarray(closed, dtype=bool),
                            rate if rate is not None and np.isfinite(rate) and rate > 0 else None)


@dataclass
class RunValidity:
    """Validity figures of one run (JSON-able through :meth:`as_dict`)."""

    valid: bool
    invalid_reasons: list[str] = field(default_factory=list)
    clock: str = "wall"
    plant_real_time_factor_p5: float | None = None
    plant_real_time_factor_min: float | None = None
    plant_real_time_factor_median: float | None = None
    plant_skipped_steps: float | None = None
    lockstep_waits: int | None = None
    lockstep_timeouts: int | None = None
    startup_s: float | None = None
    safe_commands_startup: int = 0
    safe_command_fraction: float | None = None
    held_command_fraction: float | None = None
    commands_after_startup: int = 0
    nominal_command_hz: float | None = None
    largest_gap_s: dict[str, float] = field(default_factory=dict)
    target_coverage: float | None = None
    nonfinite_samples: int = 0
    command_seq_reversals: int = 0
    target_interp: str = "linear"
    simulated: bool = True
    compliance_rate_hz: float | None = None
    recorded_snapshot_fraction: float | None = None
    tracking_start_s: float | None = None
    tracking_window_s: float | None = None
    controller_missed_slot_fraction: float | None = None
    closed_loop_open_fraction: float | None = None
    plant_input_age_p90_ms: float | None = None
    snapshot_age_p50_ms: float | None = None
    snapshot_age_p99_ms: float | None = None
    snapshot_age_max_ms: float | None = None
    qp_unreachable_fraction: float | None = None
    qp_predicted_residual_p50_mm: float | None = None
    #: a reason says the graph was short of CPU (plant behind real time, starved simulated
    #: servos, the controller's empty slots): what ``--clock sim`` cures
    cpu_starved: bool = False
    #: what published the commands, for the verdict's words: the inverse ``controller``, or
    #: the snake's ``gait`` (set by the report, which knows a snake bag)
    commander: str = "controller"
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _controller_checks(run: RunData, controller: ControllerStatus | None, t_up: float,
                       out: RunValidity, limits: ValidityLimits) -> list[str]:
    """The missed-slot figure after start-up (``t_up``, s of the run), the open-loop one
    over the tracking window (from ``out.tracking_start_s``: before the simulated robot
    runs there is nothing to measure) and the reasons they give."""
    reasons: list[str] = []
    commands = run.commands
    nominal = out.nominal_command_hz or limits.nominal_command_hz
    after = commands.t >= t_up
    if after.sum() > 1:
        stats = rate_stats(commands.t[after], nominal, seq=commands.seq[after])
        out.controller_missed_slot_fraction = stats["missed_slot_fraction"]
    f = out.controller_missed_slot_fraction
    if out.clock == "wall" and f is not None and f > limits.max_missed_slot_fraction:
        out.cpu_starved = True
        reasons.append(
            f"the controller left {100 * f:.1f} % of its {nominal:g} Hz command "
            f"slots after start-up without a command (limit {100 * limits.max_missed_slot_fraction:.0f} %): "
            "it was starved of CPU and the drivers held old setpoints")
    closed = False
    t_track = out.tracking_start_s if out.tracking_start_s is not None else t_up
    if controller is not None:
        t = (controller.stamp_ns - run.origin_ns).astype(float) * 1e-9
        closed = bool(np.any(controller.closed_loop[t >= t_track]))
    solver = run.solver
    if closed and solver is not None and solver.closed_loop_active is not None:
        ok = (solver.t >= t_track) & (solver.command_status == STATUS_OK)
        if ok.any():
            out.closed_loop_open_fraction = float(np.mean(~solver.closed_loop_active[ok]))
            if out.closed_loop_open_fraction > limits.max_open_loop_fraction:
                reasons.append(
                    f"the closed loop ran open for {100 * out.closed_loop_open_fraction:.1f} % of "
                    f"the controller's status samples (limit {100 * limits.max_open_loop_fraction:.0f} %): "
                    "the motion-capture measurements were stale (feedback_stale_after), so the "
                    "figures are not the closed loop's")
    return reasons


def _input_age_check(run: RunData, plant_clock: PlantClockSeries | None, out: RunValidity,
                     limits: ValidityLimits, t_up: float | None) -> list[str]:
    """The p90 age of the plant's inputs over the tracking window (a run without one, the
    snake's or the hybrid arm's: from ``settle_s`` after start-up ``t_up``), and its reason."""
    start = out.tracking_start_s
    if start is None and t_up is not None:
        start = t_up + limits.settle_s
    if plant_clock is None or plant_clock.input_age is None or start is None:
        return []
    t = (plant_clock.stamp_ns - run.origin_ns).astype(float) * 1e-9
    age = plant_clock.input_age[(t >= start) & np.isfinite(plant_clock.input_age)]
    if not len(age):
        return []
    p90 = float(np.percentile(age, 90))
    out.plant_input_age_p90_ms = 1e3 * p90
    if out.clock == "wall" and p90 > limits.max_plant_input_age_s:
        out.cpu_starved = True
        return [f"the simulated robot's servo inputs were {1e3 * p90:.0f} ms old (p90 of its "
                f"diagnostics windows; limit {1e3 * limits.max_plant_input_age_s:.0f} ms): the "
                "simulated servos were starved of CPU, so the robot did not follow the commands "
                "for reasons that are not the controller's"]
    return []


def _tracking_window_values(run: RunData, out: RunValidity, field_name: str) -> np.ndarray:
    """The finite values of the controller status series ``field_name`` on OK commands over
    the tracking window (empty without status samples or before the window is known)."""
    solver = run.solver
    if solver is None or out.tracking_start_s is None:
        return np.zeros(0)
    used = (solver.t >= out.tracking_start_s) & (solver.command_status == STATUS_OK)
    values = getattr(solver, field_name)[used]
    return values[np.isfinite(values)]


def _snapshot_age_note(run: RunData, out: RunValidity, limits: ValidityLimits) -> list[str]:
    """The snapshot age figures over the tracking window (OK commands), and their note."""
    age = _tracking_window_values(run, out, "snapshot_age")
    if not len(age):
        return []
    p99 = float(np.percentile(age, 99))
    out.snapshot_age_p50_ms = 1e3 * float(np.median(age))
    out.snapshot_age_p99_ms, out.snapshot_age_max_ms = 1e3 * p99, 1e3 * float(age.max())
    if p99 <= limits.note_snapshot_age_s:
        return []
    rate = ("" if out.compliance_rate_hz is None
            else f", {out.compliance_rate_hz:.1f} snapshots/s")
    return [f"the controller's compliance snapshots were old: p99 {1e3 * p99:.0f} ms, max "
            f"{out.snapshot_age_max_ms:.0f} ms{rate} (note above "
            f"{1e3 * limits.note_snapshot_age_s:.0f} ms): the low-rate FEM loop was short of "
            "CPU, and the error figures include what linearizing at an old state costs"]


def _reach_note(run: RunData, out: RunValidity, limits: ValidityLimits) -> list[str]:
    """The share of the tracking window's OK status samples whose QP could not reach its
    target (predicted residual above ``limits.unreachable_residual_m``), the residual's
    median, and their note."""
    residual = _tracking_window_values(run, out, "effector_error")
    if not len(residual):
        return []
    fraction = float(np.mean(residual > limits.unreachable_residual_m))
    out.qp_unreachable_fraction = fraction
    out.qp_predicted_residual_p50_mm = 1e3 * float(np.median(residual))
    if fraction <= limits.note_unreachable_fraction:
        return []
    return [f"the QP could not reach its target in {100 * fraction:.0f} % of the tracking window "
            f"(predicted residual above {1e3 * limits.unreachable_residual_m:.1f} mm; median "
            f"{out.qp_predicted_residual_p50_mm:.2f} mm; note above "
            f"{100 * limits.note_unreachable_fraction:.0f} %): the target (with the closed loop's "
            "correction) lies partly outside what the controller's model reaches within the "
            "actuators' bounds, and that part of the error is the workspace's, not the controller's"]


def _weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The ``q``-th percentile of ``values`` where each counts for its ``weights``, linearly
    interpolated: equal weights give ``np.percentile``'s value (each sample sits at the middle
    of its weight on the cumulative axis, the first and last at the ends)."""
    order = np.argsort(values)
    v, w = values[order], weights[order]
    if len(v) == 1:
        return float(v[0])
    centre = np.cumsum(w) - 0.5 * w - 0.5 * w[0]
    position = centre / centre[-1]
    return float(np.interp(q / 100.0, position, v))


def _plant_clock_checks(run: RunData, plant_clock: PlantClockSeries, t_up: float | None,
                        out: RunValidity, limits: ValidityLimits) -> list[str]:
    """The real-time factor figures over the windows that end after ``t_up`` (the tracking
    window's start when known, else start-up), each diagnostics window counted for its
    duration on the plant's node clock (wall-clock runs: a 5 s stall reported in one window
    weighs five 1 s windows; sim-clock runs, not judged on it: simulated seconds), and their
    reason."""
    rtf = plant_clock.real_time_factor
    t_ns = plant_clock.stamp_ns
    weights = np.diff(t_ns.astype(float), prepend=np.nan) * 1e-9
    if len(weights) > 1:
        weights[0] = np.nanmedian(weights[1:])
    else:
        weights[:] = 1.0
    keep = np.isfinite(rtf) & (weights > 0)
    if t_up is not None:
        keep &= (t_ns - run.origin_ns).astype(float) * 1e-9 >= t_up  # windows ending after start-up
    rtf, weights = rtf[keep], weights[keep]
    out.plant_skipped_steps = _finite_or_none(plant_clock.skipped_steps[-1])
    out.lockstep_waits = plant_clock.lockstep_waits
    out.lockstep_timeouts = plant_clock.lockstep_timeouts
    if not len(rtf):
        return ([] if out.clock != "wall" else
                ["cannot tell whether the simulated robot kept real time: no real-time factor of "
                 "it on /diagnostics after start-up"])
    out.plant_real_time_factor_p5 = _finite_or_none(_weighted_percentile(rtf, weights, 5))
    out.plant_real_time_factor_min = _finite_or_none(rtf.min())
    out.plant_real_time_factor_median = _finite_or_none(_weighted_percentile(rtf, weights, 50))
    p5 = out.plant_real_time_factor_p5
    if out.clock == "wall" and p5 is not None and p5 < limits.min_real_time_factor:
        out.cpu_starved = True
        return [f"the simulated robot fell behind real time (real-time factor p5 {p5:.2f} of its "
                f"time, min {out.plant_real_time_factor_min:.2f}; limit "
                f"{limits.min_real_time_factor:.2f}): its effector lagged the target for "
                "reasons that are not the controller's"]
    return []


def _frame_checks(run: RunData, out: RunValidity, tracking: bool) -> list[str]:
    """The effectors and the target must share a frame (the analysis applies no transform):
    the simulated robot's effector in another frame than the target makes the tracking
    figure meaningless (a reason), the motion capture's a note (its rows)."""
    if run.target is None or not run.target.frame_id:
        return []
    reasons: list[str] = []
    for label, series in run.effectors.items():
        if not series.frame_id or series.frame_id == run.target.frame_id:
            continue
        line = (f"{series.topic} is in frame {series.frame_id!r} and the target in "
                f"{run.target.frame_id!r}: the analysis applies no transform, so the "
                f"{label} rows compare points of two frames")
        if label == "plant" and tracking:
            reasons.append(line)
        else:
            out.notes.append(line)
    return reasons


def _mocap_note(run: RunData) -> list[str]:
    """A hardware run's motion-capture effector samples that are not finite (markers lost):
    the tables' motion-capture rows count only the finite ones."""
    mocap = run.effectors.get("mocap")
    if mocap is None or not len(mocap):
        return []
    bad = int(np.sum(~np.all(np.isfinite(mocap.xyz), axis=1)))
    if not bad:
        return []
    if bad == len(mocap):
        return [f"all {bad} motion-capture effector samples are not finite (NaN: the markers were "
                "never found): no tracking figure"]
    return [f"{bad} of {len(mocap)} motion-capture effector samples are not finite (markers lost): "
            "the motion-capture rows count the finite ones"]


def _stream_checks(run: RunData, out: RunValidity, limits: ValidityLimits, t_up: float,
                   tracking: bool) -> list[str]:
    """Gaps in the commands (after start-up) and in the simulated robot's effector (over the
    tracking window), the end of the recording included; the target's coverage of the
    window; non-finite samples; commands from more than one publisher."""
    reasons: list[str] = []
    commands = run.commands
    plant = run.effectors.get("plant")
    ends = [float(commands.t[-1])]
    if plant is not None and len(plant):
        ends.append(float(plant.t[-1]))
    if run.target is not None and len(run.target):
        ends.append(float(run.target.t[-1]))
    end = max(ends)
    streams = {"actuator_command": (commands.t, t_up)}
    if tracking and plant is not None and out.tracking_start_s is not None:
        streams["plant/effector_true"] = (plant.t, out.tracking_start_s)
    for name, (t, start) in streams.items():
        inside = t[(t >= start) & (t <= end)]
        edges = np.concatenate([[start], inside, [end]])
        gaps = np.diff(edges)
        if not len(gaps):
            continue
        k = int(np.argmax(gaps))
        out.largest_gap_s[name] = float(gaps[k])
        if gaps[k] > limits.max_stream_gap_s:
            where = "until the end of the recording" if k == len(gaps) - 1 else \
                f"from {edges[k]:.1f} s of the recording"
            reasons.append(f"{name}: nothing for {gaps[k]:.2f} s {where} (limit "
                           f"{limits.max_stream_gap_s:g} s): the "
                           + ("controller stopped commanding" if name == "actuator_command"
                              else "simulated robot stalled or stopped")
                           + ", and an average over the run would hide it")
    order = np.argsort(commands.t_receive, kind="stable")  # arrival order
    out.command_seq_reversals = int(np.sum(np.diff(commands.seq[order]) < 0))
    restarts = sequence_restarts(commands.seq[order])
    if out.command_seq_reversals > max(2, 0.01 * len(commands)):
        reasons.append(f"the command sequence numbers went back {out.command_seq_reversals} times: "
                       "more than one node published on actuator_command (or the bag holds more "
                       "than one run), and the slot and rate figures mix them")
    elif restarts:
        reasons.append(f"the command sequence numbers started again {restarts} time(s) (a restarted "
                       "controller, or more than one run in the bag): analyze one controller run "
                       "at a time")
    if tracking and plant is not None and run.target is not None and out.tracking_start_s is not None:
        in_window = plant.t >= out.tracking_start_s
        bad = int(np.sum(~np.all(np.isfinite(plant.xyz[in_window]), axis=1)))
        target_window = run.target.t >= out.tracking_start_s
        bad_target = int(np.sum(~np.all(np.isfinite(run.target.xyz[target_window]), axis=1)))
        out.nonfinite_samples = bad + bad_target
        if out.nonfinite_samples:
            reasons.append(f"{bad} effector and {bad_target} target samples of the tracking window are "
                           "not finite (NaN or inf): the simulated robot or the target publisher failed")
        n_window = int(np.sum(in_window))
        if n_window:  # effector samples with a target sample near (whatever the interpolation)
            span = (plant.t >= run.target.t[0]) & (plant.t <= run.target.t[-1] + limits.max_stream_gap_s)
            out.target_coverage = float(np.sum(in_window & span) / n_window)
            if out.target_coverage < limits.min_target_coverage:
                reasons.append(f"the target covers {100 * out.target_coverage:.0f} % of the tracking "
                               f"window's effector samples (limit {100 * limits.min_target_coverage:.0f} %): "
                               "the figures would be those of a shorter run")
    return reasons


def assess_run(run: RunData, plant_clock: PlantClockSeries | None,
               limits: ValidityLimits = ValidityLimits(),
               controller: ControllerStatus | None = None, *, tracking: bool = True,
               target_interp: str = "linear") -> RunValidity:
    """Validity of ``run`` (see the module docstring for the rules); ``controller``: the
    controller's closed-loop flags and tick rate from /diagnostics
    (:func:`load_controller_status`); ``tracking``: a run that tracks a target with the
    simulated robot's effector (False for the snake's gait and the hybrid arm's probe, judged
    by their own reports); ``target_interp``: how the target is compared with the effector
    (:func:`analysis.metrics.target_at`). Evidence the verdict needs but the bag lacks is a
    reason too ("cannot tell"), never a pass."""
    reasons: list[str] = []
    out = RunValidity(valid=True, clock=plant_clock.clock if plant_clock else "wall",
                      target_interp=target_interp)
    out.nominal_command_hz = limits.nominal_command_hz
    if controller is not None and controller.rate_hz is not None:
        if abs(controller.rate_hz - limits.nominal_command_hz) > 1e-6 * controller.rate_hz:
            out.notes.append(f"the slots are counted at the controller's own {controller.rate_hz:g} Hz "
                             f"(its diagnostics), not at {limits.nominal_command_hz:g} Hz")
        out.nominal_command_hz = controller.rate_hz

    commands = run.commands
    ok = np.flatnonzero(commands.status == STATUS_OK) if commands is not None else np.array([])
    t_up = None
    if commands is None or len(commands) == 0:
        reasons.append("no actuator command was recorded")
    elif len(ok) == 0:
        reasons.append(f"the controller never commanded: all {len(commands)} commands "
                       "were SAFE or HELD")
        out.safe_commands_startup = int(np.sum(commands.status == STATUS_SAFE))
    else:
        first = int(ok[0])
        t_up = float(commands.t[first])
        out.startup_s = float(t_up - commands.t[0])
        out.safe_commands_startup = int(np.sum(commands.status[:first] == STATUS_SAFE))
        after = commands.status[first:]
        out.commands_after_startup = int(len(after))
        out.safe_command_fraction = float(np.mean(after == STATUS_SAFE))
        out.held_command_fraction = float(np.mean(after == STATUS_HELD))
        if out.safe_command_fraction > limits.max_safe_fraction:
            reasons.append(
                f"{100 * out.safe_command_fraction:.2f} % of the commands after start-up were "
                f"SAFE (limit {100 * limits.max_safe_fraction:.1f} %): the controller was not "
                "commanding the robot")
        if out.held_command_fraction > limits.note_held_fraction:
            out.notes.append(
                f"the QP failed on {100 * out.held_command_fraction:.2f} % of the commands after "
                "start-up (HELD: the previous command held, within the limits): the controller's "
                "own outcome, in the figures")
        if run.snapshots is not None and len(run.snapshots):
            t_snap = run.snapshots.t
            inside = (t_snap >= t_up) & (t_snap <= commands.t[-1])
            if inside.sum() > 1:  # snapshots published (sequence numbers), not those recorded
                stats = rate_stats(t_snap[inside], seq=run.snapshots.seq[inside])
                out.compliance_rate_hz = stats["rate_hz"]
                out.recorded_snapshot_fraction = stats.get("received_fraction")

    if run.clock_jumps:
        more = f"; and {len(run.clock_jumps) - 2} more series" if len(run.clock_jumps) > 2 else ""
        reasons.append("the clock went back (" + "; ".join(run.clock_jumps[:2]) + more + "): a "
                       "restarted simulated clock or more than one run in the bag, whose samples "
                       "the figures would interleave; record or cut one run per bag")
    plant = run.effectors.get("plant")
    has_clock = plant_clock is not None and len(plant_clock.real_time_factor) > 0
    # a simulated robot ran when its effector or its clock is in the bag (or the run is one
    # of the snake's or the hybrid arm's, judged elsewhere); else a hardware run
    out.simulated = plant is not None or has_clock or not tracking
    if tracking and out.simulated and plant is None:
        reasons.append("no effector of the simulated robot was recorded (plant/effector_true), though "
                       "its clock was: no tracking figure")
    if tracking and run.target is None:
        reasons.append("no target was recorded: no tracking figure")
    reasons += _frame_checks(run, out, tracking)
    if not out.simulated:
        out.notes.append("no simulated robot in the bag: judged as a hardware run (its commands and "
                         "controller); its tracking is the motion-capture rows of the tables")
        out.notes += _mocap_note(run)
    if t_up is not None and plant is not None and len(plant):
        out.tracking_start_s = float(max(t_up, plant.t[0]) + limits.settle_s)
        out.tracking_window_s = max(0.0, float(plant.t[-1]) - out.tracking_start_s)
        if not out.tracking_window_s > 0:
            reasons.append(
                "the run ended before its tracking window opened (the simulated robot's first "
                f"sample came {float(plant.t[0]):.1f} s into the recording): no tracking figure")
        elif tracking and out.tracking_window_s < limits.min_tracking_window_s:
            reasons.append(f"the tracking window lasts {out.tracking_window_s:.2f} s (at least "
                           f"{limits.min_tracking_window_s:g} s): too short to measure tracking")
    if has_clock:
        reasons += _plant_clock_checks(run, plant_clock, out.tracking_start_s if out.tracking_start_s is not None
                                       else t_up, out, limits)
    elif out.simulated:
        reasons.append("cannot tell whether the simulated robot kept real time: no status of it "
                       "(real_time_factor) on /diagnostics")
    if t_up is not None:
        reasons += _controller_checks(run, controller, t_up, out, limits)
        reasons += _stream_checks(run, out, limits, t_up, tracking)
        if tracking and controller is None:
            reasons.append("cannot tell whether the closed loop ran open: no status of the "
                           "controller on /diagnostics")
    reasons += _input_age_check(run, plant_clock, out, limits, t_up)
    out.notes += _snapshot_age_note(run, out, limits) + _reach_note(run, out, limits)
    out.invalid_reasons = reasons
    out.valid = not reasons
    return out


def headline(validity: RunValidity) -> list[str]:
    """First lines of the console output and of metrics.md: the verdict, then its notes."""
    return _verdict(validity) + [f"  note: {n}" for n in validity.notes]


def _verdict(validity: RunValidity) -> list[str]:
    if validity.valid and not validity.simulated:
        return [f"VALID RUN (hardware, no simulated robot): the {validity.commander} commanded throughout."]
    if validity.valid:
        window = ""
        if validity.tracking_window_s is not None and validity.tracking_start_s is not None:
            window = (f" the {validity.tracking_window_s:.1f} s tracking window (from "
                      f"{validity.tracking_start_s:.1f} s of the recording)")
        safe = validity.safe_command_fraction or 0.0
        held = validity.held_command_fraction or 0.0
        if held > 0 and safe == 0:
            return [f"VALID RUN (clock: {validity.clock}): the plant kept its clock and the "
                    f"{validity.commander} commanded{window}, its QP failing on {100 * held:.2f} % of the "
                    "commands after start-up (HELD: the previous command held)."]
        if safe > 0:  # under the limit, but not "throughout": say what the safe state costs
            count = round(safe * validity.commands_after_startup)
            return [f"VALID RUN (clock: {validity.clock}): the plant kept its clock and the "
                    f"{validity.commander} commanded{window}, but for {count} SAFE command(s) after "
                    f"start-up ({100 * safe:.2f} %, under the limit): a safe command releases "
                    "the actuators, and the error figures include it."]
        return [f"VALID RUN (clock: {validity.clock}): the plant kept its clock and the "
                f"{validity.commander} commanded throughout{window}."]
    lines = [f"INVALID RUN (clock: {validity.clock}): the figures below do not measure the "
             "controller:"] + [f"  - {r}" for r in validity.invalid_reasons]
    if validity.cpu_starved:
        lines.append("  A machine too busy to run the graph in real time gives a valid run on "
                     "the simulated robot's clock (demo --clock sim, launch ... clock:=sim): the "
                     "graph follows it, and it waits for the slow nodes (slower than real time).")
    return lines


def window_tracking(run: RunData, start_s: float | None, target_interp: str = "linear") -> dict[str, Any] | None:
    """Plant tracking statistics (mm) over the samples at or after ``start_s``, the target
    compared as ``target_interp`` says (:func:`analysis.metrics.target_at`)."""
    plant = run.effectors.get("plant")
    if plant is None or run.target is None or start_s is None:
        return None
    error = tracking_error(plant, run.target, target_interp)
    return error_stats(error.norm[error.t >= start_s])


def summary(run: RunData, validity: RunValidity) -> dict[str, Any]:
    """The flat JSON object the demo prints: plant tracking over the tracking window,
    clock and validity figures."""
    stats = window_tracking(run, validity.tracking_start_s, validity.target_interp) or {}
    rate = recorded = None
    c = run.commands
    if c is not None and len(c) > 1:  # commands sent (sequence numbers), not those recorded
        span = float(c.t[-1] - c.t[0])
        sent, runs = sequence_span(c.seq)
        rate = sent / span if span > 0 and sent > 0 else None
        recorded = len(c) / (sent + runs) if sent > 0 else None
    return {
        "plant_mean_error_mm": stats.get("mean_mm"),
        "plant_max_error_mm": stats.get("max_mm"),
        "plant_rms_error_mm": stats.get("rms_mm"),
        "plant_error_samples": stats.get("n"),
        **validity.as_dict(),
        "command_rate_hz": rate,
        "recorded_command_fraction": recorded,
    }


def assess_bag(bag: str | Path, run: RunData, namespace: str | None = None,
               limits: ValidityLimits = ValidityLimits(), *, tracking: bool = True,
               target_interp: str = "linear") -> RunValidity:
    """:func:`assess_run` with the plant clock and the controller's status read from ``bag``."""
    return assess_run(run, load_plant_clock(bag, namespace), limits,
                      load_controller_status(bag, namespace), tracking=tracking,
                      target_interp=target_interp)
