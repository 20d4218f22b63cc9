"""Node processes end with the launcher that started them (Linux).

:class:`~soft_inverse_ros.process_launcher.GraphProcesses` starts each node in a session of
its own (the terminal's Ctrl-C reaches the launcher, which forwards it), so a launcher that
dies without shutting its graph down (``kill -9``, the out-of-memory killer, a test's
timeout) would leave the nodes running with nobody supervising them: a controller still
commanding, drivers still holding torque, a simulated graph still publishing into the next
run's domain. The launcher puts its pid in :data:`LAUNCHER_PID_ENV`; a node process that
finds it asks the kernel for SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``),
which its runtime handles as a normal stop (outputs safe, bag closed). Nodes started any
other way (``ros2 launch``, by hand) are not affected.

The kernel sends the signal when the *thread* that started the process ends: start graphs
from a thread that lives as long as the graph (the launcher's and the demo's main thread).
"""

from __future__ import annotations

import os
import signal
import sys

#: environment variable holding the pid of the launcher that started a node process
LAUNCHER_PID_ENV = "SOFT_INVERSE_ROS_LAUNCHER_PID"
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def end_with_launcher(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> bool:
    """Arrange SIGTERM for this process when the launcher named in ``environ`` ends.

    Returns True when armed. A process whose launcher is already gone (it died between
    starting this process and this call: the process was reparented to init) leaves at
    once with one line and status 1.
    Without the variable, on another OS, or when ``prctl`` fails: False, nothing changes.
    """
    value = environ.get(LAUNCHER_PID_ENV)
    if not value or not sys.platform.startswith("linux"):
        return False
    try:
        launcher = int(value)
    except ValueError:
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        return False
    # reparented to init: the launcher died before the request took effect (another parent
    # is a wrapper that exec'd into us or forked us, e.g. ``ip netns exec``: armed on it)
    if os.getppid() != launcher and os.getppid() == 1:
        print(f"[FATAL] the launcher (pid {launcher}) that started this node is gone", file=sys.stderr, flush=True)
        os._exit(1)
    return True
