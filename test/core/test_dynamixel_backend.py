"""Dynamixel backend through the real dynamixel-sdk, against a Protocol 2.0 emulator on a pty.

Faults injected at the wire: no answer, bad CRC, hardware error bit, unplugged port. The
driver must report each and reach its safe state within two command periods.
"""

from __future__ import annotations

import math
import random
import time

import numpy as np
import pytest
from dynamixel_sdk import PacketHandler

from soft_inverse_ros.core.drivers.driver_state import DriverError, DriverState
from soft_inverse_ros.testing.dynamixel_emulator import (
    DynamixelEmulator,
    PacketDecoder,
    add_stuffing,
    dynamixel_crc16,
    encode_packet,
    remove_stuffing,
)
from soft_inverse_ros.core.drivers.servo_config import ServoDriverConfig
from soft_inverse_ros.core.drivers.servo_driver import ServoDriver, ServoHealth

pytestmark = pytest.mark.timeout(60)

IDS = (1, 2, 3)
PERIOD = 0.01
MAX_SPEED = 0.05
SPOOL = 0.01
TICKS_PER_RAD = 4096 / (2 * math.pi)


# -- wire format -----------------------------------------------------------------------
def test_crc_matches_the_manual_and_the_sdk():
    # e-manual Protocol 2.0 example: PING to ID 1 = FF FF FD 00 01 03 00 01 19 4E.
    assert encode_packet(1, 0x01) == bytes.fromhex("FFFFFD0001030001194E")
    sdk = PacketHandler(2.0)
    rng = random.Random(1)
    for _ in range(50):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 60)))
        assert dynamixel_crc16(data) == sdk.updateCRC(0, list(data), len(data))


def test_byte_stuffing_matches_the_sdk_and_round_trips():
    sdk = PacketHandler(2.0)
    params = bytes([0x10, 0xFF, 0xFF, 0xFD, 0x22, 0xFF, 0xFF, 0xFD, 0xFD])
    payload = bytes([0x03]) + params
    stuffed = add_stuffing(payload)
    assert stuffed.count(b"\xff\xff\xfd\xfd") == 2
    assert remove_stuffing(stuffed) == payload
    # The SDK's own packet for the same instruction is byte-identical to ours.
    tx = [0, 0, 0, 0, 7, (len(payload) + 2) & 0xFF, 0] + list(payload) + [0, 0]
    tx = sdk.addStuffing(tx)
    n = tx[5] + 7
    tx[:4] = [0xFF, 0xFF, 0xFD, 0x00]
    crc = sdk.updateCRC(0, tx, n - 2)
    tx[n - 2 : n] = [crc & 0xFF, crc >> 8]
    assert bytes(tx[:n]) == encode_packet(7, 0x03, params)
    decoded = PacketDecoder().feed(b"\x00\x13" + bytes(tx[:n]))
    assert len(decoded) == 1 and decoded[0].params == params and decoded[0].crc_ok


# -- driver over the emulator ----------------------------------------------------------
def _config(port: str, **overrides) -> ServoDriverConfig:
    data = {
        "backend": "dynamixel",
        "period_s": PERIOD,
        "watchdog": {"periods": 5, "action": "hold"},
        "max_consecutive_comm_errors": 2,
        "dynamixel": {
            "port": port,
            "baud_rate": 1000000,
            "operating_mode": "position",
            # 102 ms status timeout: generous, the emulator shares a noisy machine.
            "latency_timer_ms": 50,
            "expected_model_number": 1020,
            "torque_constant_nm_per_a": 1.6,
        },
        "actuators": [
            {
                "name": f"cable{i}",
                "id": dxl_id,
                "spool_radius_m": SPOOL,
                "zero_offset_rad": math.pi,
                "direction": -1 if i == 1 else 1,
                "min_displacement_m": -0.005,
                "max_displacement_m": 0.02,
                "max_speed_m_s": MAX_SPEED,
            }
            for i, dxl_id in enumerate(IDS)
        ],
    }
    data.update(overrides)
    return ServoDriverConfig.from_mapping(data)


@pytest.fixture
def emulator():
    with DynamixelEmulator(IDS) as emu:
        yield emu


@pytest.fixture
def driver(emulator):
    drv = ServoDriver.from_config(_config(emulator.port_name))
    yield drv
    drv.shutdown()


