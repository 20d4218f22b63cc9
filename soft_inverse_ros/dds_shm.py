"""Remove the Fast DDS shared-memory files of processes that ended without closing them.

Node processes leave with ``os._exit`` (``nodes/node_runtime.end_process``: tearing rclpy down
raced with DDS callbacks and crashed), and a killed process cannot clean up either, so their
Fast DDS shared-memory transport files stay in ``/dev/shm``: a ~0.5 MB segment per process
and its port files, in RAM (tmpfs), run after run. Fast DDS marks each of these files as in
use with a lock file (``<name>_el`` or ``<name>_sl``) that the owning process holds locked
(``flock``) while it lives; a lock file that can be locked belongs to a process that is
gone. This is the convention Fast DDS's own ``fastdds shm clean`` relies on (that tool needs
``psutil`` in the system Python, which the setup does not install).

:func:`remove_stale_fastdds_files` removes only those files: nothing a live process uses.
:class:`~soft_inverse_ros.process_launcher.GraphProcesses` calls it when its graph has
stopped.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: where Fast DDS keeps its shared memory on Linux
SHM_DIR = Path("/dev/shm")
_SEGMENT_LOCK = re.compile(r"^(fastdds_[0-9a-z]{16})_(el|sl)$")
_PORT_LOCK = re.compile(r"^(fastdds_port\d{1,5})_(el|sl)$")


def _held(lock: Path) -> bool:
    """True when another process holds ``lock`` (or it cannot be checked)."""
    import fcntl

    try:
        with open(lock, "ab") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    return False


def remove_stale_fastdds_files(shm_dir: Path = SHM_DIR) -> int:
    """Remove the Fast DDS segments and ports none of whose lock files is held (their owners
    are gone); returns the number of files removed (0 where there is no such directory)."""
    try:
        names = os.listdir(shm_dir)
    except OSError:
        return 0
    locks: dict[str, list[str]] = {}  # base name -> its lock files
    for name in names:
        match = _SEGMENT_LOCK.match(name) or _PORT_LOCK.match(name)
        if match is not None:
            locks.setdefault(match.group(1), []).append(name)
    removed = 0
    for base, lock_files in locks.items():
        if any(_held(shm_dir / lock) for lock in lock_files):
            continue
        files = [*lock_files, base] + ([f"sem.{base}_mutex"] if base.startswith("fastdds_port") else [])
        for file in files:
            try:
                os.remove(shm_dir / file)
                removed += 1
            except OSError:  # already gone, or not ours to remove
                pass
    return removed
