"""Driver-side safety rules (safety review): HELD after SAFE / watchdog / activation is
applied as SAFE, the valve driver's pressure-rate limit, the servo driver's cable tension
limit, and their configuration checks. Core drivers on simulated backends, no ROS."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.drivers.config_reader import DriverConfigError
from soft_inverse_ros.core.drivers.driver_state import DriverState, LiveCommandGate
from soft_inverse_ros.core.drivers.servo_backend import ServoSample
from soft_inverse_ros.core.drivers.servo_config import ServoDriverConfig
from soft_inverse_ros.core.drivers.servo_driver import ServoDriver, ServoHealth, make_servo_backend
from soft_inverse_ros.core.drivers.sim_servo import SimServoBackend
from soft_inverse_ros.core.drivers.valve_config import (
    DEFAULT_MAX_PRESSURE_RATE_PA_S,
    AntagonisticPair,
    ValveDriverConfig,
)
from soft_inverse_ros.core.drivers.valve_driver import ValveDriver
from soft_inverse_ros.core.drivers.valve_pwm import apply_pairs, limit_pressure_change

from test_valve_driver import PERIOD, _mapping


# ----------------------------------------------------------------------------- helpers
def _valve_mapping(**overrides) -> dict:
    """test_valve_driver's valves, the cavity with a sensor too."""
    data = _mapping(**overrides)
    if "chambers" not in overrides:
        data["chambers"] = [{**c, "has_sensor": True} for c in data["chambers"]]
    return data


def _valves(**overrides) -> ValveDriver:
    driver = ValveDriver.from_config(ValveDriverConfig.from_mapping(_valve_mapping(**overrides)))
    driver.configure(0.0)
    driver.activate(0.0)
    return driver


class _Clock:
    def __init__(self) -> None:
        self.k = 0

    def __call__(self) -> float:
        self.k += 1
        return self.k * PERIOD


def _drive(driver, clock, command, periods, **flags):
    statuses = []
    for _ in range(periods):
        if command is not None:
            driver.command(np.asarray(command, dtype=float), **flags)
        statuses.append(driver.update(clock()))
    return statuses


def _true(driver) -> np.ndarray:
    return driver.backend.device.chambers.pressure.copy()


def _servo_config(**overrides) -> ServoDriverConfig:
    data = {
        "backend": "sim", "period_s": PERIOD, "watchdog": {"periods": 5, "action": "hold"},
        "max_consecutive_comm_errors": 2, "max_force_periods": 3,
        "sim": {"time_constant_s": 0.0, "dead_time_s": 0.0, "max_velocity_rad_s": 100.0},
        "actuators": [
            {"name": f"c{i}", "id": i + 1, "spool_radius_m": 0.01, "min_displacement_m": -0.01,
             "max_displacement_m": 0.03, "max_speed_m_s": 0.05, "max_force_n": 10.0}
            for i in range(3)
        ],
    }
    data.update(overrides)
    return ServoDriverConfig.from_mapping(data)


class TensionSim(SimServoBackend):
    """Simulated servos that report a shaft torque: ``load[i]`` [N] of cable tension
    while torque is on (0 with torque off), as a present-current reading would."""

    def __init__(self, config: ServoDriverConfig) -> None:
        base = make_servo_backend(config)
        super().__init__(base.config, (base.position_lower, base.position_upper), base.position)
        self.rad_per_m = config.calibration.rad_per_m
        self.load = np.zeros(self.size)

    @property
    def measures_tension(self) -> bool:
        return True

    def read(self, now: float, mask: np.ndarray) -> ServoSample:
        sample = super().read(now, mask)
        torque = np.where(self.torque & sample.answered, self.load / self.rad_per_m, np.nan)
        torque = np.where(~self.torque & sample.answered, 0.0, torque)
        return ServoSample(**{**sample.__dict__, "effort": torque})


def _servos(**overrides) -> tuple[ServoDriver, TensionSim]:
    cfg = _servo_config(**overrides)
    backend = TensionSim(cfg)
    driver = ServoDriver(cfg, backend)
    driver.configure()
    driver.activate(0.0)
    return driver, backend


