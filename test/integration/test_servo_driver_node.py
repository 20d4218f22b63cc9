"""servo_driver_node as a separate process over DDS, against a Dynamixel Protocol 2.0
emulator on a pseudo-terminal (in this process) and with simulated servos.

Checks: commanded strokes become the goal positions the calibration predicts; JointState
comes back; out-of-limit commands are clipped before the wire (the emulator never sees an
out-of-limit goal); partial and NaN commands are rejected; commands stop → the watchdog
releases torque, SAFE commands leave it off, and OK commands resume → torque back; a bus that stops answering is a fault
on /diagnostics with torque off within two command periods; SIGINT → torque off; a
missing servo at start is a fatal error naming it; simulated servos follow a stroke with
their lag.
"""

from __future__ import annotations

import math
import os
import signal
from pathlib import Path

import numpy as np
import pytest

try:
    import rclpy
    from soft_inverse_ros_msgs.msg import ActuatorCommand

    from driver_probe import DriverProbe, dynamixel_config, level, node_process, wait_exit
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

from soft_inverse_ros import topics
from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.testing.dynamixel_emulator import DynamixelEmulator
from soft_inverse_ros.core.drivers.servo_config import ServoDriverConfig, load_servo_config
from soft_inverse_ros.graph import build_graph
from soft_inverse_ros.process_launcher import GraphProcesses

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NODE = "servo_driver_node"
NAMES = ("cable_left", "cable_back", "cable_right", "cable_front")
IDS = (1, 2, 3, 4)
PERIOD = 0.02
DISPLACEMENT = ActuatorCommand.MODE_DISPLACEMENT
DRIVER = f"{NODE}: servo driver"
ERROR, WARN = 2, 1


def servo_status(name: str) -> str:
    return f"{NODE}: servo {name}"


@pytest.fixture(scope="module")
def ros(graph_env):
    rclpy.init()
    yield
    rclpy.try_shutdown()


def _ticks(cfg: ServoDriverConfig, displacement) -> list[int]:
    """Goal Position registers [ticks] the calibration predicts for strokes [m]: nearest
    tick, kept inside the ticks of the displacement limits."""
    d = np.clip(np.asarray(displacement, float), cfg.min_displacement, cfg.max_displacement)
    scale = cfg.dynamixel.ticks_per_rad
    ticks = np.rint(cfg.calibration.position_from_displacement(d) * scale)
    lo, hi = cfg.calibration.position_limits(cfg.min_displacement, cfg.max_displacement)
    return np.clip(ticks, np.ceil(lo * scale - 1e-9), np.floor(hi * scale + 1e-9)).astype(int).tolist()


def _goals(emu: DynamixelEmulator) -> list[int]:
    return [emu.register(i, "goal_position") for i in IDS]


def _torque(emu: DynamixelEmulator) -> list[int]:
    return [emu.register(i, "torque_enable") for i in IDS]


def _start(path: Path):
    return node_process(NODE, {"backend": "dynamixel", "device_config": str(path),
                               "diagnostics_period": 0.5})


def _int(probe: DriverProbe, name: str, key: str) -> int:
    return int(probe.diag_value(name, key, "0"))


