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


def test_a_snake_bag_counts_its_slots_at_the_gaits_rate(tmp_path):
    """analyze called every snake bag INVALID: 100 Hz gait commands counted in 1 kHz slots
    (90 % "missed"); only demo passed the gait's rate. The gait's diagnostics say it now."""
    from pathlib import Path

    from soft_inverse_ros import topics as T
    from soft_inverse_ros.analysis.run_data import CommandSeries, RunData
    from soft_inverse_ros.analysis.validity import (
        PlantClockSeries,
        ValidityLimits,
        assess_run,
        load_controller_status,
    )
    from soft_inverse_ros.recording.bag_writer import BagWriter
    from soft_inverse_ros.recording.typestore import build_typestore

    store = build_typestore()
    ty = store.types
    with BagWriter(tmp_path / "bag", store) as bag:
        bag.add_topic(f"/{T.DIAGNOSTICS}", "diagnostic_msgs/msg/DiagnosticArray")
        for k in range(3):
            header = ty["std_msgs/msg/Header"](stamp=ty["builtin_interfaces/msg/Time"](sec=k + 1, nanosec=0),
                                               frame_id="")
            values = [ty["diagnostic_msgs/msg/KeyValue"](key="rate_hz", value="100.0")]
            status = ty["diagnostic_msgs/msg/DiagnosticStatus"](level=0, name="/gait_node: gait", message="ok",
                                                                hardware_id="", values=values)
            bag.write_message(f"/{T.DIAGNOSTICS}", (k + 1) * 10**9,
                              ty["diagnostic_msgs/msg/DiagnosticArray"](header=header, status=[status]))
    controller = load_controller_status(tmp_path / "bag")
    assert controller is not None and controller.rate_hz == 100.0
    n = 2000  # 20 s of regular gait commands
    t = np.arange(n) * 0.01
    commands = CommandSeries(topic="/actuator_command", t=t, t_receive=t, target_t=np.full(n, np.nan),
                             seq=np.arange(n), names=("a",), modes=np.zeros(1, np.uint8),
                             values=np.zeros((n, 1)), efforts=np.zeros((n, 1)), strokes=np.zeros((n, 1)),
                             status=np.zeros(n, np.uint8), time_source="header")
    clock = PlantClockSeries(stamp_ns=(np.arange(1, 21) * 1e9).astype(np.int64), real_time_factor=np.ones(20),
                             sim_time=np.arange(1, 21.0), skipped_steps=np.zeros(20), clock="wall")
    run = RunData(Path("x"), {}, origin_ns=0, commands=commands)
    verdict = assess_run(run, clock, ValidityLimits(), controller, tracking=False)
    assert verdict.valid and verdict.controller_missed_slot_fraction == 0.0, verdict.invalid_reasons
    assert not assess_run(run, clock, ValidityLimits(), None, tracking=False).valid  # at 1 kHz: 90 % empty


def _crawl_bag(path, crawl: PlateSeries, *, lost: tuple[int, range] | None = None,
               commands: bool = False):
    """A bag of ``crawl``'s plates on mocap/plate<k>/pose (from t = 1 s); ``lost``: (plate,
    frames) at NaN x (a marker lost); ``commands``: one gait command per frame too."""
    from soft_inverse_ros import topics as T
    from soft_inverse_ros.recording.bag_writer import BagWriter
    from soft_inverse_ros.recording.typestore import build_typestore

    store = build_typestore()
    ty = store.types
    with BagWriter(path, store) as bag:
        if commands:
            bag.add_topic(f"/{T.ACTUATOR_COMMAND}", "soft_inverse_ros_msgs/msg/ActuatorCommand")
        for p in range(crawl.positions.shape[1]):
            bag.add_topic(f"/mocap/plate{p}/pose", "geometry_msgs/msg/PoseStamped")
        for k, t in enumerate(crawl.t):
            ns = int(1e9 + t * 1e9)
            stamp = ty["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)
            header = ty["std_msgs/msg/Header"](stamp=stamp, frame_id="base_link")
            if commands:
                bag.write_message(f"/{T.ACTUATOR_COMMAND}", ns, ty["soft_inverse_ros_msgs/msg/ActuatorCommand"](
                    header=header, target_stamp=ty["builtin_interfaces/msg/Time"](sec=0, nanosec=0), seq=k,
                    snapshot_seq=0, names=["c0"], modes=np.array([2], dtype=np.uint8), values=np.array([1e4]),
                    efforts=np.array([1e4]), strokes=np.array([0.0]), status=0, status_text=""))
            for p in range(crawl.positions.shape[1]):
                x, y, z = crawl.positions[k, p]
                if lost is not None and p == lost[0] and k in lost[1]:
                    x = float("nan")
                half = 0.5 * crawl.yaw[k, p]
                pose = ty["geometry_msgs/msg/Pose"](
                    position=ty["geometry_msgs/msg/Point"](x=float(x), y=float(y), z=float(z)),
                    orientation=ty["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=float(np.sin(half)),
                                                                   w=float(np.cos(half))))
                bag.write_message(f"/mocap/plate{p}/pose", ns, ty["geometry_msgs/msg/PoseStamped"](
                    header=header, pose=pose))
    return path


def test_frames_with_a_lost_marker_are_dropped_and_counted(tmp_path):
    """A plate at NaN for 10 frames made the forward speed NaN (a bare NaN token in the JSON
    line) under a VALID verdict."""
    from soft_inverse_ros.analysis.snake import load_snake

    crawl = _crawl()
    data = load_snake(_crawl_bag(tmp_path / "bag", crawl, lost=(2, range(100, 110))))
    assert data["nonfinite_frames"] == {"mocap": 10} and len(data["mocap"].t) == len(crawl.t) - 10
    m = snake_metrics(data)
    assert m["forward_speed_mm_s"] == pytest.approx(2.0, rel=0.02) and m["nonfinite_frames"] == {"mocap": 10}


def test_a_snake_reports_verdict_names_the_gait(tmp_path):
    """The snake's verdict said "the controller commanded": the snake graph has none, its
    gait_node commands the valves."""
    from soft_inverse_ros.analysis.report import write_report
    from soft_inverse_ros.analysis.validity import RunValidity, headline

    bag = _crawl_bag(tmp_path / "bag", _crawl(), commands=True)
    report = write_report(bag, tmp_path / "r", plots_enabled=False)
    assert report.metrics["validity"]["commander"] == "gait"
    valid = {**report.metrics["validity"], "valid": True, "invalid_reasons": []}
    assert "the gait commanded throughout" in headline(RunValidity(**valid))[0]