# ----------------------------------------------------------------------------- 1. HELD
def test_the_gate_applies_held_live_only_after_a_live_command():
    gate = LiveCommandGate()
    assert gate.as_safe(safe=False, held=True)  # first after activation
    assert not gate.as_safe(safe=False, held=False)  # OK arms
    assert not gate.as_safe(safe=False, held=True)  # HELD after OK: live
    assert not gate.as_safe(safe=False, held=True)  # HELD after HELD (live): live
    assert gate.as_safe(safe=True, held=False)
    assert gate.as_safe(safe=False, held=True)  # HELD after SAFE: safe
    assert not gate.as_safe(safe=False, held=False)
    gate.disarm()  # the watchdog tripped
    assert gate.as_safe(safe=False, held=True)
    assert gate.held_as_safe == 3
    with pytest.raises(ValueError):
        gate.as_safe(safe=True, held=True)


def test_valve_held_after_safe_stays_vented_until_an_ok_command():
    """The review's trace: 1 s of SAFE (vented), then HELD 2500 Pa re-armed the duty and the
    chamber was back at 2155 Pa 0.5 s later. Now the HELD command vents like SAFE."""
    driver, clock = _valves(), _Clock()
    _drive(driver, clock, [0.0, 0.0, 25000.0], 150)
    assert _true(driver)[2] > 20000.0
    _drive(driver, clock, [0.0, 0.0, 25000.0], 100, safe=True)
    assert _true(driver)[2] < 500.0
    statuses = _drive(driver, clock, [0.0, 0.0, 2500.0], 50, held=True)
    assert all(s.state is DriverState.ACTIVE for s in statuses)
    assert all(np.all(s.reference == 0.0) and np.all(s.duty == 0.0) for s in statuses[1:])
    assert _true(driver)[2] < 500.0
    assert driver.held_as_safe_commands == 50 and driver.safe_commands == 100
    events = driver.take_events()
    assert [level for level, _ in events] == ["warning"]  # one line, not one per command
    assert "HELD command with no live command to hold" in events[0][1]
    # only an OK command re-arms; then a HELD one holds it live
    statuses = _drive(driver, clock, [0.0, 0.0, 2500.0], 100)
    statuses += _drive(driver, clock, [0.0, 0.0, 2500.0], 50, held=True)
    assert statuses[-1].reference[2] == 2500.0
    assert _true(driver)[2] > 1500.0  # inflating again


def test_valve_held_first_after_activation_or_after_the_watchdog_vents():
    driver, clock = _valves(), _Clock()
    statuses = _drive(driver, clock, [0.0, 0.0, 20000.0], 20, held=True)
    assert all(np.all(s.reference == 0.0) for s in statuses) and _true(driver)[2] < 100.0
    _drive(driver, clock, [0.0, 0.0, 20000.0], 100)  # OK
    assert _true(driver)[2] > 15000.0
    statuses = _drive(driver, clock, None, 6)  # the watchdog vents, driver INACTIVE
    assert any(s.watchdog_tripped for s in statuses) and driver.state is DriverState.INACTIVE
    driver.activate(clock.k * PERIOD)  # the node re-activates (on an OK command only)
    statuses = _drive(driver, clock, [0.0, 0.0, 20000.0], 30, held=True)
    assert all(np.all(s.reference == 0.0) for s in statuses)


def test_servo_held_after_safe_or_watchdog_never_pulls_further():
    driver, _ = _servos()
    clock = _Clock()
    first = _drive(driver, clock, [0.02, 0.02, 0.02], 20, held=True)  # first command: HELD
    assert np.allclose(first[-1].commanded_displacement, 0.0)  # holds where activation found it
    _drive(driver, clock, [0.005, 0.005, 0.005], 20)  # OK
    _drive(driver, clock, [0.006, 0.006, 0.006], 5, held=True)  # HELD after OK: live
    assert np.allclose(driver._last_sent, 0.006)
    _drive(driver, clock, [0.004, 0.02, 0.006], 5, safe=True)  # releases c0 only
    statuses = _drive(driver, clock, [0.02, 0.02, 0.02], 20, held=True)
    np.testing.assert_allclose(statuses[-1].commanded_displacement, [0.004, 0.006, 0.006])
    # watchdog (hold): the HELD command after it holds, an OK one tracks again
    _drive(driver, clock, [0.004, 0.006, 0.006], 3)
    assert _drive(driver, clock, None, 6)[-1].watchdog_tripped
    statuses = _drive(driver, clock, [0.02, 0.02, 0.02], 20, held=True)
    np.testing.assert_allclose(statuses[-1].commanded_displacement, [0.004, 0.006, 0.006])
    statuses = _drive(driver, clock, [0.02, 0.02, 0.02], 40)
    np.testing.assert_allclose(statuses[-1].commanded_displacement, 0.02)


