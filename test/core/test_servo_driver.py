"""Servo safety layer (limits, watchdog, lifecycle, faults) on the simulated servos."""

from __future__ import annotations

import math

import numpy as np
import pytest

from soft_inverse_ros.core.drivers.driver_state import DriverError, DriverState
from soft_inverse_ros.core.drivers.servo_config import ServoDriverConfig, SimServoConfig
from soft_inverse_ros.core.drivers.servo_driver import ServoDriver, ServoHealth
from soft_inverse_ros.core.drivers.sim_servo import SimServoBackend

PERIOD = 0.01
MAX_SPEED = 0.05  # m/s → 0.5 mm per period


def _config(**overrides) -> ServoDriverConfig:
    data = {
        "backend": "sim",
        "period_s": PERIOD,
        "watchdog": {"periods": 3, "action": "hold"},
        "sim": {"time_constant_s": 0.0, "dead_time_s": 0.0, "max_velocity_rad_s": 1000.0},
        "actuators": [
            {
                "name": f"cable{i}",
                "id": i + 1,
                "spool_radius_m": 0.01,
                "zero_offset_rad": 1.0,
                "direction": -1 if i == 1 else 1,
                "min_displacement_m": -0.005,
                "max_displacement_m": 0.02,
                "max_speed_m_s": MAX_SPEED,
            }
            for i in range(3)
        ],
    }
    data.update(overrides)
    return ServoDriverConfig.from_mapping(data)


def _active(**overrides) -> ServoDriver:
    driver = ServoDriver.from_config(_config(**overrides))
    driver.configure()
    driver.activate(0.0)
    return driver


def _run(driver: ServoDriver, command, periods: int, start: int = 1):
    status = None
    for k in range(start, start + periods):
        if command is not None:
            driver.command(np.asarray(command, dtype=float))
        status = driver.update(k * PERIOD)
    return status


def test_tracks_commands_and_reports_displacement():
    driver = _active()
    status = _run(driver, [0.01, -0.004, 0.0], 40)
    assert status.state is DriverState.ACTIVE
    np.testing.assert_allclose(status.commanded_displacement, [0.01, -0.004, 0.0])
    np.testing.assert_allclose(status.displacement, [0.01, -0.004, 0.0], atol=1e-12)
    # Reversed winding: pulling the cable turns the servo the other way.
    assert status.position[1] == pytest.approx(1.0 + 0.4)
    assert all(d.health is ServoHealth.OK for d in status.diagnostics)


def test_limits_are_enforced_and_counted_whatever_the_command():
    driver = _active()
    sent = []
    for k in range(1, 120):
        driver.command(np.array([0.5, -0.5, 0.01 * math.sin(k)]))
        status = driver.update(k * PERIOD)
        sent.append(status.commanded_displacement)
    sent = np.array(sent)
    assert np.all(sent >= -0.005) and np.all(sent <= 0.02)
    steps = np.abs(np.diff(np.vstack([np.zeros(3), sent]), axis=0))
    assert np.all(steps <= MAX_SPEED * PERIOD + 1e-15)
    np.testing.assert_allclose(sent[-1, :2], [0.02, -0.005])
    assert status.position_clipped[:2].all() and not status.position_clipped[2]
    diag = status.diagnostics
    assert diag[0].position_clips == 119 and diag[1].position_clips == 119
    # 20 mm at 0.5 mm per period: 39 limited steps, the 40th lands (round-off may limit it).
    assert diag[0].velocity_clips in (39, 40)
    assert all(d.device_clips == 0 for d in diag)  # the backend never had to clip
    lo, hi = driver.backend.position_lower, driver.backend.position_upper
    assert np.all(driver.backend.position >= lo - 1e-12) and np.all(driver.backend.position <= hi + 1e-12)


def test_bad_commands_are_refused_with_a_clear_error():
    driver = _active()
    with pytest.raises(ValueError, match="shape"):
        driver.command(np.zeros(2))
    with pytest.raises(ValueError, match="non-finite"):
        driver.command(np.array([0.0, np.nan, 0.0]))


