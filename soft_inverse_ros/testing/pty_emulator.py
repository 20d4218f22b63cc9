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

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo / line editing before the driver opens it
        self.port_name = os.ttyname(self._slave)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
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

    def _run(self) -> None:
        """Serve the master side until ``self._stop`` is set."""
        raise NotImplementedError
