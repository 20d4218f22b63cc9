"""The controller's own missed-slot counter (diagnostics ``missed``) counts slots without a
command, ticks and target answers alike: the definition the bag's analysis uses
(core/control/deadlines.py). It counted ticks only, so a run whose answers filled the
slots of late ticks read 15 % missed against 2.8 % from the bag of the same run. Its grid
is phase-aligned as the bag's (a handful of commands: counted at flush)."""

from __future__ import annotations

import pytest

try:
    import rclpy  # noqa: F401
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy not importable: {err}", allow_module_level=True)

pytestmark = pytest.mark.integration


def test_answers_fill_the_slots_they_start_in(fake_clock_controller):
    clock, make = fake_clock_controller
    node = make(answer_targets=True)

    def at(t_ms: float, call) -> None:
        clock[0] = 100.0 + 1e-3 * t_ms
        call()

    at(0.0, node._tick)
    at(1.1, node._answer)  # the tick of slot 1 is late: the answer fills the slot
    at(2.4, node._tick)
    assert node._slots.flush() == 0
    at(6.0, node._tick)  # slots 3, 4 and 5 without a command
    assert node._slots.flush() == 3
    at(7.9, node._answer)  # slot 8 (rounded): slot 7 empty
    at(9.0, node._tick)
    assert node._slots.flush() == 4
    assert node._stats["ticks"] == 4 and node._stats["answers"] == 2


def test_without_the_snapshot_thread_the_ticks_run_the_snapshot_steps(fake_clock_controller):
    """``snapshot_thread: false``: a snapshot is handled one step after each tick, installed
    at its last step only; a newer one arriving meanwhile replaces it (counted)."""
    from hostile_probe import snapshot_message
    from soft_inverse_ros.nodes.conversions import to_time

    clock, make = fake_clock_controller
    node = make()

    def tick() -> None:
        clock[0] += 1e-3
        node._tick()

    msgs = []
    for seq in (1, 2):
        msg = snapshot_message()
        msg.header.stamp, msg.seq = to_time(clock[0]), seq
        msgs.append(msg)
    node._on_snapshot(msgs[0])
    tick()
    node._on_snapshot(msgs[1])  # the first one is one step in: replaced
    ticks = 0
    while node._snapshot_seq != 2:
        assert node._stats["snapshots"] == 0  # nothing installed before the last step
        tick()
        ticks += 1
        assert ticks < 20
    assert ticks >= 4 and node._snapshot_pending is None
    assert node._stats["snapshots"] == 1 and node._snapshots_superseded == 1
    assert node._stats["rejected_snapshots"] == 0