# ----------------------------------------------------------------------------- 2. rate
def test_valve_references_ramp_at_the_rate_limit_and_a_vent_is_immediate():
    driver, clock = _valves(max_pressure_rate_pa_s=1.0e6), _Clock()  # 10 kPa per period
    statuses = _drive(driver, clock, [0.0, 0.0, 35000.0], 5)
    refs = [s.reference[2] for s in statuses]
    assert refs == [10000.0, 20000.0, 30000.0, 35000.0, 35000.0]
    assert [bool(s.rate_limited[2]) for s in statuses] == [True, True, True, False, False]
    assert statuses[-1].diagnostics[2].rate_limits == 3
    # down too
    statuses = _drive(driver, clock, [0.0, 0.0, 12000.0], 3)
    assert [s.reference[2] for s in statuses] == [25000.0, 15000.0, 12000.0]
    # SAFE vents at once, and re-inflation ramps from 0 Pa
    assert _drive(driver, clock, [0.0, 0.0, 12000.0], 1, safe=True)[0].reference[2] == 0.0
    assert [s.reference[2] for s in _drive(driver, clock, [0.0, 0.0, 35000.0], 2)] == [10000.0, 20000.0]


def test_resuming_after_the_watchdog_ramps_from_the_vented_state():
    driver, clock = _valves(max_pressure_rate_pa_s=1.0e6), _Clock()
    _drive(driver, clock, [0.0, 0.0, 35000.0], 50)
    _drive(driver, clock, None, 6)
    assert driver.state is DriverState.INACTIVE
    driver.activate(clock.k * PERIOD)  # armed at 0 Pa
    status = _drive(driver, clock, [0.0, 0.0, 35000.0], 1)[0]
    assert status.reference[2] == 10000.0  # not the commanded 35 kPa in the same period


def test_a_per_chamber_rate_overrides_the_drivers():
    data = _valve_mapping(max_pressure_rate_pa_s=1.0e6)
    data["chambers"][2]["max_pressure_rate_pa_s"] = 2.0e5
    cfg = ValveDriverConfig.from_mapping(data)
    np.testing.assert_array_equal(cfg.max_pressure_rate, [1.0e6, 1.0e6, 2.0e5])
    default = ValveDriverConfig.from_mapping(_valve_mapping())
    np.testing.assert_array_equal(default.max_pressure_rate, DEFAULT_MAX_PRESSURE_RATE_PA_S)


def test_a_pair_flipping_sides_under_the_rate_limit_never_inflates_both():
    driver, clock = _valves(max_pressure_rate_pa_s=1.0e6), _Clock()
    _drive(driver, clock, [30000.0, 0.0, 0.0], 10)
    statuses = _drive(driver, clock, [0.0, 30000.0, 0.0], 10)
    refs = np.array([s.reference[:2] for s in statuses])
    assert np.all(np.min(refs, axis=1) == 0.0)  # exclusive all the way
    assert np.all(np.abs(np.diff(np.vstack([[30000.0, 0.0], refs]), axis=0)) <= 10000.0 + 1e-9)
    np.testing.assert_array_equal(refs[-1], [0.0, 30000.0])


