"""`soft-inverse-ros demo --robot hybrid_arm` over real DDS: the hybrid graph runs (hybrid
snapshots, the 1 kHz inverse QP with joints and contacts, the simulated joint servos, the
hybrid plant, simulated mocap, the recorder), and the bag shows the joint setpoints reaching
the servo driver within the joint ranges and speeds, the probe aligning with the target, the
contact force sum within the description's limit, and the markers drawing the arm."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.integration

try:
    import rclpy  # noqa: F401
    import soft_inverse_ros_msgs.msg  # noqa: F401
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.core.drivers.servo_config import load_servo_config
from soft_inverse_ros.core.model.hybrid_description import load_hybrid_description
from soft_inverse_ros.recording.bag_reader import BagReader

CLI = [sys.executable, "-m", "soft_inverse_ros.cli"]


@pytest.fixture(scope="module")
def run(graph_env, tmp_path_factory):
    out = tmp_path_factory.mktemp("hybrid_demo")
    # the first of sim_hybrid.yaml's targets held (trajectory: hold, as `launch hybrid
    # trajectory:=hold`) for 8 s of control: the probe starts 14 mm off, and at 6 s the final
    # alignment scattered 0.16-0.58 mm over runs (hybrid_model_node gives ~7 snapshots per
    # simulated second under the lockstep's 1.5-period tolerance, fewer on a busier CPU);
    # the shipped sequence moves on to its second target 10 s after target_node starts
    params = out / "sim_hybrid_hold.yaml"
    shipped = find_config("sim_hybrid.yaml").read_text()
    assert "    trajectory: csv" in shipped
    params.write_text(shipped.replace("    trajectory: csv", "    trajectory: hold", 1))
    proc = subprocess.run([*CLI, "demo", "--robot", "hybrid_arm", "--clock", "sim", "--duration", "8",
                           "--params-file", str(params), "--out", str(out), "--json"],
                          capture_output=True, text=True, env=graph_env, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    return out, summary, proc.stdout + proc.stderr


def test_the_report_states_validity_and_the_figures(run):
    out, summary, text = run
    assert ("INVALID RUN" in text) == (not summary["valid"])  # the tool says it itself
    assert summary["clock"] == "sim" and summary["robot"] == "hybrid_arm"
    assert "controller_missed_slot_fraction" in summary  # as the main job's --json line
    assert (out / "report" / "metrics.json").is_file() and (out / "report" / "hybrid.png").is_file()


def test_joint_setpoints_reach_the_servo_driver_within_limits(run):
    out, summary, _ = run
    desc = load_hybrid_description("hybrid_arm")
    servo = load_servo_config(find_config("drivers/servo_hybrid_arm.yaml"))
    lo = np.array([j.min_position for j in desc.joints])
    hi = np.array([j.max_position for j in desc.joints])
    setpoints, angles, command_stamps, all_stamps = [], [], [], []
    seqs_to_first_ok: list[int] = []  # the bag's command sequence numbers up to its first OK
    with BagReader(out / "bag") as reader:
        for _, msg in reader.read_topic("/actuator_command"):
            all_stamps.append(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec)
            if not setpoints:
                seqs_to_first_ok.append(msg.seq)
            if msg.status == 0:
                assert list(msg.names) == list(desc.actuator_names)
                nj = desc.n_joints
                assert all(m == 0 for m in msg.modes[:nj])  # MODE_DISPLACEMENT: joint angles [rad]
                setpoints.append(np.array(msg.values)[:nj])
                command_stamps.append(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec)
        stamps = []
        for _, msg in reader.read_topic("/servo/joint_states"):
            q = np.array([msg.position[list(msg.name).index(n)] for n in desc.joint_names])
            if np.all(np.isfinite(q)):
                angles.append(q)
                stamps.append(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec)
    setpoints, angles, stamps = np.array(setpoints), np.array(angles), np.array(stamps)
    # the bag may keep only a share of the 1 kHz commands (a recorder starved under load);
    # the controller's own rate is the report's, from the sequence numbers
    assert len(setpoints) > 100 and len(angles) > 100 and summary["command_rate_hz"] > 500
    assert np.all(setpoints >= lo - 1e-9) and np.all(setpoints <= hi + 1e-9)
    assert np.all(angles >= lo - 1e-9) and np.all(angles <= hi + 1e-9)
    # the servos start at home and went where the controller sent them, never faster than
    # allowed. The bag's first servo sample may come after they started moving (the
    # recorder starved, or matched /actuator_command later than /servo/joint_states, at
    # start-up): it may be no further from home than the speed limit allows since the
    # first OK command. The bag knows that command only when it holds every command from
    # the controller's first (seq 1) to its first OK one; otherwise the simulated servos'
    # start (the driver's config) and the consecutive-sample check below are what is known.
    assert np.allclose(servo.sim_start, desc.home)
    if seqs_to_first_ok == list(range(1, len(seqs_to_first_ok) + 1)):
        since = max(0.0, stamps[0] - command_stamps[0])
        assert np.all(np.abs(angles[0] - desc.home) <= servo.max_speed * since * 1.05 + 1e-3), \
            (angles[0] - desc.home, since)
    moved = np.abs(angles[-1] - desc.home).max()
    assert moved > 0.01, "the joint servos did not move"
    assert np.abs(angles[-1] - setpoints[-1]).max() < 0.25 * moved
    # never faster than the driver's joint speed limit (1 rad/s), over the graph's (simulated) time
    dt = np.diff(stamps)
    assert np.all(dt >= 0)
    assert np.all(np.abs(np.diff(angles, axis=0)) <= servo.max_speed * dt[:, None] * 1.05 + 1e-6)
    assert summary["joint_setpoints_within_limits"] and summary["servo_angles_within_limits"]
    # the command rate counts the commands sent (sequence numbers), not those the bag kept,
    # over the same window: all commands, the SAFE ones of the start-up included
    recorded = (len(all_stamps) - 1) / (max(all_stamps) - min(all_stamps))  # intervals
    assert 0 < summary["commands_recorded_fraction"] <= 1
    assert summary["command_rate_hz"] >= recorded * (1 - 1e-9)  # equal when the bag kept them all


def test_the_probe_aligns_and_the_contact_force_sum_stays_below_the_limit(run):
    _, summary, _ = run
    # the target is 14 mm off the probe axis at home (the plant's own starting figure: the
    # bag's first probe sample may come after the probe started moving)
    assert summary["alignment_error_start_mm"] == pytest.approx(14.2, abs=0.5)
    assert summary["alignment_error_final_mean_mm"] < 0.5  # the bound
    # the target held for the whole run
    (held,) = summary["targets"]
    assert held["target_m"] == pytest.approx([0.2622, 0.01, 0.037])
    assert held["alignment_error_final_mean_mm"] == pytest.approx(summary["alignment_error_final_mean_mm"])
    assert summary["contact_force_sum_limit_n"] == pytest.approx(1.0)
    assert summary["contact_force_sum_within_limit"] is True


def test_markers_draw_the_arm_and_the_contacts(run):
    out, _, _ = run
    namespaces = set()
    with BagReader(out / "bag") as reader:
        for _, msg in reader.read_topic("/visualization/robot"):
            namespaces.update(m.ns for m in msg.markers)
    assert {"arm_links", "arm_joints", "surface", "contacts", "contact_forces", "effector", "target"} <= namespaces