def test_dynamixel_commands_limits_rejections_watchdog_and_sigint(ros, tmp_path):
    with DynamixelEmulator(IDS) as emu:
        path = dynamixel_config(tmp_path, emu.port_name)
        cfg = load_servo_config(path)
        graph, log = _start(path)
        probe = DriverProbe("servo_probe", topics.SERVO_STATES, log)
        try:
            probe.drive_until(None, lambda: probe.states, 30.0, "a JointState")
            # Strokes over DDS → Goal Position registers through the calibration.
            stroke = [0.004, 0.008, 0.012, 0.016]
            expected = _ticks(cfg, stroke)
            assert len(set(expected)) == 4  # distinct, and two servos wind the other way
            send = lambda: probe.command(NAMES, DISPLACEMENT, stroke)  # noqa: E731
            probe.drive_until(send, lambda: _goals(emu) == expected, 10.0,
                              f"goals {expected}")
            assert _torque(emu) == [1, 1, 1, 1]
            # JointState: servo angles [rad] settle at the goals (one tick = 1.5 mrad).
            angles = np.array(expected) / cfg.dynamixel.ticks_per_rad
            probe.drive_until(send, lambda: np.allclose(probe.latest_state().position, angles,
                                                        atol=2.5 / cfg.dynamixel.ticks_per_rad),
                              5.0, "JointState at the goal angles")
            state = probe.latest_state()
            assert tuple(state.name) == NAMES
            assert len(state.velocity) == 4 and len(state.effort) == 4  # torque constant given
            np.testing.assert_allclose(cfg.calibration.displacement_from_position(np.array(state.position)),
                                       stroke, atol=4e-5)  # 2.5 ticks

            # Out-of-limit strokes: clipped to [-2, 20] mm before the wire.
            wild = [0.05, -0.05, 0.5, 1.0]
            limits = _ticks(cfg, wild)
            send = lambda: probe.command(NAMES, DISPLACEMENT, wild)  # noqa: E731
            probe.drive_until(send, lambda: _goals(emu) == limits, 10.0, f"goals at the limits {limits}")
            probe.drive_until(send, lambda: all(_int(probe, servo_status(n), "position_clips") > 0
                                                for n in NAMES), 5.0, "position clips on /diagnostics")
            assert emu.wait_until_idle()
            for dxl_id in IDS:
                servo = emu.servos[dxl_id]
                assert servo.rejected_goals == []
                lo, hi = servo.get("min_position_limit"), servo.get("max_position_limit")
                assert all(lo <= g <= hi for g in servo.goal_writes), (dxl_id, lo, hi)
            held = _goals(emu)
            writes = {i: len(emu.servos[i].goal_writes) for i in IDS}

            # A command of an unknown status, or stamped an hour away from the node clock:
            # refused, never applied (both were applied as OK commands)
            for kwargs, text in (({"status": 7}, "unknown status 7"),
                                 ({"stamp_offset": -3600.0}, "s before the node clock (max_command_age 0.5 s)"),
                                 ({"stamp_offset": 3600.0}, "s after the node clock (max_command_age 0.5 s)")):
                other = lambda: probe.command(NAMES, DISPLACEMENT, [0.0] * 4, **kwargs)  # noqa: E731
                probe.drive_until(other, lambda: text in probe.diag_value(DRIVER, "last_rejection"),
                                  5.0, f"the rejection of {kwargs}")

            # A command missing an actuator, then one with a NaN: rejected whole; without a
            # valid command the watchdog releases torque (action: release).
            partial = lambda: probe.command(NAMES[:3], DISPLACEMENT, [0.0, 0.0, 0.0])  # noqa: E731
            probe.drive_until(partial, lambda: "cable_front" in probe.diag_value(DRIVER, "last_rejection"),
                              5.0, "the partial command's rejection on /diagnostics")
            nan = lambda: probe.command(NAMES, DISPLACEMENT, [0.0, math.nan, 0.0, 0.0])  # noqa: E731
            probe.drive_until(nan, lambda: "non-finite value for cable_back=nan"
                              in probe.diag_value(DRIVER, "last_rejection"), 5.0, "the NaN rejection")
            probe.drive_until(nan, lambda: _torque(emu) == [0, 0, 0, 0], 5.0, "torque released by the watchdog")
            probe.drive_until(None, lambda: probe.diag_value(DRIVER, "lifecycle") == "inactive"
                              and _int(probe, DRIVER, "watchdog_deactivations") >= 1, 5.0,
                              "the watchdog deactivation on /diagnostics")
            assert _int(probe, DRIVER, "rejected_commands") > 0
            assert emu.wait_until_idle()
            for k, dxl_id in enumerate(IDS):  # nothing but the held goal was ever written
                assert set(emu.servos[dxl_id].goal_writes[writes[dxl_id]:]) <= {held[k]}

            # SAFE commands (a controller without a snapshot) keep the released torque off:
            # only an OK command re-arms what the watchdog switched off (SAFE ones did)
            safe = lambda: probe.command(NAMES, DISPLACEMENT, [0.0] * 4,  # noqa: E731
                                         status=ActuatorCommand.STATUS_SAFE)
            probe.drive_for(safe, 1.0)
            assert _torque(emu) == [0, 0, 0, 0]
            assert probe.diag_value(DRIVER, "lifecycle") == "inactive"

            # Valid commands again: torque back on, tracking resumes.
            stroke = [0.001, 0.002, 0.003, 0.0]
            expected = _ticks(cfg, stroke)
            send = lambda: probe.command(NAMES, DISPLACEMENT, stroke)  # noqa: E731
            probe.drive_until(send, lambda: _torque(emu) == [1, 1, 1, 1] and _goals(emu) == expected,
                              10.0, "resumed tracking")

            # SIGINT: clean exit, torque off.
            os.kill(graph.pid(NODE), signal.SIGINT)
            assert wait_exit(graph, 15.0) == 0, log.getvalue()
            assert emu.wait_until_idle()
            assert _torque(emu) == [0, 0, 0, 0]
        finally:
            probe.destroy()
            graph.shutdown()


