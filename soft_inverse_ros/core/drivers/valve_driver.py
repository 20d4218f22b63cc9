"""The pneumatic valve driver: safety layer between pressure commands and a valve board.

Whatever the controller sends, the driver

* makes antagonistic pairs exclusive and clips references to ``[0, max_pressure]``
  (counted per chamber, flagged in the status);
* limits the references' change to ``max_pressure_rate · period_s`` per period (counted
  and flagged too), from the vented state (0 Pa) as well: after activation, a SAFE
  command or a watchdog vent, re-inflation ramps; a vent is never rate-limited;
* applies a HELD command live only while the last command it applied was live (OK, or
  HELD after one); a HELD command after SAFE, after the watchdog or as the first one
  after activation vents like SAFE (:class:`LiveCommandGate`): only OK re-arms;
* turns references into duties (feedforward, PI loop where a sensor is present, duty
  cap at the steady-state duty of the maximum pressure, minimum valve pulse);
* runs a command watchdog: ``watchdog_periods`` periods without a command → VENT_ALL,
  driver back to INACTIVE; the board has its own watchdog (``device_watchdog_s``);
* follows the lifecycle configure (open, HELLO, CONFIG, vent) → activate (ARM) →
  deactivate / shutdown / error (VENT_ALL);
* goes to ERROR (and vents) on: a port failure, ``max_consecutive_comm_errors`` failed
  exchanges in a row (no reply, bad checksum, NACK), a sensor fault or a vent the board
  latched by itself (watchdog, overpressure), or a measured pressure above
  ``max_pressure · (1 + overpressure_margin)``.

Usage (what a ROS node does)::

    driver = ValveDriver.from_config(load_valve_config("valves.yaml"))
    driver.configure(now); driver.activate(now)
    ... driver.command(pressures_pa) when a command arrives; status = driver.update(now)
    driver.shutdown(now)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from soft_inverse_ros.core.drivers import valve_protocol as vp
from soft_inverse_ros.core.drivers.driver_state import (
    CommandWatchdog,
    DriverError,
    DriverState,
    PortError,
    ManagedDriver,
    validated_command,
)
from soft_inverse_ros.core.drivers.valve_backend import (
    SerialValveBackend,
    SimValveBackend,
    ValveBackend,
    ValveCommError,
)
from soft_inverse_ros.core.drivers.valve_config import ValveDriverConfig
from soft_inverse_ros.core.drivers.valve_pwm import (
    PressureController,
    apply_pairs,
    limit_pressure_change,
)

#: Unused board channels get this maximum pressure (u32 max: no limit; never driven).
_NO_LIMIT = 2**32 - 1


class ChamberHealth(Enum):
    OK = 0
    WARN = 1
    FAULT = 2


@dataclass(frozen=True)
class ChamberDiagnostics:
    """Health of one chamber (one diagnostic_msgs/DiagnosticStatus).

    Attributes:
        name: Chamber name.
        channel: Board channel.
        health: OK / WARN / FAULT.
        message: Why not OK.
        pressure_pa: Last measured pressure [Pa] (NaN without sensor).
        has_sensor: Closed loop (True) or open loop.
        pressure_clips: Periods the reference was clipped to [0, max_pressure].
        rate_limits: Periods the reference's change was limited by max_pressure_rate.
    """

    name: str
    channel: int
    health: ChamberHealth
    message: str
    pressure_pa: float
    has_sensor: bool
    pressure_clips: int
    rate_limits: int = 0


@dataclass(frozen=True)
class ValveStatus:
    """What one driver period produced, chamber order.

    Attributes:
        stamp: Time of the period [s].
        state: Driver state after the period.
        names: Chamber names.
        pressure: Measured pressures [Pa] (NaN without sensor or reading).
        reference: Pressure references after pairs and limits [Pa] (NaN when idle).
        duty: Duties applied by the board [0, 1] (NaN without reading).
        pressure_clipped: (n,) bool, the reference was clipped this period.
        rate_limited: (n,) bool, the reference's change was limited this period.
        watchdog_tripped: No command for ``watchdog_periods`` periods (vented).
        device_flags: Board STATE flags (``valve_protocol.Flags``).
        comm_errors: Failed exchanges since configure.
        consecutive_comm_errors: Failed exchanges in a row now.
        diagnostics: One entry per chamber.
        message: Driver-level message (last error or warning).
    """

    stamp: float
    state: DriverState
    names: tuple[str, ...]
    pressure: np.ndarray
    reference: np.ndarray
    duty: np.ndarray
    pressure_clipped: np.ndarray
    watchdog_tripped: bool
    device_flags: vp.Flags
    comm_errors: int
    consecutive_comm_errors: int
    diagnostics: tuple[ChamberDiagnostics, ...]
    message: str
    rate_limited: np.ndarray | None = None


def make_valve_backend(config: ValveDriverConfig) -> ValveBackend:
    """The backend named by ``config.backend``."""
    if config.backend == "serial":
        assert config.serial is not None
        return SerialValveBackend(config.serial)
    n = config.n_board_channels
    params = [config.pneumatics[0]] * n
    mask = 0
    for i, channel in enumerate(config.channels):
        params[channel] = config.pneumatics[i]
        mask |= int(config.has_sensor[i]) << channel
    return SimValveBackend(params, mask, config.sensor_noise_pa)


class ValveDriver(ManagedDriver):
    """Safety layer over a :class:`ValveBackend` (see the module docstring)."""

    def __init__(self, config: ValveDriverConfig, backend: ValveBackend) -> None:
        super().__init__()
        self.config = config
        self.backend = backend
        #: Measured pressure that vents everything [Pa] (also the board's limit).
        self.trip_pressure = config.max_pressure * (1.0 + config.overpressure_margin)
        self.controller = PressureController(
            config.pneumatics, config.has_sensor, config.max_pressure, config.kp_per_pa,
            config.ki_per_pa_s, config.period_s, config.pwm_frequency_hz, config.min_pulse_s,
        )
        n = config.size
        self._channels = np.array(config.channels)
        self._watchdog = CommandWatchdog(config.watchdog_periods)
        #: safe commands received (each vented every chamber)
        self.safe_commands = 0
        self._command: np.ndarray | None = None
        #: the newest command is applied as safe (SAFE, or HELD with no live command to
        #: hold): vent, pairs' bias included
        self._command_safe = False
        #: the reference applied last period [Pa] (0 when vented): the rate limit's start
        self._last_reference = np.zeros(n)
        self._max_step = np.asarray(config.max_pressure_rate, dtype=float) * config.period_s
        self._rate_limits = np.zeros(n, dtype=np.int64)
        self._pressure = np.full(n, np.nan)
        self._duty = np.full(n, np.nan)
        self._flags = vp.Flags(0)
        self._comm_errors = 0
        self._consecutive = 0
        self._clips = np.zeros(n, dtype=np.int64)
        self._fault = [""] * n

    @classmethod
    def from_config(cls, config: ValveDriverConfig) -> "ValveDriver":
        return cls(config, make_valve_backend(config))

    # -- lifecycle -------------------------------------------------------------------
    def configure(self, now: float) -> None:
        """Open the link, identify and configure the board, vent; → INACTIVE.

        Raises:
            DriverError: port, board or configuration problem (driver stays UNCONFIGURED).
        """
        self._require(DriverState.UNCONFIGURED, action="configure")
        cfg = self.config
        try:
            info = self.backend.open(now)
            if info.n_channels < cfg.n_board_channels:
                raise DriverError(
                    f"valve board has {info.n_channels} channels, config uses channel "
                    f"{cfg.n_board_channels - 1}"
                )
            missing = [
                f"{name} (channel {ch})"
                for name, ch, sensed in zip(cfg.names, cfg.channels, cfg.has_sensor)
                if sensed and not info.has_sensor(ch)
            ]
            if missing:
                raise DriverError(
                    "configured with a pressure sensor the board does not report: " + ", ".join(missing)
                )
            limits = [_NO_LIMIT] * info.n_channels
            for ch, trip in zip(cfg.channels, self.trip_pressure):
                limits[ch] = int(trip)
            pwm_hz = int(round(cfg.pwm_frequency_hz))
            self._retry(lambda: self.backend.configure(now, pwm_hz, cfg.device_watchdog_s, limits))
            state = self._retry(lambda: self.backend.vent_all(now))
        except (PortError, ValveCommError) as exc:
            self.backend.close()
            raise DriverError(f"valve board: {exc}") from exc
        except DriverError:
            self.backend.close()
            raise
        self._comm_errors = self._consecutive = 0
        self._clips[:] = 0
        self._rate_limits[:] = 0
        self._fault = [""] * cfg.size
        self._take(state)
        self._state = DriverState.INACTIVE
        self._message = ""

    def activate(self, now: float) -> None:
        """Arm the board (clears its latched vents); → ACTIVE with every chamber at 0 Pa.

        Raises:
            DriverError: the board refuses (e.g. overpressure still present) or fails.
        """
        self._require(DriverState.INACTIVE, action="activate")
        try:
            state = self._retry(lambda: self.backend.arm(now))
        except PortError as exc:
            self._fail(now, f"valve port failed during activation: {exc}")
            raise DriverError(self._message) from exc
        except ValveCommError as exc:
            raise DriverError(f"cannot activate valves: {exc}") from exc
        self._take(state)
        latched = state.flags & vp.Flags.latched()
        if latched or state.flags & vp.Flags.SENSOR_FAULT:
            raise DriverError(f"cannot activate valves, board reports {_flag_names(state.flags)}")
        self.controller.reset()
        self._command = None
        self._command_safe = False
        self._gate.disarm()  # a HELD command first after activation holds nothing live
        self._last_reference = np.zeros(self.config.size)  # armed at 0 Pa: ramps from there
        self._watchdog.reset()
        self._fault = [""] * self.config.size
        self._message = ""  # a watchdog vent's message ends with the re-arm
        self._state = DriverState.ACTIVE

    def _retry(self, request):
        """A lifecycle request, retried like periodic exchanges (a lost reply is no fault)."""
        for attempt in range(self.config.max_consecutive_comm_errors):
            try:
                return request()
            except ValveCommError:
                if attempt + 1 == self.config.max_consecutive_comm_errors:
                    raise

    def deactivate(self, now: float) -> None:
        """Vent every chamber; → INACTIVE."""
        self._require(DriverState.ACTIVE, action="deactivate")
        self._vent(now)
        if self._state == DriverState.ACTIVE:
            self._state = DriverState.INACTIVE

    def shutdown(self, now: float) -> None:
        """Vent (when possible) and close; → FINALIZED. Never raises."""
        if self._state in (DriverState.ACTIVE, DriverState.INACTIVE, DriverState.ERROR):
            try:
                self._take(self.backend.vent_all(now))
            except (PortError, ValveCommError):
                pass
        self.backend.close()
        self._state = DriverState.FINALIZED

    def _vent(self, now: float) -> None:
        try:
            self._take(self._retry(lambda: self.backend.vent_all(now)))
        except PortError as exc:
            self._fail(now, f"valve port failed while venting: {exc}")
        except ValveCommError as exc:
            self._fail(now, f"vent not confirmed by the board ({exc}); its watchdog vents "
                            f"within {self.config.device_watchdog_s} s")

    def _fail(self, now: float, reason: str) -> None:
        """Enter ERROR: vent (best effort; the board's watchdog vents otherwise)."""
        self._message = reason
        if self._state == DriverState.ERROR:
            return
        self._state = DriverState.ERROR
        try:
            self._take(self.backend.vent_all(now))
        except (PortError, ValveCommError):
            self._message += f" (vent not confirmed; board watchdog vents within {self.config.device_watchdog_s} s)"

    # -- commands --------------------------------------------------------------------
    def command(self, pressure: np.ndarray, *, safe: bool = False, held: bool = False) -> None:
        """Set chamber pressure references [Pa gauge] (chamber order); feeds the watchdog.

        ``safe``: the controller's safe command (status SAFE): every chamber vents
        (reference 0 Pa gauge, an antagonistic pair's ``bias_pa`` too) whatever the
        message's values, so a safe command never adds effort.

        ``held``: the controller's HELD command (its QP failed; it repeats its last
        command). Applied live only while the last command applied was live (OK, or HELD
        after one); after a SAFE command, a watchdog vent or as the first command after
        activation it is applied as SAFE (vent): only an OK command re-arms.

        Raises:
            ValueError: wrong shape or non-finite values (ignored), or both flags.
        """
        command = validated_command(pressure, self.config.names, "valve command")
        as_safe = self._as_safe(safe=safe, held=held, how="vented")
        if as_safe:
            command = np.zeros_like(command)
            self.safe_commands += int(safe)
        self._command = command
        self._command_safe = as_safe
        self._watchdog.feed()

    # -- periodic update -------------------------------------------------------------
    def update(self, now: float) -> ValveStatus:
        """Run one period at ``now`` [s]: limits, duties, exchange, checks."""
        n = self.config.size
        reference = np.full(n, np.nan)
        clipped = np.zeros(n, dtype=bool)
        limited = np.zeros(n, dtype=bool)
        watchdog = False
        if self._state == DriverState.INACTIVE:
            self._exchange(now, lambda: self.backend.read_state(now))
        elif self._state == DriverState.ACTIVE:
            watchdog = self._watchdog.tick()
            if watchdog:
                self._message = f"no command for {self.config.watchdog_periods} periods: vented"
                self._gate.disarm()  # a HELD command next holds nothing live
                self._last_reference = np.zeros(n)
                self._vent(now)
                if self._state == DriverState.ACTIVE:
                    self._state = DriverState.INACTIVE
            else:
                if self._command_safe:  # vent: 0 Pa, a pair's bias too, and no PI (its
                    # integral re-inflated a leaky chamber): a safe command adds no effort
                    reference, duty = np.zeros(n), np.zeros(n)
                    self.controller.reset()
                    self._last_reference = np.zeros(n)  # vented: never rate-limited
                else:
                    reference, clipped, limited = self._reference()
                    duty, _ = self.controller.duty(reference, self._pressure)
                board = np.zeros(self.backend.n_channels)
                # Round down to the wire resolution so the cap holds on the board too.
                board[self._channels] = np.floor(duty * vp.DUTY_FULL_SCALE) / vp.DUTY_FULL_SCALE
                self._exchange(now, lambda: self.backend.set_duty(now, board))
                if self._state == DriverState.ACTIVE:
                    self._check(now)
        return self._status(now, reference, clipped, watchdog, limited)

    def _reference(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        wanted = np.zeros(self.config.size) if self._command is None else self._command
        # each chamber within its own limits first: a pair's net is the difference of its two
        # chambers, so a negative gauge pressure on one would inflate the other
        within = np.clip(wanted, 0.0, self.config.max_pressure)
        paired = apply_pairs(within, self.config.pairs)
        reference = np.clip(paired, 0.0, self.config.max_pressure)
        clipped = (within != wanted) | (reference != paired)
        self._clips += clipped
        # the rate limit, from the last reference applied (0 Pa after a vent)
        ramped = limit_pressure_change(self._last_reference, reference, self._max_step, self.config.pairs)
        ramped = np.clip(ramped, 0.0, self.config.max_pressure)
        limited = ramped != reference
        self._rate_limits += limited
        self._last_reference = ramped
        return ramped, clipped, limited

    def _exchange(self, now: float, request) -> None:
        try:
            state = request()
        except PortError as exc:
            self._fail(now, f"valve port failed: {exc}")
            return
        except ValveCommError as exc:
            self._comm_errors += 1
            self._consecutive += 1
            self._message = f"valve board communication error: {exc}"
            if self._consecutive >= self.config.max_consecutive_comm_errors:
                self._fail(now, f"valve board not answering ({self._consecutive} failed exchanges: {exc})")
            return
        self._consecutive = 0
        self._take(state)

    def _take(self, state: vp.DeviceState) -> None:
        self._flags = state.flags
        pressure = [state.pressure_pa[ch] for ch in self.config.channels]
        self._pressure = np.array([np.nan if p is None else float(p) for p in pressure])
        self._pressure[~self.config.has_sensor] = np.nan
        self._duty = np.array([state.duty[ch] for ch in self.config.channels])

    def _check(self, now: float) -> None:
        """Faults visible in the board's reply: its own vents, sensors, pressures."""
        flags = self._flags
        if flags & vp.Flags.latched():
            self._fail(now, f"valve board vented by itself: {_flag_names(flags & vp.Flags.latched())}")
            return
        if flags & vp.Flags.SENSOR_FAULT:
            for i in np.flatnonzero(self.config.has_sensor):
                self._fault[i] = "sensor fault reported by the board"
            self._fail(now, "valve board reports a pressure sensor fault")
            return
        over = np.isfinite(self._pressure) & (self._pressure > self.trip_pressure)
        if np.any(over):
            for i in np.flatnonzero(over):
                self._fault[i] = f"overpressure {self._pressure[i]:.0f} Pa > {self.trip_pressure[i]:.0f} Pa"
            names = ", ".join(self.config.names[i] for i in np.flatnonzero(over))
            self._fail(now, f"overpressure in {names}: vented")

    def _status(self, now: float, reference: np.ndarray, clipped: np.ndarray, watchdog: bool,
                limited: np.ndarray) -> ValveStatus:
        cfg = self.config
        diagnostics = []
        for i in range(cfg.size):
            if self._fault[i]:
                health, msg = ChamberHealth.FAULT, self._fault[i]
            elif self._consecutive:
                health, msg = ChamberHealth.WARN, "board communication error"
            else:
                health, msg = ChamberHealth.OK, ""
            diagnostics.append(
                ChamberDiagnostics(
                    name=cfg.names[i], channel=cfg.channels[i], health=health, message=msg,
                    pressure_pa=float(self._pressure[i]), has_sensor=bool(cfg.has_sensor[i]),
                    pressure_clips=int(self._clips[i]),
                    rate_limits=int(self._rate_limits[i]),
                )
            )
        return ValveStatus(
            stamp=now,
            state=self._state,
            names=cfg.names,
            pressure=self._pressure.copy(),
            reference=reference,
            duty=self._duty.copy(),
            pressure_clipped=clipped,
            watchdog_tripped=watchdog,
            device_flags=self._flags,
            comm_errors=self._comm_errors,
            consecutive_comm_errors=self._consecutive,
            diagnostics=tuple(diagnostics),
            message=self._message,
            rate_limited=limited,
        )


def _flag_names(flags: vp.Flags | int) -> str:
    names = [f.name for f in vp.Flags if flags & f and f.name]
    return ", ".join(n.lower() for n in names) if names else "no flags"
