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
