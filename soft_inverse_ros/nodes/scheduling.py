"""Scheduling of a node process: real-time (Linux SCHED_FIFO) or a raised normal priority (nice).

SCHED_FIFO is for the loops that must not wait (the 1 kHz controller, the simulated hardware
and physics). Linux caps all real-time threads together at ``sched_rt_runtime_us`` (95 % of
each CPU by default): when their demand reaches it, every one of them, the controller
included, is stopped for the rest of the second's period (gaps of 10-50 ms measured here).
A loop that only needs a fair share ahead of everything else can run at normal scheduling
with a negative ``nice`` instead: it still goes first among the normal processes (nice -10
weighs ~9x nice 0) and its CPU does not count against the cap. With Linux's session
autogroups the nice of a node in a session of its own is set on its autogroup too
(:func:`set_nice`). ``config/sim.yaml`` does that for the capture system (-15) and the FEM
loop (-20): with the FEM loop at SCHED_FIFO the main job's real-time demand reached the cap
on two cores (BENCHMARKS.md, sixteenth session). Before the autogroup was set, a FEM loop at
nice starved whenever the graph needed more than the two cores (seventh session).
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable, Iterator


def set_fifo_priority(priority: int) -> str:
    """SCHED_FIFO ``priority`` (1-99) for every thread of this process (the executor and the
    DDS receive threads included). Returns the scheduling now in force, e.g.
    ``"SCHED_FIFO 20"``; ``priority`` <= 0 leaves normal scheduling.

    Raises:
        PermissionError / OSError: refused (needs root, CAP_SYS_NICE or an rtprio limit).
    """
    if priority <= 0:
        return "normal"
    for tid in sorted(int(t) for t in os.listdir("/proc/self/task")):
        try:
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
        except ProcessLookupError:  # the thread ended meanwhile
            pass
    return f"SCHED_FIFO {priority}"


@contextlib.contextmanager
def thread_fifo(priority: int) -> Iterator[str]:
    """SCHED_FIFO ``priority`` for the calling thread only (Linux schedules threads one by
    one) while the block runs, then normal scheduling again. Yields the scheduling in
    force: ``"SCHED_FIFO <priority>"``, ``"inherited"`` (``priority`` <= 0: the thread
    keeps what it inherited) or ``"inherited (SCHED_FIFO <priority> refused: <why>)"``.

    Normal scheduling comes back before the thread ends because ``join`` returns when the
    Python thread is done, a moment before the kernel thread is gone: a process must not
    be seen holding a real-time thread after it stopped one (a CI run caught an ending
    thread still at SCHED_FIFO in /proc/self/task).
    """
    if priority <= 0:
        yield "inherited"
        return
    try:  # pid 0: the calling thread
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as exc:  # not permitted, or not Linux
        yield f"inherited (SCHED_FIFO {priority} refused: {exc})"
        return
    try:
        yield f"SCHED_FIFO {priority}"
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def scheduling_restorer() -> Callable[[], None]:
    """A function that puts every thread of this process back to the scheduling the
    calling thread has now (policy and priority; threads created since included).

    For a tool that raises its own priority for a while inside a longer-lived process
    (``bench pipeline``'s probe, run in-process by the tests: without it, the test process
    stayed at SCHED_FIFO for the rest of the session and starved the graphs of the later
    tests)."""
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)

    def restore() -> None:
        for tid in sorted(int(t) for t in os.listdir("/proc/self/task")):
            try:
                os.sched_setscheduler(tid, policy, param)
            except ProcessLookupError:  # the thread ended meanwhile
                pass

    return restore


#: Linux's switch for session autogroups (``CONFIG_SCHED_AUTOGROUP``).
AUTOGROUP_SWITCH = "/proc/sys/kernel/sched_autogroup_enabled"


def autogroups_enabled(switch: str = AUTOGROUP_SWITCH) -> bool:
    """True when Linux groups normal processes by session (autogroup) for CPU sharing."""
    try:
        with open(switch) as handle:
            return handle.read().strip() == "1"
    except OSError:
        return False


def set_nice(nice: int, *, autogroup: str = "/proc/self/autogroup",
             switch: str = AUTOGROUP_SWITCH) -> str:
    """``nice`` (-20..19) for every thread of this process (Linux sets it per thread), and
    for its autogroup when it has one of its own. Returns the scheduling now in force, e.g.
    ``"nice -10"``; 0 leaves it unchanged.

    With autogroups (the default of most desktop and server kernels) a thread's nice only
    ranks it among the threads of its own session: the CPU is first shared between
    sessions by their autogroup's nice. ``soft-inverse-ros launch``/``demo`` start each
    node in a session of its own (``process_launcher.py``), so a thread nice alone gave
    nothing (the simulated mocap at nice -15 and a FEM loop at nice -20 got the same share
    as the recorder at 0, measured in BENCHMARKS.md, sixteenth session). A session leader
    therefore sets its autogroup's nice too. A process in a shared session (``ros2 launch``
    starts its nodes in the launcher's) leaves the autogroup alone: that would change the
    share of every process of the session, the user's shell included; its nice then ranks it
    among the session's processes, as Linux does.

    Raises:
        PermissionError / OSError: refused (a negative nice needs root, CAP_SYS_NICE or a
            nice limit).
    """
    if nice == 0:
        return "normal"
    for tid in sorted(int(t) for t in os.listdir("/proc/self/task")):
        os.setpriority(os.PRIO_PROCESS, tid, nice)
    if os.getsid(0) == os.getpid() and autogroups_enabled(switch) and os.path.exists(autogroup):
        with open(autogroup, "w") as handle:
            handle.write(str(nice))
        return f"nice {nice} (its session's autogroup too)"
    return f"nice {nice}"


def apply_scheduling(node, priority: int, consequence: str, nice: int = 0) -> str:
    """:func:`set_fifo_priority` for a node, or :func:`set_nice` when ``priority`` is 0 and
    ``nice`` is not: a refusal is one warning on the node's logger ending with
    ``consequence`` (what normal scheduling risks). Returns the scheduling in force
    ("normal" when refused or neither is asked)."""
    try:
        if priority > 0:
            return set_fifo_priority(priority)
        return set_nice(nice)
    except (PermissionError, OSError) as exc:
        asked = f"realtime_priority {priority}" if priority > 0 else f"nice {nice}"
        node.get_logger().warning(f"{asked} refused ({exc}); normal scheduling: {consequence}")
        return "normal"


def nice_field_metadata(role: str) -> dict:
    """The ``nice`` parameter's metadata for a node config (``role``: why it goes first)."""
    return {"description": f"nice value of this process's threads with realtime_priority 0 (-20..19; "
                           f"0: unchanged): a negative one puts {role} ahead of the normal processes "
                           "without counting against the real-time cap (scheduling.py; needs root "
                           "or a nice limit, else a warning)", "range": (-20, 19)}


def check_scheduling(realtime_priority: int, nice: int) -> None:
    """Refuse a config asking both: SCHED_FIFO ignores nice.

    Raises:
        ValueError: both set.
    """
    if realtime_priority > 0 and nice != 0:
        raise ValueError(f"realtime_priority {realtime_priority} and nice {nice}: choose one "
                         "(a SCHED_FIFO thread has no nice)")
