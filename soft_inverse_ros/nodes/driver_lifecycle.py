"""What servo_driver_node and valve_driver_node share: a ROS 2 managed (lifecycle) node
around a core driver, the command selection by actuator name, and the device-config file.

Lifecycle (``rclpy.lifecycle``; ``ros2 lifecycle set <node> <transition>`` on a full ROS 2
install, or the ``<node>/change_state`` service): the node's states follow the driver's.

* configure: load nothing new (the device config was validated at start), open the port,
  ping / identify every device (:class:`DriverError` naming the device on failure);
* activate: outputs live (servo torque on holding the present position; valve board armed
  at 0 Pa);
* deactivate: outputs safe (torque off; all chambers vented), port stays open and the
  node keeps publishing the measured state;
* cleanup: close the port; shutdown: safe outputs and close for good.

With ``autostart`` (default) the node configures and activates itself at start; a device
that does not answer then ends the process with a one-line fatal error naming it (exit
code 1), so a launch file marking the driver required stops the graph.

The driver may leave ACTIVE by itself: its command watchdog (servo ``release``, valve
vent), a device fault, a lost port. The node then goes to the lifecycle INACTIVE state
too and says why (log + /diagnostics, published at once on every state or health
change and every ``diagnostics_period`` otherwise). After a *watchdog* deactivation, and
only then, the next valid command of status OK re-activates the driver when
``resume_after_watchdog`` is set (a SAFE or HELD command does not); after a fault (driver ERROR) the operator recovers with cleanup → configure →
activate. On SIGINT/SIGTERM ``close()`` puts the outputs in their safe state and closes
the port.

HELD commands (the controller's QP failed; it repeats its last command) are applied live
only while the last command the driver applied was live (OK, or HELD after one); a HELD
command after a SAFE one, after the command watchdog or as the first command after
activation is applied as SAFE (the core drivers' ``LiveCommandGate``): only OK re-arms.

Simulated time: under ``use_sim_time`` the driver's period, hence its command watchdog,
runs on ``/clock``; if the simulation stops, the watchdog stops with it. Hardware
backends (anything but ``sim``) are therefore refused under ``use_sim_time`` at start,
one line naming the backend.

Commands: at the start of each driver period the node takes the newest ``ActuatorCommand``
received since the last one (``polled_subscription.py``: no wake-up per message; the
driver writes once per period, so a command superseded within the period would never have
been written) and checks and applies it; ``commands_read`` counts the commands taken,
``rejected_commands`` the rejected ones among them.
"""

from __future__ import annotations

import time
from abc import ABCMeta, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from soft_inverse_ros_msgs.msg import ActuatorCommand

from soft_inverse_ros import topics
from soft_inverse_ros.core.drivers.config_reader import resolve_device_config
from soft_inverse_ros.core.drivers.driver_state import DriverError, DriverState
from soft_inverse_ros.nodes import diagnostics as diag
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.periodic import create_periodic
from soft_inverse_ros.nodes.polled_subscription import PolledSubscription
from soft_inverse_ros.nodes.scheduling import apply_scheduling
from soft_inverse_ros.nodes.node_runtime import (
    NodeConfigError,
    check_known_parameters,
    config_parameter_names,
    declare_config,
    main_for,
    signals_deferred,
)

#: exit code of a driver node whose devices could not be started (autostart)
EXIT_DEVICE_ERROR = 1

_SUCCESS = TransitionCallbackReturn.SUCCESS
_FAILURE = TransitionCallbackReturn.FAILURE


