"""gait_node: the soft snake's undulation gait (paper eq. 9) as valve pressure setpoints.

Every 1/``publish_rate_hz`` s (node clock: wall, or /clock with ``use_sim_time``) it
publishes on ``actuator_command`` (soft_inverse_ros_msgs/ActuatorCommand, the message the
valve driver takes, ``MODE_PRESSURE``, status OK) the chamber pressures of
p_i(t) = A·sin(2πft + iφ) + offset for link i (:class:`~soft_inverse_ros.core.snake.gait.
GaitSource`): p_i > 0 inflates link i's right chamber, p_i < 0 its left one, the other
chamber of the pair gets 0 Pa (vents). ``values`` = ``efforts`` = setpoints [Pa],
``strokes`` = 0.

The chambers are those of the valve driver's device config (``valve_config``, the same
file the driver reads): ``chambers`` names them as (left, right) pairs link by link,
empty = the device config's chambers in that order. The highest pressure a gait may ask
is the lower of the chambers' supply pressure and ``max_pressure_pa``.

Run-time parameters (``ros2 param set``): ``frequency_hz`` f [Hz], ``phase_rad`` φ [rad],
``offset_pa`` and ``amplitude_pa`` A [Pa]. A change is validated first and refused whole,
with the reason, when amplitude + |offset| exceeds the valves' limit, f is outside
[0, ``max_frequency_hz``], |φ| > 2π or a value is not finite; an accepted change continues
the wave from its current phase (no jump). The current parameters are on /diagnostics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from soft_inverse_ros_msgs.msg import ActuatorCommand

from soft_inverse_ros import topics
from soft_inverse_ros.core.snake.gait import Gait, GaitLimits, GaitSource
from soft_inverse_ros.nodes import diagnostics as diag
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.conversions import now_seconds
from soft_inverse_ros.nodes.periodic import create_periodic
from soft_inverse_ros.nodes.scheduling import apply_scheduling, check_scheduling, nice_field_metadata
from soft_inverse_ros.nodes.node_runtime import (
    NodeConfigError,
    check_known_parameters,
    config_parameter_names,
    declare_config,
    main_for,
)

#: valve driver config used when ``valve_config`` is empty (under the package's config/)
DEFAULT_VALVE_CONFIG = "drivers/valve_sim_snake.yaml"
#: the eq. 9 parameters that may change at run time
GAIT_PARAMETERS = ("frequency_hz", "phase_rad", "offset_pa", "amplitude_pa")


@dataclass(frozen=True)
class GaitNodeConfig:
    frequency_hz: float = field(default=1.0, metadata={
        "description": "gait frequency f [Hz] (run time: checked against max_frequency_hz)",
        "range": (0.0, 100.0), "dynamic": True})
    phase_rad: float = field(default=math.pi / 2, metadata={
        "description": "phase shift between consecutive links φ [rad]",
        "range": (-2 * math.pi, 2 * math.pi), "dynamic": True})
    offset_pa: float = field(default=0.0, metadata={
        "description": "pressure offset (turning) [Pa]; amplitude + |offset| must stay within "
                       "the valves' limit", "range": (-1e6, 1e6), "dynamic": True})
    amplitude_pa: float = field(default=55158.0, metadata={
        "description": "pressure amplitude A [Pa] (8 psi = 55158 Pa)", "range": (0.0, 1e6),
        "dynamic": True})
    max_frequency_hz: float = field(default=5.0, metadata={
        "description": "highest gait frequency accepted [Hz]", "range": (0.01, 100.0)})
    publish_rate_hz: float = field(default=100.0, metadata={
        "description": "setpoint rate [Hz] (the valve driver's watchdog needs one within "
                       "its watchdog periods)", "range": (1.0, 1000.0)})
    valve_config: str = field(default="", metadata={
        "description": "valve driver YAML the driver reads (chamber names, supply and "
                       "limits): a path, or under config/ or config/drivers/; empty: "
                       + DEFAULT_VALVE_CONFIG})
    chambers: tuple[str, ...] = field(default=(), metadata={
        "description": "chamber names as (left, right) pairs, link 0 first; empty: the "
                       "valve config's chambers in order"})
    start_delay: float = field(default=0.0, metadata={
        "description": "publish 0 Pa for this long before the wave starts [s]",
        "range": (0.0, 3600.0)})
    realtime_priority: int = field(default=0, metadata={
        "description": "SCHED_FIFO priority of this process's threads (1-99; 0: normal "
                       "scheduling): the setpoints keep their rate on a busy CPU (needs root "
                       "or an rtprio limit, else a warning)",
        "range": (0, 99)})
    nice: int = field(default=0, metadata=nice_field_metadata("the gait's setpoints"))

    def __post_init__(self) -> None:
        check_scheduling(self.realtime_priority, self.nice)


class GaitNode(Node):
    def __init__(self, node_name: str = "gait_node", **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.config = cfg = declare_config(self, GaitNodeConfig)
        check_known_parameters(self, config_parameter_names(GaitNodeConfig))
        self._scheduling = apply_scheduling(self, cfg.realtime_priority,
                                            "setpoints may come late on a busy machine",
                                            cfg.nice)
        self.names, limit = self._chambers(cfg)
        self.n_links = len(self.names) // 2
        try:
            self.source = GaitSource(
                Gait(cfg.frequency_hz, cfg.phase_rad, cfg.offset_pa, cfg.amplitude_pa),
                GaitLimits(limit, cfg.max_frequency_hz), self.n_links)
        except ValueError as exc:
            raise NodeConfigError(f"{node_name}: gait refused: {exc}") from None
        self._refused = 0
        self._last_refusal = ""
        self._seq = 0
        self._t_start = now_seconds(self) + cfg.start_delay
        self._pub = self.create_publisher(ActuatorCommand, topics.ACTUATOR_COMMAND, qos.HIGH_RATE)
        self._msg = ActuatorCommand()
        self._msg.names = list(self.names)
        self._msg.modes = [ActuatorCommand.MODE_PRESSURE] * len(self.names)
        self._msg.strokes = [0.0] * len(self.names)
        self._msg.header.frame_id = topics.BASE_FRAME
        self._msg.status_text = "gait"
        self.add_on_set_parameters_callback(self._on_parameters)
        create_periodic(self, 1.0 / cfg.publish_rate_hz, self._publish)
        self._diag = diag.DiagnosticsPublisher(self, self._diagnostics)
        self.get_logger().info(
            f"gait f {cfg.frequency_hz:g} Hz, φ {cfg.phase_rad:.3f} rad, A {cfg.amplitude_pa:.0f} Pa, "
            f"offset {cfg.offset_pa:.0f} Pa on {self.n_links} links ({', '.join(self.names)}), "
            f"limit {limit:.0f} Pa")

    def _chambers(self, cfg: GaitNodeConfig) -> tuple[tuple[str, ...], float]:
        """Chamber names (left, right per link) and the pressure limit [Pa] from the valve
        driver's config."""
        from soft_inverse_ros.core.drivers.valve_config import ValveDriverConfig
        from soft_inverse_ros.core.drivers.config_reader import read_driver_section, resolve_device_config

        name = self.get_name()
        path = resolve_device_config(cfg.valve_config, DEFAULT_VALVE_CONFIG)
        try:
            valves = ValveDriverConfig.from_mapping(read_driver_section(path, "valve_driver", None))
        except ValueError as exc:
            raise NodeConfigError(f"{name}: valve_config {path}: {exc}") from None
        names = tuple(cfg.chambers) or valves.names
        if len(names) < 2 or len(names) % 2:
            raise NodeConfigError(f"{name}: chambers must be (left, right) pairs, got {list(names)}")
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:  # the driver would refuse every command naming one twice
            raise NodeConfigError(f"{name}: chambers {repeated} named more than once in {list(names)}")
        missing = [n for n in names if n not in valves.names]
        if missing:
            raise NodeConfigError(f"{name}: chambers {missing} are not in {path} "
                                  f"(it has {list(valves.names)})")
        idx = [valves.names.index(n) for n in names]
        # each link's (left, right) must be one of the driver's antagonistic pairs, right the
        # positive side (p > 0 inflates the right chamber): a swapped pair mirrors the gait
        pairs = {(p.positive, p.negative) for p in valves.pairs}
        for link in range(len(idx) // 2):
            left, right = idx[2 * link], idx[2 * link + 1]
            if pairs and (right, left) not in pairs:
                mirrored = (left, right) in pairs
                raise NodeConfigError(
                    f"{name}: link {link}'s chambers ({names[2 * link]}, {names[2 * link + 1]}) are "
                    + (f"a pair of {path} with the sides swapped (its positive side is the right one): "
                       "the gait would be mirrored" if mirrored else f"not one antagonistic pair of {path}"))
        window = valves.watchdog_periods * valves.period_s
        if 2.0 / cfg.publish_rate_hz > window:  # at least two setpoints per watchdog window
            raise NodeConfigError(
                f"{name}: publish_rate_hz {cfg.publish_rate_hz:g} Hz is too slow for the valve "
                f"driver's watchdog ({valves.watchdog_periods} periods of {valves.period_s:g} s in "
                f"{path}): at least {2.0 / window:g} Hz, or the valves vent between setpoints")
        supply = np.array([valves.pneumatics[i].supply_pressure_pa for i in idx])
        limit = float(np.min(np.minimum(supply, valves.max_pressure[idx])))
        return names, limit

    def _on_parameters(self, params) -> SetParametersResult:
        changed = {p.name: p.value for p in params if p.name in GAIT_PARAMETERS}
        if not changed:
            return SetParametersResult(successful=True)
        g = self.source.gait
        values = {"frequency_hz": g.frequency_hz, "phase_rad": g.phase_rad,
                  "offset_pa": g.offset_pa, "amplitude_pa": g.amplitude_pa}
        try:
            values.update({k: float(v) for k, v in changed.items()})
            reason = self.source.set(Gait(**values))
        except (TypeError, ValueError) as exc:
            reason = f"invalid gait: {exc}"
        if reason:
            self._refused += 1
            self._last_refusal = reason
            self.get_logger().warning(f"gait change {changed} refused: {reason}")
            return SetParametersResult(successful=False, reason=reason)
        self.get_logger().info(f"gait changed: {changed}")
        return SetParametersResult(successful=True)

    def _publish(self) -> None:
        now = now_seconds(self)
        if now < self._t_start:
            setpoints = np.zeros(len(self.names))
        else:
            setpoints = self.source.chambers(now - self._t_start).ravel()
        self._seq += 1
        msg = self._msg
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.seq = self._seq
        msg.values = setpoints.tolist()
        msg.efforts = msg.values
        msg.status = ActuatorCommand.STATUS_OK
        self._pub.publish(msg)

    def _diagnostics(self):
        g = self.source.gait
        values = {"frequency_hz": g.frequency_hz, "phase_rad": g.phase_rad,
                  "offset_pa": g.offset_pa, "amplitude_pa": g.amplitude_pa,
                  "max_pressure_pa": self.source.limits.max_pressure_pa,
                  "rate_hz": self.config.publish_rate_hz,  # the command slots (analyze counts them at it)
                  "commands": self._seq, "changes_refused": self._refused,
                  "last_refusal": self._last_refusal or "none"}
        return [diag.status(f"{self.get_name()}: gait", diag.OK, "ok", values)]


def main(args=None) -> int:
    return main_for(GaitNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
