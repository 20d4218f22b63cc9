"""ROS 2 nodes: thin rclpy wrappers over ``soft_inverse_ros.core``.

Every node is a single-threaded loop on a machine it shares with the others (two cores
run the whole simulated graph), so BLAS / OpenMP / numba thread pools only add
contention: they are limited to one thread here, before numpy is imported, unless the
environment already says otherwise.

A node process (launched with ``--ros-args``) interrupted while it is still importing its
modules (Ctrl-C seconds after a launch, while numba and rclpy load) exits quietly with
status 0 instead of printing a KeyboardInterrupt traceback; once it runs, its own handler
(``node_runtime.run_nodes``) takes over.
"""

import os
import signal
import sys


def _interrupted_while_starting(signum, frame):  # noqa: ARG001 -- signal handler signature
    raise SystemExit(0)


if "--ros-args" in sys.argv and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted_while_starting)

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
