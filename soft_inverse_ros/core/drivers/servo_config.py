"""Configuration of the cable-servo driver, validated once from a YAML mapping.

Example (``config/drivers/servo_dynamixel.yaml``)::

    servo_driver:
      backend: dynamixel            # dynamixel | sim
      period_s: 0.01                # command period (the node's timer)
      watchdog: {periods: 10, action: hold}    # hold | release (torque off)
      max_consecutive_comm_errors: 2
      on_servo_fault: isolate       # isolate (others keep going) | stop_all
      max_force_periods: 3          # periods above max_force_n before the cable is released
      dynamixel: {port: /dev/ttyUSB0, baud_rate: 1000000, operating_mode: extended_position,
                  torque_constant_nm_per_a: 1.6}   # needed to measure tension (max_force_n)
      actuators:
        - {name: cable0, id: 1, spool_radius_m: 0.01, zero_offset_rad: 3.1416, direction: 1,
           gear_ratio: 1.0, min_displacement_m: -0.005, max_displacement_m: 0.03,
           max_speed_m_s: 0.05, max_force_n: 15}
"""

from __future__ import annotations

import math
import pathlib
from dataclasses import dataclass, field

import numpy as np

from soft_inverse_ros.core.drivers.config_reader import (
    ConfigReader,
    read_yaml_section,
    unique_names,
)
from soft_inverse_ros.core.drivers.servo_calibration import ServoCalibration

#: Dynamixel X-series operating modes usable for cable position control.
OPERATING_MODES = {"position": 3, "extended_position": 4, "current_based_position": 5}
#: upper bounds past which a value is a unit mistake, not a servo: a command period [s]
#: (ms written as s), a cable's speed [m/s] (mm/s as m/s: a spool on a hobby servo reaches
#: ~0.05 m/s), a joint's speed [rad/s] (deg/s as rad/s)
MAX_PERIOD_S = 1.0
MAX_CABLE_SPEED_M_S = 1.0
MAX_JOINT_VELOCITY_RAD_S = 50.0
#: upper bound of a cable's ``max_force_n`` [N]: an X-series servo on a 10 mm spool pulls
#: ~400 N at stall; more is a unit mistake (mN or gram-force as N)
MAX_CABLE_FORCE_N = 2000.0
#: upper bound of ``max_force_periods``: a tension limit acting after more periods than
#: this (1 s at 100 Hz) is no short-term protection
MAX_FORCE_PERIODS = 100
#: Baud rates the dynamixel-sdk PortHandler accepts.
SDK_BAUD_RATES = (
    9600, 19200, 38400, 57600, 115200, 230400, 460800, 500000, 576000, 921600,
    1000000, 1152000, 2000000, 2500000, 3000000, 3500000, 4000000,
)
#: Position range of X-series servos in (single-turn) position mode [ticks].
POSITION_MODE_TICKS = (0, 4095)
#: Position range in extended position mode (±256 turns) [ticks].
EXTENDED_MODE_TICKS = (-1_048_575, 1_048_575)


