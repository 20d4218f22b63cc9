"""servo_driver_node: cable strokes from the controller → servo positions (Dynamixel or simulated).

Subscribes ``actuator_command`` (ActuatorCommand, best effort): it takes the actuators of
its device config by name, in ``MODE_DISPLACEMENT`` (``values`` = cable stroke [m],
positive = cable pulled/shortened). A command that does not name each of them exactly
once, gives another mode, or a NaN/inf value is rejected whole (counted, logged, on
/diagnostics): nothing partial or non-finite is applied. Other actuators in the command
(e.g. cavities) are ignored.

Every ``period_s`` of the device config the core :class:`ServoDriver` runs one period
(read, check, limit, write) and the node publishes

* ``servo/joint_states`` (:data:`topics.SERVO_STATES`, sensor_msgs/JointState, best
  effort): ``name`` = actuator names (driver order); ``position`` = servo output-shaft
  angle [rad] (NaN for a servo that did not answer); ``velocity`` = shaft angular
  velocity [rad/s]; ``effort`` = shaft torque [N·m], only when the backend reports it
  (Dynamixel with ``torque_constant_nm_per_a``; empty otherwise). ``header.stamp`` = the
  node clock at the period. Published while the driver is configured (ACTIVE or
  INACTIVE, torque on or off); not in ERROR or unconfigured.
* ``/diagnostics``: one status for the driver (lifecycle and driver state, watchdog,
  commands received / rejected, periods) and one per servo (``<node>: servo <name>``:
  health, temperature [°C], input voltage [V], hardware error bits, communication errors,
  torque, position / speed / device clips, position, displacement, commanded
  displacement), at once on any state or health change, else every
  ``diagnostics_period``.

Cable stroke ↔ servo angle (the conversion a consumer of ``servo/joint_states`` such as
the simulated plant must use): load the SAME device config and apply its calibration::

    from soft_inverse_ros.core.drivers.servo_config import load_servo_config
    cal = load_servo_config(path).calibration          # ServoCalibration, driver order
    stroke_m = cal.displacement_from_position(position_rad)   # d = s·r·(q − q0)/g

(:meth:`ServoCalibration.displacement_from_position` in
``core/drivers/servo_calibration.py``; reorder ``position`` by ``JointState.name`` to the
config's actuator order first). The default device config is
``config/drivers/servo_sim.yaml`` (``find_config("drivers/servo_sim.yaml")``).

Safety (enforced by the core driver, whatever the commands): strokes clipped to
``[min_displacement_m, max_displacement_m]`` and their change to ``max_speed_m_s ·
period_s`` per period (so no out-of-limit goal ever reaches a servo; in ``operating_mode:
position`` with ``write_position_limits`` the Dynamixel backend also writes the limits to
the servos' position-limit registers, which the other modes do not have); command
watchdog (``watchdog.periods`` periods without a valid command → ``hold`` the last goal
or ``release`` = torque off); a servo that misses ``max_consecutive_comm_errors`` reads or
raises a hardware error gets torque off (``on_servo_fault: isolate``) or stops everything
(``stop_all``, driver ERROR); a port failure → ERROR with torque off. Cable tension limit
(``max_force_n`` per actuator, ``max_force_periods``): a cable whose measured tension stays
above its limit that many periods is released (torque off on that servo: it never adds
effort, where holding would keep pulling against the load), one error line in the log,
ERROR on /diagnostics (driver and servo), until an OK command asks it to pull less than
where it tripped with the tension back below the limit. The tension is measured only by
the Dynamixel backend with ``torque_constant_nm_per_a`` (present current); the sim
backend measures none, so there the limit is not enforced, and the driver status says so
(``tension_limit`` on /diagnostics, a warning at start). HELD commands re-arm nothing: see
:mod:`soft_inverse_ros.nodes.driver_lifecycle`. On SIGINT/SIGTERM the node deactivates
(torque off) and closes the port.

Lifecycle (managed node): see :mod:`soft_inverse_ros.nodes.driver_lifecycle`. At start
(``autostart``) it opens the port and pings every servo; a servo that does not answer is
a fatal error naming its ID and actuator (exit code 1). The core driver does not start
with a missing servo even with ``on_servo_fault: isolate`` (isolation applies to faults
while running).

Parameters: ``backend`` (sim | dynamixel; empty = the device config's), ``device_config``
(driver YAML; empty = ``drivers/servo_sim.yaml``), ``autostart``,
``resume_after_watchdog``, ``diagnostics_period``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sensor_msgs.msg import JointState
from soft_inverse_ros_msgs.msg import ActuatorCommand

from soft_inverse_ros import topics
from soft_inverse_ros.core.drivers.servo_backend import describe_hardware_error
from soft_inverse_ros.core.drivers.config_reader import read_driver_section
from soft_inverse_ros.core.drivers.servo_config import ServoDriverConfig
from soft_inverse_ros.core.drivers.servo_driver import ServoDriver, ServoHealth, ServoStatus
from soft_inverse_ros.nodes import diagnostics as diag
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.conversions import to_time
from soft_inverse_ros.nodes.driver_lifecycle import (
    DriverLifecycleNode,
    DriverNodeConfig,
    driver_main,
)

#: Device config used when ``device_config`` is empty (under the package's config/).
DEFAULT_DEVICE_CONFIG = "drivers/servo_sim.yaml"

_LEVEL = {ServoHealth.OK: diag.OK, ServoHealth.WARN: diag.WARN, ServoHealth.FAULT: diag.ERROR}


@dataclass(frozen=True)
class ServoNodeConfig(DriverNodeConfig):
    backend: str = field(default="", metadata={
        "description": "servo backend; overrides the device_config's backend key, empty: the "
                       "device_config's", "choices": ("", "sim", "dynamixel")})
    device_config: str = field(default="", metadata={
        "description": "servo_driver YAML (names, IDs, calibration, limits, watchdog, bus): a "
                       "path, or a file under config/ or config/drivers/; empty: "
                       + DEFAULT_DEVICE_CONFIG})


class ServoDriverNode(DriverLifecycleNode):
    device_kind = "servo"

    def __init__(self, node_name: str = "servo_driver_node", **kwargs) -> None:
        super().__init__(node_name, ServoNodeConfig, mode=ActuatorCommand.MODE_DISPLACEMENT,
                         mode_name="displacement", default_device_config=DEFAULT_DEVICE_CONFIG,
                         **kwargs)
        self.calibration = self.driver_config.calibration
        self._state_pub = self.create_publisher(JointState, topics.SERVO_STATES, qos.HIGH_RATE)
        if self.driver_config.has_force_limit:
            log = (self.get_logger().warning if self.driver.tension_limit.startswith("NOT")
                   else self.get_logger().info)
            log(f"tension limit {self.driver.tension_limit}")
        self.start()

    # ------------------------------------------------------------------ driver hooks
    def load_driver_config(self, path: Path, backend: str | None) -> ServoDriverConfig:
        return ServoDriverConfig.from_mapping(read_driver_section(path, "servo_driver", backend))

    def make_driver(self) -> ServoDriver:
        return ServoDriver.from_config(self.driver_config)

    def driver_configure(self, now: float) -> None:
        self.driver.configure()

    def driver_activate(self, now: float) -> None:
        self.driver.activate(now)

    def driver_deactivate(self, now: float) -> None:
        self.driver.deactivate()

    def driver_shutdown(self, now: float) -> None:
        self.driver.shutdown()

    # ------------------------------------------------------------------ outputs
    def publish_state(self, status: ServoStatus) -> None:
        msg = JointState()
        msg.header.stamp = to_time(status.stamp)
        msg.name = list(status.names)
        msg.position = status.position.tolist()
        msg.velocity = status.velocity.tolist()
        if not np.all(np.isnan(status.effort)):
            msg.effort = status.effort.tolist()
        self._state_pub.publish(msg)

    def active_problem(self, status: ServoStatus) -> str:
        if status.over_force is None or not status.over_force.any():
            return ""
        names = ", ".join(n for n, o in zip(status.names, status.over_force) if o)
        return f"tension above max_force_n, torque released: {names}"

    def health_key(self, status: ServoStatus) -> tuple:
        return tuple((d.health, d.torque_enabled) for d in status.diagnostics)

    def device_diagnostics(self, status: ServoStatus) -> list:
        out = []
        for i, d in enumerate(status.diagnostics):
            values = {
                "id": d.device_id,
                "health": d.health.name,
                "torque_enabled": d.torque_enabled,
                "temperature_c": d.temperature_c,
                "voltage_v": d.voltage_v,
                "hardware_error": f"0x{d.hardware_error:02x} ({describe_hardware_error(d.hardware_error)})",
                "comm_errors": d.comm_errors,
                "consecutive_comm_errors": d.consecutive_comm_errors,
                "position_clips": d.position_clips,
                "velocity_clips": d.velocity_clips,
                "device_clips": d.device_clips,
                "position_rad": float(status.position[i]),
                "displacement_m": float(status.displacement[i]),
                "commanded_displacement_m": float(status.commanded_displacement[i]),
                "watchdog_tripped": status.watchdog_tripped,
                "tension_n": d.tension_n,
                "max_force_n": d.max_force_n,
                "tension_limit": self.driver.tension_limit,
                "over_force": d.over_force,
                "over_force_trips": d.over_force_trips,
            }
            message = d.message or ("ok" if d.torque_enabled else "torque off")
            out.append(diag.status(f"{self.get_name()}: servo {d.name}", _LEVEL[d.health],
                                   message, values, hardware_id=f"{self.driver_config.backend} id {d.device_id}"))
        return out


def main(args=None) -> int:
    return driver_main(ServoDriverNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
