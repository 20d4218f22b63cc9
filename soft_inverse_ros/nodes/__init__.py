"""ROS 2 nodes: thin rclpy wrappers over ``soft_inverse_ros.core``.

Every node is a single-threaded loop on a machine it shares with the others (two cores
run the whole simulated graph), so BLAS / OpenMP / numba thread pools only add
contention: they are limited to one thread here, before numpy is imported, unless the
environment already says otherwise.
"""

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
