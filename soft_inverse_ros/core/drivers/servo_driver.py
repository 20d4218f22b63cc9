"""The cable-servo driver: the safety layer between the controller and a servo backend.

Whatever the controller sends, the driver

* clips cable displacements to ``[min_displacement, max_displacement]`` and limits their
  change to ``max_speed · period_s`` per period (both counted per actuator and flagged in
  the status), so no out-of-limit goal ever reaches a device;
* runs a command watchdog: ``watchdog_periods`` periods without a command → ``hold``
  (keep the last goal) or ``release`` (torque off, driver back to INACTIVE);
* applies a HELD command live only while the last command it applied was live (OK, or
  HELD after one); a HELD command after SAFE, after the watchdog or as the first one
  after activation is applied as SAFE (never pulls further): only OK re-arms;
* limits cable tension: a cable whose measured tension stays above ``max_force_n`` for
  ``max_force_periods`` periods is released (torque off on that servo: unlike holding
  its position, which keeps the motor pulling against whatever load built the tension,
  torque off can only lower it) and reported (servo health FAULT, message); an OK
  command asking that cable to pull less than where it tripped, with the tension below
  the limit, re-arms it (torque on holding its present position, then tracking at
  ``max_speed``). Only where the backend measures tension (Dynamixel with
  ``torque_constant_nm_per_a``); the sim backend reports no tension, see
  :attr:`ServoDriver.tension_limit`;
* follows the lifecycle configure (open port, ping, static settings) → activate (goal :=
  present position, torque on) → deactivate / shutdown / error (torque off);
* declares a servo faulted after ``max_consecutive_comm_errors`` failed reads or at once
  on a hardware error; a faulted servo gets torque off and is no longer commanded, the
  others keep going (``on_servo_fault: isolate``) or everything stops (``stop_all``). A
  port failure puts the driver in ERROR.

Usage (what a ROS node does)::

    driver = ServoDriver.from_config(load_servo_config("servo.yaml"))
    driver.configure()                  # raises DriverError naming silent servos
    driver.activate(now)
    ... each period:  driver.command(displacements_m)   # when a command arrives
                      status = driver.update(now)       # once per period_s
    driver.shutdown()
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from soft_inverse_ros.core.drivers.driver_state import (
    CommandWatchdog,
    DriverError,
    DriverState,
    PortError,
    ManagedDriver,
    validated_command,
)
from soft_inverse_ros.core.drivers.servo_backend import (
    ServoBackend,
    ServoSample,
    describe_hardware_error,
)
from soft_inverse_ros.core.drivers.servo_config import ServoDriverConfig


class ServoHealth(Enum):
    """Per-servo health, mapped by nodes to diagnostic_msgs/DiagnosticStatus levels."""

    OK = 0
    WARN = 1  #: transient communication errors, still commanded
    #: torque off, not commanded: a device fault (until re-activation) or a tension above
    #: max_force_n (until an OK command re-arms it)
    FAULT = 2


@dataclass(frozen=True)
class ServoDiagnostics:
    """Health of one servo (one diagnostic_msgs/DiagnosticStatus).

    Attributes:
        name: Actuator name.
        device_id: Bus ID.
        health: OK / WARN / FAULT.
        message: Why not OK ("" when OK).
        temperature_c: Last reported temperature [°C] (NaN if never reported).
        voltage_v: Last reported input voltage [V] (NaN if never reported).
        hardware_error: Hardware Error Status bits (0 = none).
        comm_errors: Failed reads since configure.
        consecutive_comm_errors: Failed reads in a row now.
        torque_enabled: Torque as last set by the driver.
        position_clips: Periods the displacement command was clipped to the limits.
        velocity_clips: Periods the displacement change was limited by max_speed.
        device_clips: Goals the backend itself had to clip (should stay 0).
        tension_n: Measured cable tension [N] (NaN when the backend measures none).
        max_force_n: Tension limit [N] (inf: none).
        over_force: Released for a tension above max_force_n, waiting for an OK command.
        over_force_trips: Times the tension limit released it since configure.
    """

    name: str
    device_id: int
    health: ServoHealth
    message: str
    temperature_c: float
    voltage_v: float
    hardware_error: int
    comm_errors: int
    consecutive_comm_errors: int
    torque_enabled: bool
    position_clips: int
    velocity_clips: int
    device_clips: int
    tension_n: float = float("nan")
    max_force_n: float = float("inf")
    over_force: bool = False
    over_force_trips: int = 0


@dataclass(frozen=True)
class ServoStatus:
    """What one driver period produced (a JointState plus diagnostics), actuator order.

    Attributes:
        stamp: Time of the period [s].
        state: Driver lifecycle state after the period.
        names: Actuator names.
        displacement: Measured cable displacement [m] (NaN where not read).
        speed: Measured cable speed [m/s].
        tension: Cable tension from the servo effort [N] (NaN when not reported).
        position: Measured servo shaft angle [rad].
        velocity: Measured shaft angular velocity [rad/s].
        effort: Shaft torque [N·m] (NaN when not reported).
        commanded_displacement: Displacement sent this period [m] (NaN where nothing
            was sent).
        position_clipped: (n,) bool, the command was outside the limits this period.
        velocity_clipped: (n,) bool, the command moved faster than max_speed.
        watchdog_tripped: No command for ``watchdog_periods`` periods.
        diagnostics: One entry per servo.
        message: Driver-level message (last error or warning, "" when none).
        over_force: (n,) bool, released by the tension limit (None: never checked).
    """

    stamp: float
    state: DriverState
    names: tuple[str, ...]
    displacement: np.ndarray
    speed: np.ndarray
    tension: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    commanded_displacement: np.ndarray
    position_clipped: np.ndarray
    velocity_clipped: np.ndarray
    watchdog_tripped: bool
    diagnostics: tuple[ServoDiagnostics, ...]
    message: str
    over_force: np.ndarray | None = None


def make_servo_backend(config: ServoDriverConfig) -> ServoBackend:
    """The backend named by ``config.backend``, with the driver's position limits."""
    limits = config.calibration.position_limits(config.min_displacement, config.max_displacement)
    if config.backend == "dynamixel":
        from soft_inverse_ros.core.drivers.dynamixel_backend import DynamixelBackend

        assert config.dynamixel is not None
        return DynamixelBackend(config.dynamixel, config.ids, limits)
    from soft_inverse_ros.core.drivers.sim_servo import SimServoBackend

    start = np.clip(0.0 if config.sim_start is None else config.sim_start,
                    config.min_displacement, config.max_displacement)
    return SimServoBackend(
        config.sim, limits, config.calibration.position_from_displacement(start)
    )


