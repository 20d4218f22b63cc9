"""One-thread timing for the benchmarks."""

from __future__ import annotations

import os


def limit_threads():
    """One BLAS/OpenMP thread: env vars before numpy loads, threadpoolctl when available.

    Returns the threadpoolctl limiter (keep a reference while timing) or None.
    """
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "SOFT_INVERSE_ROS_CONTACT_THREADS"):
        os.environ[var] = "1"
    try:
        import sksparse.cholmod  # noqa: F401  (load its BLAS before limiting)
    except ImportError:
        pass
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(1)


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time [s] a process has used so far (Linux /proc)."""
    import os

    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