@dataclass(frozen=True)
class DynamixelConfig:
    """Dynamixel Protocol 2.0 bus settings (X-series control table).

    Attributes:
        port: Serial device (``/dev/ttyUSB0``, or a pseudo-terminal in tests).
        baud_rate: Bus speed [bit/s]; must match the servos' Baud Rate register.
        operating_mode: ``position`` (one turn), ``extended_position`` or
            ``current_based_position``; written to register 11 at configure.
        ticks_per_revolution: Position resolution [ticks/turn] (4096 for X-series).
        latency_timer_ms: USB-serial latency the SDK waits for (status timeout is
            2·latency + 2 ms + transfer time); 16 ms is the FTDI default.
        expected_model_number: Model number every servo must report (1020 = XM430-W350),
            or None to accept any.
        current_unit_a: Present Current unit [A] (2.69 mA on XM430).
        velocity_unit_rad_s: Present Velocity unit [rad/s] (0.229 rpm).
        voltage_unit_v: Present Input Voltage unit [V] (0.1 V).
        torque_constant_nm_per_a: Shaft torque per ampere, to report efforts; None when
            efforts are not reported.
        write_position_limits: Write Min/Max Position Limit (EEPROM) from the
            displacement limits at configure, so the servo itself rejects goals outside
            (``operating_mode: position`` only: the other modes ignore those registers).
        profile_velocity: Profile Velocity register (0 = no device-side profile).
    """

    port: str
    baud_rate: int = 1_000_000
    operating_mode: str = "extended_position"
    ticks_per_revolution: int = 4096
    latency_timer_ms: float = 16.0
    expected_model_number: int | None = None
    current_unit_a: float = 0.00269
    velocity_unit_rad_s: float = 0.229 * 2.0 * math.pi / 60.0
    voltage_unit_v: float = 0.1
    torque_constant_nm_per_a: float | None = None
    write_position_limits: bool = True
    profile_velocity: int = 0

    @property
    def operating_mode_value(self) -> int:
        return OPERATING_MODES[self.operating_mode]

    @property
    def ticks_per_rad(self) -> float:
        return self.ticks_per_revolution / (2.0 * math.pi)

    @property
    def tick_range(self) -> tuple[int, int]:
        return POSITION_MODE_TICKS if self.operating_mode == "position" else EXTENDED_MODE_TICKS

    @classmethod
    def from_reader(cls, r: ConfigReader) -> "DynamixelConfig":
        baud = r.int("baud_rate", 1_000_000)
        if baud not in SDK_BAUD_RATES:
            raise r.error("baud_rate", f"unsupported by dynamixel-sdk: {baud}")
        model = r.int("expected_model_number", None, min=0, max=65535)
        torque_constant = r.float("torque_constant_nm_per_a", None, min=0.0, min_exclusive=True)
        cfg = cls(
            port=r.str("port"),
            baud_rate=baud,
            operating_mode=r.choice("operating_mode", OPERATING_MODES, "extended_position"),
            ticks_per_revolution=r.int("ticks_per_revolution", 4096, min=2),
            latency_timer_ms=r.float("latency_timer_ms", 16.0, min=0.0, max=255.0),  # FTDI's range
            expected_model_number=model,
            current_unit_a=r.float("current_unit_a", 0.00269, min=0.0, min_exclusive=True),
            velocity_unit_rad_s=r.float(
                "velocity_unit_rad_s", 0.229 * 2.0 * math.pi / 60.0, min=0.0, min_exclusive=True
            ),
            voltage_unit_v=r.float("voltage_unit_v", 0.1, min=0.0, min_exclusive=True),
            torque_constant_nm_per_a=torque_constant,
            write_position_limits=r.bool("write_position_limits", True),
            profile_velocity=r.int("profile_velocity", 0, min=0),
        )
        if r.has("write_position_limits") and cfg.write_position_limits and cfg.operating_mode != "position":
            raise r.error("write_position_limits", "applies to operating_mode: position only (the "
                          f"{cfg.operating_mode} mode has no position-limit registers)")
        r.finish()
        return cfg


@dataclass(frozen=True)
class SimServoConfig:
    """Simulated servo dynamics (same for every servo).

    Attributes:
        time_constant_s: First-order lag of the shaft angle toward the goal [s] (>= 0).
        dead_time_s: Delay between a goal write and its effect [s] (>= 0).
        max_velocity_rad_s: Shaft speed limit of the servo itself [rad/s] (> 0).
    """

    time_constant_s: float = 0.03
    dead_time_s: float = 0.005
    max_velocity_rad_s: float = 6.0

    @classmethod
    def from_reader(cls, r: ConfigReader) -> "SimServoConfig":
        cfg = cls(
            time_constant_s=r.float("time_constant_s", 0.03, min=0.0),
            dead_time_s=r.float("dead_time_s", 0.005, min=0.0),
            max_velocity_rad_s=r.float("max_velocity_rad_s", 6.0, min=0.0, min_exclusive=True),
        )
        r.finish()
        return cfg