def test_limit_pressure_change_keeps_pairs_exclusive_and_each_step_bounded():
    rng = np.random.default_rng(3)
    pairs = (AntagonisticPair(0, 1, 2000.0), AntagonisticPair(2, 3, 0.0))
    step = np.array([3000.0, 5000.0, 4000.0, 4000.0, 2500.0])
    prev = np.zeros(5)
    for _ in range(500):
        wanted = apply_pairs(rng.uniform(0.0, 40000.0, 5), pairs)
        if rng.random() < 0.1:
            wanted = np.zeros(5)  # a vent target (the driver itself never ramps a vent)
        out = limit_pressure_change(prev, wanted, step, pairs)
        bound = step.copy()
        bound[:2] = step[:2].min()
        assert np.all(np.abs(out - prev) <= bound + 1e-9)
        assert np.all(out >= 0.0)
        for pair in pairs:  # one side at its common level: exclusive
            lo = min(out[pair.positive], out[pair.negative])
            assert lo <= pair.bias_pa + 1e-9
        prev = out


@pytest.mark.parametrize("changes, text", [
    ({"max_pressure_rate_pa_s": -1.0}, "valve_driver.max_pressure_rate_pa_s: must be > 0.0"),
    ({"max_pressure_rate_pa_s": 1.0e9}, "valve_driver.max_pressure_rate_pa_s: must be <= 100000000.0"),
    ({"max_pressure_rate_pa_s": 500.0},
     "valve_driver.max_pressure_rate_pa_s: 500 Pa/s takes 120 s to reach left's max_pressure_pa"),
    ({"max_presure_rate_pa_s": 1.0e6},
     "unknown key(s) max_presure_rate_pa_s (max_presure_rate_pa_s: did you mean 'max_pressure_rate_pa_s'?)"),
])
def test_the_rate_key_is_validated_like_the_servos_max_speed(changes, text):
    with pytest.raises(DriverConfigError) as err:
        ValveDriverConfig.from_mapping(_valve_mapping(**changes))
    assert text in str(err.value) and "\n" not in str(err.value)


def test_a_chamber_rate_unit_mistake_names_the_chamber_key():
    data = _valve_mapping()
    data["chambers"][2]["max_pressure_rate_pa_s"] = 300.0  # kPa/s as Pa/s
    with pytest.raises(DriverConfigError, match=r"valve_driver\.chambers\[2\]\.max_pressure_rate_pa_s: "
                                                r"300 Pa/s takes 133 s"):
        ValveDriverConfig.from_mapping(data)


# ----------------------------------------------------------------------------- 3. tension
def test_a_cable_above_max_force_for_the_configured_periods_is_released_and_reported():
    driver, backend = _servos()
    clock = _Clock()
    _drive(driver, clock, [0.01, 0.01, 0.01], 30)
    backend.load[1] = 12.0  # above 10 N
    statuses = _drive(driver, clock, [0.02, 0.02, 0.02], 2)
    assert not statuses[-1].over_force.any()  # 2 periods: not yet (max_force_periods 3)
    backend.load[1] = 9.0
    _drive(driver, clock, [0.02, 0.02, 0.02], 1)  # back below: the count starts anew
    backend.load[1] = 12.0
    statuses = _drive(driver, clock, [0.02, 0.02, 0.02], 3)
    status = statuses[-1]
    np.testing.assert_array_equal(status.over_force, [False, True, False])
    assert status.state is DriverState.ACTIVE  # the others keep going
    assert list(backend.torque) == [True, False, True]  # released, never held pulling
    d = status.diagnostics[1]
    assert d.health is ServoHealth.FAULT and d.over_force and d.over_force_trips == 1
    assert "tension above max_force_n 10 N" in d.message
    errors = [t for level, t in driver.take_events() if level == "error"]
    assert len(errors) == 1 and "\n" not in errors[0]
    assert "servo id 2 (c1) tension 12.0 N above max_force_n 10 N for 3 period(s)" in errors[0]
    assert "torque released" in driver.message
    trip = driver._trip_displacement[1]
    # no more pull on it: not commanded, even by OK, SAFE or HELD commands asking more
    goals = backend._goal.copy()
    _drive(driver, clock, [0.03, 0.03, 0.03], 10)
    _drive(driver, clock, [0.0, 0.0, 0.0], 3, safe=True)
    _drive(driver, clock, [0.0, 0.0, 0.0], 3, held=True)  # HELD after SAFE, and HELD re-arms nothing
    assert driver.over_force[1] and not backend.torque[1] and backend._goal[1] == goals[1]
    assert driver.take_events() == [("warning", "HELD command with no live command to hold (after "
                                     "SAFE, the watchdog or activation): applied as SAFE until an OK command")]
    # an OK command pulling less than where it tripped, tension below the limit: re-armed
    backend.load[1] = 0.0
    _drive(driver, clock, [0.0, trip - 0.002, 0.0], 1)
    assert not driver.over_force[1] and backend.torque[1]
    assert any("torque on again" in t for _, t in driver.take_events())
    statuses = _drive(driver, clock, [0.0, trip - 0.002, 0.0], 40)
    assert statuses[-1].diagnostics[1].health is ServoHealth.OK
    assert statuses[-1].commanded_displacement[1] == pytest.approx(trip - 0.002)