class ServoDriver(ManagedDriver):
    """Safety layer over a :class:`ServoBackend` (see the module docstring)."""

    def __init__(self, config: ServoDriverConfig, backend: ServoBackend) -> None:
        super().__init__()
        if backend.size != config.size:
            raise ValueError(f"backend drives {backend.size} servos, config has {config.size}")
        self.config = config
        self.backend = backend
        n = config.size
        self._watchdog = CommandWatchdog(config.watchdog_periods)
        self._command: np.ndarray | None = None
        self._last_sent = np.full(n, np.nan)  # displacement goal in force [m]
        #: safe commands received (each held or released the cables, never pulled)
        self.safe_commands = 0
        self._faulted = np.zeros(n, dtype=bool)
        self._fault_message = [""] * n
        self._torque = np.zeros(n, dtype=bool)
        self._comm_errors = np.zeros(n, dtype=np.int64)
        self._consecutive = np.zeros(n, dtype=np.int64)
        self._position_clips = np.zeros(n, dtype=np.int64)
        self._velocity_clips = np.zeros(n, dtype=np.int64)
        self._last_sample = ServoSample.empty(n)
        self._temperature = np.full(n, np.nan)
        self._voltage = np.full(n, np.nan)
        self._hardware_error = np.zeros(n, dtype=np.int64)
        # tension limit: periods above max_force in a row, latched releases, where they
        # tripped [m], re-arm requested by an OK command, trips since configure
        self._over_count = np.zeros(n, dtype=np.int64)
        self._over_force = np.zeros(n, dtype=bool)
        self._trip_displacement = np.full(n, np.nan)
        self._rearm = np.zeros(n, dtype=bool)
        self._over_force_trips = np.zeros(n, dtype=np.int64)

    @property
    def tension_limit(self) -> str:
        """How ``max_force_n`` is enforced, for status and logs: "none configured",
        "enforced ..." or "NOT enforced ..." (a backend that measures no tension)."""
        if not self.config.has_force_limit:
            return "none configured"
        if not self.backend.measures_tension:
            return (f"NOT enforced: the {self.config.backend} backend does not measure cable "
                    "tension (max_force_n configured but ignored)")
        return (f"enforced: release after {self.config.max_force_periods} period(s) above "
                "max_force_n")

    @property
    def over_force(self) -> np.ndarray:
        """(n,) bool: cables released by the tension limit (until an OK command re-arms)."""
        return self._over_force.copy()

    @classmethod
    def from_config(cls, config: ServoDriverConfig) -> "ServoDriver":
        return cls(config, make_servo_backend(config))

    @property
    def faulted(self) -> np.ndarray:
        """(n,) bool: servos declared faulted (torque off, not commanded)."""
        return self._faulted.copy()

    # -- lifecycle -------------------------------------------------------------------
    def _servo_label(self, i: int) -> str:
        return f"servo id {self.config.ids[i]} ({self.config.names[i]})"

    def configure(self) -> None:
        """Open the port, ping every servo, write static settings; → INACTIVE.

        Raises:
            DriverError: the port cannot be opened or some servo does not answer (the
                message names each one); the driver stays UNCONFIGURED, port closed.
        """
        self._require(DriverState.UNCONFIGURED, action="configure")
        try:
            problems = self.backend.open()
        except PortError as exc:
            self.backend.close()
            raise DriverError(f"servo port: {exc}") from exc
        bad = [f"{self._servo_label(i)}: {p}" for i, p in enumerate(problems) if p]
        if bad:
            self.backend.close()
            raise DriverError("servos not usable: " + "; ".join(bad))
        self._reset_counters()
        self._torque[:] = False
        self._state = DriverState.INACTIVE
        self._message = ""

    def _reset_counters(self) -> None:
        self._faulted[:] = False
        self._fault_message = [""] * self.config.size
        self._comm_errors[:] = 0
        self._consecutive[:] = 0
        self._position_clips[:] = 0
        self._velocity_clips[:] = 0
        self._hardware_error[:] = 0
        self._over_force_trips[:] = 0
        self._clear_over_force()

    def _clear_over_force(self) -> None:
        self._over_count[:] = 0
        self._over_force[:] = False
        self._trip_displacement[:] = np.nan
        self._rearm[:] = False

    def activate(self, now: float) -> None:
        """Hold the present positions and enable torque on every servo; → ACTIVE.

        Every servo must answer without hardware error; a servo starting outside its
        limits by at most one period's step at ``max_speed`` gets its goal at the nearest
        limit (reported in ``message``); further outside, activation is refused (the goal
        would jump there at the servo's full speed).

        Raises:
            DriverError: some servo is unusable or too far outside its limits (torque is
                left off everywhere).
        """
        self._require(DriverState.INACTIVE, action="activate")
        all_servos = np.ones(self.config.size, dtype=bool)
        try:
            sample = self.backend.read(now, all_servos)
            # A lost status packet is not a fault: retry as the runtime tolerance allows.
            for _ in range(self.config.max_consecutive_comm_errors - 1):
                if sample.answered.all():
                    break
                sample = self.backend.read(now, all_servos)
        except PortError as exc:
            self._fail(f"servo port failed during activation: {exc}")
            raise DriverError(self._message) from exc
        self._remember_health(sample)
        bad = [
            f"{self._servo_label(i)}: "
            + (sample.errors[i] or "no answer")
            if not sample.answered[i]
            else f"{self._servo_label(i)}: hardware error "
            f"({describe_hardware_error(int(sample.hardware_error[i]))})"
            for i in range(self.config.size)
            if not sample.answered[i] or sample.hardware_error[i]
        ]
        if bad:
            raise DriverError("cannot activate, " + "; ".join(bad))
        self._faulted[:] = False
        self._fault_message = [""] * self.config.size
        self._consecutive[:] = 0
        self._clear_over_force()  # torque on everywhere, each holding its present position
        self._gate.disarm()  # a HELD command first after activation holds nothing live
        cfg = self.config
        measured = cfg.calibration.displacement_from_position(sample.position)
        start = np.clip(measured, cfg.min_displacement, cfg.max_displacement)
        # the goal goes straight to the limit (the device clips goals to its limits too), so
        # only a distance the speed limit allows in one period is bridged
        far = np.abs(start - measured) > cfg.max_speed * cfg.period_s
        if np.any(far):
            joint = cfg.joint if cfg.joint is not None else np.zeros(cfg.size, dtype=bool)

            def where(i: int) -> str:
                unit, scale = ("rad", 1.0) if joint[i] else ("mm", 1e3)
                return (f"{self._servo_label(i)} at {measured[i] * scale:.4g} {unit}, limits "
                        f"[{cfg.min_displacement[i] * scale:.4g}, {cfg.max_displacement[i] * scale:.4g}]")

            raise DriverError("cannot activate, outside the limits by more than one period at max speed "
                              "(torque stays off; bring it within them or widen them): "
                              + "; ".join(where(i) for i in np.flatnonzero(far)))
        outside = [cfg.names[i] for i in np.flatnonzero(start != measured)]
        self._message = (
            f"started just outside its limits, goal at the limit: {', '.join(outside)}"
            if outside
            else ""
        )
        self._last_sent = start
        self._command = None
        try:
            self.backend.write_goal(
                now, self.config.calibration.position_from_displacement(start), all_servos
            )
            ok = self.backend.set_torque(True, all_servos)
        except PortError as exc:
            self._fail(f"servo port failed during activation: {exc}")
            raise DriverError(self._message) from exc
        self._torque = ok.copy()
        if not np.all(ok):
            names = ", ".join(self._servo_label(i) for i in np.flatnonzero(~ok))
            self._torque_off(all_servos)
            raise DriverError(f"cannot activate, torque enable not confirmed by {names}")
        self._watchdog.reset()
        self._state = DriverState.ACTIVE

    def deactivate(self) -> None:
        """Torque off; → INACTIVE (port stays open)."""
        self._require(DriverState.ACTIVE, action="deactivate")
        self._torque_off(np.ones(self.config.size, dtype=bool))
        if self._state == DriverState.ACTIVE:
            self._state = DriverState.INACTIVE

    def shutdown(self) -> None:
        """Torque off (when possible) and close the port; → FINALIZED. Never raises."""
        if self._state in (DriverState.ACTIVE, DriverState.INACTIVE):
            self._torque_off(np.ones(self.config.size, dtype=bool))
        self.backend.close()
        self._state = DriverState.FINALIZED

    def _torque_off(self, mask: np.ndarray, confirm: bool = True) -> None:
        try:
            self.backend.set_torque(False, mask, confirm=confirm)
        except PortError as exc:
            self._fail(f"servo port failed while disabling torque: {exc}")
        self._torque &= ~mask

    def _fail(self, reason: str) -> None:
        """Enter ERROR: torque off everywhere (best effort), remember why."""
        self._message = reason
        if self._state != DriverState.ERROR:
            self._state = DriverState.ERROR
            try:
                self.backend.set_torque(False, np.ones(self.config.size, dtype=bool), confirm=False)
            except PortError:
                pass
            self._torque[:] = False

    # -- commands --------------------------------------------------------------------
    def command(self, displacement: np.ndarray, *, safe: bool = False, held: bool = False) -> None:
        """Set the cable displacements [m] to track (actuator order); feeds the watchdog.

        ``safe``: the controller's safe command (status SAFE). A safe command never adds
        effort: each cable goes to the commanded displacement only where that shortens it
        less than the goal it holds now (it releases towards slack), else it holds; a
        joint servo (``config.joint``) holds its goal; with no goal held yet it holds the
        position found at activation.

        ``held``: the controller's HELD command (its QP failed; it repeats its last
        command). Applied live only while the last command applied was live (OK, or HELD
        after one); after a SAFE command, the watchdog tripping or as the first command
        after activation it is applied as SAFE: only an OK command re-arms. Only an OK
        command re-arms a cable released by the tension limit (see the module docstring).

        Raises:
            ValueError: wrong shape or non-finite values (the command is ignored), or both
                flags.
        """
        command = validated_command(displacement, self.config.names, "servo command")
        as_safe = self._as_safe(safe=safe, held=held, how="applied")
        if not as_safe and not held and self._over_force.any():
            # an OK command asking a released cable to pull less than where it tripped
            self._rearm |= self._over_force & (command < self._trip_displacement)
        if as_safe:
            self.safe_commands += int(safe)
            # no goal held yet (not active): hold whatever position activation finds
            if np.all(np.isfinite(self._last_sent)):
                command = np.minimum(command, self._last_sent)
                if self.config.joint is not None:  # a joint servo holds its goal
                    command = np.where(self.config.joint, self._last_sent, command)
            else:
                command = None
        self._command = command
        self._watchdog.feed()

    # -- periodic update -------------------------------------------------------------
    def update(self, now: float) -> ServoStatus:
        """Run one command period at time ``now`` [s]: read, check, limit, write."""
        n = self.config.size
        pos_clipped = np.zeros(n, dtype=bool)
        vel_clipped = np.zeros(n, dtype=bool)
        sent = np.full(n, np.nan)
        watchdog = False
        if self._state in (DriverState.ACTIVE, DriverState.INACTIVE):
            try:
                sample = self.backend.read(now, ~self._faulted)
                self._account(sample)
                if self._state == DriverState.ACTIVE:
                    self._limit_tension(sample)
                    watchdog = self._watchdog.tick()
                    if watchdog:
                        self._gate.disarm()  # a HELD command next holds nothing live
                    if watchdog and self.config.watchdog_action == "release":
                        self._message = (
                            f"no command for {self.config.watchdog_periods} periods: "
                            "torque released"
                        )
                        self._torque_off(np.ones(n, dtype=bool))
                        if self._state == DriverState.ACTIVE:
                            self._state = DriverState.INACTIVE
                    else:
                        sent, pos_clipped, vel_clipped = self._write(now, hold=watchdog)
            except PortError as exc:
                self._fail(f"servo port failed: {exc}")
                sample = ServoSample.empty(n)
            self._last_sample = sample
        else:
            sample = ServoSample.empty(n)
        return self._status(now, sample, sent, pos_clipped, vel_clipped, watchdog)

    def _write(self, now: float, hold: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cfg = self.config
        target = self._last_sent if (hold or self._command is None) else self._command
        limited = np.clip(target, cfg.min_displacement, cfg.max_displacement)
        pos_clipped = limited != target
        max_step = cfg.max_speed * cfg.period_s
        step = np.clip(limited - self._last_sent, -max_step, max_step)
        vel_clipped = step != limited - self._last_sent
        active = ~self._faulted & ~self._over_force
        goal = np.where(active, self._last_sent + step, self._last_sent)
        # Land exactly on a limit when the step reaches it (no round-off past it).
        goal = np.clip(goal, cfg.min_displacement, cfg.max_displacement)
        self.backend.write_goal(now, cfg.calibration.position_from_displacement(goal), active)
        self._last_sent = goal
        pos_clipped &= active
        vel_clipped &= active
        self._position_clips += pos_clipped
        self._velocity_clips += vel_clipped
        return np.where(active, goal, np.nan), pos_clipped, vel_clipped

    def _limit_tension(self, sample: ServoSample) -> None:
        """The tension limit, once per active period: release cables above ``max_force``
        for ``max_force_periods`` periods; re-arm the ones an OK command asked to."""
        cfg = self.config
        tension = np.where(sample.answered, cfg.calibration.tension_from_torque(sample.effort), np.nan)
        below = ~(tension > cfg.max_force)  # NaN (not measured): not above
        # re-arm: an OK command asked to pull less, and the tension is below the limit
        rearm = self._rearm & self._over_force & ~self._faulted & below
        self._rearm[:] = False
        if rearm.any():
            measured = cfg.calibration.displacement_from_position(sample.position)
            start = np.clip(np.where(np.isfinite(measured), measured, self._last_sent),
                            cfg.min_displacement, cfg.max_displacement)
            ok = self.backend.set_torque(True, rearm)  # holds the present position
            self._torque |= ok
            self._last_sent = np.where(ok, start, self._last_sent)
            self._over_force &= ~ok
            self._over_count[ok] = 0
            for i in np.flatnonzero(ok):
                self._event("info", f"{self._servo_label(i)}: tension {tension[i]:.1f} N back "
                                    f"below max_force_n {cfg.max_force[i]:g} N and an OK command pulls "
                                    "less: torque on again")
            if not self._over_force.any():
                self._message = ""
        watched = self._torque & ~self._faulted & ~self._over_force
        over = watched & ~below
        self._over_count = np.where(over, self._over_count + 1, 0)
        trip = self._over_count >= cfg.max_force_periods
        if not trip.any():
            return
        measured = cfg.calibration.displacement_from_position(sample.position)
        self._trip_displacement = np.where(trip, measured, self._trip_displacement)
        self._over_force |= trip
        self._over_force_trips += trip
        self._over_count[trip] = 0
        self._torque_off(trip, confirm=False)  # release: torque off can only lower the tension
        text = "; ".join(
            f"{self._servo_label(i)} tension {tension[i]:.1f} N above max_force_n "
            f"{cfg.max_force[i]:g} N for {cfg.max_force_periods} period(s) at "
            f"{measured[i] * 1e3:.2f} mm" for i in np.flatnonzero(trip))
        self._message = (f"tension limit: {text}: torque released; re-arms on an OK command "
                         "pulling less, with the tension below the limit")
        self._event("error", self._message)

    def _remember_health(self, sample: ServoSample) -> None:
        a = sample.answered
        self._temperature = np.where(a, sample.temperature, self._temperature)
        self._voltage = np.where(a, sample.voltage, self._voltage)
        self._hardware_error = np.where(a, sample.hardware_error, self._hardware_error)

    def _account(self, sample: ServoSample) -> None:
        """Update error counters from a read; fault servos per policy."""
        self._remember_health(sample)
        asked = ~self._faulted
        failed = asked & ~sample.answered
        self._comm_errors += failed
        self._consecutive = np.where(failed, self._consecutive + 1, 0)
        newly: list[int] = []
        for i in np.flatnonzero(asked):
            if sample.answered[i] and sample.hardware_error[i]:
                bits = int(sample.hardware_error[i])
                self._fault_message[i] = (
                    f"hardware error 0x{bits:02x} ({describe_hardware_error(bits)})"
                )
                newly.append(i)
            elif self._consecutive[i] >= self.config.max_consecutive_comm_errors:
                self._fault_message[i] = (
                    f"does not answer ({self._consecutive[i]} failed reads: {sample.errors[i]})"
                )
                newly.append(i)
        if not newly:
            return
        mask = np.zeros(self.config.size, dtype=bool)
        mask[newly] = True
        self._faulted |= mask
        text = "; ".join(f"{self._servo_label(i)} {self._fault_message[i]}" for i in newly)
        if self._state != DriverState.ACTIVE:
            self._message = text
            return
        if self.config.on_servo_fault == "stop_all" or np.all(self._faulted):
            self._fail(f"servo fault, all torque off: {text}")
            return
        self._message = f"servo fault, isolated (others still commanded): {text}"
        self._torque_off(mask, confirm=False)  # a silent servo must not stall the others

    # -- status ----------------------------------------------------------------------
    def _status(
        self,
        now: float,
        sample: ServoSample,
        sent: np.ndarray,
        pos_clipped: np.ndarray,
        vel_clipped: np.ndarray,
        watchdog: bool,
    ) -> ServoStatus:
        cal = self.config.calibration
        tension = cal.tension_from_torque(sample.effort)
        diagnostics = []
        for i in range(self.config.size):
            if self._faulted[i]:
                health, msg = ServoHealth.FAULT, self._fault_message[i]
            elif self._over_force[i]:
                health, msg = ServoHealth.FAULT, (
                    f"tension above max_force_n {self.config.max_force[i]:g} N: torque released "
                    f"(at {self._trip_displacement[i] * 1e3:.2f} mm); an OK command pulling less re-arms")
            elif self._consecutive[i]:
                health, msg = ServoHealth.WARN, f"communication error: {sample.errors[i]}"
            else:
                health, msg = ServoHealth.OK, ""
            diagnostics.append(
                ServoDiagnostics(
                    name=self.config.names[i],
                    device_id=self.config.ids[i],
                    health=health,
                    message=msg,
                    temperature_c=float(self._temperature[i]),
                    voltage_v=float(self._voltage[i]),
                    hardware_error=int(self._hardware_error[i]),
                    comm_errors=int(self._comm_errors[i]),
                    consecutive_comm_errors=int(self._consecutive[i]),
                    torque_enabled=bool(self._torque[i]),
                    position_clips=int(self._position_clips[i]),
                    velocity_clips=int(self._velocity_clips[i]),
                    device_clips=int(self.backend.device_clip_count[i]),
                    tension_n=float(tension[i]),
                    max_force_n=float(self.config.max_force[i]),
                    over_force=bool(self._over_force[i]),
                    over_force_trips=int(self._over_force_trips[i]),
                )
            )
        return ServoStatus(
            stamp=now,
            state=self._state,
            names=self.config.names,
            displacement=cal.displacement_from_position(sample.position),
            speed=cal.speed_from_velocity(sample.velocity),
            tension=tension,
            position=sample.position.copy(),
            velocity=sample.velocity.copy(),
            effort=sample.effort.copy(),
            commanded_displacement=sent,
            position_clipped=pos_clipped,
            velocity_clipped=vel_clipped,
            watchdog_tripped=watchdog,
            diagnostics=tuple(diagnostics),
            message=self._message,
            over_force=self._over_force.copy(),
        )
