"""Analysis of synthetic bags with known trajectories: exact metric values, plots, report, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from soft_inverse_ros import topics as T
from soft_inverse_ros.analysis.metrics import (
    analyze_bag,
    rate_stats,
    target_at,
    total_variation,
    tracking_error,
)
from soft_inverse_ros.analysis.report import write_report
from soft_inverse_ros.analysis.run_data import find_topic, load_run
from soft_inverse_ros.analysis.snapshots import scene_from_markers
from soft_inverse_ros.cli import main as cli_main
from soft_inverse_ros.recording.bag_writer import BagWriter
from soft_inverse_ros.recording.typestore import build_typestore

S = 10**9  # ns per s
T0 = 1_700_000_000 * S  # a wall-clock-like origin [ns]
CMD_PERIOD = 10_000_000  # 100 Hz
N_CMD = 101  # commands over 1 s, one of them (k = 50) missing
LATENCY = 3_000_000  # target -> command [ns]


@pytest.fixture(scope="module")
def store():
    return build_typestore()


class Msgs:
    """rosbags message constructors."""

    def __init__(self, store):
        self.s = store
        self.ty = store.types

    def time(self, ns: int):
        return self.ty["builtin_interfaces/msg/Time"](sec=ns // S, nanosec=ns % S)

    def header(self, ns: int):
        return self.ty["std_msgs/msg/Header"](stamp=self.time(ns), frame_id=T.BASE_FRAME)

    def point(self, ns: int, xyz):
        P = self.ty["geometry_msgs/msg/Point"]
        return self.ty["geometry_msgs/msg/PointStamped"](
            header=self.header(ns), point=P(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2])))


def target_xyz(t_s: np.ndarray) -> np.ndarray:
    """Moves 10 mm along x during the first second, then holds (m)."""
    t_s = np.asarray(t_s, dtype=float)
    x = 0.01 * np.clip(t_s, 0.0, 1.0)
    return np.stack([x, np.full_like(x, 0.02), np.full_like(x, -0.05)], axis=-1)


def write_run(path: Path, store, *, ns: str = "", zero_stamps: bool = False, storage="mcap",
              markers: bool = True, stamp=None, seq_of=None, controller_rate: str | None = None,
              contacts: bool = False) -> Path:
    """A 2 s run; ``stamp``: header stamp [ns] of a message of time t [ns] (default t, or 0
    with ``zero_stamps``); ``seq_of``: sequence number of command k (default k)."""
    m = Msgs(store)
    A = store.types["soft_inverse_ros_msgs/msg/ActuatorCommand"]
    C = store.types["soft_inverse_ros_msgs/msg/ComplianceSnapshot"]
    St = store.types["soft_inverse_ros_msgs/msg/InverseSolverStatus"]
    pre = f"/{ns}" if ns else ""
    with BagWriter(path, store, storage=storage) as bag:
        bag.add_topic(f"{pre}/{T.TARGET}", "geometry_msgs/msg/PointStamped")
        bag.add_topic(f"{pre}/{T.PLANT_EFFECTOR_TRUE}", "geometry_msgs/msg/PointStamped")
        bag.add_topic(f"{pre}/{T.MOCAP_EFFECTOR}", "geometry_msgs/msg/PointStamped")
        bag.add_topic(f"{pre}/{T.ACTUATOR_COMMAND}", "soft_inverse_ros_msgs/msg/ActuatorCommand")
        bag.add_topic(f"{pre}/{T.COMPLIANCE}", "soft_inverse_ros_msgs/msg/ComplianceSnapshot")
        bag.add_topic(f"{pre}/{T.INVERSE_STATUS}", "soft_inverse_ros_msgs/msg/InverseSolverStatus")
        if stamp is None:
            stamp = (lambda t: 0) if zero_stamps else (lambda t: t)
        if seq_of is None:
            seq_of = (lambda k: k)
        recv = 1_000_000  # receive 1 ms after the stamp
        # target at 100 Hz over [0, 2] s
        for k in range(201):
            t = T0 + k * 10_000_000
            bag.write_message(f"{pre}/{T.TARGET}", t + recv, m.point(stamp(t), target_xyz((t - T0) / S)))
        # plant effector at 200 Hz, 1 mm off in x; mocap at 50 Hz, 2 mm off in y
        for k in range(401):
            t = T0 + k * 5_000_000
            xyz = target_xyz((t - T0) / S) + [0.001, 0.0, 0.0]
            bag.write_message(f"{pre}/{T.PLANT_EFFECTOR_TRUE}", t + recv, m.point(stamp(t), xyz))
        for k in range(101):
            t = T0 + k * 20_000_000
            xyz = target_xyz((t - T0) / S) + [0.0, 0.002, 0.0]
            bag.write_message(f"{pre}/{T.MOCAP_EFFECTOR}", t + recv, m.point(stamp(t), xyz))
        # commands at 100 Hz, tick 50 missing; a0 ramps 0 -> 1 N then holds, a1 alternates
        for k in range(N_CMD):
            if k == 50:
                continue
            t = T0 + k * CMD_PERIOD
            a0 = min(k, 20) / 20.0
            a1 = float(k % 2)
            bag.write_message(f"{pre}/{T.ACTUATOR_COMMAND}", t + recv, A(
                header=m.header(stamp(t)), target_stamp=m.time(t - LATENCY), seq=seq_of(k),
                snapshot_seq=k // 5, names=["a0", "a1"], modes=np.array([1, 1], dtype=np.uint8),
                values=np.array([a0, a1]), efforts=np.array([a0, a1]),
                strokes=np.array([a0 * 1e-3, 0.0]),
                status=A.STATUS_HELD if k in (10, 11) else A.STATUS_OK, status_text=""))
        # snapshots: periods alternate 45 / 55 ms (20 Hz nominal)
        t = T0
        for k in range(21):
            bag.write_message(f"{pre}/{T.COMPLIANCE}", t + recv, C(
                header=m.header(stamp(t)), seq=k, state_seq=k, actuator_names=["a0", "a1"],
                actuator_kinds=np.array([1, 1], dtype=np.uint8), effector_names=["x", "y", "z"],
                w_ea=np.zeros(6), w_aa=np.zeros(4), w_ee=np.zeros(9), effector_position=np.zeros(3),
                actuator_stroke=np.zeros(2), lambda0=np.zeros(2),
                fem_step_time=0.010, compliance_time=0.002, contact_ids=np.zeros(0, dtype=np.int64),
                contact_points=np.zeros(0), contact_normals=np.zeros(0), contact_gap=np.zeros(0),
                contact_force=np.zeros(0), w_cc=np.zeros(0), w_ca=np.zeros(0), w_ec=np.zeros(0),
                contact_source=np.zeros(0, dtype=np.int32), contact_force_weight=np.zeros(0),
                contact_reduced=False))
            t += 45_000_000 if k % 2 == 0 else 55_000_000
        for k in range(10):
            t = T0 + k * 100_000_000
            bag.write_message(f"{pre}/{T.INVERSE_STATUS}", t + recv, St(
                header=m.header(stamp(t)), command_seq=k, snapshot_seq=k, snapshot_age=0.02,
                solver_status="solved", command_status=0 if k else 2, solve_time=1e-4,
                iterations=3, objective=0.0, effector_error=1e-3, measured_effector_error=np.nan,
                effort_lower_active=np.zeros(2, dtype=bool), effort_upper_active=np.zeros(2, dtype=bool),
                stroke_lower_active=np.zeros(2, dtype=bool), stroke_upper_active=np.zeros(2, dtype=bool),
                qp_variation_percent=0.0, qp_variation_rate=0.0, closed_loop_active=False,
                contact_ids=np.zeros(0, dtype=np.int64), contact_active=np.zeros(0, dtype=bool),
                contact_force=np.zeros(0), contact_gap=np.zeros(0), contact_force_sum=0.0,
                contact_states_solved=0))
        if controller_rate is not None or contacts:  # /diagnostics: the controller's rate_hz,
            ty = store.types                             # the plant's contact figures
            Kv, St = ty["diagnostic_msgs/msg/KeyValue"], ty["diagnostic_msgs/msg/DiagnosticStatus"]
            statuses = []
            if controller_rate is not None:
                statuses.append(St(level=0, name="inverse_controller_node: inverse QP", message="ok",
                                   hardware_id="", values=[Kv(key="rate_hz", value=controller_rate)]))
            if contacts:
                statuses.append(St(level=0, name="plant_sim_node: plant", message="ok", hardware_id="",
                                   values=[Kv(key="contacts", value="3"), Kv(key="contact_force_total_N", value="0.5"),
                                           Kv(key="contact_free_penetration_mm", value="0.02")]))
            bag.add_topic(T.DIAGNOSTICS, "diagnostic_msgs/msg/DiagnosticArray")
            bag.write_message(T.DIAGNOSTICS, T0 + S, ty["diagnostic_msgs/msg/DiagnosticArray"](
                header=m.header(T0 + S), status=statuses))
        if markers:
            bag.add_topic(f"{pre}/{T.ROBOT_MARKERS}", "visualization_msgs/msg/MarkerArray")
            for k in range(4):
                bag.write_message(f"{pre}/{T.ROBOT_MARKERS}", T0 + k * 500_000_000,
                                  marker_array(store, shift=0.001 * k, with_surface=(k != 2)))
    return path


def marker_array(store, shift: float = 0.0, with_surface: bool = True):
    """A tetrahedron surface (TRIANGLE_LIST), two spheres and one cable (LINE_STRIP)."""
    ty = store.types
    Marker, P = ty["visualization_msgs/msg/Marker"], ty["geometry_msgs/msg/Point"]
    Color = ty["std_msgs/msg/ColorRGBA"]
    m = Msgs(store)

    def marker(ns, mid, kind, points=(), colors=(), pos=(0.0, 0.0, 0.0), scale=1.0, text=""):
        return Marker(
            header=m.header(T0), ns=ns, id=mid, type=kind, action=0,
            pose=ty["geometry_msgs/msg/Pose"](
                position=P(x=pos[0], y=pos[1], z=pos[2]),
                orientation=ty["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)),
            scale=ty["geometry_msgs/msg/Vector3"](x=scale, y=scale, z=scale),
            color=Color(r=0.2, g=0.4, b=0.6, a=1.0),
            lifetime=ty["builtin_interfaces/msg/Duration"](sec=0, nanosec=0), frame_locked=False,
            points=[P(x=float(a), y=float(b), z=float(c)) for a, b, c in points],
            colors=[Color(r=r, g=g, b=b, a=a) for r, g, b, a in colors], texture_resource="",
            texture=ty["sensor_msgs/msg/CompressedImage"](header=m.header(0), format="", data=np.zeros(0, dtype=np.uint8)),
            uv_coordinates=[], text=text,
            mesh_resource="", mesh_file=ty["visualization_msgs/msg/MeshFile"](filename="", data=np.zeros(0, dtype=np.uint8)),
            mesh_use_embedded_materials=False)

    v = np.array([[0, 0, 0], [0.02, 0, 0], [0, 0.02, 0], [0, 0, 0.02]]) + [shift, 0, 0]
    faces = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    tri = v[faces].reshape(-1, 3)
    colors = np.tile([0.9, 0.5, 0.1, 1.0], (12, 1))
    markers = []
    if with_surface:
        markers.append(marker("surface", 0, 11, tri, colors))
    markers += [
        marker("effector", 0, 2, pos=(0.02 + shift, 0.0, 0.0), scale=0.002),
        marker("target", 0, 2, pos=(0.021, 0.0, 0.0), scale=0.002),
        marker("cables", 0, 4, [[0, 0, 0], [0.01, 0.0, 0.01]], scale=0.0005, text="cable0"),
    ]
    return ty["visualization_msgs/msg/MarkerArray"](markers=markers)


@pytest.fixture(scope="module")
def run_bag(tmp_path_factory, store) -> Path:
    return write_run(tmp_path_factory.mktemp("run") / "bag", store)


def test_constant_offsets_give_exact_tracking_errors(run_bag):
    metrics = analyze_bag(run_bag)
    plant, mocap = metrics["tracking"]["plant"], metrics["tracking"]["mocap"]
    assert plant["n"] == 401 and mocap["n"] == 101
    for key in ("mean_mm", "rms_mm", "max_mm", "p95_mm", "final_mm"):
        assert plant[key] == pytest.approx(1.0, abs=1e-9)
        assert mocap[key] == pytest.approx(2.0, abs=1e-9)
    assert plant["bias_mm"] == pytest.approx([1.0, 0.0, 0.0], abs=1e-9)
    # the target moves during the first second: samples in [0, 1) s are "moving"
    assert plant["phases"]["moving"]["n"] == 200
    assert plant["phases"]["holding"]["n"] == 201
    assert plant["phases"]["moving"]["mean_mm"] == pytest.approx(1.0, abs=1e-9)


def test_loop_rates_jitter_and_missed_deadlines(run_bag):
    metrics = analyze_bag(run_bag, nominal_command_hz=100.0)
    cmd = metrics["rates"]["actuator_command"]
    assert cmd["n"] == 100
    assert cmd["duration_s"] == pytest.approx(1.0)
    # command 50 is absent from the bag but its sequence number was used: it was sent and
    # lost by the recorder, so its slot is not a missed deadline, the rate is the sender's
    # (100 commands over 1 s) and the 20 ms around the lost one is not a sender's period
    assert cmd["rate_hz"] == pytest.approx(100.0)
    assert cmd["received_fraction"] == pytest.approx(100 / 101)
    assert cmd["nominal_hz"] == pytest.approx(100.0) and cmd["nominal_source"] == "given"
    assert cmd["period_max_ms"] == pytest.approx(10.0)
    assert cmd["missed_slots"] == 0 and cmd["missed_slot_fraction"] == 0.0
    stamps = np.delete(np.arange(101) * 0.01, 50)
    without_seq = rate_stats(stamps, 100.0)
    assert without_seq["missed_slots"] == 1  # without seq: one empty slot
    assert without_seq["rate_hz"] == pytest.approx(99.0) and without_seq["period_max_ms"] == pytest.approx(20.0)
    snap = metrics["rates"]["compliance"]
    assert snap["n"] == 21 and snap["nominal_source"] == "median period"
    assert snap["nominal_hz"] == pytest.approx(20.0)
    assert snap["jitter_std_ms"] == pytest.approx(5.0)
    assert snap["jitter_p99_ms"] == pytest.approx(5.0)
    assert snap["missed_slot_fraction"] == 0.0
    assert metrics["fem"]["fem_step_time"]["mean_ms"] == pytest.approx(10.0)
    assert metrics["solver"]["not_ok_fraction"] == pytest.approx(0.1)


def test_latency_smoothness_and_status(run_bag):
    metrics = analyze_bag(run_bag)
    lat = metrics["latency_target_to_command"]
    assert lat["n"] == 100
    for key in ("mean_ms", "p50_ms", "p99_ms", "max_ms", "min_ms"):
        assert lat[key] == pytest.approx(3.0, abs=1e-6)
    sm = metrics["smoothness"]
    assert sm["efforts_total_variation"]["a0"] == pytest.approx(1.0)
    # a1 alternates 0/1 over k = 0..100 without k = 50 (49 and 51 are both odd: no change)
    assert sm["efforts_total_variation"]["a1"] == pytest.approx(98.0)
    assert sm["strokes_total_variation"]["a0"] == pytest.approx(1e-3)
    assert sm["efforts_total_variation_per_s"]["a0"] == pytest.approx(1.0)
    assert metrics["command_status"] == {"ok": 98, "held": 2, "safe": 0, "n": 100}


def test_target_interpolation_linear_vs_hold():
    t_target = np.array([0.0, 0.1, 0.2])
    xyz_target = np.array([[0.0, 0, 0], [0.01, 0, 0], [0.02, 0, 0]])
    t = np.array([-0.05, 0.05, 0.15, 0.2, 0.3])
    lin, lin_ok = target_at(t, t_target, xyz_target, "linear")
    hold, hold_ok = target_at(t, t_target, xyz_target, "hold")
    assert lin_ok.tolist() == [False, True, True, True, False]
    assert hold_ok.tolist() == [False, True, True, True, True]
    np.testing.assert_allclose(lin[1:4, 0], [0.005, 0.015, 0.02])
    np.testing.assert_allclose(hold[1:, 0], [0.0, 0.01, 0.02, 0.02])
    assert np.all(np.isnan(lin[[0, 4]]))
    with pytest.raises(ValueError, match="interpolation"):
        target_at(t, t_target, xyz_target, "cubic")  # type: ignore[arg-type]


def test_hold_interpolation_error_of_an_effector_on_the_line(tmp_path, store):
    """An effector exactly on a linearly moving target: 0 with linear, v·Δt with hold."""
    from soft_inverse_ros.analysis.run_data import PointSeries

    tt = np.arange(0, 11) * 0.1
    target = PointSeries("/target", tt, np.c_[0.01 * tt, 0 * tt, 0 * tt], tt, "header", "base_link")
    te = np.arange(0, 100) * 0.01 + 0.005
    eff = PointSeries("/eff", te, np.c_[0.01 * te, 0 * te, 0 * te], te, "header", "base_link")
    assert tracking_error(eff, target, "linear").norm.max() == pytest.approx(0.0, abs=1e-15)
    hold = tracking_error(eff, target, "hold")
    expected = 0.01 * (te - np.floor(te / 0.1 + 1e-9) * 0.1)
    np.testing.assert_allclose(hold.norm, expected, atol=1e-12)


def test_rate_stats_edge_cases():
    assert rate_stats(np.array([1.0]))["rate_hz"] is None
    assert rate_stats(np.array([]))["n"] == 0
    with pytest.raises(ValueError, match="nominal rate"):
        rate_stats(np.array([0.0, 1.0]), nominal_hz=0.0)
    np.testing.assert_allclose(total_variation(np.array([[0, 1], [2, np.nan], [1, 3]])), [3, 2])


def test_zero_header_stamps_fall_back_to_receive_time(tmp_path, store):
    bag = write_run(tmp_path / "bag", store, zero_stamps=True, markers=False)
    run = load_run(bag)
    assert run.target.time_source == "receive" and run.commands.time_source == "receive"
    metrics = analyze_bag(bag)
    assert metrics["tracking"]["plant"]["mean_mm"] == pytest.approx(1.0, abs=1e-9)
    # command times are now the receive times (1 ms after computation): latency 3 + 1 ms
    assert metrics["latency_target_to_command"]["mean_ms"] == pytest.approx(4.0, abs=1e-6)


def test_namespaced_and_sqlite3_bags(tmp_path, store):
    bag = write_run(tmp_path / "bag", store, ns="robot1", storage="sqlite3", markers=False)
    metrics = analyze_bag(bag)
    assert metrics["tracking"]["plant"]["topic"] == "/robot1/plant/effector_true"
    assert metrics["tracking"]["plant"]["mean_mm"] == pytest.approx(1.0, abs=1e-9)
    assert analyze_bag(bag, namespace="robot1")["rates"]["actuator_command"]["n"] == 100
    # a namespace the bag does not have is refused, not reported as a run without data
    with pytest.raises(ValueError, match="no topic of the control loop .* under namespace 'other'; its topics: "
                                         "/robot1/actuator_command"):
        analyze_bag(bag, namespace="other")
    assert find_topic(["/a/target", "/b/target"], "target", "b") == "/b/target"
    with pytest.raises(ValueError, match="several topics"):
        find_topic(["/a/target", "/b/target"], "target")
    assert find_topic(["/target", "/b/target"], "target") == "/target"


def test_scene_from_markers_replays_the_marker_array(store):
    scene = scene_from_markers(marker_array(store, shift=0.005).markers)
    assert scene.surface.n_triangles == 4
    np.testing.assert_allclose(scene.surface.colors[0], [0.9, 0.5, 0.1, 1.0])
    assert scene.surface.vertices[:, 0].min() == pytest.approx(0.005)
    assert [s.name for s in scene.spheres] == ["effector", "target"]
    assert scene.spheres[0].radius == pytest.approx(0.001)
    assert scene.polylines[0].name == "cable0" and scene.polylines[0].width == 0.0005


def test_report_folder_and_cli(run_bag, tmp_path, capsys):
    out = tmp_path / "report"
    report = write_report(run_bag, out, nominal_command_hz=100.0, snapshots=3)
    names = sorted(p.name for p in report.files)
    assert names == sorted([
        "metrics.json", "metrics.md", "trajectory_xy.png", "trajectory_time.png",
        "tracking_error.png", "actuators.png", "rates.png",
        "robot_00.png", "robot_01.png", "robot_02.png"])
    for p in report.files:
        assert p.is_file() and p.stat().st_size > 1000
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["tracking"]["plant"]["mean_mm"] == pytest.approx(1.0, abs=1e-9)
    # the validity counts the slots of the loop named (100 Hz here), not a 1 kHz controller's
    assert saved["validity"]["controller_missed_slot_fraction"] == pytest.approx(0.0, abs=0.02)
    assert not any("command slots" in r for r in saved["validity"]["invalid_reasons"])
    md = (out / "metrics.md").read_text()
    assert "| plant | all | 401 | 1.000 | 1.000 | 1.000 | 1.000 |" in md
    # the judged window is said apart from the whole recording's table
    start, n = saved["summary"]["tracking_start_s"], saved["summary"]["plant_error_samples"]
    assert 0 < n < 401
    assert (f"Tracking window (what the validity and `--json` judge): from {start:.2f} s of the "
            f"recording, {n} plant samples: mean 1.000 mm") in md
    assert "![rates](rates.png)" in md
    # markers 0, 1(2 has no surface; the state keeps the surface of 1), 3
    assert [s["file"] for s in saved["snapshots"]] == ["robot_00.png", "robot_01.png", "robot_02.png"]

    rc = cli_main(["analyze", str(run_bag), "--out", str(tmp_path / "cli"), "--json",
                   "--command-rate", "100", "--snapshots", "0"])
    assert rc == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    cli = json.loads(last)
    assert cli["rates"]["actuator_command"]["missed_slot_fraction"] == 0.0
    assert "snapshots" not in cli
    # this bag holds no /diagnostics: the verdict cannot tell, so the run is not valid
    # (it was VALID without evidence), and --strict says it in the exit status
    assert not cli["validity"]["valid"]
    assert any(r.startswith("cannot tell") for r in cli["validity"]["invalid_reasons"])
    assert cli_main(["analyze", str(run_bag), "--out", str(tmp_path / "cli"), "--no-plots", "--strict"]) == 3
    capsys.readouterr()
    assert cli_main(["analyze", str(tmp_path / "missing")]) == 2
    # an infinite rate made every period on time (a valid run out of nothing); a negative
    # threshold made every sample "moving"; a report folder where a file is: one line each
    for option, value in (("--command-rate", "inf"), ("--moving-threshold", "-1"), ("--snapshots", "-3")):
        with pytest.raises(SystemExit) as exit_:
            cli_main(["analyze", str(run_bag), option, value])
        assert exit_.value.code == 2 and option in capsys.readouterr().err
    (tmp_path / "afile").write_text("x")
    assert cli_main(["analyze", str(run_bag), "--no-plots", "--out", str(tmp_path / "afile" / "rep")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("analyze: ") and "Not a directory" in err and "Traceback" not in err


def test_latency_counts_the_first_command_answering_each_target():
    from soft_inverse_ros.analysis.metrics import latency_stats
    from soft_inverse_ros.analysis.run_data import CommandSeries

    # 1 kHz commands, a new target every 4 ms, each answered 0.5 ms after its stamp.
    t = 0.001 * np.arange(40) + 0.0005
    target_t = np.floor(t / 0.004) * 0.004
    n = len(t)
    commands = CommandSeries(
        topic="/actuator_command", t=t, t_receive=t, target_t=target_t, seq=np.arange(n),
        names=("a",), modes=np.zeros(1), values=np.zeros((n, 1)), efforts=np.zeros((n, 1)),
        strokes=np.zeros((n, 1)), status=np.zeros(n), time_source="header")
    stats = latency_stats(commands)
    assert stats["n"] == 10
    assert stats["max_ms"] == pytest.approx(0.5) and stats["min_ms"] == pytest.approx(0.5)


def test_target_holds_are_the_intervals_the_target_stood_still():
    from soft_inverse_ros.analysis.hybrid_report import target_holds

    t = np.arange(0.0, 20.0, 0.02)  # 50 Hz targets: hold A 5 s, move 2 s, hold B 0.5 s, move, hold C to the end
    a, b, c = np.array([0.0, 0.0, 0.1]), np.array([0.01, 0.0, 0.1]), np.array([0.02, 0.0, 0.1])
    points = np.where((t < 5.0)[:, None], a, np.nan)
    move = (t >= 5.0) & (t < 7.0)
    points[move] = a + (t[move] - 5.0)[:, None] / 2.0 * (b - a)
    points[(t >= 7.0) & (t < 7.5)] = b
    move = (t >= 7.5) & (t < 9.5)
    points[move] = b + (t[move] - 7.5)[:, None] / 2.0 * (c - b)
    points[t >= 9.5] = c
    points += np.random.default_rng(0).normal(scale=1e-8, size=points.shape)  # below the tolerance
    holds = target_holds(t, points, min_hold_s=1.0)
    assert [np.allclose(p, q, atol=1e-7) for (_, _, p), q in zip(holds, (a, c))] == [True, True]
    assert holds[0][:2] == pytest.approx((0.0, 5.0), abs=0.021)
    assert holds[1][:2] == pytest.approx((9.5, t[-1]), abs=0.021)
    assert len(target_holds(t, points, min_hold_s=0.4)) == 3  # B counts once holds may be short
    assert target_holds(t[:1], points[:1], min_hold_s=1.0) == []


def test_a_clock_that_goes_back_makes_the_run_invalid_not_interleaved(tmp_path, store):
    """Header stamps 5 s back from 1 s on (a restarted simulated clock): sorted by stamp the
    two stretches interleaved into a VALID run with a 7x error; the jump is found and said."""
    from soft_inverse_ros.analysis.validity import assess_bag

    bag = write_run(tmp_path / "bag", store, markers=False,
                    stamp=lambda t: t - 5 * S if t >= T0 + S else t)
    run = load_run(bag)
    assert any(j.startswith("/target: its header times go back 4.99 s") for j in run.clock_jumps)
    verdict = assess_bag(bag, run)
    assert not verdict.valid and any("the clock went back" in r for r in verdict.invalid_reasons)
    # messages reordered by milliseconds are not a jump
    calm = write_run(tmp_path / "calm", store, markers=False,
                     stamp=lambda t: t - 3_000_000 if (t // 10_000_000) % 7 == 3 else t)
    assert load_run(calm).clock_jumps == []


def test_one_message_stamped_zero_is_dropped_not_a_switch_to_receive_time(tmp_path, store):
    """One /target stamped 0 among stamped ones switched the whole series to receive time
    (the wall clock among simulated stamps: "nothing for 1.7e9 s")."""
    bag = write_run(tmp_path / "bag", store, markers=False, stamp=lambda t: 0 if t == T0 else t)
    run = load_run(bag)
    assert run.target.time_source == "header" and len(run.target) == 200
    assert any("1 of 201 messages stamped 0 ignored" in n for n in run.notes)


def test_a_restarted_controller_is_said_and_its_commands_counted_per_run(tmp_path, store):
    """Sequence numbers starting again at command 60 of 100: 'recorded fraction 2.0' and a
    halved rate, VALID, before."""
    from soft_inverse_ros.analysis.metrics import sequence_restarts, sequence_span
    from soft_inverse_ros.analysis.validity import assess_bag, summary

    bag = write_run(tmp_path / "bag", store, markers=False, seq_of=lambda k: k if k < 60 else 1000 + k - 60)
    run = load_run(bag)
    assert sequence_restarts(run.commands.seq) == 0  # 1000 on: a jump forward, lost commands
    bag = write_run(tmp_path / "restart", store, markers=False,
                    seq_of=lambda k: 500 + k if k < 60 else k - 60)
    run = load_run(bag)
    assert sequence_restarts(run.commands.seq) == 1
    sent = 59 + (N_CMD - 1 - 60)  # steps of each run: 500..559 and 0..N_CMD-61
    assert sequence_span(run.commands.seq) == (sent, 2)
    verdict = assess_bag(bag, run)
    assert any("started again 1 time(s)" in r for r in verdict.invalid_reasons)
    out = summary(run, verdict)
    assert out["recorded_command_fraction"] == pytest.approx((N_CMD - 1) / (sent + 2))  # 50 lost
    assert out["command_rate_hz"] == pytest.approx(sent / np.ptp(run.commands.t), rel=1e-6)


def test_statuses_of_a_namespace_are_those_prefixed_with_it(tmp_path, store):
    """/diagnostics is global: two robots' plants on it; --namespace r1 reads r1's only (it
    looked for /r1/diagnostics and found no status at all)."""
    from soft_inverse_ros.analysis.validity import load_plant_clock

    ty = store.types
    with BagWriter(tmp_path / "bag", store) as bag:
        bag.add_topic(T.DIAGNOSTICS, "diagnostic_msgs/msg/DiagnosticArray")
        for k in range(3):
            statuses = [ty["diagnostic_msgs/msg/DiagnosticStatus"](
                level=0, name=f"{robot}/plant_sim_node: plant", message="ok", hardware_id="",
                values=[ty["diagnostic_msgs/msg/KeyValue"](key="real_time_factor", value=rtf)])
                for robot, rtf in (("r1", "1.0"), ("r2", "0.5"))]
            bag.write_message(T.DIAGNOSTICS, (k + 1) * S, ty["diagnostic_msgs/msg/DiagnosticArray"](
                header=Msgs(store).header((k + 1) * S), status=statuses))
    assert find_topic([T.DIAGNOSTICS, "/r1/target"], T.DIAGNOSTICS, "r1") == T.DIAGNOSTICS
    assert load_plant_clock(tmp_path / "bag", "r1").real_time_factor.tolist() == [1.0] * 3
    assert load_plant_clock(tmp_path / "bag", "/r2").real_time_factor.tolist() == [0.5] * 3
    assert len(load_plant_clock(tmp_path / "bag").real_time_factor) == 6  # no namespace: all


def test_a_diagnostics_topic_of_another_type_is_ignored_with_a_warning(tmp_path, store):
    from soft_inverse_ros.analysis.validity import load_controller_status

    with BagWriter(tmp_path / "bag", store) as bag:
        bag.add_topic(T.DIAGNOSTICS, "std_msgs/msg/String")
        bag.write_message(T.DIAGNOSTICS, S, store.types["std_msgs/msg/String"](data="x"))
    with pytest.warns(UserWarning, match="has type std_msgs/msg/String, expected"):
        assert load_controller_status(tmp_path / "bag") is None


def test_the_report_folder_of_a_bag_given_as_dot(tmp_path, monkeypatch):
    from soft_inverse_ros.analysis.report import default_report_dir

    (tmp_path / "run1").mkdir()
    monkeypatch.chdir(tmp_path / "run1")
    assert default_report_dir(".") == tmp_path / "run1_report"


def test_a_hybrid_bag_gets_the_hybrid_report_and_refuses_tracking_options(tmp_path, store, capsys):
    from soft_inverse_ros.analysis.hybrid_report import is_hybrid_bag

    ty = store.types
    with BagWriter(tmp_path / "bag", store) as bag:
        bag.add_topic(T.DIAGNOSTICS, "diagnostic_msgs/msg/DiagnosticArray")
        status = ty["diagnostic_msgs/msg/DiagnosticStatus"](
            level=0, name="hybrid_model_node: hybrid model", message="ok", hardware_id="", values=[])
        bag.write_message(T.DIAGNOSTICS, S, ty["diagnostic_msgs/msg/DiagnosticArray"](
            header=Msgs(store).header(S), status=[status]))
    assert is_hybrid_bag(tmp_path / "bag")
    assert not is_hybrid_bag(write_run(tmp_path / "soft", store, markers=False))
    assert cli_main(["analyze", str(tmp_path / "bag"), "--command-rate", "100"]) == 2
    assert "records the hybrid arm" in capsys.readouterr().err


def test_the_nominal_rate_says_where_it_came_from(tmp_path, store):
    """The controller's own rate from its diagnostics was labelled "(given)" in the table,
    as if the user had passed --command-rate."""
    bag = write_run(tmp_path / "bag", store, markers=False, controller_rate="100.0")
    row = write_report(bag, tmp_path / "r1", plots_enabled=False).metrics["rates"]["actuator_command"]
    assert row["nominal_hz"] == pytest.approx(100.0) and row["nominal_source"] == "controller diagnostics"
    row = write_report(bag, tmp_path / "r2", nominal_command_hz=50.0,
                       plots_enabled=False).metrics["rates"]["actuator_command"]
    assert row["nominal_hz"] == pytest.approx(50.0) and row["nominal_source"] == "given"


def test_contact_figures_are_in_the_tables_and_the_json_without_plots(tmp_path, store):
    """They were only in metrics.json, and only when plots were drawn."""
    bag = write_run(tmp_path / "bag", store, markers=False, contacts=True)
    report = write_report(bag, tmp_path / "r", plots_enabled=False)
    assert report.metrics["contacts"]["contacts_max"] == 3
    assert report.metrics["summary"]["plant_contact_force_total_max_N"] == pytest.approx(0.5)
    assert "contacts at most 3; total contact force at most 0.500 N" in (tmp_path / "r" / "metrics.md").read_text()
