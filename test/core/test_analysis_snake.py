"""The snake's locomotion figures from plate series (analysis/snake.py)."""

import numpy as np
import pytest

from soft_inverse_ros.analysis.snake import PlateSeries, snake_metrics


def _crawl(speed=0.002, amp=0.2, n=401, duration=8.0):
    """5 plates 80 mm apart along x crawling along +x (head, the last plate, first) at
    ``speed`` [m/s], links bending ±amp rad at 1 Hz."""
    t = np.linspace(0.0, duration, n)
    x0 = np.arange(5) * 0.08
    pos = np.zeros((n, 5, 3))
    pos[:, :, 0] = x0 + speed * t[:, None] + 0.001 * np.sin(2 * np.pi * t)[:, None]
    yaw = np.cumsum(np.concatenate([np.zeros((n, 1)),
                                    amp * np.sin(2 * np.pi * t[:, None] + np.arange(4) * 1.57)], 1), 1)
    return PlateSeries("mocap", t, pos, yaw)


def test_forward_speed_curvature_and_com_of_a_synthetic_crawl():
    s = _crawl()
    m = snake_metrics({"mocap": s, "plant": None, "com_true": None, "t0_ns": 0})
    assert m["forward_direction_xy"] == pytest.approx([1.0, 0.0])
    assert m["forward_speed_mm_s"] == pytest.approx(2.0, rel=0.02)  # 2 mm/s toward +x
    backward = snake_metrics({"mocap": _crawl(speed=-0.002), "plant": None, "com_true": None, "t0_ns": 0})
    assert backward["forward_speed_mm_s"] == pytest.approx(-2.0, rel=0.02)  # tail first
    assert m["mocap"]["curvature_amplitude_deg"] == pytest.approx([np.degrees(0.2)] * 4, rel=0.02)
    assert np.allclose(s.com()[0, 0], 0.16 + 0.0)  # polyline centroid of equally spaced plates
    still = snake_metrics({"mocap": _crawl(speed=0.0), "plant": None, "com_true": None, "t0_ns": 0})
    assert abs(still["forward_speed_mm_s"]) < 0.05