def test_watchdog_hold_keeps_last_goal_and_resumes():
    driver = _active()
    _run(driver, [0.004, 0.0, 0.0], 4)  # ramp stops at 2 mm after 4 periods
    status = _run(driver, None, 2, start=5)
    assert not status.watchdog_tripped
    status = _run(driver, None, 1, start=7)  # third period without command
    assert status.watchdog_tripped and status.state is DriverState.ACTIVE
    held = status.commanded_displacement.copy()
    status = _run(driver, None, 5, start=8)
    np.testing.assert_allclose(status.commanded_displacement, held)
    assert held[0] == pytest.approx(0.003)  # the ramp went on 2 periods, then held
    status = _run(driver, [0.004, 0.0, 0.0], 3, start=13)
    assert not status.watchdog_tripped
    assert status.commanded_displacement[0] == pytest.approx(0.004)


def test_watchdog_release_turns_torque_off_and_deactivates():
    driver = _active(watchdog={"periods": 2, "action": "release"})
    _run(driver, [0.002, 0.0, 0.0], 3)
    status = _run(driver, None, 2, start=4)
    assert status.watchdog_tripped and status.state is DriverState.INACTIVE
    assert not driver.backend.torque.any()
    assert "torque released" in status.message
    driver.activate(1.0)  # the node re-activates explicitly
    assert driver.state is DriverState.ACTIVE and driver.backend.torque.all()


def test_activation_holds_present_position_without_jump():
    cfg = _config()
    backend = SimServoBackend(
        SimServoConfig(0.0, 0.0, 1000.0),
        cfg.calibration.position_limits(cfg.min_displacement, cfg.max_displacement),
        cfg.calibration.position_from_displacement(np.array([0.01, 0.003, -0.002])),
    )
    driver = ServoDriver(cfg, backend)
    driver.configure()
    driver.activate(0.0)
    status = driver.update(PERIOD)  # no command yet: hold
    np.testing.assert_allclose(status.commanded_displacement, [0.01, 0.003, -0.002])
    np.testing.assert_allclose(status.displacement, [0.01, 0.003, -0.002], atol=1e-12)


def _driver_starting_at(displacement) -> ServoDriver:
    cfg = _config()
    backend = SimServoBackend(
        SimServoConfig(0.0, 0.0, 1000.0),
        cfg.calibration.position_limits(cfg.min_displacement, cfg.max_displacement),
        cfg.calibration.position_from_displacement(np.asarray(displacement, dtype=float)),
    )
    driver = ServoDriver(cfg, backend)
    driver.configure()
    return driver


def test_activation_far_outside_the_limits_is_refused_with_torque_off():
    """A cable 10 mm slacker than its limit got its goal at the limit at once: a 10 mm pull
    at the servo's full speed, 20 periods' worth of max_speed (the message said "held")."""
    driver = _driver_starting_at([0.0, -0.015, 0.0])
    with pytest.raises(DriverError, match=r"cannot activate, outside the limits by more than one period "
                                          r"at max speed .*servo id 2 \(cable1\) at -15 mm, limits \[-5, 20\]"):
        driver.activate(0.0)
    assert driver.state is DriverState.INACTIVE and not np.any(driver.backend.torque)


def test_activation_within_one_step_of_a_limit_puts_the_goal_on_it():
    driver = _driver_starting_at([0.0, -0.0053, 0.0])  # 0.3 mm beyond, max step 0.5 mm
    driver.activate(0.0)
    assert driver.message == "started just outside its limits, goal at the limit: cable1"
    status = driver.update(PERIOD)
    np.testing.assert_allclose(status.commanded_displacement, [0.0, -0.005, 0.0])


def test_lifecycle_order_is_enforced_and_torque_follows():
    driver = ServoDriver.from_config(_config())
    with pytest.raises(DriverError, match="cannot activate in state unconfigured"):
        driver.activate(0.0)
    driver.configure()
    assert not driver.backend.torque.any()
    driver.activate(0.0)
    assert driver.backend.torque.all()
    driver.deactivate()
    assert driver.state is DriverState.INACTIVE and not driver.backend.torque.any()
    status = driver.update(0.1)  # inactive: feedback still read, nothing sent
    assert np.isnan(status.commanded_displacement).all() and np.isfinite(status.displacement).all()
    driver.shutdown()
    assert driver.state is DriverState.FINALIZED


def test_configure_names_the_silent_servo():
    cfg = _config()
    driver = ServoDriver.from_config(cfg)
    driver.backend.mute(2)
    with pytest.raises(DriverError, match=r"servo id 3 \(cable2\): no answer to ping"):
        driver.configure()
    assert driver.state is DriverState.UNCONFIGURED


