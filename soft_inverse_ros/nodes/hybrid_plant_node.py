"""hybrid_plant_node: the simulated hybrid robot (arm + soft rod + soft block).

Steps :class:`~soft_inverse_ros.core.sim.hybrid_plant.HybridContactPlant` (implicit Euler in
mixed coordinates with the block's contacts, core/rigid/hybrid_dynamics.py; the controller's
model is quasi-static and knows no gravity sag of the rod) every ``dt``, in one of two clock
modes, as plant_sim_node:

* ``clock: wall``: on a wall-clock timer; a late tick is caught up with up to
  ``max_catch_up_steps`` steps, beyond that the simulated clock slips (skipped steps counted);
* ``clock: sim``: the node is the graph's clock: it publishes ``/clock`` (``clock_rate_hz``
  ticks), stepping the plant every ``dt``, never faster than real time; the other nodes run
  with ``use_sim_time``. In lockstep (plant_clock.LockstepConfig: ``max_input_lag``,
  ``max_snapshot_lag``, ``max_mocap_lag``) the clock waits for the joint servos' states,
  hybrid_model_node's snapshots and the mocap's frames.

Input: the joint servos' sensor_msgs/JointState on ``servo/joint_states`` (servo_driver_node,
``position`` = shaft angles [rad]) converted to joint angles with the calibration of the
driver's own config (``servo_config``; joint servos: the angle itself); they are the joint
position servos' setpoints. A NaN angle holds that joint's setpoint. A description with
soft force actuators: their efforts [N] from the controller's commands (``actuator_command``,
``values`` in MODE_FORCE, by name; no actuator dynamics).

Publishes (frame ``base_link``, stamps = node clock):

* ``plant/effector_true`` (PointStamped): the probe tip [m] (the simulated mocap's effector);
* ``plant/markers_true`` (PointCloud2): the probe tip and the point behind it on the probe
  axis [m] (the report's alignment error);
* ``visualization/robot`` (MarkerArray, ``visualization_rate_hz``): the arm (``arm_links``,
  ``arm_joints``), the soft rod and block surface, probe tip, target, contacts and forces;
* /diagnostics (``<node>: plant``): real-time factor, simulated time, skipped steps, clock,
  step times, contacts, contact force sum now and its maximum over the window [N], the
  description's force-sum limit, the alignment error to the newest target [mm] and the
  one the first target found (the run's starting error, whatever a recording missed) [mm].
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState, PointCloud2
from soft_inverse_ros_msgs.msg import ActuatorCommand

from soft_inverse_ros import topics
from soft_inverse_ros.core.model.hybrid_description import load_hybrid_description
from soft_inverse_ros.core.rigid.hybrid_live import alignment_distance, hybrid_visual_scene
from soft_inverse_ros.core.sim.hybrid_plant import HybridContactPlant, HybridPlantConfig
from soft_inverse_ros.nodes import diagnostics as diag
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.conversions import to_seconds
from soft_inverse_ros.nodes.periodic import create_timer
from soft_inverse_ros.nodes.plant_clock import CLOCK_MODES, LockstepConfig, PlantClock, make_lockstep
from soft_inverse_ros.nodes.scheduling import apply_scheduling
from soft_inverse_ros.nodes.markers import ScenePublisher
from soft_inverse_ros.nodes.node_runtime import (
    NodeConfigError,
    check_known_parameters,
    config_parameter_names,
    declare_config,
    main_for,
)
from soft_inverse_ros.nodes.point_cloud import cloud_from_points

DEFAULT_SERVO_CONFIG = "drivers/servo_hybrid_arm.yaml"
#: the lockstep's name for the joint servos' states (plant_clock.make_lockstep)
INPUT_STREAM = "servo states"


@dataclass(frozen=True)
class HybridPlantNodeConfig:
    robot: str = field(default="hybrid_arm", metadata={
        "description": "hybrid robot description (type: hybrid)"})
    servo_config: str = field(default="", metadata={
        "description": "servo driver YAML for the angle calibration; empty: " + DEFAULT_SERVO_CONFIG})
    dt: float = field(default=0.01, metadata={"description": "time step [s]", "range": (1e-4, 0.05)})
    rayleigh_mass: float = field(default=1.0, metadata={"description": "Rayleigh α [1/s]", "range": (0.0, 100.0)})
    rayleigh_stiffness: float = field(default=0.02, metadata={"description": "Rayleigh β [s]", "range": (0.0, 1.0)})
    publish_every: int = field(default=1, metadata={
        "description": "publish the probe every this many steps", "range": (1, 1000)})
    visualization_rate_hz: float = field(default=5.0, metadata={
        "description": "MarkerArray rate [Hz] (0: off)", "range": (0.0, 5.0)})
    max_catch_up_steps: int = field(default=4, metadata={
        "description": "most steps per timer tick when behind real time", "range": (1, 100)})
    clock: str = field(default="wall", metadata={
        "description": "wall: step on the wall clock; sim: publish /clock (the graph follows)",
        "choices": CLOCK_MODES})
    clock_rate_hz: float = field(default=1000.0, metadata={
        "description": "clock: sim: /clock ticks per simulated second", "range": (10.0, 10000.0)})
    frame_id: str = field(default="", metadata={
        "description": "frame of the outputs; empty: the description's frame_id"})
    realtime_priority: int = field(default=0, metadata={
        "description": "SCHED_FIFO priority of this process's threads (1-99; 0: normal "
                       "scheduling; needs root or an rtprio limit, else a warning): the simulated robot stands in for physics",
        "range": (0, 99)})


class HybridPlantNode(Node):
    def __init__(self, node_name: str = "hybrid_plant_node", **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.config = cfg = declare_config(self, HybridPlantNodeConfig)
        self.lockstep_config = declare_config(self, LockstepConfig)
        check_known_parameters(self, config_parameter_names(HybridPlantNodeConfig)
                               + config_parameter_names(LockstepConfig))
        if cfg.clock == "sim" and self.get_parameter("use_sim_time").value:
            raise NodeConfigError(f"{self.get_name()}: clock: sim makes this node the clock source; "
                                  "it cannot use_sim_time itself")
        self.desc = load_hybrid_description(cfg.robot)
        self.frame_id = cfg.frame_id or self.desc.frame_id
        self.plant = HybridContactPlant(self.desc, HybridPlantConfig(
            dt=cfg.dt, rayleigh_mass=cfg.rayleigh_mass, rayleigh_stiffness=cfg.rayleigh_stiffness))
        self.calibration, self._servo_index = self._load_calibration(cfg.servo_config)
        self._scheduling = apply_scheduling(self, self.config.realtime_priority,
                                            "the plant may fall behind real time on a busy machine")
        self.plant.step()  # compile/warm the kernels before the clock starts
        self.plant.time, self.plant.steps = 0.0, 0
        self._target: np.ndarray | None = None
        self._first_target_error = float("nan")  # [m] alignment error when the first target came
        self._inputs = self._rejected = self._steps = 0
        self._step_times: deque[float] = deque(maxlen=1000)
        self._force_max = 0.0
        self._last_error = ""
        self._eff_pub = self.create_publisher(PointStamped, topics.PLANT_EFFECTOR_TRUE, qos.HIGH_RATE)
        self._markers_pub = self.create_publisher(PointCloud2, topics.PLANT_MARKERS_TRUE, qos.HIGH_RATE)
        from visualization_msgs.msg import MarkerArray

        self._viz_pub = self.create_publisher(MarkerArray, topics.ROBOT_MARKERS, qos.MARKERS_LATCHED)
        self._scene_pub = ScenePublisher(self._viz_pub)
        self.create_subscription(JointState, topics.SERVO_STATES, self._on_servo_states, qos.HIGH_RATE)
        self.create_subscription(PointStamped, topics.TARGET, self._on_target, qos.HIGH_RATE)
        self._soft_names = tuple(a.name for a in self.desc.soft_actuators)
        if self._soft_names:
            self.create_subscription(ActuatorCommand, topics.ACTUATOR_COMMAND, self._on_command, qos.HIGH_RATE)
        # clock: sim: waits for the joint servos' states, the hybrid model's snapshots and
        # the mocap's frames (plant_clock.LockstepConfig)
        self.lockstep = make_lockstep(self, self.lockstep_config, cfg.clock, INPUT_STREAM)
        self.plant_clock = PlantClock(self, dt=cfg.dt, plant_time=lambda: self.plant.time,
                                      step=self._step_once, max_catch_up_steps=cfg.max_catch_up_steps,
                                      lockstep=self.lockstep)
        if cfg.clock == "sim":
            self.plant_clock.start_sim(cfg.clock_rate_hz)
        else:
            self.plant_clock.start_wall()
        if cfg.visualization_rate_hz > 0:
            create_timer(self, 1.0 / cfg.visualization_rate_hz, self._publish_visualization)
        self._diag = diag.DiagnosticsPublisher(self, self._diagnostics)
        tip, _ = self.plant.probe_points()
        self.get_logger().info(
            f"hybrid plant '{self.desc.name}': dt {cfg.dt * 1e3:.1f} ms, clock {cfg.clock}, probe tip at "
            f"{np.round(tip, 4).tolist()} m, block top at {self.plant.scene.block_top_z:.4f} m")

    # ------------------------------------------------------------------ inputs
    def _load_calibration(self, value: str):
        from soft_inverse_ros.nodes.driver_lifecycle import load_servo_config_for

        servo = load_servo_config_for(self.get_name(), value, DEFAULT_SERVO_CONFIG, self.desc.joint_names,
                                      "joint(s)")
        return servo.calibration, np.array([servo.names.index(n) for n in self.desc.joint_names])

    def _on_servo_states(self, msg: JointState) -> None:
        q = self.plant.q_cmd
        names = list(msg.name)
        if len(msg.position) != len(names):
            self._rejected += 1
            return
        angles = np.full(len(self.calibration.spool_radius), np.nan)
        for k, name in enumerate(names):
            if name in self.desc.joint_names:
                i = self.desc.joint_names.index(name)
                angles[self._servo_index[i]] = msg.position[k]
        joints = self.calibration.displacement_from_position(angles)[self._servo_index]
        lo = np.array([j.min_position for j in self.desc.joints])
        hi = np.array([j.max_position for j in self.desc.joints])
        if np.any((joints < lo - 0.1) | (joints > hi + 0.1)):  # absurd: hold the previous setpoints
            self._rejected += 1
            self._last_error = f"refused servo angles {np.round(joints, 3).tolist()} rad (beyond the joint ranges)"
            return
        self.plant.set_joint_setpoints(np.where(np.isfinite(joints), joints, q))
        self._inputs += 1
        self.lockstep.stamp(INPUT_STREAM, to_seconds(msg.header.stamp))

    def _on_command(self, msg: ActuatorCommand) -> None:
        names = list(msg.names)
        values = np.full(len(self._soft_names), np.nan)
        for i, name in enumerate(self._soft_names):
            if name in names:
                k = names.index(name)
                if k < len(msg.modes) and k < len(msg.values) and msg.modes[k] == ActuatorCommand.MODE_FORCE:
                    values[i] = msg.values[k]
        if np.any(np.abs(values[np.isfinite(values)]) > 1e3):  # absurd: hold the previous efforts
            self._rejected += 1
            self._last_error = f"refused soft actuator efforts {values.tolist()} N"
            return
        self.plant.set_soft_efforts(values)

    def _on_target(self, msg: PointStamped) -> None:
        p = np.array([msg.point.x, msg.point.y, msg.point.z])
        if np.all(np.isfinite(p)):
            if self._target is None:  # the run's starting error: the pose the first target found
                tip, back = self.plant.probe_points()
                self._first_target_error = alignment_distance(tip, back, p)
            self._target = p

    # ------------------------------------------------------------------ clock and steps
    def _step_once(self) -> None:
        t0 = time.perf_counter()
        try:
            forces = self.plant.step()
        except (ValueError, ArithmeticError, RuntimeError) as exc:
            self._last_error = f"plant step failed: {exc}"
            self.get_logger().error(self._last_error, throttle_duration_sec=1.0)
            return
        self._step_times.append(time.perf_counter() - t0)
        self._force_max = max(self._force_max, float(forces.sum()))
        self._steps += 1
        if self._steps % self.config.publish_every == 0:
            self._publish_truth()

    # ------------------------------------------------------------------ outputs
    def _publish_truth(self) -> None:
        stamp = self.get_clock().now().to_msg()
        tip, back = self.plant.probe_points()
        msg = PointStamped()
        msg.header.stamp = stamp
        msg.header.frame_id = self.frame_id
        msg.point.x, msg.point.y, msg.point.z = map(float, tip)
        self._eff_pub.publish(msg)
        self._markers_pub.publish(cloud_from_points(np.vstack([tip, back]), self.frame_id, stamp))

    def _publish_visualization(self) -> None:
        p = self.plant
        scene = hybrid_visual_scene(p.scene, p.rod_positions, p.block_positions, p.q, p.forces,
                                    p.contact_points(), self._target, self.frame_id)
        self._scene_pub.publish(scene, self.get_clock().now().to_msg())

    def _diagnostics(self):
        rtf = self.plant_clock.update_real_time_factor()
        times = np.asarray(self._step_times) if self._step_times else np.zeros(1)
        level, message = diag.OK, "ok"
        self._last_error = self._last_error or self.lockstep.last_error
        self.lockstep.last_error = ""
        if self._last_error:
            level, message = diag.WARN, self._last_error
        elif rtf < 0.9 and self.config.clock == "wall":
            level, message = diag.WARN, f"behind real time (factor {rtf:.2f})"
        self._last_error = ""
        tip, back = self.plant.probe_points()
        values = {
            "robot": self.config.robot,
            "sim_time_s": self.plant.time, "real_time_factor": rtf, "steps": self._steps,
            "skipped_steps": self.plant_clock.skipped, "clock": self.config.clock, "model": "hybrid",
            "scheduling": self._scheduling,
            "dt_ms": 1e3 * self.config.dt,
            "step_time_p50_ms": 1e3 * float(np.median(times)),
            "step_time_p99_ms": 1e3 * float(np.percentile(times, 99)),
            "inputs_received": self._inputs, "inputs_rejected": self._rejected,
            "contacts": int(np.sum(self.plant.forces > 0)),
            "contact_force_sum_n": float(self.plant.forces.sum()),
            "contact_force_sum_max_n": self._force_max,
            "contact_force_sum_limit_n": self.desc.force_sum_max,
            "alignment_error_mm": (1e3 * alignment_distance(tip, back, self._target)
                                   if self._target is not None else float("nan")),
            "alignment_error_first_target_mm": 1e3 * self._first_target_error,
        }
        self._force_max = float(self.plant.forces.sum())
        for name, q in zip(self.desc.joint_names, self.plant.q):
            values[f"joint.{name}_rad"] = float(q)
        for name, f, d in zip(self._soft_names, self.plant.soft_efforts, self.plant.soft_strokes()):
            values[f"effort.{name}_n"], values[f"stroke.{name}_m"] = float(f), float(d)
        if self.lockstep.active:
            values.update(self.lockstep.counters())
        return [diag.status(f"{self.get_name()}: plant", level, message, values)]


def main(args=None) -> int:
    return main_for(HybridPlantNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
