"""bench pipeline's figures from what the probe received (no ROS needed)."""

import numpy as np
import pytest

from soft_inverse_ros.bench.pipeline import command_figures

T = 1e-3


def test_rates_slots_losses_and_latency_split():
    n = 1000
    seq = np.arange(n)
    stamps = np.arange(n) * T
    stamps[500:] += 3 * T  # the controller skipped 3 ticks (no sequence number used)
    receive = stamps + 0.4e-3  # delivered 0.4 ms after the tick started
    # a new target 0.3 ms before every 4th tick
    target_stamps = stamps[np.arange(n) // 4 * 4] - 0.3e-3
    keep = np.ones(n, bool)
    keep[[100, 101, 700]] = False  # lost by the probe, sent on time
    f = command_figures(receive[keep], seq[keep], stamps[keep], target_stamps[keep], T)
    assert f["missed_slots"] == 3  # the skipped ticks, not the probe's losses
    assert f["missed_slot_fraction"] == pytest.approx(3 / 1003)
    assert f["probe_loss_fraction"] == pytest.approx(3 / 999)
    assert f["command_rate_hz"] == pytest.approx(999 / (1002 * T))
    assert f["answer_delay_p50_ms"] == pytest.approx(0.3, abs=1e-9)
    assert f["tick_to_delivery_p50_ms"] == pytest.approx(0.4, abs=1e-9)
    assert f["end_to_end_latency_p50_ms"] == pytest.approx(0.7, abs=1e-9)


def test_the_zero_values_the_help_offers_are_accepted():
    """--fem-rate 0 (as fast as possible) and priority 0 (normal scheduling) were refused by
    their option types although --help offered them."""
    from soft_inverse_ros.cli import build_parser

    args = build_parser().parse_args(["bench", "pipeline", "--fem-rate", "0", "--realtime-priority", "0",
                                      "--probe-priority", "0"])
    assert (args.fem_rate, args.realtime_priority, args.probe_priority) == (0.0, 0, 0)