@dataclass(frozen=True)
class DriverNodeConfig:
    """Parameters common to the driver nodes (``backend`` choices differ per node)."""

    backend: str = field(default="", metadata={
        "description": "device backend; overrides the device_config's backend key, "
                       "empty: the device_config's"})
    device_config: str = field(default="", metadata={
        "description": "driver YAML: a path, or a file under the package's config/ or "
                       "config/drivers/; empty: the packaged simulated default"})
    autostart: bool = field(default=True, metadata={
        "description": "configure and activate at start (fatal error if a device does not "
                       "answer); false: wait for lifecycle transitions"})
    resume_after_watchdog: bool = field(default=True, metadata={
        "description": "re-activate on the next valid command of status OK after the command "
                       "watchdog deactivated the driver (never after a fault; SAFE and HELD "
                       "commands do not)"})
    diagnostics_period: float = field(default=1.0, metadata={
        "description": "period of /diagnostics when nothing changes [s]",
        "range": (0.05, 60.0)})
    realtime_priority: int = field(default=0, metadata={
        "description": "SCHED_FIFO priority of this process's threads (1-99; 0: normal "
                       "scheduling): the command's consumer, so commands are not delayed by "
                       "a busy CPU (needs root or an rtprio limit, else a warning)",
        "range": (0, 99)})
    max_command_age: float = field(default=0.5, metadata={
        "description": "a command stamped more than this before or after the node clock is "
                       "refused (stale, replayed or from a clock that is not the graph's) [s]",
        "range": (0.01, 10.0)})


def load_servo_config_for(node_name: str, value: str, default: str, names: Sequence[str], what: str):
    """The servo driver YAML a simulated robot reads its angle ↔ stroke calibration from
    (``value`` resolved as :func:`resolve_device_config`), checked to drive every one of
    ``names`` (the plant's cables or joints, ``what`` naming them in the error).

    Raises:
        NodeConfigError: one line: the file is invalid, or lacks one of ``names``.
        FileNotFoundError: no such file (naming the places searched).
    """
    from soft_inverse_ros.core.drivers.servo_config import load_servo_config

    path = resolve_device_config(value, default)
    try:
        servo = load_servo_config(path)
    except ValueError as exc:
        raise NodeConfigError(f"{node_name}: servo_config {path}: {exc}") from None
    missing = [n for n in names if n not in servo.names]
    if missing:
        raise NodeConfigError(f"{node_name}: servo_config {path} has no servo for {what} {missing} "
                              f"(it drives {list(servo.names)})")
    return servo


#: the ActuatorCommand statuses a driver acts on (anything else is refused)
_STATUSES = (ActuatorCommand.STATUS_OK, ActuatorCommand.STATUS_HELD, ActuatorCommand.STATUS_SAFE)


class CommandRejected(ValueError):
    """An ActuatorCommand this driver must not apply (the message says why)."""


class CommandSelector:
    """Picks a driver's actuators, by name, out of an ActuatorCommand.

    The command may name other actuators too (a robot with cables and cavities sends one
    command for both drivers); it must name each of ours exactly once, in ``mode``, with a
    finite value. Anything else rejects the whole command: nothing partial, nothing NaN
    is ever applied.

    Args:
        names: This driver's actuator names, in driver order.
        mode: The ``ActuatorCommand.MODE_*`` the driver takes.
        mode_name: Readable name of that mode, for messages.
    """

    def __init__(self, names: Sequence[str], mode: int, mode_name: str) -> None:
        self.names = tuple(names)
        self.mode = mode
        self.mode_name = mode_name
        self._key: tuple[str, ...] | None = None
        self._index = np.zeros(0, dtype=np.intp)

    def _index_for(self, names: tuple[str, ...]) -> np.ndarray:
        if names != self._key:
            position: dict[str, int] = {}
            duplicates: list[str] = []
            for i, n in enumerate(names):
                if n in position:
                    duplicates.append(n)
                position.setdefault(n, i)
            ours_duplicated = sorted(set(duplicates) & set(self.names))
            if ours_duplicated:
                raise CommandRejected(f"command names {ours_duplicated} more than once")
            missing = [n for n in self.names if n not in position]
            if missing:
                raise CommandRejected(
                    f"command does not name {missing} (it names {list(names)})"
                )
            self._index = np.array([position[n] for n in self.names], dtype=np.intp)
            self._key = names
        return self._index

    def select(self, msg: ActuatorCommand) -> np.ndarray:
        """This driver's values (driver order) from ``msg``.

        Raises:
            CommandRejected: a status that is not one of ActuatorCommand's, names missing or
                repeated, array lengths inconsistent, a wrong mode, or a non-finite value
                (the message names the actuators).
        """
        if msg.status not in _STATUSES:
            raise CommandRejected(f"unknown status {msg.status} (expected OK {ActuatorCommand.STATUS_OK}, "
                                  f"HELD {ActuatorCommand.STATUS_HELD} or SAFE {ActuatorCommand.STATUS_SAFE})")
        names = tuple(msg.names)
        if len(msg.values) != len(names) or len(msg.modes) != len(names):
            raise CommandRejected(
                f"command has {len(names)} names, {len(msg.modes)} modes and "
                f"{len(msg.values)} values"
            )
        index = self._index_for(names)
        modes = np.asarray(msg.modes, dtype=np.uint8)[index]
        values = np.asarray(msg.values, dtype=float)[index]
        wrong = modes != self.mode
        if wrong.any():
            bad = [f"{self.names[i]} (mode {int(modes[i])})" for i in np.flatnonzero(wrong)]
            raise CommandRejected(f"expected {self.mode_name} mode for {', '.join(bad)}")
        finite = np.isfinite(values)
        if not finite.all():
            bad = [f"{self.names[i]}={values[i]}" for i in np.flatnonzero(~finite)]
            raise CommandRejected(f"non-finite value for {', '.join(bad)}")
        return values


