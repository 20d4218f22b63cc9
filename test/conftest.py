"""Shared pytest fixtures."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
#: SOFA SoftRobots meshes; override with SOFT_INVERSE_ROS_SHARED_DATA.
SHARED_DATA = pathlib.Path(
    os.environ.get(
        "SOFT_INVERSE_ROS_SHARED_DATA", REPO.parent / "shared" / "data" / "sofa-softrobots"
    )
)


@pytest.fixture(scope="session")
def sofa_data() -> pathlib.Path:
    """Folder of the SOFA meshes; the test is skipped (with the reason) when absent."""
    if not (SHARED_DATA / "diamond.vtk").is_file():
        pytest.skip(f"SOFA meshes not found at {SHARED_DATA} (../shared is absent)")
    return SHARED_DATA


def _real_time_threads() -> list[int]:
    """Threads of this process at a real-time policy (SCHED_FIFO / SCHED_RR)."""
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            if os.sched_getscheduler(int(tid)) in (os.SCHED_FIFO, os.SCHED_RR):
                out.append(int(tid))
        except ProcessLookupError:  # ended meanwhile
            pass
    return out


@pytest.fixture(autouse=True)
def _test_process_stays_at_normal_scheduling():
    """A test must not leave the test process real-time: a bench run in-process once did,
    and every later test's graph (fem_node at SCHED_FIFO 5, the mocap at 7) was starved by
    the test's own probe at SCHED_FIFO 8 (two CI runs failed on it)."""
    yield
    if hasattr(os, "sched_getscheduler") and os.path.isdir("/proc/self/task"):
        left = _real_time_threads()
        assert not left, f"this test left {len(left)} thread(s) of the test process real-time"


# ------------------------------------------------------------------ numba warm-up, first run
#: the test whose first step (setup's numba warm-up compiling every main-job kernel into an
#: empty cache: ~45 s on one core) starts in the background as soon as it is collected
JIT_WARM_UP_TEST = ("test_jit_warm_up.py::"
                    "test_the_warm_up_caches_every_main_job_kernel_and_a_second_run_compiles_nothing")
_JIT_FIRST_RUN = pytest.StashKey[tuple]()


def _start_jit_first_run() -> tuple[subprocess.Popen, pathlib.Path]:
    cache = pathlib.Path(tempfile.mkdtemp(prefix="jit-warm-up-")) / "numba"
    proc = subprocess.Popen([sys.executable, "-m", "soft_inverse_ros.core.jit_warm_up"],
                            env={**os.environ, "NUMBA_CACHE_DIR": str(cache)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, cache


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: only a test that will run
def pytest_collection_modifyitems(config, items):
    """Start the warm-up's first run (a compiler, one core) while the rest of the suite
    runs on the other core: it is a process of its own, whatever runs beside it, and the
    test only waits for its result (``jit_first_run``)."""
    if importlib.util.find_spec("numba") is None:
        return
    if any(item.nodeid.endswith(JIT_WARM_UP_TEST) for item in items):
        config.stash[_JIT_FIRST_RUN] = _start_jit_first_run()


def pytest_unconfigure(config):
    proc, cache = config.stash.get(_JIT_FIRST_RUN, (None, None))
    if proc is not None:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        shutil.rmtree(cache.parent, ignore_errors=True)


@pytest.fixture
def jit_first_run(request) -> tuple[pathlib.Path, int, str, str]:
    """(cache folder, exit code, stdout, stderr) of the numba warm-up's run into an empty
    cache: the one started at collection, or one run now."""
    pytest.importorskip("numba")
    started = request.config.stash.get(_JIT_FIRST_RUN, None)
    proc, cache = started if started is not None else _start_jit_first_run()
    try:
        out, err = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    if started is None:
        request.addfinalizer(lambda: shutil.rmtree(cache.parent, ignore_errors=True))
    return cache, proc.returncode, out, err
