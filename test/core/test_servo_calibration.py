"""Cable ↔ servo calibration and servo driver configuration validation."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from soft_inverse_ros.core.drivers.config_reader import DriverConfigError
from soft_inverse_ros.core.drivers.servo_calibration import ServoCalibration
from soft_inverse_ros.core.drivers.servo_config import ServoDriverConfig, load_servo_config


def _calibration() -> ServoCalibration:
    return ServoCalibration(
        spool_radius=np.array([0.01, 0.02, 0.005]),
        zero_offset=np.array([math.pi, 0.5, -1.0]),
        direction=np.array([1.0, -1.0, 1.0]),
        gear_ratio=np.array([1.0, 1.0, 3.0]),
    )


def test_displacement_to_angle_by_hand():
    cal = _calibration()
    q = cal.position_from_displacement(np.array([0.01, 0.01, 0.01]))
    # 1 cm on a 1 cm spool = 1 rad; reversed 2 cm spool = −0.5 rad; 3:1 gear on 5 mm = 6 rad.
    np.testing.assert_allclose(q, [math.pi + 1.0, 0.5 - 0.5, -1.0 + 6.0])


def test_round_trips_and_speed_tension_scaling():
    cal = _calibration()
    d = np.array([[0.003, -0.002, 0.02], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(cal.displacement_from_position(cal.position_from_displacement(d)), d)
    v = np.array([0.05, -0.01, 0.2])
    np.testing.assert_allclose(cal.speed_from_velocity(cal.velocity_from_speed(v)), v)
    # Torque 0.1 N·m pulls 10 N on a 1 cm spool; reversed winding pulls with −torque;
    # a 3:1 reduction triples the spool torque.
    np.testing.assert_allclose(
        cal.tension_from_torque(np.array([0.1, -0.1, 0.1])), [10.0, 5.0, 60.0]
    )


def test_position_limits_are_ordered_for_reversed_servos():
    cal = _calibration()
    lo, hi = cal.position_limits(np.full(3, -0.001), np.full(3, 0.01))
    assert np.all(lo < hi)
    np.testing.assert_allclose(lo[1], 0.5 - 0.01 / 0.02)
    np.testing.assert_allclose(hi[1], 0.5 + 0.001 / 0.02)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("spool_radius", [0.01, -0.01], "spool_radius must be > 0"),
        ("direction", [1.0, 0.5], "direction must be +1 or -1"),
        ("gear_ratio", [1.0, 0.0], "gear_ratio must be > 0"),
        ("zero_offset", [0.0, float("nan")], "non-finite"),
    ],
)
def test_calibration_rejects_bad_values(field, value, message):
    args = {
        "spool_radius": [0.01, 0.01],
        "zero_offset": [0.0, 0.0],
        "direction": [1.0, 1.0],
        "gear_ratio": [1.0, 1.0],
    }
    args[field] = value
    with pytest.raises(ValueError, match=re.escape(message)):
        ServoCalibration(**{k: np.array(v) for k, v in args.items()})


def _mapping(**changes):
    actuator = {
        "name": "cable0",
        "id": 1,
        "spool_radius_m": 0.01,
        "zero_offset_rad": 3.14159,
        "min_displacement_m": -0.005,
        "max_displacement_m": 0.03,
        "max_speed_m_s": 0.05,
    }
    data = {"backend": "sim", "actuators": [actuator, {**actuator, "name": "cable1", "id": 2}]}
    for key, value in changes.items():
        if key.startswith("a0_"):
            if value is None:
                del actuator[key[3:]]
            else:
                actuator[key[3:]] = value
        else:
            data[key] = value
    return data


def test_config_defaults_and_arrays():
    cfg = ServoDriverConfig.from_mapping(_mapping())
    assert cfg.names == ("cable0", "cable1") and cfg.ids == (1, 2)
    assert cfg.watchdog_action == "hold" and cfg.on_servo_fault == "isolate"
    np.testing.assert_allclose(cfg.max_displacement, [0.03, 0.03])
    assert cfg.dynamixel is None


@pytest.mark.parametrize(
    "changes, key",
    [
        ({"a0_spool_radius_m": None}, "servo_driver.actuators[0].spool_radius_m"),
        ({"a0_spool_radius_m": -0.01}, "servo_driver.actuators[0].spool_radius_m"),
        ({"a0_direction": 2}, "servo_driver.actuators[0].direction"),
        ({"a0_max_displacement_m": -0.01}, "servo_driver.actuators[0].max_displacement_m"),
        ({"a0_id": 300}, "servo_driver.actuators[0].id"),
        ({"a0_spool_radius": 0.01}, "servo_driver.actuators[0]: unknown key(s) spool_radius"),
        ({"watchdog": {"periods": 0}}, "servo_driver.watchdog.periods"),
        ({"watchdog": {"periods": None}}, "servo_driver.watchdog.periods: given without a value"),
        ({"watchdog": {"action": "explode"}}, "servo_driver.watchdog.action"),
        ({"backend": "dynamixel"}, "servo_driver.dynamixel"),
        ({"period_s": "fast"}, "servo_driver.period_s"),
        ({"a0_id": 2}, "duplicate servo id"),
        ({"a0_name": "cable1"}, "duplicate actuator name"),
    ],
)
def test_config_errors_name_the_key(changes, key):
    with pytest.raises(DriverConfigError, match=re.escape(key)):
        ServoDriverConfig.from_mapping(_mapping(**changes))


def test_position_mode_range_is_checked_against_calibration():
    data = _mapping(
        backend="dynamixel",
        dynamixel={"port": "/dev/null", "operating_mode": "position"},
        a0_zero_offset_rad=0.1,  # −5 mm → 0.1 − 0.5 rad < 0 ticks
    )
    with pytest.raises(DriverConfigError, match=r"actuators\[0\].*outside \[0, 4095\]"):
        ServoDriverConfig.from_mapping(data)
    data["dynamixel"]["operating_mode"] = "extended_position"
    assert ServoDriverConfig.from_mapping(data).dynamixel.tick_range[0] < 0


def test_example_configs_load():
    import pathlib

    folder = pathlib.Path(__file__).resolve().parents[2] / "config" / "drivers"
    files = sorted(folder.glob("servo_*.yaml"))
    assert files, "no servo example configs"
    for path in files:
        cfg = load_servo_config(path)
        assert cfg.size >= 1
