"""The emulators' serving thread: real-time while it serves, normal when it ends."""

from __future__ import annotations

import os

import pytest

from soft_inverse_ros.testing.pty_emulator import PtyEmulator

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setscheduler"), reason="no sched_setscheduler on this platform"
)


class _Recording(PtyEmulator):
    """Serves nothing: records the calling thread's policy while it 'serves'."""

    def _run(self) -> None:
        self.policy_while_serving = os.sched_getscheduler(0)


def _may_set_real_time() -> bool:
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except OSError:
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


def test_serving_thread_returns_to_normal_scheduling_before_it_ends():
    if not _may_set_real_time():
        pytest.skip("this process may not use SCHED_FIFO (needs root or CAP_SYS_NICE)")
    emulator = _Recording()
    try:
        emulator._serve()  # in this thread, so its policy after the call can be read
    finally:
        emulator.stop()
    assert emulator.policy_while_serving == os.SCHED_FIFO
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_serving_thread_at_normal_priority_when_real_time_is_off():
    emulator = _Recording()
    emulator.realtime_priority = 0
    with emulator:
        pass
    assert emulator.policy_while_serving == os.SCHED_OTHER
