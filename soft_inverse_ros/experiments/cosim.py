"""Deterministic offline co-simulation of the two-rate controller on simulated time.

It wires, without ROS and without the wall clock, exactly the core objects the nodes wrap:

- the controller's FEM model (:class:`~soft_inverse_ros.core.model.robot_model.RobotModel`, as
  ``fem_node`` with fused compliance: one Newton step + compliance per update under the
  newest commanded efforts λ);
- the inverse QP (:class:`~soft_inverse_ros.core.control.inverse_qp.InverseSolver`, as
  ``inverse_controller_node``), with the optional target correction
  (:class:`~soft_inverse_ros.core.control.feedback.TargetFeedback`);
- the target (:class:`~soft_inverse_ros.core.control.trajectory.Trajectory`, as ``target_node``);
- the cable-servo driver and its simulated servos (rate limit, lag, dead time);
- the robot: a plant (anything with ``step(dt, cable_strokes=..., pressures=...)`` and
  ``effector_position``, e.g. ``core.sim.plant.SoftRobotPlant``) or, without a plant, the
  controller's own model (the perfect-model loop of the ICRA 2015 simulations);
- the mocap: :class:`~soft_inverse_ros.core.mocap.simulated_source.SimulatedMocapSource`
  observing the plant's effector as the labeled marker ``tip`` and the
  :class:`~soft_inverse_ros.core.mocap.pipeline.MocapPipeline` turning frames into the
  measured effector.

Time is an integer tick count of the QP period ``h = 1/qp_rate_hz``; every other period
is a whole number of ticks (checked, the error names the key). Per tick ``k`` (time
``t = k h``), in this order:

1. **snapshots**: every snapshot whose availability time has come is handed to
   ``solver.set_snapshot`` (the newest last);
2. **FEM**: when the FEM loop is idle and its start time has come it runs
   ``model.update(λ, seq, stamp=t)`` with the efforts of the newest command. The snapshot
   linearizes the state at ``t`` but is usable only from ``t + fem_compute_time`` (the
   compute latency of the real low-rate loop, modelled explicitly; rounded up to a tick).
   The timer fires at ``n · fem_period``; an update starts on the first tick at or after
   the next firing time that follows the previous start, and not before the previous
   update has finished (like an rcl timer whose callback overran: it fires at once,
   then back on its period grid);
3. **mocap**: on mocap ticks the true effector is captured; frames whose delivery time
   (capture + latency) has come go through the pipeline;
4. **QP**: in ``async`` mode every tick solves for the current target (corrected by the
   feedback when enabled); in ``sync`` mode (the "generic" single-rate baseline of
   Largilliere et al. 2015) the QP is solved only on ticks where a new snapshot was
   accepted, and the command is held in between;
5. **servo**: on servo-period ticks the driver takes the newest command strokes and
   writes rate-limited goals to the simulated servos;
6. **plant**: on plant ticks the plant advances by its period (in ``plant_substeps``
   implicit steps) under the cable displacements the servos deliver at the end of each
   substep (pressures: the commanded pressures, no valve dynamics).

Everything recorded (SI) is sampled at the start of a tick, before that tick's updates:
the effector is the robot's state at ``t``, the commands those in force at ``t``.

Units: SI (m, s, N, Pa), robot base frame (REP-103).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from soft_inverse_ros.core.control.feedback import TargetFeedback, qp_saturated
from soft_inverse_ros.core.control.inverse_qp import ComplianceVariation, InverseSolver, InverseStatus
from soft_inverse_ros.core.model.snapshot import ActuatorKind, ComplianceSnapshot, effector_row_axes

CONTROL_MODES = ("async", "sync")
#: Label of the simulated mocap marker on the effector.
EFFECTOR_MARKER = "tip"


class Plant(Protocol):
    """What the co-simulation needs from a simulated robot (``core.sim.plant.SoftRobotPlant``)."""

    def step(self, dt: float, *, cable_strokes: np.ndarray | None = None,
             pressures: np.ndarray | None = None): ...

    @property
    def effector_position(self) -> np.ndarray: ...


@dataclass(frozen=True)
class CosimConfig:
    """Rates and latencies of one co-simulated run (seconds, SI).

    Attributes:
        duration: Simulated time [s].
        mode: ``"async"`` (QP every tick, the paper's method) or ``"sync"`` (QP only when a
            new snapshot arrives: the single-rate baseline).
        qp_rate_hz: High-rate loop rate [Hz]; its period is the simulation tick.
        fem_period: Period of the FEM loop's timer [s] (any value: an update starts on
            the first tick at or after its timer time).
        fem_compute_time: Latency of one FEM update [s]: a snapshot of the state at ``t``
            is usable from ``t + fem_compute_time`` on (rounded up to a tick, ≥ 1 tick).
        servo_period: Command period of the servo driver [s] (ignored without servos).
        plant_period: Plant integration period [s] (ignored without a plant).
        plant_substeps: Implicit steps per plant period.
        mocap_period: Capture period of the simulated mocap [s] (ignored without mocap).
        record_every: Record one sample every this many ticks.
    """

    duration: float
    mode: str = "async"
    qp_rate_hz: float = 1000.0
    fem_period: float = 1.0 / 30.0
    fem_compute_time: float = 0.036
    servo_period: float = 0.01
    plant_period: float = 0.001
    plant_substeps: int = 1
    mocap_period: float = 0.01
    record_every: int = 1

    def __post_init__(self) -> None:
        if self.mode not in CONTROL_MODES:
            raise ValueError(f"cosim.mode must be one of {CONTROL_MODES}, got {self.mode!r}")
        for key in ("duration", "qp_rate_hz", "fem_period", "servo_period", "plant_period",
                    "mocap_period"):
            value = getattr(self, key)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"cosim.{key} must be a finite number > 0, got {value!r}")
        if not (math.isfinite(self.fem_compute_time) and self.fem_compute_time >= 0):
            raise ValueError(f"cosim.fem_compute_time must be finite and >= 0 s, got "
                             f"{self.fem_compute_time!r}")
        for key in ("plant_substeps", "record_every"):
            value = getattr(self, key)
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"cosim.{key} must be an integer >= 1, got {value!r}")
        for key in ("servo_period", "plant_period", "mocap_period"):
            self.ticks(key)

    @property
    def tick(self) -> float:
        """Simulation tick = QP period [s]."""
        return 1.0 / self.qp_rate_hz

    def ticks(self, key: str) -> int:
        """A period of this config as a whole number of ticks (ValueError naming ``key``)."""
        value = getattr(self, key) * self.qp_rate_hz
        n = round(value)
        if n < 1 or abs(value - n) > 1e-6 * max(1.0, value):
            raise ValueError(f"cosim.{key} = {getattr(self, key)!r} s must be a whole number (>= 1) "
                             f"of QP periods ({self.tick!r} s)")
        return int(n)

    @property
    def n_ticks(self) -> int:
        return int(round(self.duration * self.qp_rate_hz))

    @property
    def compute_ticks(self) -> int:
        """Snapshot latency in ticks (ceil, at least one: usable on a later tick)."""
        return max(1, math.ceil(self.fem_compute_time * self.qp_rate_hz - 1e-9))


@dataclass
class MocapLink:
    """The simulated mocap chain: a source observing the truth and the pipeline.

    ``source`` is a :class:`SimulatedMocapSource`, ``pipeline`` a :class:`MocapPipeline`
    whose effector is the labeled marker :data:`EFFECTOR_MARKER` (identity registration).
    """

    source: object
    pipeline: object


@dataclass
class CosimParts:
    """The objects of one run (they are mutated by it: build fresh ones per run).

    Attributes:
        model: The controller's FEM model, at its initial equilibrium.
        solver: The inverse solver (limits of ``model``'s actuators, in their order).
        target: Target effector position (3,) [m] as a function of time [s].
        plant: The simulated robot, at its initial state; None: ``model`` is the robot.
        servo: A configured :class:`ServoDriver` with simulated servos (cable actuators, in
            the model's cable order); None: ideal actuators (the plant gets the commanded
            strokes at once).
        mocap: Simulated mocap chain; needed for feedback.
        feedback: Target correction from the measured effector (None: open loop).
        initial_snapshot: Snapshot usable at t = 0 (e.g. the model's rest state); None: the
            QP waits for the first FEM update (safe command until then).
    """

    model: object
    solver: InverseSolver
    target: Callable[[float], np.ndarray]
    plant: Plant | None = None
    servo: object | None = None
    mocap: MocapLink | None = None
    feedback: TargetFeedback | None = None
    initial_snapshot: ComplianceSnapshot | None = None


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class CosimResult:
    """Time series of one run (recorded at the start of each recorded tick), SI.

    Attributes:
        config: The run's configuration.
        actuator_names, actuator_kinds: The model's actuators.
        t: (n,) times [s].
        target: (n, 3) desired effector position [m].
        qp_target: (n, 3) target handed to the QP (feedback-corrected) [m].
        effector: (n, 3) true effector position (plant, or model without plant) [m].
        effector_fresh: (n,) True where ``effector`` is the robot's state at ``t`` (a plant
            step ends at ``t``; every sample without a plant). Between plant steps the
            effector is held while the target moves: tracking errors use fresh samples.
        measured: (n, 3) latest measured effector (NaN before the first) [m].
        command_efforts: (n, n_a) efforts of the command in force [N or Pa].
        command_strokes: (n, n_a) strokes of the command in force [m or m³].
        delivered: (n, n_a) actuator output: cable displacement at the servo output at t
            [m] (the plant samples it at its steps; without servos the commanded strokes),
            pressures [Pa] (the commanded ones).
        snapshot_stamps: (k,) state time of each snapshot produced [s].
        snapshot_available: (k,) time it became usable [s].
        variations: Variation indicators of the accepted snapshots (in order).
        qp_solve_t: (m,) time of each QP solve [s] (a window's solves: run_metrics).
        qp_solve_status: InverseStatus name of each solve.
        fem_wall_times: (k,) wall time of each FEM update [s] (informative only).
        plant_steps: Plant steps taken.
        wall_time: Wall time of the whole run [s].
    """

    config: CosimConfig
    actuator_names: tuple[str, ...]
    actuator_kinds: tuple[ActuatorKind, ...]
    t: np.ndarray
    target: np.ndarray
    qp_target: np.ndarray
    effector: np.ndarray
    effector_fresh: np.ndarray
    measured: np.ndarray
    command_efforts: np.ndarray
    command_strokes: np.ndarray
    delivered: np.ndarray
    snapshot_stamps: np.ndarray
    snapshot_available: np.ndarray
    variations: tuple[ComplianceVariation, ...]
    qp_solve_t: np.ndarray
    qp_solve_status: tuple[str, ...]
    fem_wall_times: np.ndarray
    plant_steps: int
    wall_time: float

    @property
    def qp_solves(self) -> int:
        """QP solves performed."""
        return len(self.qp_solve_t)

    @property
    def status_counts(self) -> dict[str, int]:
        """InverseStatus name → count over the solves."""
        return dict(Counter(self.qp_solve_status))

    @property
    def error(self) -> np.ndarray:
        """(n,) ‖effector − target‖ [m] (meaningful where ``effector_fresh``)."""
        return np.linalg.norm(self.effector - self.target, axis=1)

    def window(self, start: float, end: float | None = None) -> np.ndarray:
        """(n,) bool: samples with ``start ≤ t < end`` (end: the run's end)."""
        end = math.inf if end is None else end
        return (self.t >= start - 1e-12) & (self.t < end - 1e-12)


@dataclass
class _Pending:
    available_tick: int
    snapshot: ComplianceSnapshot


@dataclass
class _Recorder:
    n: int
    n_a: int
    i: int = 0
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        shapes = {"t": (self.n,), "target": (self.n, 3), "qp_target": (self.n, 3),
                  "effector": (self.n, 3), "effector_fresh": (self.n,), "measured": (self.n, 3),
                  "command_efforts": (self.n, self.n_a), "command_strokes": (self.n, self.n_a),
                  "delivered": (self.n, self.n_a)}
        self.arrays = {k: np.full(s, np.nan) for k, s in shapes.items()}

    def add(self, **values) -> None:
        i = self.i
        for key, value in values.items():
            self.arrays[key][i] = value
        self.i += 1


@dataclass(frozen=True)
class _Schedule:
    """Periods of one run: the tick ``h`` [s], the FEM latency and the servo, plant and mocap
    periods in ticks (0 when that part is absent), and the plant substep ``sub_dt`` [s]."""

    h: float
    compute_ticks: int
    servo_ticks: int
    plant_ticks: int
    mocap_ticks: int
    sub_dt: float


@dataclass
class _LoopState:
    """What one run carries from tick to tick (SI).

    Attributes:
        efforts, strokes: The command in force (n_a,) [N or Pa], [m or m³].
        cable_disp: Cable displacements delivered to the plant (n_cables,) [m].
        model_effector: The model's effector (rows) [m], the robot's state without a plant.
        last_target, qp_target_xyz: Desired and QP (feedback-corrected) target (3,) [m].
        measured_xyz, measured_rows, measured_stamp: Latest measured effector (NaN before
            the first) [m], its rows, and its stamp [s].
        has_command: A QP solve has produced a command (the servos hold until then).
        saturated, qp_residual: Of the last solved tick (back-calculation anti-windup).
        pending: FEM snapshots not usable yet, oldest first.
        stamps, available, fem_walls: Per FEM update: state time, time usable, wall time [s].
        fem_next_start, fem_busy_until: FEM timer ticks.
    """

    efforts: np.ndarray
    strokes: np.ndarray
    cable_disp: np.ndarray
    model_effector: np.ndarray
    last_target: np.ndarray
    qp_target_xyz: np.ndarray
    measured_xyz: np.ndarray
    measured_rows: np.ndarray | None = None
    measured_stamp: float | None = None
    has_command: bool = False
    saturated: bool = False
    qp_residual: np.ndarray | None = None
    pending: list[_Pending] = field(default_factory=list)
    stamps: list[float] = field(default_factory=list)
    available: list[float] = field(default_factory=list)
    fem_walls: list[float] = field(default_factory=list)
    variations: list[ComplianceVariation] = field(default_factory=list)
    solve_t: list[float] = field(default_factory=list)
    solve_status: list[str] = field(default_factory=list)
    fem_next_start: int = 0
    fem_busy_until: int = 0
    seq: int = 0
    plant_steps: int = 0


class CoSimulation:
    """One co-simulated run (see the module docstring). Call :meth:`run` once."""

    def __init__(self, config: CosimConfig, parts: CosimParts) -> None:
        self.config = config
        self.parts = parts
        model = parts.model
        self.kinds = tuple(model.actuator_kinds)
        self.names = tuple(model.actuator_names)
        if parts.solver.n_actuators != len(self.kinds):
            raise ValueError(f"solver has {parts.solver.n_actuators} actuators, the model {len(self.kinds)}")
        self.row_axes = effector_row_axes(model.effector_names)
        self.cable = np.array([k is ActuatorKind.CABLE for k in self.kinds])
        self.pressure = np.array([k is ActuatorKind.PRESSURE for k in self.kinds])
        if parts.plant is not None and any(k is ActuatorKind.FORCE for k in self.kinds):
            raise ValueError("the plant takes cable strokes and pressures; linear-force actuators "
                             "are not supported in the co-simulation")
        if parts.servo is not None:
            servo_names = tuple(parts.servo.config.names)
            cable_names = tuple(n for n, c in zip(self.names, self.cable) if c)
            if servo_names != cable_names:
                raise ValueError(f"servo driver actuators {servo_names} do not match the model's "
                                 f"cables {cable_names} (same names, same order)")
            servo_ticks = round(parts.servo.config.period_s * config.qp_rate_hz)
            if abs(parts.servo.config.period_s - config.servo_period) > 1e-12 or servo_ticks < 1:
                raise ValueError(f"cosim.servo_period ({config.servo_period} s) must equal the servo "
                                 f"driver's period_s ({parts.servo.config.period_s} s)")
            if parts.plant is not None and config.ticks("servo_period") % config.ticks("plant_period"):
                # the plant reads the servos at the end of its step, ahead of the loop's
                # clock: a goal written inside a plant step would act too early
                raise ValueError(f"cosim.servo_period ({config.servo_period} s) must be a multiple of "
                                 f"cosim.plant_period ({config.plant_period} s)")
        if parts.feedback is not None and parts.mocap is None:
            raise ValueError("feedback needs the simulated mocap (CosimParts.mocap)")

    # ------------------------------------------------------------------ helpers
    def _rows(self, xyz: np.ndarray) -> np.ndarray:
        return np.asarray(xyz, float)[self.row_axes]

    def _xyz(self, rows: np.ndarray, fill: np.ndarray) -> np.ndarray:
        out = np.array(fill, float)
        out[self.row_axes] = rows
        return out

    def _next_fem_start(self, start_tick: int) -> int:
        """First tick at or after the FEM timer's next firing time after ``start_tick``."""
        cfg = self.config
        period_ticks = cfg.fem_period * cfg.qp_rate_hz
        n = math.floor(start_tick / period_ticks + 1e-9) + 1  # next grid index after the start
        return max(start_tick + 1, math.ceil(n * period_ticks - 1e-9))

    def _servo_displacement(self, now: float) -> np.ndarray:
        backend = self.parts.servo.backend
        backend.advance(now)
        return self.parts.servo.config.calibration.displacement_from_position(backend.position)

    # ------------------------------------------------------------------ the loop
    def run(self) -> CosimResult:
        cfg, p = self.config, self.parts
        wall0 = time.perf_counter()
        sched = self._schedule()
        n_ticks = cfg.n_ticks
        rec = _Recorder(n_ticks // cfg.record_every + 1, len(self.kinds))
        s = self._initial_state()

        for k in range(n_ticks + 1):
            now = k * sched.h
            effector_xyz = self._sample(k, now, s, sched, rec)
            if k == n_ticks:
                break
            new_snapshot = self._accept_snapshots(k, s)  # 1.
            if k >= s.fem_next_start and k >= s.fem_busy_until:  # 2.
                self._fem_update(k, now, s, sched)
            if p.mocap is not None:  # 3.
                self._mocap_update(k, now, effector_xyz, s, sched)
            s.last_target = np.asarray(p.target(now), float)  # 4.
            if cfg.mode != "sync" or new_snapshot:
                self._solve_qp(now, s)
            if p.servo is not None and k % sched.servo_ticks == 0:  # 5.
                if s.has_command:
                    p.servo.command(s.strokes[self.cable])
                p.servo.update(now)
            self._actuate(k, now, s, sched)  # 6.
        return self._result(s, rec, wall0)

    def _schedule(self) -> _Schedule:
        """The run's periods in ticks (0 for an absent part) and the tick / substep [s]."""
        cfg, p = self.config, self.parts
        return _Schedule(
            h=cfg.tick,
            compute_ticks=cfg.compute_ticks,
            servo_ticks=cfg.ticks("servo_period") if p.servo is not None else 0,
            plant_ticks=cfg.ticks("plant_period") if p.plant is not None else 0,
            mocap_ticks=cfg.ticks("mocap_period") if p.mocap is not None else 0,
            sub_dt=cfg.plant_period / cfg.plant_substeps,
        )

    def _initial_state(self) -> _LoopState:
        """The loop state at t = 0: initial snapshot accepted (if any), safe command."""
        p = self.parts
        seq = 0
        fem_next_start = 0
        if p.initial_snapshot is not None:
            update = p.solver.set_snapshot(p.initial_snapshot)
            if not update.accepted:
                raise ValueError(f"initial snapshot rejected: {update.reason}")
            seq = p.initial_snapshot.seq
            fem_next_start = self._next_fem_start(0)  # the initial snapshot is the update at t = 0
        safe = p.solver.safe_command()
        efforts = np.array(safe.efforts, float)
        strokes = np.array(safe.strokes, float)
        model_effector = np.asarray(p.model.effector_position, float)
        last_target = np.asarray(p.target(0.0), float)
        if last_target.shape != (3,):
            raise ValueError(f"target(t) must return 3 coordinates [m], got shape {last_target.shape}")
        if p.servo is not None:
            cable_disp = self._servo_displacement(0.0)
        else:
            cable_disp = strokes[self.cable].copy()
        return _LoopState(efforts=efforts, strokes=strokes, cable_disp=cable_disp,
                          model_effector=model_effector, last_target=last_target,
                          qp_target_xyz=last_target.copy(), measured_xyz=np.full(3, np.nan),
                          seq=seq, fem_next_start=fem_next_start)

    def _sample(self, k: int, now: float, s: _LoopState, sched: _Schedule, rec: _Recorder) -> np.ndarray:
        """The true effector (3,) [m] at ``now``, recorded with the commands on recorded ticks.

        Advances the simulated servos to ``now`` (every tick, recorded or not).
        """
        p = self.parts
        if p.plant is not None:
            effector_rows = np.asarray(p.plant.effector_position, float)
        else:
            effector_rows = s.model_effector
        effector_xyz = self._xyz(effector_rows, s.last_target)
        delivered = np.where(self.pressure, s.efforts, 0.0)
        delivered[self.cable] = (self._servo_displacement(now) if p.servo is not None
                                 else s.cable_disp)
        if k % self.config.record_every == 0:
            fresh = p.plant is None or k % sched.plant_ticks == 0
            rec.add(t=now, target=s.last_target, qp_target=s.qp_target_xyz, effector=effector_xyz,
                    effector_fresh=float(fresh), measured=s.measured_xyz, command_efforts=s.efforts,
                    command_strokes=s.strokes, delivered=delivered)
        return effector_xyz

    def _accept_snapshots(self, k: int, s: _LoopState) -> bool:
        """Hand the snapshots usable at tick ``k`` to the solver; True if one was accepted."""
        p = self.parts
        new_snapshot = False
        while s.pending and s.pending[0].available_tick <= k:
            snap = s.pending.pop(0).snapshot
            if p.plant is None:  # the model is the robot: its new state from now on
                s.model_effector = np.asarray(snap.effector_position, float)
            update = p.solver.set_snapshot(snap)
            if update.accepted:
                new_snapshot = True
                if update.variation is not None:
                    s.variations.append(update.variation)
        return new_snapshot

    def _fem_update(self, k: int, now: float, s: _LoopState, sched: _Schedule) -> None:
        """One FEM update under the newest commanded efforts; its snapshot becomes pending."""
        s.seq += 1
        info, snap = self.parts.model.update(s.efforts, s.seq, now)
        s.fem_walls.append(info.wall_time)
        s.stamps.append(now)
        s.available.append((k + sched.compute_ticks) * sched.h)
        s.pending.append(_Pending(k + sched.compute_ticks, snap))
        s.fem_busy_until = k + sched.compute_ticks
        s.fem_next_start = self._next_fem_start(k)

    def _mocap_update(self, k: int, now: float, effector_xyz: np.ndarray, s: _LoopState,
                      sched: _Schedule) -> None:
        """Capture the effector on mocap ticks; take the newest delivered fresh measurement."""
        mocap = self.parts.mocap
        if k % sched.mocap_ticks == 0:
            mocap.source.observe(now, markers={EFFECTOR_MARKER: effector_xyz})
        for frame in mocap.source.poll(now):
            estimate = mocap.pipeline.process(frame)
            eff = estimate.effector
            if eff.fresh and eff.position is not None:
                s.measured_xyz = np.asarray(eff.position, float)
                s.measured_rows = self._rows(s.measured_xyz)
                s.measured_stamp = float(eff.stamp)

    def _solve_qp(self, now: float, s: _LoopState) -> None:
        """Solve the QP for the current (feedback-corrected) target; update the command."""
        p = self.parts
        target_rows = self._rows(s.last_target)
        if p.feedback is not None:
            fb = p.feedback.update(now, target_rows, s.measured_rows, s.measured_stamp,
                                   saturated=s.saturated, qp_residual=s.qp_residual)
            qp_rows = fb.target
        else:
            qp_rows = target_rows
        s.qp_target_xyz = self._xyz(qp_rows, s.last_target)
        result = p.solver.solve(qp_rows, stamp=now)
        s.solve_t.append(now)
        s.solve_status.append(InverseStatus(result.status).name)
        if result.status is not InverseStatus.NO_SNAPSHOT:
            s.efforts = np.array(result.efforts, float)
            s.strokes = np.array(result.strokes, float)
            s.has_command = True
        s.saturated = qp_saturated(result.ok, result.effector_error)
        s.qp_residual = result.effector_residual if result.ok else None

    def _actuate(self, k: int, now: float, s: _LoopState, sched: _Schedule) -> None:
        """Step the plant on plant ticks (``plant_substeps`` steps of ``sub_dt`` [s]) under the
        delivered cable displacements [m] and commanded pressures [Pa]; without a plant or
        servos, the commanded strokes are the actuator output."""
        p = self.parts
        if p.plant is not None:
            if k % sched.plant_ticks == 0:
                pressures = s.efforts[self.pressure] if self.pressure.any() else None
                for j in range(self.config.plant_substeps):
                    if p.servo is not None:
                        s.cable_disp = self._servo_displacement(now + (j + 1) * sched.sub_dt)
                    else:
                        s.cable_disp = s.strokes[self.cable].copy()
                    p.plant.step(sched.sub_dt, cable_strokes=s.cable_disp if self.cable.any() else None,
                                 pressures=pressures)
                    s.plant_steps += 1
        elif p.servo is None:
            s.cable_disp = s.strokes[self.cable].copy()

    def _result(self, s: _LoopState, rec: _Recorder, wall0: float) -> CosimResult:
        """The run's :class:`CosimResult` (``wall0``: ``perf_counter`` at the start [s])."""
        arrays = {key: value[: rec.i] for key, value in rec.arrays.items()}
        arrays["effector_fresh"] = arrays["effector_fresh"] > 0.5
        return CosimResult(
            config=self.config, actuator_names=self.names, actuator_kinds=self.kinds,
            snapshot_stamps=np.array(s.stamps), snapshot_available=np.array(s.available),
            variations=tuple(s.variations), qp_solve_t=np.array(s.solve_t),
            qp_solve_status=tuple(s.solve_status),
            fem_wall_times=np.array(s.fem_walls), plant_steps=s.plant_steps,
            wall_time=time.perf_counter() - wall0, **arrays,
        )


def run_cosim(config: CosimConfig, parts: CosimParts) -> CosimResult:
    """Build and run one co-simulation."""
    return CoSimulation(config, parts).run()
