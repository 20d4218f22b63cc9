"""The reference firmware sketch, built for the host, driven by the real serial backend.

``firmware/valve_controller/valve_controller.ino`` is compiled unchanged with g++
against a host Arduino API (``firmware/valve_controller/host``) whose valves switch
simulated chambers at the sketch's own PWM edges; the sketch's Serial is a
pseudo-terminal the Python ValveDriver opens. Skipped when g++ is missing.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time
import tty

import numpy as np
import pytest

from soft_inverse_ros.core.drivers import valve_protocol as vp
from soft_inverse_ros.core.drivers.driver_state import DriverState
from soft_inverse_ros.core.drivers.valve_backend import SerialValveBackend
from soft_inverse_ros.core.drivers.valve_config import SerialValveConfig, ValveDriverConfig
from soft_inverse_ros.core.drivers.valve_driver import ValveDriver

pytestmark = pytest.mark.timeout(120)

FIRMWARE = pathlib.Path(__file__).resolve().parents[2] / "firmware" / "valve_controller"
PNEUMATICS = {
    "supply_pressure_pa": 1.0e5,
    "inflow_coefficient": 2100.0,
    "outflow_rate_pa_s": 4.0e5,
    "outflow_knee_pa": 2.0e4,
    "latency_s": 0.0,
}


@pytest.fixture(scope="module")
def firmware_binary(tmp_path_factory) -> pathlib.Path:
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ not available to build the firmware for the host")
    out = tmp_path_factory.mktemp("firmware") / "valve_host"
    subprocess.run(
        [compiler, "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-I", str(FIRMWARE / "host"),
         str(FIRMWARE / "host" / "host_main.cpp"), "-o", str(out)],
        check=True, capture_output=True, timeout=120,
    )
    return out


@pytest.fixture
def board(firmware_binary):
    """The firmware process on the master side of a pty; yields the slave's path."""
    master, slave = os.openpty()
    tty.setraw(slave)
    tty.setraw(master)
    process = subprocess.Popen([str(firmware_binary)], stdin=master, stdout=master, close_fds=True)
    try:
        yield os.ttyname(slave)
    finally:
        process.kill()
        process.wait(timeout=5)
        os.close(master)
        os.close(slave)


def _driver(port: str) -> ValveDriver:
    cfg = ValveDriverConfig.from_mapping({
        "backend": "serial",
        "period_s": 0.01,
        "watchdog": {"periods": 20},
        "device_watchdog_s": 0.3,
        "serial": {"port": port, "reply_timeout_s": 0.25, "boot_timeout_s": 2.0},
        "pneumatics": PNEUMATICS,
        "chambers": [
            {"name": "left", "channel": 0, "has_sensor": True, "max_pressure_pa": 60000},
            {"name": "right", "channel": 1, "has_sensor": True, "max_pressure_pa": 60000},
            {"name": "open_loop", "channel": 3, "has_sensor": False, "max_pressure_pa": 60000},
        ],
        "pairs": [{"positive": "left", "negative": "right"}],
    })
    return ValveDriver.from_config(cfg)


def test_firmware_protocol_and_pressure_loop(board):
    driver = _driver(board)
    driver.configure(time.monotonic())
    info = driver.backend.info
    assert (info.protocol_version, info.n_channels, info.sensor_mask) == (1, 4, 0b0111)
    driver.activate(time.monotonic())
    pressures = []
    end = time.monotonic() + 2.5
    while time.monotonic() < end:
        driver.command(np.array([25000.0, 5000.0, 0.0]))
        status = driver.update(time.monotonic())
        pressures.append(status.pressure[0])
        time.sleep(0.01)
    assert status.state is DriverState.ACTIVE, status.message
    # Closed loop through the sketch's PWM and sensor conversion (10-bit ADC: ~110 Pa/count).
    # The pair nets 25 − 5 = 20 kPa. The chamber sees the switched 60 Hz PWM, not its
    # average: this small, fast chamber ripples by about ±2.5 kPa around the mean.
    recent = np.array(pressures[-50:])
    assert abs(recent.mean() - 20000.0) < 1000.0, recent
    assert recent.std() < 3000.0, recent
    assert status.pressure[1] < 500.0  # the antagonist deflated
    assert status.duty[1] == 0.0 and 0.0 < status.duty[0] < 1.0
    driver.deactivate(time.monotonic())
    state = driver.backend.read_state(time.monotonic())
    assert state.flags & vp.Flags.VENT_HOST and max(state.duty) == 0.0
    driver.shutdown(time.monotonic())


def test_firmware_latches_watchdog_vent_and_nacks_bad_frames(board):
    backend = SerialValveBackend(SerialValveConfig(board, reply_timeout_s=0.25, boot_timeout_s=2.0))
    try:
        now = time.monotonic()
        backend.open(now)
        with pytest.raises(Exception, match="NOT_CONFIGURED"):
            backend.set_duty(now, np.zeros(4))
        state = backend.configure(now, 60, 0.05, [60000, 60000, 60000, 60000])
        assert state.flags & vp.Flags.CONFIGURED and state.flags & vp.Flags.VENT_BOOT
        state = backend.arm(now)
        assert not state.flags & vp.Flags.latched()
        state = backend.set_duty(now, np.array([0.2, 0.0, 0.0, 0.0]))  # settles near 14 kPa
        assert state.duty[0] == 0.2
        time.sleep(0.5)  # no traffic for 10 watchdog periods
        state = backend.read_state(time.monotonic())
        assert state.flags & vp.Flags.VENT_WATCHDOG and state.duty[0] == 0.0
        state = backend.set_duty(time.monotonic(), np.array([0.2, 0.0, 0.0, 0.0]))
        assert state.duty[0] == 0.0  # latched until ARM
        with pytest.raises(Exception, match="BAD_VALUE"):
            backend.configure(time.monotonic(), 60, 0.05, [1, 2])  # wrong channel count
        # A corrupted frame gets a NACK BAD_CRC (the backend reports it as a failed exchange).
        backend._seq = 40
        frame = bytearray(vp.encode_frame(vp.MsgType.HEARTBEAT, 41))
        frame[-1] ^= 0x55
        backend._serial.write(bytes(frame))
        deadline = time.monotonic() + 1.0
        decoder, got = vp.FrameDecoder(), []
        while time.monotonic() < deadline and not got:
            got = [f for f in decoder.feed(backend._serial.read(64)) if f.crc_ok]
        assert got and got[0].msg_type == vp.MsgType.NACK
        assert vp.decode_nack(got[0].payload) == (vp.NackCode.BAD_CRC, vp.MsgType.HEARTBEAT)
        state = backend.arm(time.monotonic())  # the link still works after the noise
        assert not state.flags & vp.Flags.latched()
    finally:
        backend.close()
