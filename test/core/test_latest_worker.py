"""nodes/latest_worker.py: the newest item only, errors reported, its own scheduling."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from soft_inverse_ros.nodes.latest_worker import LatestWorker


def test_items_put_while_one_is_handled_leave_only_the_newest():
    release = threading.Event()
    started = threading.Event()
    seen: list[int] = []

    def handle(item: int) -> None:
        seen.append(item)
        started.set()
        release.wait(5.0)

    worker = LatestWorker(handle, "test-worker")
    try:
        worker.put(0)
        assert started.wait(5.0)
        for item in range(1, 6):
            worker.put(item)
        release.set()
        assert worker.wait_idle(5.0)
        assert seen == [0, 5]
        assert worker.superseded == 4 and worker.handled == 2
    finally:
        release.set()
        worker.close()


def test_an_error_is_reported_and_the_worker_goes_on():
    errors: list[BaseException] = []
    seen: list[int] = []

    def handle(item: int) -> None:
        if item < 0:
            raise ValueError("bad item")
        seen.append(item)

    worker = LatestWorker(handle, "test-worker", on_error=errors.append)
    try:
        worker.put(-1)
        assert worker.wait_idle(5.0)
        worker.put(3)
        assert worker.wait_idle(5.0)
    finally:
        worker.close()
    assert [str(e) for e in errors] == ["bad item"] and seen == [3]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread SCHED_FIFO is Linux's")
def test_the_worker_runs_at_the_priority_asked_or_says_it_was_refused():
    policies: list[tuple[int, int]] = []
    worker = LatestWorker(lambda _: policies.append(
        (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)), "test-worker",
        fifo_priority=3)
    try:
        worker.put(None)
        assert worker.wait_idle(5.0)
    finally:
        worker.close()
    if worker.scheduling == "SCHED_FIFO 3":
        assert policies == [(os.SCHED_FIFO, 3)]
    else:  # no privilege here: the inherited (normal) scheduling, and the refusal said
        assert worker.scheduling.startswith("inherited (SCHED_FIFO 3 refused")
        assert policies[0][0] == os.sched_getscheduler(0)


def test_a_handler_that_returns_steps_is_paused_before_each_one():
    """A generator handler runs one step per pause (the controller's pause waits for the end
    of a tick); close() stops between two steps."""
    log: list[str] = []

    def steps(item: int):
        for k in range(3):
            log.append(f"{item}.{k}")
            yield
        log.append(f"{item}.done")

    worker = LatestWorker(steps, "test-worker", pause=lambda: log.append("pause"))
    try:
        worker.put(7)
        assert worker.wait_idle(5.0)
    finally:
        worker.close()
    assert log == ["pause", "7.0", "pause", "7.1", "pause", "7.2", "pause", "7.done"]

    gate = threading.Event()
    log.clear()
    worker = LatestWorker(steps, "test-worker", pause=lambda: gate.wait(5.0) and gate.clear())
    try:
        worker.put(1)
        gate.set()
        for _ in range(100):
            if log:
                break
            threading.Event().wait(0.01)
        worker.close(timeout=0.0)  # between two steps: the rest is not run
        gate.set()
        worker._thread.join(5.0)
    finally:
        worker.close()
    assert log == ["1.0"]