class DriverLifecycleNode(LifecycleNode, metaclass=ABCMeta):
    """A managed node around a core driver (see the module docstring).

    Subclasses implement the hooks below; they create their state publisher and then call
    :meth:`start` at the end of their ``__init__``.

    Args:
        node_name: ROS node name.
        config_cls: The node's parameter dataclass (a :class:`DriverNodeConfig`).
        mode, mode_name: Command mode taken from ActuatorCommand.
        default_device_config: ``device_config`` when the parameter is empty (under config/).
    """

    #: What the driver drives, for messages ("servo", "valve").
    device_kind = "driver"

    def __init__(self, node_name: str, config_cls: type[DriverNodeConfig], *, mode: int,
                 mode_name: str, default_device_config: str, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, config_cls)
        check_known_parameters(self, config_parameter_names(config_cls))
        try:
            self.device_config_path = resolve_device_config(self.config.device_config,
                                                            default_device_config)
        except FileNotFoundError as exc:
            raise NodeConfigError(f"{node_name}: {exc}") from None
        try:
            self.driver_config = self.load_driver_config(self.device_config_path,
                                                         self.config.backend or None)
        except ValueError as exc:  # DriverConfigError names the key
            raise NodeConfigError(f"{node_name}: device_config {self.device_config_path}: {exc}") from None
        refusal = self._sim_time_refusal()
        if refusal:
            raise NodeConfigError(f"{node_name}: {refusal}")
        self.driver = self.make_driver()
        self.names = tuple(self.driver_config.names)
        self.selector = CommandSelector(self.names, mode, mode_name)
        self.period_s = float(self.driver_config.period_s)

        self._lifecycle = "unconfigured"
        self._resume_armed = False  # the watchdog (only) deactivated the driver
        self._status: Any = None  # last driver status
        self._health_key: Any = None
        self._periods = 0
        self._stats = {"commands_read": 0, "rejected_commands": 0, "ignored_inactive": 0,
                       "watchdog_deactivations": 0, "resumes": 0, "update_errors": 0}
        self._rejected_at_last_diag = 0
        self._last_rejection = ""
        self._last_error = ""
        # the newest command, taken at the start of each period (polled_subscription.py)
        self._commands = PolledSubscription(self, ActuatorCommand, topics.ACTUATOR_COMMAND,
                                            qos.HIGH_RATE)
        self._timer = create_periodic(self, self.period_s, self._tick)
        self._scheduling = apply_scheduling(self, self.config.realtime_priority,
                                            "commands may wait for a busy CPU")
        self._diag = diag.DiagnosticsPublisher(self, self._diagnostics,
                                               self.config.diagnostics_period)

    def _sim_time_refusal(self) -> str:
        """Why this backend cannot run under ``use_sim_time`` ("" when it can): the period,
        hence the command watchdog, runs on /clock, which stops when the simulation stops;
        real servos would then stay torqued (valves inflated) with nothing watching."""
        backend = self.driver_config.backend
        if backend == "sim" or not self.get_parameter("use_sim_time").value:
            return ""
        return (f"backend {backend} drives hardware and is refused under use_sim_time: the driver's "
                f"period and command watchdog would run on /clock and stop with the simulation, "
                f"leaving the {self.device_kind} outputs live (use backend sim, or use_sim_time false)")

    # ------------------------------------------------------------------ hooks
    def active_problem(self, status: Any) -> str:
        """An error the driver reports while active (ERROR on /diagnostics; "" when none)."""
        return ""

    @abstractmethod
    def load_driver_config(self, path: Path, backend: str | None) -> Any:
        """Validated driver config from ``path``, ``backend`` overriding its backend key."""

    @abstractmethod
    def make_driver(self) -> Any:
        """A new (unconfigured) core driver for ``self.driver_config``."""

    @abstractmethod
    def driver_configure(self, now: float) -> None: ...

    @abstractmethod
    def driver_activate(self, now: float) -> None: ...

    @abstractmethod
    def driver_deactivate(self, now: float) -> None: ...

    @abstractmethod
    def driver_shutdown(self, now: float) -> None: ...

    @abstractmethod
    def publish_state(self, status: Any) -> None:
        """Publish one period's status (the JointState)."""

    @abstractmethod
    def health_key(self, status: Any) -> tuple:
        """What, when it changes, triggers an immediate /diagnostics publication."""

    @abstractmethod
    def device_diagnostics(self, status: Any) -> list:
        """One DiagnosticStatus per actuator."""

    # ------------------------------------------------------------------ start / stop
    def now(self) -> float:
        """The node clock [s] (ROS time: wall time, or simulated time with use_sim_time)."""
        return self.get_clock().now().nanoseconds * 1e-9

    def start(self) -> None:
        """Log the setup; with ``autostart`` configure and activate.

        Raises:
            DriverError: autostart failed (the outputs are safe and the port closed).
        """
        self.get_logger().info(
            f"{self.driver_config.backend} backend, {len(self.names)} actuator(s) "
            f"{list(self.names)}, period {self.period_s * 1e3:g} ms, config {self.device_config_path}"
        )
        if not self.config.autostart:
            return
        self._wait_for_sim_clock()
        with signals_deferred():  # a Ctrl-C now still ends in close(): outputs safe
            for transition, target in ((self.trigger_configure, "inactive"),
                                       (self.trigger_activate, "active")):
                transition()
                if self._lifecycle != target:
                    self.close()
                    reason = self._last_error or f"lifecycle transition to {target} failed"
                    raise DriverError(f"{self.get_name()}: {reason}")

    def _wait_for_sim_clock(self, timeout_s: float = 60.0) -> None:
        """With ``use_sim_time``, wait (spinning this node) for the first ``/clock``: before it
        the node's time is 0, and a device configured at time 0 sees the first tick come
        at the graph's current simulated time — a silent host for a board's own watchdog,
        which then vents (seen with the snake's valves when the plant started first).

        Raises:
            DriverError: no /clock within ``timeout_s`` [s] of wall time.
        """
        if not self.get_parameter("use_sim_time").value:
            return
        import rclpy

        deadline = time.monotonic() + timeout_s
        while self.get_clock().now().nanoseconds == 0:
            if time.monotonic() > deadline:
                raise DriverError(f"{self.get_name()}: use_sim_time is set but no /clock arrived "
                                  f"within {timeout_s:g} s (is the simulated robot running?)")
            rclpy.spin_once(self, timeout_sec=0.05)

    def close(self) -> None:
        """Outputs safe, port closed (called by the runtime on SIGINT/SIGTERM; never raises)."""
        if self._lifecycle == "finalized":
            return
        try:
            if self.driver.state == DriverState.ACTIVE:
                self.driver_deactivate(self.now())
        except Exception as exc:  # noqa: BLE001 -- shutdown below still makes it safe
            self.get_logger().error(f"deactivate at close failed: {exc}")
        self.driver_shutdown(self.now())
        self._lifecycle = "finalized"
        self._timer.cancel()
        self.get_logger().info(f"shut down: {self.device_kind} outputs safe, port closed")

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        refusal = self._sim_time_refusal()  # checked at start too; use_sim_time is fixed
        if refusal:
            return self._transition_failed("configure", DriverError(refusal))
        try:
            self.driver_configure(self.now())
        except DriverError as exc:
            return self._transition_failed("configure", exc)
        except Exception as exc:  # a defect: on_error makes the outputs safe, and says this
            self._last_error = f"cannot configure: {type(exc).__name__}: {exc}"
            raise
        self._lifecycle = "inactive"
        self._last_error = ""
        self.get_logger().info(f"configured: {self.device_kind} port open, every device answered")
        self._publish_diagnostics_now()
        return _SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self.driver_activate(self.now())
        except DriverError as exc:
            return self._transition_failed("activate", exc)
        except Exception as exc:  # a defect: on_error makes the outputs safe, and says this
            self._last_error = f"cannot activate: {type(exc).__name__}: {exc}"
            raise
        self._lifecycle = "active"
        self._resume_armed = False
        self._last_error = ""
        self.get_logger().info(f"active: {self.device_kind} outputs live")
        self._publish_diagnostics_now()
        return _SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self.driver.state == DriverState.ACTIVE:
            self.driver_deactivate(self.now())
        self._lifecycle = "inactive"
        self._resume_armed = False
        self.get_logger().info(f"inactive: {self.device_kind} outputs safe, commands ignored until activate")
        self._publish_diagnostics_now()
        return _SUCCESS

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self.driver.state in (DriverState.INACTIVE, DriverState.ERROR):
            self.driver.cleanup()
        self._lifecycle = "unconfigured"
        self.get_logger().info(f"unconfigured: {self.device_kind} port closed")
        self._status = None  # no device reading while unconfigured
        self._publish_diagnostics_now()
        return _SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.close()
        return _SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A transition raised: outputs safe, a fresh unconfigured driver."""
        reason = f" ({self._last_error})" if self._last_error else ""
        self.get_logger().error(f"error during a lifecycle transition from {state.label}{reason}: "
                                "outputs made safe, node unconfigured")
        self.driver_shutdown(self.now())
        self.driver = self.make_driver()
        self._lifecycle = "unconfigured"
        return _SUCCESS

    def _transition_failed(self, what: str, exc: Exception) -> TransitionCallbackReturn:
        self._last_error = f"cannot {what}: {exc}"
        self._resume_armed = False  # a failed resume is not retried on every command
        self.get_logger().error(self._last_error)
        self._publish_diagnostics_now()
        return _FAILURE

    # ------------------------------------------------------------------ commands
    def _apply_command(self) -> None:
        """Check and apply the newest command received since the last period: the driver
        writes once per period, so only the newest one matters (the controller sends
        ~1.2 kHz, the driver writes at 100 Hz; they are not read one by one)."""
        msg = self._commands.take_newest()
        if msg is None:
            return
        self._stats["commands_read"] += 1
        try:
            values = self.selector.select(msg)
            stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
            age = self.now() - stamp
            if not abs(age) <= self.config.max_command_age:
                raise CommandRejected(
                    f"stamped {abs(age):.3f} s {'before' if age > 0 else 'after'} the node clock "
                    f"(max_command_age {self.config.max_command_age:g} s): stale, or another clock")
        except CommandRejected as exc:
            self._stats["rejected_commands"] += 1
            self._last_rejection = str(exc)
            self.get_logger().warning(f"command {msg.seq} rejected: {exc}",
                                      throttle_duration_sec=1.0)
            return
        if self._lifecycle != "active":
            # only a solved command re-arms outputs the watchdog switched off: a SAFE one
            # (the controller has no valid snapshot or target) or a HELD one (its QP failed)
            # is no sign the controller is commanding again
            if not (self._resume_armed and self.config.resume_after_watchdog
                    and msg.status == ActuatorCommand.STATUS_OK
                    and self.driver.state == DriverState.INACTIVE):
                self._stats["ignored_inactive"] += 1
                return
            self.trigger_activate()
            if self._lifecycle != "active":
                self._stats["ignored_inactive"] += 1
                return
            self._stats["resumes"] += 1
            self.get_logger().info("commands resumed: driver re-activated")
        # the driver applies a HELD command live only after a live one (OK or HELD), else
        # as SAFE: a HELD after SAFE, the watchdog or activation re-armed nothing
        self.driver.command(values, safe=msg.status == ActuatorCommand.STATUS_SAFE,
                            held=msg.status == ActuatorCommand.STATUS_HELD)

    # ------------------------------------------------------------------ the period
    def _tick(self) -> None:
        self._apply_command()
        if self.driver.state in (DriverState.UNCONFIGURED, DriverState.FINALIZED):
            return
        now = self.now()
        try:
            status = self.driver.update(now)
        except Exception as exc:  # noqa: BLE001 -- never leave live outputs behind a crash
            self._stats["update_errors"] += 1
            self._last_error = f"driver update failed: {type(exc).__name__}: {exc}"
            self.get_logger().error(self._last_error, throttle_duration_sec=1.0)
            if self._lifecycle == "active":
                self.trigger_deactivate()
            return
        self._log_driver_events()
        self._periods += 1
        self._status = status
        if self.driver.state in (DriverState.ACTIVE, DriverState.INACTIVE):
            self.publish_state(status)
        if self._lifecycle == "active" and self.driver.state != DriverState.ACTIVE:
            self._driver_left_active(status)
        key = (self._lifecycle, self.driver.state, status.watchdog_tripped, self.health_key(status))
        if key != self._health_key:
            self._publish_diagnostics_now()

    def _log_driver_events(self) -> None:
        """One log line per event the core driver queued (a tension-limit release, a HELD
        command applied as SAFE, ...)."""
        logger = self.get_logger()
        for level, text in self.driver.take_events():
            {"error": logger.error, "warning": logger.warning}.get(level, logger.info)(
                f"{self.device_kind} driver: {text}")

    def _driver_left_active(self, status: Any) -> None:
        watchdog = status.watchdog_tripped and self.driver.state == DriverState.INACTIVE
        text = f"{self.device_kind} driver {self.driver.state.value}: {self.driver.message}"
        if watchdog:
            self._stats["watchdog_deactivations"] += 1
            self.get_logger().warning(text + (
                "; re-activates on the next OK command" if self.config.resume_after_watchdog else ""))
        else:
            self._last_error = text
            self.get_logger().error(text)
        self.trigger_deactivate()
        self._resume_armed = watchdog

    # ------------------------------------------------------------------ health
    def _publish_diagnostics_now(self) -> None:
        self._diag.publish()

    def _diagnostics(self) -> list:
        status = self._status
        driver_state = self.driver.state
        watchdog = bool(status is not None and status.watchdog_tripped)
        rejected = self._stats["rejected_commands"] - self._rejected_at_last_diag
        self._rejected_at_last_diag = self._stats["rejected_commands"]
        if driver_state == DriverState.ERROR or (self._last_error and self._lifecycle != "active"):
            level, message = diag.ERROR, self.driver.message or self._last_error
        elif self._lifecycle != "active":
            level = diag.WARN
            message = (f"inactive after the command watchdog ({self.driver.message})"
                       if self._resume_armed else f"lifecycle {self._lifecycle}: outputs safe")
        elif status is not None and self.active_problem(status):
            level, message = diag.ERROR, self.active_problem(status)
        elif watchdog:
            level, message = diag.WARN, f"command watchdog tripped: {self.driver.message or 'holding'}"
        elif rejected:
            level, message = diag.WARN, f"{rejected} command(s) rejected: {self._last_rejection}"
        else:
            level, message = diag.OK, self.driver.message or "ok"
        values = {
            "lifecycle": self._lifecycle,
            "driver_state": driver_state.value,
            "backend": self.driver_config.backend,
            "device_config": str(self.device_config_path),
            "period_s": self.period_s,
            "periods": self._periods,
            "watchdog_tripped": watchdog,
            **self._stats,
            "held_as_safe_commands": self.driver.held_as_safe_commands,
            "last_rejection": self._last_rejection,
            "driver_message": self.driver.message,
            "last_error": self._last_error,
        }
        self._health_key = (self._lifecycle, driver_state, watchdog,
                            self.health_key(status) if status is not None else None)
        out = [diag.status(f"{self.get_name()}: {self.device_kind} driver", level, message, values)]
        if status is not None:
            out += self.device_diagnostics(status)
        return out


def driver_main(node_cls: Callable[[], DriverLifecycleNode], args: Sequence[str] | None) -> int:
    """``main()`` of a driver node: :func:`main_for`, with a device that cannot be started
    (autostart) reported as one fatal line and exit code :data:`EXIT_DEVICE_ERROR`."""
    return main_for(node_cls, args, fatal_errors={DriverError: EXIT_DEVICE_ERROR})
