"""Valve serial backend against the firmware-protocol emulator on a pseudo-terminal.

Faults injected at the wire: no answer, bad checksum, sensor fault bit, unplugged port,
and the board's own watchdog when the host stalls.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from soft_inverse_ros.core.drivers import valve_protocol as vp
from soft_inverse_ros.core.drivers.driver_state import DriverError, DriverState
from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticParams
from soft_inverse_ros.core.drivers.valve_config import ValveDriverConfig
from soft_inverse_ros.core.drivers.valve_driver import ValveDriver
from soft_inverse_ros.testing.valve_emulator import ValveEmulator

pytestmark = pytest.mark.timeout(60)

PERIOD = 0.01
PARAMS = PneumaticParams(1.0e5, 2100.0, 4.0e5, 2.0e4, 0.015)


def _config(port: str, **overrides) -> ValveDriverConfig:
    data = {
        "backend": "serial",
        "period_s": PERIOD,
        "watchdog": {"periods": 5},
        # Generous timeouts: the emulator thread shares a noisy machine with the test.
        "device_watchdog_s": 0.5,
        "serial": {"port": port, "baud_rate": 1000000, "reply_timeout_s": 0.25},
        "pneumatics": {
            "supply_pressure_pa": PARAMS.supply_pressure_pa,
            "inflow_coefficient": PARAMS.inflow_coefficient,
            "outflow_rate_pa_s": PARAMS.outflow_rate_pa_s,
            "outflow_knee_pa": PARAMS.outflow_knee_pa,
            "latency_s": PARAMS.latency_s,
        },
        "chambers": [
            {"name": "left", "channel": 0, "has_sensor": True, "max_pressure_pa": 60000},
            {"name": "right", "channel": 1, "has_sensor": True, "max_pressure_pa": 60000},
        ],
    }
    data.update(overrides)
    return ValveDriverConfig.from_mapping(data)


@pytest.fixture
def emulator():
    with ValveEmulator([PARAMS] * 3, sensor_mask=0b011) as emu:
        yield emu


@pytest.fixture
def driver(emulator):
    drv = ValveDriver.from_config(_config(emulator.port_name))
    yield drv
    drv.shutdown(time.monotonic())


def _active(driver):
    driver.configure(time.monotonic())
    driver.activate(time.monotonic())
    return driver


def _periods(driver, command, count, sleep=PERIOD):
    status = None
    for _ in range(count):
        if command is not None:
            driver.command(np.asarray(command, dtype=float))
        status = driver.update(time.monotonic())
        time.sleep(sleep)
    return status


def test_configure_arm_and_track_pressure_over_the_wire(emulator, driver):
    driver.configure(time.monotonic())
    assert emulator.device.flags & vp.Flags.CONFIGURED
    assert emulator.device.pwm_hz == 60 and emulator.device.watchdog_ms == 500
    # The board's own limit is the driver's trip pressure (110 % of the maximum).
    assert emulator.device.max_pressure[0] == pytest.approx(66000.0, abs=1.0)
    driver.activate(time.monotonic())
    assert not emulator.flags() & vp.Flags.latched()
    deadline = time.monotonic() + 5.0
    status = None
    while time.monotonic() < deadline:
        status = _periods(driver, [25000.0, 0.0], 1)
        if abs(status.pressure[0] - 25000.0) < 500.0 and time.monotonic() > deadline - 4.0:
            break
    assert status.state is DriverState.ACTIVE
    assert status.pressure[0] == pytest.approx(25000.0, abs=500.0)
    assert emulator.pressures()[0] == pytest.approx(25000.0, abs=1000.0)
    assert status.duty[0] > 0.0 and status.duty[1] == 0.0
    assert status.comm_errors == 0
    assert set(emulator.received_types) >= {vp.MsgType.HELLO, vp.MsgType.CONFIG, vp.MsgType.ARM,
                                            vp.MsgType.SET_DUTY, vp.MsgType.VENT_ALL}


@pytest.mark.parametrize("fault", ["mute", "bad_crc"])
def test_silent_or_corrupt_board_errors_within_two_periods(emulator, driver, fault):
    _active(driver)
    _periods(driver, [20000.0, 0.0], 10)
    (emulator.mute if fault == "mute" else emulator.corrupt_crc)()
    first = _periods(driver, [20000.0, 0.0], 1, sleep=0)
    second = _periods(driver, [20000.0, 0.0], 1, sleep=0)
    assert first.state is DriverState.ACTIVE and first.consecutive_comm_errors == 1
    assert second.state is DriverState.ERROR
    assert ("no reply" if fault == "mute" else "checksum") in second.message
    # The vent request cannot be confirmed either; the board's watchdog vents on its own.
    time.sleep(0.7)
    assert emulator.flags() & (vp.Flags.VENT_WATCHDOG | vp.Flags.VENT_HOST)
    assert emulator.device.applied_duty_wire().max() == 0


def test_sensor_fault_bit_errors_and_vents_in_one_period(emulator, driver):
    _active(driver)
    _periods(driver, [20000.0, 0.0], 10)
    emulator.sensor_fault(0)
    status = _periods(driver, [20000.0, 0.0], 1, sleep=0)
    assert status.state is DriverState.ERROR and "sensor fault" in status.message
    assert emulator.flags() & vp.Flags.VENT_HOST  # the driver's VENT_ALL reached the board


def test_unplugged_port_errors_in_one_period(emulator, driver):
    _active(driver)
    _periods(driver, [20000.0, 0.0], 5)
    emulator.unplug()
    status = _periods(driver, [20000.0, 0.0], 1, sleep=0)
    assert status.state is DriverState.ERROR and "valve port failed" in status.message


def test_board_watchdog_vents_when_the_host_stalls(emulator, driver):
    _active(driver)
    _periods(driver, [20000.0, 0.0], 20)
    time.sleep(0.8)  # the host stalls longer than the board watchdog
    assert emulator.flags() & vp.Flags.VENT_WATCHDOG
    status = _periods(driver, [20000.0, 0.0], 1, sleep=0)
    assert status.state is DriverState.ERROR and "vent_watchdog" in status.message


def test_host_watchdog_vents_and_deactivates(emulator, driver):
    _active(driver)
    _periods(driver, [20000.0, 0.0], 10)
    status = _periods(driver, None, 5)
    assert status.watchdog_tripped and status.state is DriverState.INACTIVE
    assert emulator.flags() & vp.Flags.VENT_HOST


def test_sensor_missing_on_the_board_is_a_configure_error(emulator):
    driver = ValveDriver.from_config(
        _config(
            emulator.port_name,
            chambers=[{"name": "c", "channel": 2, "has_sensor": True, "max_pressure_pa": 50000}],
        )
    )
    with pytest.raises(DriverError, match=r"sensor the board does not report: c \(channel 2\)"):
        driver.configure(time.monotonic())


def test_garbage_on_the_line_is_nacked_and_does_not_break_the_link(emulator, driver):
    fd = os.open(emulator.port_name, os.O_WRONLY | os.O_NOCTTY)
    try:
        # A frame with a broken checksum, as line noise would produce.
        bad = bytearray(vp.encode_frame(vp.MsgType.SET_DUTY, 3, vp.encode_duties([1.0, 1.0, 1.0])))
        bad[-1] ^= 0xFF
        os.write(fd, b"\x00\x17" + bytes(bad))
    finally:
        os.close(fd)
    time.sleep(0.05)
    assert emulator.bad_frames_received >= 1
    assert emulator.device.applied_duty_wire().max() == 0  # the corrupt command was not applied
    _active(driver)  # stale NACKs are skipped by sequence number
    status = _periods(driver, [10000.0, 0.0], 5)
    assert status.state is DriverState.ACTIVE


def test_unopenable_port_is_a_clear_configure_error(tmp_path):
    driver = ValveDriver.from_config(_config(str(tmp_path / "ttyACM_missing")))
    with pytest.raises(DriverError, match="valve board: cannot open"):
        driver.configure(time.monotonic())


def test_a_board_of_more_channels_than_the_protocol_carries_is_one_error():
    """A board reporting 16 channels: the CONFIG frame overflowed (ProtocolError escaped the
    driver, the node said only "lifecycle transition failed")."""
    from soft_inverse_ros.core.drivers.valve_backend import ValveBackend, ValveCommError

    class SixteenChannels(ValveBackend):
        def _exchange(self, now, msg_type, payload):
            return vp.MsgType.INFO, vp.encode_info(vp.DeviceInfo(vp.PROTOCOL_VERSION, 16, 0b11, 1, 500))

        def _open_transport(self):
            pass

        def close(self):
            pass

    with pytest.raises(ValveCommError, match=r"bad INFO: the board reports 16 channels; "
                                             r"the protocol carries 1 to 8"):
        SixteenChannels().open(0.0)


def test_a_malformed_nack_is_a_communication_error():
    """A NACK of one byte raised ProtocolError past the driver's error handling."""
    from soft_inverse_ros.core.drivers.valve_backend import ValveBackend, ValveCommError

    class OneByteNack(ValveBackend):
        def _exchange(self, now, msg_type, payload):
            return vp.MsgType.NACK, b"\x01"

        def _open_transport(self):
            pass

        def close(self):
            pass

    with pytest.raises(ValveCommError, match="bad NACK to READ_STATE: NACK must have 2 bytes"):
        OneByteNack().read_state(0.0)
