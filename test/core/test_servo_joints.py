"""Joint servos (``joint: true``) in the servo driver: the command is the joint angle [rad],
clipped to the joint range and rate-limited; a SAFE command holds the goal; the simulated
servos start where the config says (the hybrid arm's home)."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.core.drivers.config_reader import DriverConfigError as ConfigError
from soft_inverse_ros.core.drivers.servo_config import ServoDriverConfig, load_servo_config
from soft_inverse_ros.core.drivers.servo_driver import ServoDriver
from soft_inverse_ros.core.model.hybrid_description import load_hybrid_description


def _driver():
    cfg = load_servo_config(find_config("drivers/servo_hybrid_arm.yaml"))
    driver = ServoDriver.from_config(cfg)
    driver.configure()
    driver.activate(0.0)
    return cfg, driver


def test_config_matches_the_description():
    cfg = load_servo_config(find_config("drivers/servo_hybrid_arm.yaml"))
    desc = load_hybrid_description("hybrid_arm")
    assert cfg.names == desc.joint_names and cfg.joint.all()
    assert cfg.min_displacement == pytest.approx([j.min_position for j in desc.joints])
    assert cfg.max_displacement == pytest.approx([j.max_position for j in desc.joints])
    assert cfg.sim_start == pytest.approx(desc.home)
    # angle in = angle out: no spool
    assert cfg.calibration.displacement_from_position(desc.home) == pytest.approx(desc.home)


def test_joint_goals_are_clipped_and_rate_limited_and_safe_holds():
    cfg, driver = _driver()
    status = driver.update(0.01)
    home = cfg.sim_start
    assert status.position == pytest.approx(home, abs=1e-6)
    far = home + np.array([5.0, -5.0, 0.0, 0.0, 0.0])
    step = cfg.max_speed * cfg.period_s
    sent = []
    for k in range(2, 400):
        driver.command(far)
        st = driver.update(0.01 * k)
        sent.append(st.commanded_displacement)
    sent = np.array(sent)
    assert np.all(np.abs(np.diff(sent, axis=0)) <= step + 1e-12)
    assert np.all(sent <= cfg.max_displacement + 1e-12) and np.all(sent >= cfg.min_displacement - 1e-12)
    assert sent[-1][0] == pytest.approx(cfg.max_displacement[0]) and sent[-1][1] == pytest.approx(cfg.min_displacement[1])
    held = sent[-1].copy()
    driver.command(home - 1.0, safe=True)  # SAFE: a joint holds its goal (never "releases")
    st = driver.update(4.0)
    assert st.commanded_displacement == pytest.approx(held)


def test_joint_keys_are_required():
    with pytest.raises(ConfigError, match="max_position_rad"):
        ServoDriverConfig.from_mapping({"actuators": [
            {"name": "j1", "joint": True, "min_position_rad": -1.0, "max_velocity_rad_s": 1.0}]})
    with pytest.raises(ConfigError, match="sim_start_position_rad"):
        ServoDriverConfig.from_mapping({"actuators": [
            {"name": "j1", "joint": True, "min_position_rad": -1.0, "max_position_rad": 1.0,
             "max_velocity_rad_s": 1.0, "sim_start_position_rad": 2.0}]})


def _one_joint(**keys) -> dict:
    return {"name": "j1", "joint": True, "min_position_rad": -1.0, "max_position_rad": 1.0,
            "max_velocity_rad_s": 1.0, **keys}


def test_unit_mistakes_in_a_servo_config_are_refused():
    """ms written as s made the watchdog 100 s; mm/s written as m/s let the whole stroke go
    in one goal: both ran."""
    cable = {"name": "c0", "spool_radius_m": 0.01, "min_displacement_m": -0.002,
             "max_displacement_m": 0.02, "max_speed_m_s": 0.01}
    with pytest.raises(ConfigError, match=r"servo_driver.period_s: must be <= 1.0, got 10.0"):
        ServoDriverConfig.from_mapping({"period_s": 10, "actuators": [cable]})
    with pytest.raises(ConfigError, match=r"actuators\[0\].max_speed_m_s: must be <= 1.0, got 40.0"):
        ServoDriverConfig.from_mapping({"actuators": [{**cable, "max_speed_m_s": 40}]})
    with pytest.raises(ConfigError, match=r"max_velocity_rad_s: must be <= 50.0, got 270.0"):
        ServoDriverConfig.from_mapping({"actuators": [_one_joint(max_velocity_rad_s=270)]})
    bus = {"port": "/dev/ttyUSB0", "operating_mode": "extended_position"}
    with pytest.raises(ConfigError, match=r"latency_timer_ms: must be <= 255.0"):
        ServoDriverConfig.from_mapping({"backend": "dynamixel", "dynamixel": {**bus, "latency_timer_ms": 1000},
                                        "actuators": [cable]})
    with pytest.raises(ConfigError, match=r"write_position_limits: applies to operating_mode: position only"):
        ServoDriverConfig.from_mapping({"backend": "dynamixel", "dynamixel": {**bus, "write_position_limits": True},
                                        "actuators": [cable]})
    ServoDriverConfig.from_mapping({"backend": "dynamixel", "dynamixel": {**bus, "write_position_limits": False},
                                    "actuators": [cable]})  # saying it off is harmless


def test_a_joint_range_beyond_position_mode_names_the_joint_keys():
    """A joint's range outside position mode's ticks named max_displacement_m and metres."""
    bus = {"port": "/dev/ttyUSB0", "operating_mode": "position"}
    with pytest.raises(ConfigError, match=r"actuators\[0\].max_position_rad: position range \[-4.0, 4.0\] rad"):
        ServoDriverConfig.from_mapping({"backend": "dynamixel", "dynamixel": bus, "actuators": [
            _one_joint(min_position_rad=-4.0, max_position_rad=4.0)]})