def _active(driver: ServoDriver) -> ServoDriver:
    driver.configure()
    driver.activate(time.monotonic())
    return driver


def _periods(driver, command, count):
    status = None
    for _ in range(count):
        if command is not None:
            driver.command(np.asarray(command, dtype=float))
        status = driver.update(time.monotonic())
    return status


def test_configure_writes_mode_and_limits_activate_enables_torque(emulator, driver):
    driver.configure()
    for i, dxl_id in enumerate(IDS):
        assert emulator.register(dxl_id, "operating_mode") == 3
        assert emulator.register(dxl_id, "torque_enable") == 0
        lo, hi = emulator.register(dxl_id, "min_position_limit"), emulator.register(dxl_id, "max_position_limit")
        # [−5, 20] mm on a 1 cm spool around π rad (reversed for the second servo).
        span = (math.pi + np.array([-0.5, 2.0]) * (-1 if i == 1 else 1)) * TICKS_PER_RAD
        assert lo == math.ceil(span.min() - 1e-9) and hi == math.floor(span.max() + 1e-9)
    driver.activate(time.monotonic())
    assert all(emulator.register(i, "torque_enable") == 1 for i in IDS)
    # Activation holds the present position: first goal = present (2048 ticks).
    assert all(emulator.servos[i].goal_writes[0] == 2048 for i in IDS)


def test_tracking_feedback_and_health_readings(emulator, driver):
    _active(driver)
    status = None
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        driver.command(np.array([0.01, 0.004, -0.003]))
        status = driver.update(time.monotonic())
        if np.allclose(status.displacement, [0.01, 0.004, -0.003], atol=2e-5):
            break
        time.sleep(0.002)
    assert status.state is DriverState.ACTIVE
    # Feedback through present position: within one tick (1.5e-5 m on a 1 cm spool).
    np.testing.assert_allclose(status.displacement, [0.01, 0.004, -0.003], atol=2e-5)
    np.testing.assert_allclose(status.position, math.pi + np.array([1.0, -0.4, -0.3]), atol=2e-3)
    assert np.all(np.isfinite(status.effort)) and np.all(np.isfinite(status.velocity))
    for d in status.diagnostics:
        assert d.health is ServoHealth.OK and d.temperature_c == 36 and d.voltage_v == pytest.approx(12.0)
        assert d.hardware_error == 0 and d.torque_enabled


def test_out_of_limit_commands_never_reach_the_device(emulator, driver):
    _active(driver)
    status = _periods(driver, [1.0, 1.0, -1.0], 80)
    assert emulator.wait_until_idle()
    assert status.position_clipped.all()
    for i, dxl_id in enumerate(IDS):
        servo = emulator.servos[dxl_id]
        assert servo.rejected_goals == []  # the device never saw a goal outside its limits
        goals = np.array(servo.goal_writes)
        lo, hi = servo.get("min_position_limit"), servo.get("max_position_limit")
        assert np.all((goals >= lo) & (goals <= hi))
        # Speed limit: 0.5 mm per period = 0.05 rad = 32.6 ticks (+1 for rounding).
        assert np.max(np.abs(np.diff(goals))) <= MAX_SPEED * PERIOD / SPOOL * TICKS_PER_RAD + 1
    np.testing.assert_allclose(status.commanded_displacement, [0.02, 0.02, -0.005])
    assert all(d.device_clips == 0 for d in status.diagnostics)


@pytest.mark.parametrize("fault", ["mute", "bad_crc"])
def test_silent_or_corrupt_servo_isolated_within_two_periods(emulator, driver, fault):
    _active(driver)
    _periods(driver, [0.002, 0.002, 0.002], 3)
    (emulator.mute if fault == "mute" else emulator.corrupt_crc)(2)
    assert emulator.wait_until_idle()
    writes_before = {i: len(emulator.servos[i].goal_writes) for i in IDS}
    first = _periods(driver, [0.004, 0.004, 0.004], 1)
    second = _periods(driver, [0.004, 0.004, 0.004], 1)
    assert first.diagnostics[1].health is ServoHealth.WARN
    assert second.diagnostics[1].health is ServoHealth.FAULT
    assert second.state is DriverState.ACTIVE
    expected = "no status packet" if fault == "mute" else "CRC"
    assert "servo id 2 (cable1) does not answer" in second.message
    assert expected in second.diagnostics[1].message
    # Safe state for that servo: torque off reached it (sync write needs no answer).
    assert emulator.wait_until_idle()
    assert emulator.register(2, "torque_enable") == 0
    # The others keep being commanded.
    _periods(driver, [0.006, 0.006, 0.006], 3)
    assert emulator.wait_until_idle()
    for dxl_id in (1, 3):
        assert len(emulator.servos[dxl_id].goal_writes) >= writes_before[dxl_id] + 5
        assert emulator.register(dxl_id, "torque_enable") == 1
    # Servo 2 got the goal of the first (warning) period only.
    assert len(emulator.servos[2].goal_writes) == writes_before[2] + 1


