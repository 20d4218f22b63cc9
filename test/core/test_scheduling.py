"""nodes/scheduling.py: SCHED_FIFO or nice for every thread of a node process, the config
check refusing both, and a refusal reported as one warning (no exception)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from soft_inverse_ros.nodes.scheduling import apply_scheduling, check_scheduling, set_nice, thread_fifo

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")


def test_a_config_asking_fifo_and_nice_is_refused():
    check_scheduling(0, -10)
    check_scheduling(20, 0)
    with pytest.raises(ValueError, match="choose one"):
        check_scheduling(5, -10)


def test_nice_zero_changes_nothing():
    before = os.getpriority(os.PRIO_PROCESS, 0)
    assert set_nice(0) == "normal"
    assert os.getpriority(os.PRIO_PROCESS, 0) == before


@linux_only
def test_nice_reaches_every_thread_of_the_process():
    """In a child process (a raised nice cannot be undone without privileges): a thread
    started before the call gets the nice too (Linux keeps nice per thread)."""
    code = """
import os, threading, time
from soft_inverse_ros.nodes.scheduling import set_nice
tids = []
def worker():
    tids.append(threading.get_native_id()); time.sleep(2)
t = threading.Thread(target=worker); t.start()
while not tids: time.sleep(0.01)
print(set_nice(5), os.getpriority(os.PRIO_PROCESS, tids[0]), os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["nice", "5", "5", "5"]


_AUTOGROUP_CODE = """
import os
from soft_inverse_ros.nodes.scheduling import set_nice
def group_nice():
    # e.g. "/autogroup-42 nice 0"; empty for a process in the kernel's root group (the
    # session that booted the machine or a container's, where CI runs)
    with open("/proc/self/autogroup") as handle:
        words = handle.read().split()
    return words[-1] if words else "root"
before = group_nice()
print(set_nice(5) + "|" + before + "|" + group_nice())
"""


def _autogroup_child(**popen) -> list[str]:
    from soft_inverse_ros.nodes.scheduling import autogroups_enabled

    if not (autogroups_enabled() and os.path.exists("/proc/self/autogroup")):
        pytest.skip("this kernel does not group processes by session (autogroup)")
    out = subprocess.run([sys.executable, "-c", _AUTOGROUP_CODE], capture_output=True,
                         text=True, timeout=60, **popen)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split("|")


@linux_only
def test_a_session_leader_sets_its_autogroups_nice_too():
    """A node the launcher starts in a session of its own is alone in its autogroup, and the
    autogroup's nice is what ranks it against the other nodes' processes."""
    said, before, after = _autogroup_child(start_new_session=True)
    assert said == "nice 5 (its session's autogroup too)"
    assert (before, after) == ("0", "5")


@linux_only
def test_a_process_in_a_shared_session_leaves_the_autogroup_alone():
    """Under ``ros2 launch`` the nodes share the launcher's session (and the shell's):
    changing the autogroup would re-rank all of them."""
    said, before, after = _autogroup_child()
    assert said == "nice 5"
    assert after == before


class _Logger:
    def __init__(self):
        self.warnings = []

    def warning(self, text):
        self.warnings.append(text)


class _Node:
    def __init__(self):
        self.logger = _Logger()

    def get_logger(self):
        return self.logger


def test_a_refused_request_is_one_warning_and_normal_scheduling(monkeypatch):
    import soft_inverse_ros.nodes.scheduling as sched

    def refuse(*_):
        raise PermissionError("not permitted")

    monkeypatch.setattr(sched.os, "setpriority", refuse)
    node = _Node()
    assert apply_scheduling(node, 0, "snapshots may come late", nice=-10) == "normal"
    assert node.logger.warnings == ["nice -10 refused (not permitted); normal scheduling: snapshots may come late"]


@linux_only
def test_thread_fifo_holds_for_the_block_only_and_says_a_refusal():
    """In a thread of its own: SCHED_FIFO inside the block (or the refusal said), normal
    scheduling after it, before the thread ends."""
    import threading

    seen: list = []

    def body():
        with thread_fifo(0) as said:
            seen.append((said, os.sched_getscheduler(0)))
        with thread_fifo(4) as said:
            seen.append((said, os.sched_getscheduler(0), os.sched_getparam(0).sched_priority))
        seen.append(os.sched_getscheduler(0))

    t = threading.Thread(target=body)
    t.start()
    t.join(10.0)
    assert seen[0] == ("inherited", os.SCHED_OTHER)
    said, policy, priority = seen[1]
    if said == "SCHED_FIFO 4":
        assert (policy, priority) == (os.SCHED_FIFO, 4)
    else:  # no privilege here
        assert said.startswith("inherited (SCHED_FIFO 4 refused") and policy == os.SCHED_OTHER
    assert seen[2] == os.SCHED_OTHER