def test_dynamixel_bus_silence_is_a_fault_with_torque_off_within_two_periods(ros, tmp_path):
    with DynamixelEmulator(IDS) as emu:
        path = dynamixel_config(tmp_path, emu.port_name, max_comm_errors=2)  # as shipped
        cfg = load_servo_config(path)
        graph, log = _start(path)
        probe = DriverProbe("servo_fault_probe", topics.SERVO_STATES, log)
        try:
            stroke = [0.003, 0.003, 0.003, 0.003]
            send = lambda: probe.command(NAMES, DISPLACEMENT, stroke)  # noqa: E731
            probe.drive_until(send, lambda: _goals(emu) == _ticks(cfg, stroke), 30.0,
                              "tracking before the fault")
            first_record = len(probe.diagnostics)
            for dxl_id in IDS:  # the bus stops answering (status packets lost)
                emu.mute(dxl_id)
            probe.drive_until(send, lambda: any(
                level(r.statuses[DRIVER]) == ERROR for r in probe.diagnostics[first_record:]
                if DRIVER in r.statuses), 20.0, "driver ERROR on /diagnostics")
            records = [r for r in probe.diagnostics[first_record:] if DRIVER in r.statuses]
            error = next(r for r in records if level(r.statuses[DRIVER]) == ERROR)
            assert "does not answer" in error.statuses[DRIVER].message
            # Each servo: first failed read (WARN) → fault within two command periods.
            for name in NAMES:
                status = servo_status(name)
                warn = next(int(r.values(DRIVER)["periods"]) for r in records
                            if level(r.statuses[status]) == WARN)
                fault = next(int(r.values(DRIVER)["periods"]) for r in records
                             if level(r.statuses[status]) == ERROR)
                assert fault - warn + 1 <= 2, (name, warn, fault)
                assert "no status packet" in error.statuses[status].message
            assert error.values(DRIVER)["lifecycle"] == "inactive"
            # The safe state reached the servos (torque off is a broadcast: no answer needed).
            assert emu.wait_until_idle()
            assert _torque(emu) == [0, 0, 0, 0]
            # In ERROR the node stops publishing JointState (consumers see it go stale).
            count = len(probe.states)
            probe.drive_for(send, 0.5)
            assert len(probe.states) <= count + 1
            assert not graph.poll(), log.getvalue()
        finally:
            probe.destroy()
            graph.shutdown()


def test_missing_servo_at_start_is_a_fatal_error_naming_it(ros, tmp_path):
    with DynamixelEmulator(IDS[:3]) as emu:  # no servo with ID 4 on the bus
        graph, log = _start(dynamixel_config(tmp_path, emu.port_name))
        try:
            assert wait_exit(graph, 60.0) == 1, log.getvalue()
            assert "[FATAL]" in log.getvalue()
            assert "servo id 4 (cable_front)" in log.getvalue()
        finally:
            graph.shutdown()