def test_silent_servo_is_isolated_within_two_periods_others_continue():
    driver = _active()
    _run(driver, [0.001, 0.001, 0.001], 2)
    driver.backend.mute(1)
    status = _run(driver, [0.005, 0.005, 0.005], 1, start=3)
    assert status.diagnostics[1].health is ServoHealth.WARN
    status = _run(driver, [0.005, 0.005, 0.005], 1, start=4)
    assert status.state is DriverState.ACTIVE
    assert status.diagnostics[1].health is ServoHealth.FAULT
    assert "servo id 2 (cable1) does not answer" in status.message
    before = status.commanded_displacement.copy()
    status = _run(driver, [0.005, 0.005, 0.005], 2, start=5)
    assert np.isnan(status.commanded_displacement[1])
    assert np.all(status.commanded_displacement[[0, 2]] > before[[0, 2]])


def test_hardware_error_stop_all_goes_to_error_at_once():
    driver = _active(on_servo_fault="stop_all")
    _run(driver, [0.001, 0.001, 0.001], 2)
    driver.backend.inject_hardware_error(0, 1 << 2)
    status = _run(driver, [0.002, 0.002, 0.002], 1, start=3)
    assert status.state is DriverState.ERROR
    assert "overheating" in status.message
    assert not driver.backend.torque.any()
    with pytest.raises(DriverError):
        driver.activate(1.0)
    driver.cleanup()
    # Reconfiguring names the servo that still has the error.
    with pytest.raises(DriverError, match=r"servo id 1 \(cable0\): hardware error 0x04"):
        driver.configure()


def test_unplugged_port_goes_to_error():
    driver = _active()
    driver.backend.unplug()
    status = _run(driver, [0.001, 0.001, 0.001], 1)
    assert status.state is DriverState.ERROR and "port" in status.message
    assert np.isnan(status.displacement).all()


def test_sim_servo_dead_time_lag_and_rate_limit():
    cfg = SimServoConfig(time_constant_s=0.05, dead_time_s=0.02, max_velocity_rad_s=2.0)
    sim = SimServoBackend(cfg, (np.array([-10.0]), np.array([10.0])), np.array([0.0]))
    sim.open()
    sim.set_torque(True, np.array([True]))
    sim.write_goal(0.0, np.array([1.0]), np.array([True]))
    dt = 0.001
    times = np.arange(1, 601) * dt
    q = np.array([sim.read(t, np.array([True])).position[0] for t in times])
    assert np.all(q[times < 0.02 - 1e-9] == 0.0)  # dead time
    # While (goal − q)/τ > v_max the shaft moves at v_max: until q = 1 − v_max·τ = 0.9.
    t_sat = 0.02 + 0.9 / 2.0
    fast = (times > 0.021) & (times < t_sat - 0.01)
    np.testing.assert_allclose(np.diff(q)[fast[1:]], 2.0 * dt, rtol=1e-9)
    after = times > t_sat + 0.002
    expected = 1.0 - 0.1 * np.exp(-(times[after] - t_sat) / 0.05)
    np.testing.assert_allclose(q[after], expected, atol=2e-3)


def test_a_safe_command_never_pulls_a_cable_further():
    """SAFE (the controller has no valid solution) holds or releases, never shortens: a
    safe stroke above the held goal is not followed, one below it is (towards slack)."""
    driver = _active()
    status = _run(driver, [0.008, 0.004, 0.0], 40)
    np.testing.assert_allclose(status.displacement, [0.008, 0.004, 0.0], atol=1e-12)
    for k in range(41, 81):
        driver.command(np.array([0.015, 0.0, 0.003]), safe=True)
        status = driver.update(k * PERIOD)
    np.testing.assert_allclose(status.commanded_displacement, [0.008, 0.0, 0.0])
    np.testing.assert_allclose(status.displacement, [0.008, 0.0, 0.0], atol=1e-12)
    assert driver.safe_commands == 40
    # an ordinary command is followed again
    status = _run(driver, [0.012, 0.004, 0.002], 40, start=81)
    np.testing.assert_allclose(status.displacement, [0.012, 0.004, 0.002], atol=1e-12)


def test_a_safe_command_before_activation_holds_the_found_position():
    driver = ServoDriver.from_config(_config())
    driver.configure()
    driver.command(np.array([0.02, 0.02, 0.02]), safe=True)
    driver.activate(0.0)
    found = driver.update(PERIOD).displacement.copy()
    status = _run(driver, None, 20, start=2)
    np.testing.assert_allclose(status.displacement, found, atol=1e-12)
