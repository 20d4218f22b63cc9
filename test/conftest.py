"""Shared pytest fixtures."""

from __future__ import annotations

import atexit
import os
import pathlib
import shutil
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
#: SOFA SoftRobots meshes; override with SOFT_INVERSE_ROS_SHARED_DATA.
SHARED_DATA = pathlib.Path(
    os.environ.get(
        "SOFT_INVERSE_ROS_SHARED_DATA", REPO.parent / "shared" / "data" / "sofa-softrobots"
    )
)


# The reduced plants' build cache (core/sim/build_cache.py) of this test run: a folder of
# its own, inherited by the node processes the tests start, never the user's ~/.cache.
# It starts with the user's entries (read-only use: setup builds the demo's plant there, so
# the graphs the tests start load it instead of building it inside the starting graph, as a
# user's graph does; entries of other code versions never match).
if "SOFT_INVERSE_ROS_CACHE_DIR" not in os.environ:
    from soft_inverse_ros.core.sim.build_cache import cache_dir as _user_cache_dir

    _USER = _user_cache_dir()
    _CACHE = tempfile.mkdtemp(prefix="soft-inverse-ros-test-cache-")
    os.environ["SOFT_INVERSE_ROS_CACHE_DIR"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
    if _USER is not None and _USER.is_dir():
        shutil.copytree(_USER, pathlib.Path(_CACHE) / "plants", dirs_exist_ok=True)


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
