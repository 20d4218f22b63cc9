"""A thread that handles the newest item handed to it, below the priority of the caller.

The controller's compliance snapshots take 0.5–1.2 ms each to convert, check and prepare
inside a running graph (140 µs back to back on an idle core). Handled in the executor
thread that also runs the 1 kHz ticks, one snapshot in two delayed the next tick out of
its 1 ms slot: 1.2–1.9 % of the slots empty while the machine was half idle (BENCHMARKS.md,
seventeenth session). :class:`LatestWorker` runs that work in a thread of its own, at a
real-time priority below the ticks' when the process runs at SCHED_FIFO (the controller
uses the lowest, 1), so a due tick preempts it (with the interpreter's switch interval
shortened, see ``inverse_controller_node``): the tick waits for the GIL at most about one
switch interval.

Only the newest item matters (a snapshot replaces the previous one): an item still
waiting when a newer one arrives is dropped and counted in :attr:`LatestWorker.superseded`.

Preempted or not, the worker and the ticks share one interpreter: while the worker ran
beside them, a tick waited for the GIL at each hand-over, and the controller alone (fed
snapshots at 25 Hz by another process) lost 0.2 % of its slots, three quarters of them
while a snapshot was being handled (1.8 ms of wall time each, 5 % of the time). A
``handle`` may therefore return a generator: the worker runs it step by step and calls
``pause()`` before each step, which the controller makes wait for the end of a tick, so
every step (a few hundred µs) runs in the gap between two ticks.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator

from soft_inverse_ros.nodes.scheduling import thread_fifo

__all__ = ["LatestWorker"]


class LatestWorker:
    """``handle(item)`` in a thread of its own for the newest item :meth:`put`.

    Args:
        handle: Called with each item taken, in the worker thread. An exception it raises
            goes to ``on_error`` (the worker goes on). When it returns an iterator (a
            generator), the worker runs it to its end, one step at a time.
        pause: Called before each step of such an iterator (the first included), e.g. to
            wait for a gap in the caller's work; None: no pause.
        name: The thread's name.
        fifo_priority: SCHED_FIFO priority the worker sets for itself (Linux; 0: it keeps
            the scheduling it inherits from the thread that made it). A refusal leaves
            the inherited scheduling and is reported by :attr:`scheduling`.
        on_error: Called with the exception ``handle`` raised.
    """

    def __init__(self, handle: Callable[[Any], Iterator[Any] | None], name: str, *,
                 fifo_priority: int = 0, pause: Callable[[], None] | None = None,
                 on_error: Callable[[BaseException], None] | None = None) -> None:
        self._handle = handle
        self._pause = pause
        self._on_error = on_error
        self._fifo = int(fifo_priority)
        self._cond = threading.Condition()
        self._item: Any = None
        self._has_item = False
        self._busy = False
        self._stop = False
        self.superseded = 0  # items replaced before the worker took them
        self.handled = 0
        self.scheduling = "inherited"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, item: Any) -> None:
        """Hand ``item`` over (returns at once); replaces an item not taken yet."""
        with self._cond:
            if self._has_item:
                self.superseded += 1
            self._item, self._has_item = item, True
            self._cond.notify()

    def wait_idle(self, timeout: float) -> bool:
        """True once every item put has been handled (False after ``timeout`` [s])."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._has_item and not self._busy, timeout)

    def close(self, timeout: float = 1.0) -> None:
        """Stop after the item being handled (a waiting one is dropped) and join."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        with thread_fifo(self._fifo) as scheduling:
            self.scheduling = scheduling
            self._serve()

    def _serve(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._has_item or self._stop)
                if self._stop:
                    return
                item, self._item, self._has_item = self._item, None, False
                self._busy = True
            try:
                steps = self._handle(item)
                if steps is not None:
                    self._run_steps(iter(steps))
            except Exception as exc:  # noqa: BLE001 -- the worker outlives a bad item
                if self._on_error is not None:
                    self._on_error(exc)
            finally:
                with self._cond:
                    self._busy = False
                    self.handled += 1
                    self._cond.notify_all()

    def _run_steps(self, steps: Iterator[Any]) -> None:
        """Each step of ``steps`` after a :attr:`_pause` (stops early when closed)."""
        while True:
            if self._pause is not None:
                self._pause()
            if self._stop:
                return
            try:
                next(steps)
            except StopIteration:
                return
