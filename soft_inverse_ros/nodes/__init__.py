"""ROS 2 nodes: thin rclpy wrappers over ``soft_inverse_ros.core``.

Every node is a single-threaded loop on a machine it shares with the others (two cores
run the whole simulated graph), so BLAS / OpenMP / numba thread pools and ipctk's broad
phase (TBB; ``SOFT_INVERSE_ROS_CONTACT_THREADS``, core/contact/geometry.py) only add
contention: they are limited to one thread here, before numpy is imported, unless the
environment already says otherwise.

A node process (launched with ``--ros-args``) interrupted while it is still importing its
modules (Ctrl-C seconds after a launch, while numba and rclpy load) exits quietly with
status 0 instead of printing a KeyboardInterrupt traceback; once it runs, its own handler
(``node_runtime.run_nodes``) takes over. This holds also when the process inherited SIGINT
ignored (started from a script's background job, whose SIGINT the shell ignores): the
running node stops on SIGINT whatever it inherited (``run_nodes``), so a starting one does
too, rather than ignoring the launcher's forwarded SIGINT until its imports end. Nothing is
open yet at that point, so the handler leaves at once (``os._exit``): a ``SystemExit``
raised in the middle of a library's import could be caught by its ``except`` clauses.

A node process started by this package's launcher ends (SIGTERM, a normal stop) when that
launcher dies without stopping it (``soft_inverse_ros/supervision.py``).
"""

import os
import signal
import sys


def _interrupted_while_starting(signum, frame):  # noqa: ARG001 -- signal handler signature
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if "--ros-args" in sys.argv and signal.getsignal(signal.SIGINT) in (
        signal.default_int_handler, signal.SIG_IGN, signal.SIG_DFL):
    signal.signal(signal.SIGINT, _interrupted_while_starting)

if "--ros-args" in sys.argv:  # a node process: end with the launcher that started it (supervision.py)
    from soft_inverse_ros.supervision import end_with_launcher

    end_with_launcher()

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "NUMBA_NUM_THREADS", "SOFT_INVERSE_ROS_CONTACT_THREADS"):
    os.environ.setdefault(_name, "1")