def test_hardware_error_bit_faults_the_servo_in_one_period(emulator, driver):
    _active(driver)
    _periods(driver, [0.002, 0.002, 0.002], 2)
    emulator.raise_hardware_error(3, bits=(1 << 5) | (1 << 2))
    status = _periods(driver, [0.003, 0.003, 0.003], 1)
    diag = status.diagnostics[2]
    assert diag.health is ServoHealth.FAULT and diag.hardware_error == 0x24
    assert "overheating, overload" in diag.message
    assert status.state is DriverState.ACTIVE and np.isnan(status.commanded_displacement[2])


def test_hardware_error_with_stop_all_turns_every_torque_off(emulator):
    driver = ServoDriver.from_config(_config(emulator.port_name, on_servo_fault="stop_all"))
    try:
        _active(driver)
        _periods(driver, [0.002, 0.002, 0.002], 2)
        emulator.raise_hardware_error(1)
        status = _periods(driver, [0.003, 0.003, 0.003], 1)
        assert status.state is DriverState.ERROR and "overload" in status.message
        assert emulator.wait_until_idle()
        assert all(emulator.register(i, "torque_enable") == 0 for i in IDS)
    finally:
        driver.shutdown()


def test_unplugged_port_goes_to_error_in_one_period(emulator, driver):
    _active(driver)
    _periods(driver, [0.002, 0.002, 0.002], 2)
    emulator.unplug()
    status = _periods(driver, [0.003, 0.003, 0.003], 1)
    assert status.state is DriverState.ERROR
    assert "servo port failed" in status.message and "Input/output error" in status.message
    assert np.isnan(status.displacement).all()
    driver.shutdown()  # never raises on a dead port
    assert driver.state is DriverState.FINALIZED


def test_configure_fails_clearly_for_a_missing_servo(emulator):
    emulator.mute(3)
    driver = ServoDriver.from_config(_config(emulator.port_name))
    with pytest.raises(DriverError, match=r"servo id 3 \(cable2\): no answer to ping"):
        driver.configure()
    assert driver.state is DriverState.UNCONFIGURED


def test_configure_fails_for_a_wrong_model(emulator):
    bus = {"port": emulator.port_name, "operating_mode": "position", "latency_timer_ms": 50,
           "expected_model_number": 1060}  # XL430-W250 expected, XM430-W350 present
    driver = ServoDriver.from_config(_config(emulator.port_name, dynamixel=bus))
    with pytest.raises(DriverError, match="model number 1020, expected 1060"):
        driver.configure()


def test_watchdog_release_and_deactivate_turn_torque_off(emulator):
    driver = ServoDriver.from_config(
        _config(emulator.port_name, watchdog={"periods": 2, "action": "release"})
    )
    try:
        _active(driver)
        _periods(driver, [0.002, 0.002, 0.002], 2)
        status = _periods(driver, None, 2)
        assert status.watchdog_tripped and status.state is DriverState.INACTIVE
        assert emulator.wait_until_idle()
        assert all(emulator.register(i, "torque_enable") == 0 for i in IDS)
        driver.activate(time.monotonic())
        assert all(emulator.register(i, "torque_enable") == 1 for i in IDS)
        driver.deactivate()
        assert emulator.wait_until_idle()
        assert all(emulator.register(i, "torque_enable") == 0 for i in IDS)
    finally:
        driver.shutdown()


def test_unopenable_port_is_a_clear_configure_error(tmp_path):
    driver = ServoDriver.from_config(_config(str(tmp_path / "ttyUSB_missing")))
    with pytest.raises(DriverError, match="servo port: cannot open"):
        driver.configure()