def test_simulated_servos_follow_a_stroke_with_their_lag(ros):
    spec = next(s for s in build_graph("sim") if s.name == NODE)  # as the sim graph starts it
    cfg = load_servo_config(find_config("drivers/servo_sim.yaml"))
    assert cfg.names == NAMES
    graph = GraphProcesses([spec], output=None).start()
    probe = DriverProbe("servo_sim_probe", topics.SERVO_STATES)
    try:
        probe.drive_until(None, lambda: probe.states, 30.0, "a JointState")
        stroke = np.full(4, 0.01)
        goal = cfg.calibration.position_from_displacement(stroke)
        start = len(probe.states)
        send = lambda: probe.command(NAMES, DISPLACEMENT, stroke)  # noqa: E731
        probe.drive_until(send, lambda: np.allclose(probe.latest_state().position, goal, atol=1e-3),
                          10.0, "the simulated servos at the goal")
        stamps = np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for _, m in probe.states[start:]])
        q = np.array([m.position for _, m in probe.states[start:]])
        v = np.array([m.velocity for _, m in probe.states[start:]])
        assert np.all(np.diff(q, axis=0) >= -1e-9) and np.all(q <= goal + 1e-9)  # no overshoot
        # Rate-limited by the driver (max_speed / spool radius = 4 rad/s) and lagging:
        # from 5 % to 95 % of the way takes at least 0.9 rad / 4 rad/s.
        rate_limit = cfg.max_speed[0] * cfg.calibration.rad_per_m[0]
        for j in range(4):
            t05 = stamps[np.argmax(q[:, j] > 0.05 * goal[j])]
            t95 = stamps[np.argmax(q[:, j] > 0.95 * goal[j])]
            assert t95 - t05 >= 0.9 * goal[j] / rate_limit - 2 * cfg.period_s, (j, t95 - t05)
        # The reported velocity is the servo's: moving, within its own speed limit.
        assert 0.5 * rate_limit < np.max(v) <= cfg.sim.max_velocity_rad_s + 1e-9
    finally:
        probe.destroy()
        graph.shutdown()


def test_command_selector_takes_its_actuators_by_name_and_rejects_the_rest():
    from soft_inverse_ros.nodes.driver_lifecycle import CommandRejected, CommandSelector

    selector = CommandSelector(("a", "b"), DISPLACEMENT, "displacement")

    def msg(names, values, modes=None, status=ActuatorCommand.STATUS_OK):
        m = ActuatorCommand()
        m.status = status
        m.names = list(names)
        m.modes = [DISPLACEMENT] * len(names) if modes is None else list(modes)
        m.values = [float(v) for v in values]
        return m

    # Any order, other actuators ignored (one command for cables and cavities).
    np.testing.assert_array_equal(
        selector.select(msg(["cavity", "b", "a"], [5e3, 0.002, 0.001],
                            [ActuatorCommand.MODE_PRESSURE, DISPLACEMENT, DISPLACEMENT])),
        [0.001, 0.002])
    np.testing.assert_array_equal(selector.select(msg(["a", "b"], [0.003, 0.004])), [0.003, 0.004])
    for bad, text in [
        (msg(["a"], [0.0]), r"does not name \['b'\]"),
        (msg(["a", "b", "a"], [0.0, 0.0, 0.0]), r"names \['a'\] more than once"),
        (msg(["a", "b"], [0.0, math.inf]), "non-finite value for b=inf"),
        (msg(["a", "b"], [0.0, 0.0], [DISPLACEMENT, ActuatorCommand.MODE_FORCE]),
         r"expected displacement mode for b \(mode 1\)"),
        (msg(["a", "b"], [0.0]), "2 names, 2 modes and 1 values"),
        (msg(["a", "b"], [0.0, 0.0], status=7), "unknown status 7"),
    ]:
        with pytest.raises(CommandRejected, match=text):
            selector.select(bad)


def test_a_sim_time_driver_starts_its_device_only_once_the_clock_runs(ros):
    """use_sim_time: before the first /clock the node's time is 0; configuring the device
    then made the first period come at the graph's current simulated time (a silent
    host for a board's watchdog). The driver waits for /clock, and says so if none comes."""
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rosgraph_msgs.msg import Clock

    from soft_inverse_ros.core.drivers.driver_state import DriverError
    from soft_inverse_ros.nodes.servo_driver_node import ServoDriverNode

    params = [Parameter("use_sim_time", value=True), Parameter("autostart", value=False),
              Parameter("backend", value="sim")]
    node = ServoDriverNode(parameter_overrides=params)
    clock_node = Node("clock_source")
    try:
        with pytest.raises(DriverError, match="no /clock arrived"):
            node._wait_for_sim_clock(timeout_s=0.3)
        pub = clock_node.create_publisher(Clock, "/clock", 10)
        msg = Clock()
        msg.clock.sec = 7
        for _ in range(200):
            pub.publish(msg)
            rclpy.spin_once(clock_node, timeout_sec=0.01)
            try:
                node._wait_for_sim_clock(timeout_s=0.05)
                break
            except DriverError:
                continue
        assert node.now() == pytest.approx(7.0)
    finally:
        node.destroy_node()
        clock_node.destroy_node()
