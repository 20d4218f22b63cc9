"""valve_driver_node: chamber pressures from the controller → valve PWM (serial board or simulated).

Subscribes ``actuator_command`` (ActuatorCommand, best effort): it takes the chambers of
its device config by name, in ``MODE_PRESSURE`` (``values`` = gauge pressure [Pa]). A
command that does not name each chamber exactly once, gives another mode, or a NaN/inf
value is rejected whole (counted, logged, on /diagnostics); other actuators (e.g.
cables) are ignored.

Every ``period_s`` of the device config (the pressure-loop period; the board generates
the ``pwm_frequency_hz`` PWM itself) the core :class:`ValveDriver` runs one period
(pairs, limits, feedforward + PI → duties, one exchange with the board, checks) and the
node publishes

* ``valves/chamber_states`` (:data:`topics.CHAMBER_PRESSURES`, sensor_msgs/JointState,
  best effort): ``name`` = chamber names (driver order); ``effort`` = chamber gauge
  pressure [Pa]: the sensor reading for a chamber with ``has_sensor`` (for the sim
  backend, its simulated sensor), the open-loop model estimate
  (:class:`~soft_inverse_ros.core.drivers.chamber_pressure_estimate.OpenLoopPressureEstimate`,
  integrated from the duties the board reports applying) for a chamber without;
  ``position`` and ``velocity`` are empty. Published while the driver is configured
  (ACTIVE or INACTIVE), not in ERROR.
* ``/diagnostics``: one status for the driver (lifecycle and driver state, board flags,
  communication errors, watchdog, commands) and one per chamber (``<node>: chamber
  <name>``: health, pressure, reference, duty, sensor / model, clips), at once on any
  state or health change, else every ``diagnostics_period``.

Safety (enforced by the core driver): antagonistic pairs made exclusive, references
clipped to ``[0, max_pressure_pa]`` and their change to ``max_pressure_rate_pa_s ·
period_s`` per period (from the vented state too: re-inflation after a SAFE command or the
watchdog ramps; a vent is immediate), HELD commands applied live only after a live one
(else vented as SAFE: see :mod:`soft_inverse_ros.nodes.driver_lifecycle`), duties capped at the steady-state duty of the
maximum pressure; command watchdog (``watchdog.periods`` periods without a valid command
→ vent all, driver INACTIVE; the node re-activates on the next command when
``resume_after_watchdog``); the board's own watchdog vents without host traffic; a lost
or corrupt link, a sensor fault, a vent latched by the board or a measured overpressure →
vent all, driver ERROR. On SIGINT/SIGTERM the node vents every chamber and closes the port.

Lifecycle (managed node): see :mod:`soft_inverse_ros.nodes.driver_lifecycle`; at start the
board must answer HELLO and report every configured sensor (fatal error otherwise).

Parameters: ``backend`` (serial | sim; empty = the device config's), ``device_config``
(driver YAML; empty = ``drivers/valve_sim_springy.yaml``), ``autostart``,
``resume_after_watchdog``, ``diagnostics_period``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sensor_msgs.msg import JointState
from soft_inverse_ros_msgs.msg import ActuatorCommand

from soft_inverse_ros import topics
from soft_inverse_ros.core.drivers.chamber_pressure_estimate import OpenLoopPressureEstimate
from soft_inverse_ros.core.drivers.config_reader import read_driver_section
from soft_inverse_ros.core.drivers.valve_config import ValveDriverConfig
from soft_inverse_ros.core.drivers import valve_protocol as vp
from soft_inverse_ros.core.drivers.valve_driver import ChamberHealth, ValveDriver, ValveStatus
from soft_inverse_ros.nodes import diagnostics as diag
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.conversions import to_time
from soft_inverse_ros.nodes.driver_lifecycle import (
    DriverLifecycleNode,
    DriverNodeConfig,
    driver_main,
)

#: Device config used when ``device_config`` is empty (under the package's config/).
DEFAULT_DEVICE_CONFIG = "drivers/valve_sim_springy.yaml"

def flag_names(flags: vp.Flags | int) -> str:
    """Readable board STATE flags ("none" when clear)."""
    names = [f.name.lower() for f in vp.Flags if f.name and flags & f]
    return ", ".join(names) if names else "none"


_LEVEL = {ChamberHealth.OK: diag.OK, ChamberHealth.WARN: diag.WARN, ChamberHealth.FAULT: diag.ERROR}


@dataclass(frozen=True)
class ValveNodeConfig(DriverNodeConfig):
    backend: str = field(default="", metadata={
        "description": "valve backend; overrides the device_config's backend key, empty: the "
                       "device_config's", "choices": ("", "serial", "sim")})
    device_config: str = field(default="", metadata={
        "description": "valve_driver YAML (chambers, channels, limits, pneumatics, link): a "
                       "path, or a file under config/ or config/drivers/; empty: "
                       + DEFAULT_DEVICE_CONFIG})


class ValveDriverNode(DriverLifecycleNode):
    device_kind = "valve"

    def __init__(self, node_name: str = "valve_driver_node", **kwargs) -> None:
        super().__init__(node_name, ValveNodeConfig, mode=ActuatorCommand.MODE_PRESSURE,
                         mode_name="pressure", default_device_config=DEFAULT_DEVICE_CONFIG,
                         **kwargs)
        cfg = self.driver_config
        self._sensorless = np.flatnonzero(~cfg.has_sensor)
        self._estimate = (
            OpenLoopPressureEstimate([cfg.pneumatics[i] for i in self._sensorless])
            if self._sensorless.size else None
        )
        self._pressure = np.full(cfg.size, np.nan)
        self._state_pub = self.create_publisher(JointState, topics.CHAMBER_PRESSURES, qos.HIGH_RATE)
        self.start()

    # ------------------------------------------------------------------ driver hooks
    def load_driver_config(self, path: Path, backend: str | None) -> ValveDriverConfig:
        return ValveDriverConfig.from_mapping(read_driver_section(path, "valve_driver", backend))

    def make_driver(self) -> ValveDriver:
        return ValveDriver.from_config(self.driver_config)

    def driver_configure(self, now: float) -> None:
        self.driver.configure(now)
        if self._estimate is not None:
            self._estimate.reset()  # configure vents every chamber

    def driver_activate(self, now: float) -> None:
        self.driver.activate(now)

    def driver_deactivate(self, now: float) -> None:
        self.driver.deactivate(now)

    def driver_shutdown(self, now: float) -> None:
        self.driver.shutdown(now)

    # ------------------------------------------------------------------ outputs
    def chamber_pressure(self, status: ValveStatus) -> np.ndarray:
        """Measured pressure where sensed, modelled pressure elsewhere [Pa] (chamber order)."""
        pressure = status.pressure.copy()
        if self._estimate is not None:
            pressure[self._sensorless] = self._estimate.update(status.stamp, status.duty[self._sensorless])
        return pressure

    def publish_state(self, status: ValveStatus) -> None:
        self._pressure = self.chamber_pressure(status)
        msg = JointState()
        msg.header.stamp = to_time(status.stamp)
        msg.name = list(status.names)
        msg.effort = self._pressure.tolist()
        self._state_pub.publish(msg)

    def health_key(self, status: ValveStatus) -> tuple:
        return tuple(d.health for d in status.diagnostics)

    def device_diagnostics(self, status: ValveStatus) -> list:
        out = []
        for i, d in enumerate(status.diagnostics):
            values = {
                "channel": d.channel,
                "health": d.health.name,
                "pressure_pa": float(self._pressure[i]),
                "pressure_source": "sensor" if d.has_sensor else "model",
                "reference_pa": float(status.reference[i]),
                "duty": float(status.duty[i]),
                "pressure_clips": d.pressure_clips,
                "rate_limits": d.rate_limits,
                "max_pressure_rate_pa_s": float(self.driver_config.max_pressure_rate[i]),
                "board_flags": flag_names(status.device_flags),
                "comm_errors": status.comm_errors,
                "consecutive_comm_errors": status.consecutive_comm_errors,
                "watchdog_tripped": status.watchdog_tripped,
            }
            out.append(diag.status(f"{self.get_name()}: chamber {d.name}", _LEVEL[d.health],
                                   d.message or "ok", values,
                                   hardware_id=f"{self.driver_config.backend} channel {d.channel}"))
        return out


def main(args=None) -> int:
    return driver_main(ValveDriverNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
