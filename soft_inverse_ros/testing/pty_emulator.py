"""The pseudo-terminal and serving thread shared by the device emulators.

An emulator owns the master side of a pseudo-terminal; drivers open ``port_name`` (the
slave side, put in raw mode: no echo, no line editing) as if it were a USB-serial
adapter. A subclass implements :meth:`PtyEmulator._run`, which serves the master side
until ``self._stop`` is set.
"""

from __future__ import annotations

import os
import threading
import tty
from typing import Self


class PtyEmulator:
    """A device behind a pseudo-terminal, served by a background thread.

    Use as a context manager (starts and stops the thread) and give ``port_name`` to the
    driver.
    """

    #: Name of the serving thread.
    thread_name = "pty-emulator"
    #: SCHED_FIFO priority of the serving thread when the process may set it (root,
    #: CAP_SYS_NICE), else normal scheduling. An emulated device stands for hardware,
    #: which does not wait for the CPU the system under test takes: at normal priority,
    #: a 2-core machine in a slow spell running a graph whose nodes are SCHED_FIFO 5-20
    #: starved the thread past a driver's 202 ms status timeout three times in a row (a
    #: servo fault in the hardware-launch test). Above every node of the package (20).
    realtime_priority = 30

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo / line editing before the driver opens it
        self.port_name = os.ttyname(self._slave)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._serve, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the pseudo-terminal (the driver's port then fails)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        for fd in (self._master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass
        self._master = self._slave = -1

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        realtime = False
        if self.realtime_priority > 0 and hasattr(os, "sched_setscheduler"):
            try:  # pid 0: the calling thread only (Linux schedules threads one by one)
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.realtime_priority))
                realtime = True
            except OSError:
                pass  # not permitted: normal scheduling
        try:
            self._run()
        finally:
            # Back to normal scheduling before the thread ends: ``join`` returns when the
            # Python thread is done, a moment before the kernel thread is gone, and a
            # process must not be seen holding a real-time thread after ``stop`` (a CI run
            # caught the ending thread still at SCHED_FIFO in /proc/self/task).
            if realtime:
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))

    def _run(self) -> None:
        """Serve the master side until ``self._stop`` is set."""
        raise NotImplementedError
