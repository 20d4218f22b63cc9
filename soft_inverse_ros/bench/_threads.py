"""One-thread timing for the benchmarks."""

from __future__ import annotations

import os


def limit_threads():
    """One BLAS/OpenMP thread: env vars before numpy loads, threadpoolctl when available.

    Returns the threadpoolctl limiter (keep a reference while timing) or None.
    """
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
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
