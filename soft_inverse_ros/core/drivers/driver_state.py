"""Lifecycle states and the command watchdog shared by the servo and valve drivers."""

from __future__ import annotations

from enum import Enum
from typing import Protocol, Sequence

import numpy as np


class DriverState(Enum):
    """Driver lifecycle, mirroring the ROS 2 managed-node states.

    * ``UNCONFIGURED``: nothing open.
    * ``INACTIVE``: port open, devices answered; outputs safe (torque off / valves vented).
    * ``ACTIVE``: commands reach the devices.
    * ``ERROR``: a fault put the outputs in their safe state; ``shutdown`` or a new
      ``configure`` (after ``reset``) is needed.
    * ``FINALIZED``: port closed for good.
    """

    UNCONFIGURED = "unconfigured"
    INACTIVE = "inactive"
    ACTIVE = "active"
    ERROR = "error"
    FINALIZED = "finalized"


class DriverError(RuntimeError):
    """A lifecycle transition failed; the message says which device and why."""


class PortError(OSError):
    """The serial port failed (unplugged, closed, I/O error): the link is gone."""


class _Closable(Protocol):
    def close(self) -> None: ...


class ManagedDriver:
    """Lifecycle bookkeeping shared by the servo and valve drivers.

    Holds the :class:`DriverState` and the driver-level message, guards transitions and
    implements :meth:`cleanup`. Subclasses set ``backend`` (closing it never raises).
    """

    backend: _Closable

    def __init__(self) -> None:
        self._state = DriverState.UNCONFIGURED
        self._message = ""
        self._events: list[tuple[str, str]] = []
        self._gate = LiveCommandGate()  # the HELD rule; disarmed on activation and watchdog trips

    @property
    def held_as_safe_commands(self) -> int:
        """HELD commands applied as SAFE (no live command to hold)."""
        return self._gate.held_as_safe

    def _as_safe(self, *, safe: bool, held: bool, how: str) -> bool:
        """Whether a command of this status is applied as SAFE (:class:`LiveCommandGate`),
        with one warning per episode of HELD commands applied so (``how``: what the driver
        does with them, e.g. "vented").

        Raises:
            ValueError: both ``safe`` and ``held``.
        """
        as_safe = self._gate.as_safe(safe=safe, held=held)
        if self._gate.new_held_episode:
            self._event("warning", "HELD command with no live command to hold (after SAFE, the "
                                   f"watchdog or activation): {how} as SAFE until an OK command")
        return as_safe

    def _event(self, level: str, text: str) -> None:
        """Queue one log line (``level``: "info", "warning" or "error") for the node."""
        self._events.append((level, text))

    def take_events(self) -> list[tuple[str, str]]:
        """The (level, text) lines queued since the last call (the node logs each once)."""
        events, self._events = self._events, []
        return events

    @property
    def state(self) -> DriverState:
        return self._state

    @property
    def message(self) -> str:
        """Last error or warning ("" when none)."""
        return self._message

    def _require(self, *allowed: DriverState, action: str) -> None:
        """Raise :class:`DriverError` unless the state is one of ``allowed``."""
        if self._state not in allowed:
            names = ", ".join(s.value for s in allowed)
            raise DriverError(f"cannot {action} in state {self._state.value} (needs {names})")

    def cleanup(self) -> None:
        """Close the link; → UNCONFIGURED (from INACTIVE or ERROR)."""
        self._require(DriverState.INACTIVE, DriverState.ERROR, action="clean up")
        self.backend.close()
        self._state = DriverState.UNCONFIGURED


def validated_command(values: object, names: Sequence[str], what: str) -> np.ndarray:
    """A command as a new float array of shape ``(len(names),)`` with finite values.

    Raises:
        ValueError: wrong shape or non-finite values; the message starts with ``what``
            (e.g. "servo command") and lists ``names`` on a shape mismatch.
    """
    v = np.array(values, dtype=float)
    if v.shape != (len(names),):
        raise ValueError(f"{what} has shape {v.shape}, expected ({len(names)},) for {', '.join(names)}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{what} has non-finite values: {v}")
    return v


class CommandWatchdog:
    """Counts command periods without a fresh command.

    Call :meth:`feed` when a command arrives and :meth:`tick` once per command period;
    ``tick`` returns True once ``periods`` consecutive periods passed without a command
    (and keeps returning True until the next ``feed``).

    Args:
        periods: Periods without a command before the watchdog trips (>= 1).
    """

    def __init__(self, periods: int) -> None:
        if periods < 1:
            raise ValueError(f"watchdog periods must be >= 1, got {periods}")
        self.periods = periods
        self._fresh = False
        self._missed = 0

    def feed(self) -> None:
        self._fresh = True

    def reset(self) -> None:
        """Start counting anew (e.g. on activation), as if a command had just arrived."""
        self._fresh = False
        self._missed = 0

    @property
    def missed(self) -> int:
        """Consecutive periods without a command so far."""
        return self._missed

    @property
    def tripped(self) -> bool:
        return self._missed >= self.periods

    def tick(self) -> bool:
        if self._fresh:
            self._missed = 0
        else:
            self._missed += 1
        self._fresh = False
        return self.tripped


class LiveCommandGate:
    """Which commands a driver applies as live: the HELD rule.

    A controller sends OK (a solved command), HELD (its QP failed: it repeats its last
    command) or SAFE (no valid snapshot or target). HELD is only "keep doing what you
    were doing": it is applied live only while the last command the driver applied was
    live (OK, or a HELD after one). A HELD after a SAFE command, after the command
    watchdog tripped, or as the first command after activation repeats no live command,
    so it is applied as SAFE (the driver's safe behaviour: held / vented); only an OK
    command re-arms. Call :meth:`disarm` on activation and when the watchdog trips.
    """

    def __init__(self) -> None:
        #: the last command applied was live (OK, or HELD after one)
        self.live = False
        #: HELD commands applied as SAFE (no live command to hold)
        self.held_as_safe = 0
        #: the last command was the first HELD applied as SAFE since a live or SAFE one
        #: (the driver says so once per such episode)
        self.new_held_episode = False
        self._in_episode = False

    def disarm(self) -> None:
        self.live = False

    def as_safe(self, *, safe: bool, held: bool) -> bool:
        """Whether a command of this status is applied as SAFE (and record it as applied).

        Raises:
            ValueError: both ``safe`` and ``held``.
        """
        if safe and held:
            raise ValueError("a command is SAFE or HELD, not both")
        held_as_safe = held and not self.live
        self.new_held_episode = held_as_safe and not self._in_episode
        self._in_episode = held_as_safe
        if held_as_safe:
            self.held_as_safe += 1
            return True
        if safe:
            self.live = False
            return True
        if not held:
            self.live = True
        return False
