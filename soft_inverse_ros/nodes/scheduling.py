"""Real-time scheduling of a node process (Linux SCHED_FIFO)."""

from __future__ import annotations

import os


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
        os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
    return f"SCHED_FIFO {priority}"


def apply_fifo_priority(node, priority: int, consequence: str) -> str:
    """:func:`set_fifo_priority` for a node: a refusal is one warning on the node's logger
    ending with ``consequence`` (what normal scheduling risks). Returns the scheduling in
    force ("normal" when refused or ``priority`` <= 0)."""
    if priority <= 0:
        return "normal"
    try:
        return set_fifo_priority(priority)
    except (PermissionError, OSError) as exc:
        node.get_logger().warning(f"realtime_priority {priority} refused ({exc}); normal scheduling: {consequence}")
        return "normal"
