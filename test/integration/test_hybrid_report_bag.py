"""The hybrid arm's report from a bag (analysis/hybrid_report.py): held targets that the
simulated robot's recorded samples do not cover make the run INVALID, with the targets
named (a wall-clock run under load started its robot after two of the four holds, and the
report listed the other two without a word)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sensor_msgs", reason="the report reads PointCloud2 through sensor_msgs")

from soft_inverse_ros import topics as T  # noqa: E402
from soft_inverse_ros.analysis.hybrid_report import hybrid_metrics  # noqa: E402
from soft_inverse_ros.recording.bag_writer import BagWriter  # noqa: E402
from soft_inverse_ros.recording.typestore import build_typestore  # noqa: E402

pytestmark = pytest.mark.integration
S = 1_000_000_000
TARGETS = ((0.2622, 0.01, 0.037), (0.2422, 0.01, 0.037), (0.2422, -0.01, 0.037), (0.2622, -0.01, 0.037))


def _bag(path, robot_from_s: float):
    """Four targets held 10 s each from t = 1 s; the probe (tip, the point behind it) on the
    target's axis from ``robot_from_s`` on; the plant's status every second."""
    store = build_typestore()
    ty = store.types

    def header(ns: int):
        return ty["std_msgs/msg/Header"](stamp=ty["builtin_interfaces/msg/Time"](sec=ns // S, nanosec=ns % S),
                                         frame_id="base_link")

    fields = [ty["sensor_msgs/msg/PointField"](name=n, offset=4 * i, datatype=7, count=1)
              for i, n in enumerate("xyz")]
    with BagWriter(path, store) as bag:
        bag.add_topic(f"/{T.TARGET}", "geometry_msgs/msg/PointStamped")
        bag.add_topic(f"/{T.PLANT_MARKERS_TRUE}", "sensor_msgs/msg/PointCloud2")
        for k in range(int(41 / 0.02)):
            ns = S + k * 20_000_000
            target = TARGETS[min(k * 20_000_000 // (10 * S), 3)]
            bag.write_message(f"/{T.TARGET}", ns, ty["geometry_msgs/msg/PointStamped"](
                header=header(ns), point=ty["geometry_msgs/msg/Point"](x=target[0], y=target[1], z=target[2])))
            if ns >= robot_from_s * S:
                points = np.array([target, np.add(target, (0.0, 0.0, 0.05))], dtype=np.float32)
                bag.write_message(f"/{T.PLANT_MARKERS_TRUE}", ns, ty["sensor_msgs/msg/PointCloud2"](
                    header=header(ns), height=1, width=2, fields=fields, is_bigendian=False, point_step=12,
                    row_step=24, data=np.frombuffer(points.tobytes(), dtype=np.uint8), is_dense=True))
    return path


def test_held_targets_the_robot_missed_make_the_run_invalid(tmp_path):
    full = hybrid_metrics(_bag(tmp_path / "full", robot_from_s=0.0))
    assert len(full["targets"]) == 4 and full["targets_missed_mm"] == []
    assert not any("held targets" in r for r in full["validity"]["invalid_reasons"])
    late = hybrid_metrics(_bag(tmp_path / "late", robot_from_s=22.0))
    assert len(late["targets"]) == 2 and late["targets_missed_mm"] == [[262.2, 10.0, 37.0], [242.2, 10.0, 37.0]]
    assert not late["validity"]["valid"]
    assert any("2 of 4 held targets" in r for r in late["validity"]["invalid_reasons"])