@dataclass(frozen=True)
class ServoDriverConfig:
    """Validated servo driver configuration (arrays of shape (n,), actuator order).

    Attributes:
        names: Actuator names (the cable actuators of the robot description, or the
            joints of a hybrid robot: see ``joint``).
        ids: Device IDs on the bus (1..252), one per actuator.
        calibration: Cable ↔ servo mapping.
        min_displacement: Lower cable displacement limits [m].
        max_displacement: Upper cable displacement limits [m].
        max_speed: Cable speed limits [m/s] (> 0): the commanded displacement changes by at
            most ``max_speed · period_s`` per period.
        period_s: Command period [s].
        watchdog_periods: Periods without a command before the watchdog acts.
        watchdog_action: ``hold`` (keep the last goal) or ``release`` (torque off; the
            driver drops to INACTIVE).
        max_consecutive_comm_errors: Failed reads in a row before a servo is declared
            not answering.
        on_servo_fault: ``isolate`` (torque off that servo, keep commanding the others) or
            ``stop_all`` (torque off everything, driver ERROR).
        backend: ``dynamixel`` or ``sim``.
        dynamixel: Bus settings (required for the dynamixel backend).
        sim: Simulated dynamics.
        max_force: Cable tension limits [N] (``max_force_n``; inf: none): a cable whose
            measured tension stays above its limit for more than ``max_force_periods``
            periods is released (torque off) until an OK command asks it to pull less.
            Only enforced where the backend measures tension (Dynamixel with
            ``torque_constant_nm_per_a``; the sim backend reports none).
        max_force_periods: Consecutive periods above ``max_force`` that trip the limit.
    """

    names: tuple[str, ...]
    ids: tuple[int, ...]
    calibration: ServoCalibration
    min_displacement: np.ndarray
    max_displacement: np.ndarray
    max_speed: np.ndarray
    period_s: float = 0.01
    watchdog_periods: int = 10
    watchdog_action: str = "hold"
    max_consecutive_comm_errors: int = 2
    on_servo_fault: str = "isolate"
    backend: str = "sim"
    dynamixel: DynamixelConfig | None = None
    sim: SimServoConfig = field(default_factory=SimServoConfig)
    #: (n,) bool: a joint servo (``joint: true``) drives a robot joint directly: its
    #: displacement is the joint angle [rad] (limits ``min/max_position_rad``, speed
    #: ``max_velocity_rad_s``), and a SAFE command holds its goal. None: no joint servos.
    joint: np.ndarray | None = None
    #: (n,) where the simulated servos start (displacement [m], joint angle [rad]); None: 0
    sim_start: np.ndarray | None = None
    max_force: np.ndarray | None = None
    max_force_periods: int = 3

    def __post_init__(self) -> None:
        if self.max_force is None:  # built in code without one: no tension limit
            object.__setattr__(self, "max_force", np.full(len(self.names), np.inf))

    @property
    def has_force_limit(self) -> bool:
        """Some actuator has a finite ``max_force_n``."""
        return bool(np.any(np.isfinite(self.max_force)))

    @property
    def size(self) -> int:
        return len(self.names)

    @classmethod
    def from_mapping(cls, data: object, path: str = "servo_driver") -> "ServoDriverConfig":
        """Validate a mapping (the value under the ``servo_driver`` key)."""
        r = ConfigReader(data, path)
        backend = r.choice("backend", ("dynamixel", "sim"), "sim")
        period = r.float("period_s", 0.01, min=0.0, min_exclusive=True, max=MAX_PERIOD_S)
        wd = r.section("watchdog")
        watchdog_periods = wd.int("periods", 10, min=1)
        watchdog_action = wd.choice("action", ("hold", "release"), "hold")
        wd.finish()
        max_comm = r.int("max_consecutive_comm_errors", 2, min=1)
        on_fault = r.choice("on_servo_fault", ("isolate", "stop_all"), "isolate")
        force_periods = r.int("max_force_periods", 3, min=1, max=MAX_FORCE_PERIODS)
        dxl = (
            DynamixelConfig.from_reader(r.section("dynamixel", required=True))
            if backend == "dynamixel" or r.has("dynamixel")
            else None
        )
        sim = SimServoConfig.from_reader(r.section("sim"))

        names, ids, radius, offset, direction, gear = [], [], [], [], [], []
        dmin, dmax, vmax, joint, start, fmax = [], [], [], [], [], []
        items = r.sections("actuators")
        for i, a in enumerate(items):
            names.append(a.str("name"))
            ids.append(a.int("id", i + 1, min=0, max=252))
            is_joint = a.bool("joint", False)
            joint.append(is_joint)
            # a joint servo drives its joint directly: "displacement" = joint angle [rad]
            radius.append(1.0 if is_joint else a.float("spool_radius_m", min=0.0, min_exclusive=True))
            offset.append(a.float("zero_offset_rad", 0.0))
            d = a.int("direction", 1)
            if d not in (1, -1):
                raise a.error("direction", f"must be 1 or -1, got {d}")
            direction.append(d)
            gear.append(a.float("gear_ratio", 1.0, min=0.0, min_exclusive=True))
            lo_key, hi_key, v_key = (("min_position_rad", "max_position_rad", "max_velocity_rad_s") if is_joint
                                     else ("min_displacement_m", "max_displacement_m", "max_speed_m_s"))
            lo = a.float(lo_key)
            hi = a.float(hi_key)
            if not lo < hi:
                raise a.error(hi_key, f"must be > {lo_key} ({lo}), got {hi}")
            dmin.append(lo)
            dmax.append(hi)
            vmax.append(a.float(v_key, min=0.0, min_exclusive=True,
                                max=MAX_JOINT_VELOCITY_RAD_S if is_joint else MAX_CABLE_SPEED_M_S))
            start.append(a.float("sim_start_position_rad" if is_joint else "sim_start_displacement_m", 0.0))
            if is_joint and a.has("max_force_n"):
                raise a.error("max_force_n", "applies to cable servos (a joint servo has no cable tension)")
            force = None if is_joint else a.float("max_force_n", None, min=0.0, min_exclusive=True,
                                                  max=MAX_CABLE_FORCE_N)
            fmax.append(np.inf if force is None else force)
            if not lo <= start[-1] <= hi:
                raise a.error("sim_start_position_rad" if is_joint else "sim_start_displacement_m",
                              f"must lie in [{lo}, {hi}], got {start[-1]}")
            a.finish()
        unique_names(names, f"{path}.actuators", "actuator name")
        unique_names([str(x) for x in ids], f"{path}.actuators", "servo id")
        r.finish()

        calibration = ServoCalibration(
            spool_radius=np.array(radius),
            zero_offset=np.array(offset),
            direction=np.array(direction, dtype=float),
            gear_ratio=np.array(gear),
        )
        cfg = cls(
            names=tuple(names),
            ids=tuple(ids),
            calibration=calibration,
            min_displacement=np.array(dmin),
            max_displacement=np.array(dmax),
            max_speed=np.array(vmax),
            period_s=period,
            watchdog_periods=watchdog_periods,
            watchdog_action=watchdog_action,
            max_consecutive_comm_errors=max_comm,
            on_servo_fault=on_fault,
            backend=backend,
            dynamixel=dxl,
            sim=sim,
            joint=np.array(joint, dtype=bool),
            sim_start=np.array(start),
            max_force=np.array(fmax),
            max_force_periods=force_periods,
        )
        if dxl is not None:
            cfg._check_tick_range(items)
        if backend == "dynamixel" and cfg.has_force_limit and dxl.torque_constant_nm_per_a is None:
            i = int(np.flatnonzero(np.isfinite(cfg.max_force))[0])
            raise items[i].error("max_force_n", "needs dynamixel.torque_constant_nm_per_a (the tension "
                                 "is measured from the present current through it)")
        return cfg

    def _check_tick_range(self, items: list[ConfigReader]) -> None:
        assert self.dynamixel is not None
        lo_q, hi_q = self.calibration.position_limits(self.min_displacement, self.max_displacement)
        lo_t, hi_t = self.dynamixel.tick_range
        scale = self.dynamixel.ticks_per_rad
        for i, item in enumerate(items):
            if lo_q[i] * scale < lo_t or hi_q[i] * scale > hi_t:
                joint = self.joint is not None and bool(self.joint[i])
                key, what, unit = (("max_position_rad", "position", "rad") if joint
                                   else ("max_displacement_m", "displacement", "m"))
                raise item.error(
                    key,
                    f"{what} range [{self.min_displacement[i]}, {self.max_displacement[i]}] {unit} "
                    f"maps to servo ticks [{lo_q[i] * scale:.0f}, {hi_q[i] * scale:.0f}], outside "
                    f"[{lo_t}, {hi_t}] of {self.dynamixel.operating_mode} mode "
                    "(adjust zero_offset_rad or use extended_position)",
                )


def load_servo_config(path: str | pathlib.Path) -> ServoDriverConfig:
    """Read and validate ``servo_driver`` from a YAML file."""
    return ServoDriverConfig.from_mapping(read_yaml_section(path, "servo_driver"))
