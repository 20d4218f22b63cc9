"""Valve safety layer and pressure loop on the simulated board (no serial port)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from soft_inverse_ros.core.drivers import valve_protocol as vp
from soft_inverse_ros.core.drivers.config_reader import DriverConfigError
from soft_inverse_ros.core.drivers.driver_state import DriverError, DriverState
from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticParams
from soft_inverse_ros.core.drivers.valve_config import ValveDriverConfig, load_valve_config
from soft_inverse_ros.core.drivers.valve_driver import ChamberHealth, ValveDriver
from soft_inverse_ros.core.drivers.valve_pwm import PressureController, apply_pairs, quantize_duty

PERIOD = 0.01
PNEUMATICS = {
    "supply_pressure_pa": 1.0e5,
    "inflow_coefficient": 2100.0,
    "outflow_rate_pa_s": 4.0e5,
    "outflow_knee_pa": 2.0e4,
    "latency_s": 0.015,
}


def _mapping(**overrides) -> dict:
    data = {
        "backend": "sim",
        "period_s": PERIOD,
        "watchdog": {"periods": 5},
        "device_watchdog_s": 0.1,
        "pneumatics": dict(PNEUMATICS),
        "chambers": [
            {"name": "left", "channel": 0, "has_sensor": True, "max_pressure_pa": 60000},
            {"name": "right", "channel": 1, "has_sensor": True, "max_pressure_pa": 60000},
            {"name": "cavity", "channel": 2, "has_sensor": False, "max_pressure_pa": 40000},
        ],
        "pairs": [{"positive": "left", "negative": "right"}],
    }
    data.update(overrides)
    return data


def _active(**overrides) -> ValveDriver:
    driver = ValveDriver.from_config(ValveDriverConfig.from_mapping(_mapping(**overrides)))
    driver.configure(0.0)
    driver.activate(0.0)
    return driver


def _run(driver, command, start, periods):
    status = None
    for k in range(start, start + periods):
        if command is not None:
            driver.command(np.asarray(command, dtype=float))
        status = driver.update(k * PERIOD)
    return status


def _true_pressure(driver) -> np.ndarray:
    return driver.backend.device.chambers.pressure.copy()


def test_closed_and_open_loop_reach_their_references():
    driver = _active()
    status = _run(driver, [25000.0, 0.0, 20000.0], 1, 250)
    assert status.state is DriverState.ACTIVE
    truth = _true_pressure(driver)
    assert truth[0] == pytest.approx(25000.0, rel=0.01)  # PI loop on the sensor
    assert truth[1] < 100.0  # antagonist deflated
    assert truth[2] == pytest.approx(20000.0, rel=0.03)  # open loop: feedforward only
    assert np.isnan(status.pressure[2]) and status.pressure[0] == pytest.approx(truth[0], abs=1.0)


def test_pairs_make_one_side_inflate_while_the_other_deflates():
    out = apply_pairs(np.array([30000.0, 10000.0, 5.0]), ())
    np.testing.assert_allclose(out, [30000.0, 10000.0, 5.0])
    cfg = ValveDriverConfig.from_mapping(_mapping(pairs=[{"positive": "left", "negative": "right", "bias_pa": 2000}]))
    np.testing.assert_allclose(apply_pairs(np.array([30000.0, 10000.0, 0.0]), cfg.pairs), [22000.0, 2000.0, 0.0])
    np.testing.assert_allclose(apply_pairs(np.array([0.0, 5000.0, 0.0]), cfg.pairs), [2000.0, 7000.0, 0.0])
    driver = _active()
    status = _run(driver, [30000.0, 10000.0, 0.0], 1, 30)
    np.testing.assert_allclose(status.reference, [20000.0, 0.0, 0.0])
    assert status.duty[0] > 0.0 and status.duty[1] == 0.0


def test_limits_clip_references_and_bound_the_true_pressure():
    driver = _active()
    peak = np.zeros(3)
    for k in range(1, 301):
        driver.command(np.array([1.0e6, -5.0e4, 1.0e6]))
        status = driver.update(k * PERIOD)
        peak = np.maximum(peak, _true_pressure(driver))
    assert status.state is DriverState.ACTIVE
    np.testing.assert_allclose(status.reference, [60000.0, 0.0, 40000.0])
    assert status.pressure_clipped[[0, 2]].all()
    assert status.diagnostics[0].pressure_clips == 300
    # Duty caps: no duty the driver sends can push a chamber past its maximum.
    assert np.all(status.duty <= driver.controller.duty_cap + 1e-12)
    assert peak[0] <= 60000.0 * 1.001 and peak[2] <= 40000.0 * 1.001
    assert peak[2] == pytest.approx(40000.0, rel=0.05)  # and it does get there


def test_a_negative_pressure_never_inflates_the_other_chamber_of_its_pair():
    """The pair's net was taken before the chambers' limits: left = -30 kPa commanded right to
    +30 kPa (-1e9 Pa: to its maximum), clip counters silent."""
    driver = _active()
    peak = np.zeros(3)
    for k in range(1, 101):
        driver.command(np.array([-30000.0 if k < 50 else -1e9, 0.0, 0.0]))
        status = driver.update(k * PERIOD)
        peak = np.maximum(peak, _true_pressure(driver))
    np.testing.assert_allclose(status.reference, [0.0, 0.0, 0.0])
    assert status.pressure_clipped[0] and not status.pressure_clipped[1]
    assert peak[1] < 100.0


def test_a_rearm_after_the_watchdog_clears_its_message():
    """After a watchdog vent and a resume the status still said "vented" while active."""
    driver = _active()
    _run(driver, [30000.0, 0.0, 20000.0], 1, 10)
    status = _run(driver, None, 11, 6)
    assert status.state is DriverState.INACTIVE and "vented" in status.message
    driver.activate(0.2)
    status = _run(driver, [10000.0, 0.0, 0.0], 21, 3)
    assert status.state is DriverState.ACTIVE and status.message == ""


def test_watchdog_vents_and_deactivates():
    driver = _active()
    _run(driver, [30000.0, 0.0, 20000.0], 1, 50)
    assert _true_pressure(driver)[0] > 20000.0
    status = _run(driver, None, 51, 5)
    assert status.watchdog_tripped and status.state is DriverState.INACTIVE
    assert status.device_flags & vp.Flags.VENT_HOST
    _run(driver, None, 56, 50)  # inactive: feedback only
    assert np.all(_true_pressure(driver) < 500.0)


def test_board_watchdog_vents_when_the_host_stalls_and_driver_reports_it():
    driver = _active()
    _run(driver, [30000.0, 0.0, 20000.0], 1, 30)
    driver.command(np.array([30000.0, 0.0, 20000.0]))
    status = driver.update(0.30 + 0.15)  # the host stalled 150 ms > device_watchdog_s
    assert status.state is DriverState.ERROR
    assert "vented by itself: vent_watchdog" in status.message


def test_sensor_fault_goes_to_error_and_vents_in_one_period():
    driver = _active()
    _run(driver, [30000.0, 0.0, 0.0], 1, 20)
    driver.backend.device.sensor_fault[0] = True
    status = _run(driver, [30000.0, 0.0, 0.0], 21, 1)
    assert status.state is DriverState.ERROR and "sensor fault" in status.message
    assert status.diagnostics[0].health is ChamberHealth.FAULT
    assert driver.backend.device.flags & vp.Flags.VENT_HOST


def test_board_overpressure_latches_and_blocks_activation():
    driver = _active()
    _run(driver, [10000.0, 0.0, 0.0], 1, 10)
    driver.backend.device.chambers.pressure[1] = 90000.0  # squeezed from outside
    status = _run(driver, [10000.0, 0.0, 0.0], 11, 1)
    assert status.state is DriverState.ERROR and "vent_overpressure" in status.message
    driver.cleanup()
    driver.configure(1.0)
    driver.backend.device.chambers.pressure[1] = 90000.0
    with pytest.raises(DriverError, match="vent_overpressure"):
        driver.activate(1.0)  # ARM cannot clear an overpressure still present


def test_silent_board_errors_within_two_periods():
    driver = _active()
    _run(driver, [10000.0, 0.0, 0.0], 1, 5)
    driver.backend.muted = True
    first = _run(driver, [10000.0, 0.0, 0.0], 6, 1)
    assert first.state is DriverState.ACTIVE and first.diagnostics[0].health is ChamberHealth.WARN
    second = _run(driver, [10000.0, 0.0, 0.0], 7, 1)
    assert second.state is DriverState.ERROR and "not answering" in second.message


def test_lifecycle_and_bad_commands():
    driver = ValveDriver.from_config(ValveDriverConfig.from_mapping(_mapping()))
    with pytest.raises(DriverError, match="cannot activate in state unconfigured"):
        driver.activate(0.0)
    driver.configure(0.0)
    assert driver.backend.device.flags & vp.Flags.CONFIGURED
    driver.activate(0.0)
    with pytest.raises(ValueError, match="shape"):
        driver.command(np.zeros(2))
    with pytest.raises(ValueError, match="non-finite"):
        driver.command(np.array([np.inf, 0.0, 0.0]))
    _run(driver, [20000.0, 0.0, 10000.0], 1, 30)
    driver.deactivate(0.5)
    assert driver.state is DriverState.INACTIVE and driver.backend.device.flags & vp.Flags.VENT_HOST
    driver.shutdown(0.6)
    assert driver.state is DriverState.FINALIZED


def test_duty_quantization_and_anti_windup():
    d = quantize_duty(np.array([0.0, 0.05, 0.07, 0.5, 0.93, 0.95, 1.0]), 60.0, 0.002)  # d_min = 0.12
    np.testing.assert_allclose(d, [0.0, 0.0, 0.12, 0.5, 0.88, 1.0, 1.0])
    params = [PneumaticParams(**PNEUMATICS)]
    ctl = PressureController(params, np.array([True]), np.array([60000.0]), 2e-5, 1e-4, PERIOD, 60.0, 0.0)
    for _ in range(1000):  # a large error held for 10 s saturates at the cap ...
        duty, saturated = ctl.duty(np.array([60000.0]), np.array([0.0]))
    assert duty[0] == pytest.approx(ctl.duty_cap[0]) and saturated[0]
    # ... without winding up: the first reading at the reference gives the feedforward.
    duty, _ = ctl.duty(np.array([60000.0]), np.array([60000.0]))
    assert duty[0] <= ctl.duty_cap[0] and duty[0] >= ctl.feedforward(np.array([60000.0]))[0] - 0.05


@pytest.mark.parametrize(
    "changes, key",
    [
        ({"pneumatics": {**PNEUMATICS, "inflow_coefficient": -1}}, "valve_driver.pneumatics.inflow_coefficient"),
        ({"chambers": [{"name": "a", "max_pressure_pa": 0}]}, "valve_driver.chambers[0].max_pressure_pa"),
        ({"pairs": [{"positive": "left", "negative": "nope"}]}, "valve_driver.pairs[0].negative: unknown chamber"),
        ({"pairs": [{"positive": "left", "negative": "left"}]}, "already in a pair"),
        ({"backend": "serial"}, "valve_driver.serial"),
        ({"pwm_frequency_hz": 1000}, "valve_driver.pwm_frequency_hz"),
        ({"min_pulse_s": 0.01}, "valve_driver.min_pulse_s"),
        ({"device_watchdog_s": 0.005}, "valve_driver.device_watchdog_s"),
        ({"colour": "red"}, "unknown key(s) colour"),
        # a limit above the supply (or a supply in kPa) was clipped silently
        ({"chambers": [{"name": "a", "max_pressure_pa": 150000}]},
         "valve_driver.chambers[0].max_pressure_pa: 150000 Pa is above the supply_pressure_pa 100000 Pa"),
        ({"pneumatics": {**PNEUMATICS, "supply_pressure_pa": 100.0}}, "is above the supply_pressure_pa 100 Pa"),
        ({"pneumatics": {**PNEUMATICS, "latency_s": 20}}, "valve_driver.pneumatics.latency_s"),  # ms as s
    ],
)
def test_config_errors_name_the_key(changes, key):
    with pytest.raises(DriverConfigError, match=re.escape(key)):
        ValveDriverConfig.from_mapping(_mapping(**changes))


def test_example_configs_load():
    import pathlib

    folder = pathlib.Path(__file__).resolve().parents[2] / "config" / "drivers"
    files = sorted(folder.glob("valve_*.yaml"))
    assert files, "no valve example configs"
    for path in files:
        assert load_valve_config(path).size >= 1


def test_a_safe_command_vents_every_chamber_whatever_its_values():
    driver = _active()
    _run(driver, [25000.0, 0.0, 20000.0], 1, 250)
    assert _true_pressure(driver)[0] > 20000.0
    for k in range(251, 501):
        driver.command(np.array([30000.0, 30000.0, 30000.0]), safe=True)
        driver.update(k * PERIOD)
    assert np.all(_true_pressure(driver) < 500.0)
    assert driver.safe_commands == 250


def test_a_safe_command_vents_a_biased_pair_too_and_an_ok_command_restores_its_bias():
    """A pair's bias was applied to the safe command's zeros: SAFE inflated both chambers
    to ``bias_pa`` (20 kPa), even right after the watchdog had vented them."""
    driver = _active(pairs=[{"positive": "left", "negative": "right", "bias_pa": 20000}])
    _run(driver, [0.0, 0.0, 0.0], 1, 250)
    assert _true_pressure(driver)[:2] == pytest.approx([20000.0, 20000.0], rel=0.03)
    for k in range(251, 501):
        driver.command(np.zeros(3), safe=True)
        status = driver.update(k * PERIOD)
    np.testing.assert_array_equal(status.reference, [0.0, 0.0, 0.0])
    assert np.all(_true_pressure(driver) < 500.0)
    status = _run(driver, [0.0, 0.0, 0.0], 501, 1)  # solved commands again: the bias is back
    np.testing.assert_array_equal(status.reference[:2], [20000.0, 20000.0])


def test_an_unreadable_driver_file_is_one_line(tmp_path):
    """A folder (or a device, a file without permission) was an OSError traceback."""
    from soft_inverse_ros.core.drivers.config_reader import read_driver_section

    with pytest.raises(DriverConfigError, match="cannot read: Is a directory"):
        read_driver_section(tmp_path, "valve_driver", None)
    with pytest.raises(DriverConfigError, match="cannot read: Is a directory"):
        load_valve_config(tmp_path)


def test_unit_mistakes_in_a_valve_config_are_refused():
    """period_s: 10 (ms as s) ran with a 100 s watchdog until the board watchdog check caught
    it by accident; a reply timeout of minutes would stall the loop."""
    with pytest.raises(DriverConfigError, match=r"period_s: must be <= 1.0, got 10.0"):
        ValveDriverConfig.from_mapping(_mapping(period_s=10))
    serial = {"port": "/dev/ttyACM0", "reply_timeout_s": 20}
    with pytest.raises(DriverConfigError, match=r"reply_timeout_s: must be <= 1.0, got 20.0"):
        ValveDriverConfig.from_mapping(_mapping(backend="serial", serial=serial))


def test_a_safe_command_opens_no_valve_even_with_the_pressure_loops_integral_built_up():
    """The PI's integral, built up holding 30 kPa on a chamber that leaks more than the
    driver's model, re-inflated it in pulses of 12 % duty while SAFE commands vented it."""
    from soft_inverse_ros.core.drivers.valve_backend import SimValveBackend

    leaky = dict(PNEUMATICS, outflow_rate_pa_s=6.0e5)
    driver = ValveDriver(ValveDriverConfig.from_mapping(_mapping(pairs=[])),
                         SimValveBackend([PneumaticParams(**leaky)] * 3, 0b011))
    driver.configure(0.0)
    driver.activate(0.0)
    _run(driver, [30000.0, 0.0, 0.0], 1, 400)
    assert _true_pressure(driver)[0] == pytest.approx(30000.0, rel=0.01)
    duties = []
    for k in range(401, 701):
        driver.command(np.array([30000.0, 0.0, 0.0]), safe=True)
        duties.append(driver.update(k * PERIOD).duty)
    assert np.nanmax(duties) == 0.0