def test_an_ok_command_still_pulling_or_a_tension_still_above_does_not_rearm():
    driver, backend = _servos()
    clock = _Clock()
    _drive(driver, clock, [0.01, 0.01, 0.01], 30)
    backend.load[0] = 50.0
    _drive(driver, clock, [0.01, 0.01, 0.01], 3)
    assert driver.over_force[0]
    backend.load[0] = 0.0
    _drive(driver, clock, [0.02, 0.0, 0.0], 5)  # OK, but asks to pull further: stays released
    assert driver.over_force[0] and not backend.torque[0]


def test_the_sim_backend_measures_no_tension_and_says_so():
    cfg = _servo_config()
    driver = ServoDriver.from_config(cfg)
    assert not driver.backend.measures_tension
    assert driver.tension_limit.startswith("NOT enforced: the sim backend does not measure cable tension")
    driver.configure()
    driver.activate(0.0)
    status = _drive(driver, _Clock(), [0.01, 0.01, 0.01], 5)[-1]
    assert np.all(np.isnan(status.tension)) and not status.over_force.any()
    assert ServoDriver.from_config(_servo_config(actuators=[
        {"name": "c", "spool_radius_m": 0.01, "min_displacement_m": 0.0, "max_displacement_m": 0.01,
         "max_speed_m_s": 0.01}])).tension_limit == "none configured"
    driver, _ = _servos()
    assert driver.tension_limit.startswith("enforced: release after 3 period(s)")


def _one(**extra) -> dict:
    return {"name": "c", "spool_radius_m": 0.01, "min_displacement_m": 0.0, "max_displacement_m": 0.01,
            "max_speed_m_s": 0.01, **extra}


@pytest.mark.parametrize("changes, text", [
    ({"actuators": [_one(max_force_n=-1.0)]}, "servo_driver.actuators[0].max_force_n: must be > 0.0"),
    ({"actuators": [_one(max_force_n=5000.0)]}, "servo_driver.actuators[0].max_force_n: must be <= 2000.0"),
    ({"actuators": [_one(max_forc_n=5.0)]},
     "unknown key(s) max_forc_n (max_forc_n: did you mean 'max_force_n'?)"),
    ({"max_force_periods": 0}, "servo_driver.max_force_periods: must be >= 1"),
    ({"actuators": [{"name": "j", "joint": True, "min_position_rad": -1.0, "max_position_rad": 1.0,
                     "max_velocity_rad_s": 1.0, "max_force_n": 5.0}]},
     "servo_driver.actuators[0].max_force_n: applies to cable servos"),
    ({"backend": "dynamixel", "dynamixel": {"port": "/dev/null", "operating_mode": "extended_position"},
      "actuators": [_one(max_force_n=5.0)]},
     "servo_driver.actuators[0].max_force_n: needs dynamixel.torque_constant_nm_per_a"),
])
def test_max_force_is_validated_like_the_other_limits(changes, text):
    with pytest.raises(DriverConfigError) as err:
        _servo_config(**changes)
    assert text in str(err.value) and "\n" not in str(err.value)


def test_the_gate_marks_the_first_held_as_safe_command_of_each_episode():
    gate = LiveCommandGate()
    marks = []
    for safe, held in ((True, False), (False, True), (False, True), (False, False), (False, True),
                       (True, False), (False, True)):
        gate.as_safe(safe=safe, held=held)
        marks.append(gate.new_held_episode)
    assert marks == [False, True, False, False, False, False, True]
    assert gate.held_as_safe == 3
