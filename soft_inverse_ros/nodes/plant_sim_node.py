"""plant_sim_node: the simulated robot (a dynamic FEM plant, not the controller's model).

Runs the plant ``model`` selects (:class:`~soft_inverse_ros.core.sim.plant.SoftRobotPlant`,
the full dynamic FEM, :class:`~soft_inverse_ros.core.sim.modal_plant.ModalPlant`, its
reduced-order models, or :class:`~soft_inverse_ros.core.sim.mujoco_plant.MujocoPlant`, the
optional MuJoCo engine) at its time step ``dt``, in one of two clock modes:

* ``clock: wall`` (default): on a wall-clock timer (real time: when a step runs late the
  node catches up with up to ``max_catch_up_steps`` steps per tick; beyond that the
  simulated clock slips and the skipped steps are counted; the real-time factor is in
  /diagnostics, per diagnostics period);
* ``clock: sim``: the node is the graph's clock: it publishes ``/clock`` in
  ``clock_rate_hz`` ticks, stepping the plant every ``dt``, never faster than
  ``max_real_time_factor`` × real time; the other nodes run with ``use_sim_time``. In
  lockstep (``max_input_lag``, ``max_snapshot_lag``, ``max_mocap_lag`` > 0,
  :class:`~soft_inverse_ros.nodes.plant_clock.LockstepConfig`) the clock
  also waits for the drivers' inputs, the compliance snapshots and the mocap's frames
  (:class:`~soft_inverse_ros.core.sim.lockstep.Lockstep`): a node that the machine cannot
  run at the graph's pace slows the whole graph down instead of falsifying the run.

``realtime_priority`` > 0 runs the process at SCHED_FIFO (below the controller's): the
simulated robot stands in for physics. Absurd inputs (a stroke beyond the robot's size,
|pressure| > 2 MPa, |force| > 1 kN) are refused and the previous inputs held; a SAFE
command moves a cable only towards slack.

Inputs (the newest value is held):

* ``input: servo_states`` (default): the servo driver's sensor_msgs/JointState on
  ``servo/joint_states`` -- ``position`` = servo shaft angles [rad], converted to cable
  strokes [m] with the calibration of the servo driver's own config (``servo_config``,
  same file the driver reads). A NaN angle (servo not answering) holds that cable.
* ``input: command``: the controller's soft_inverse_ros_msgs/ActuatorCommand directly
  (no servo dynamics): cables take ``values`` in MODE_DISPLACEMENT (else the predicted
  ``strokes``), cavities ``values`` in MODE_PRESSURE, forces ``values`` in MODE_FORCE.
* chamber pressures (both modes, robots with cavities): sensor_msgs/JointState on
  ``valves/chamber_states``, ``effort`` = pressure [Pa], by name.

With ``clock: sim`` and a lockstep lag set, also (polled, read only when the clock would
wait for them): the newest soft_inverse_ros_msgs/ComplianceSnapshot on ``compliance`` and
sensor_msgs/PointCloud2 on ``mocap/markers``, for their stamps. The target
(geometry_msgs/PointStamped on ``target``) is read only to be drawn.

Cable strokes follow the controller's convention: the cable shortening relative to the
robot's rest (mesh) geometry [m].

Publishes (frame ``base_link`` or the description's frame, stamps = node clock):

* ``plant/effector_true`` (geometry_msgs/PointStamped): the true effector position [m]
  (weighted barycentre of the description's first effector);
* ``plant/markers_true`` (sensor_msgs/PointCloud2, x y z float32): the true positions of
  ``marker_points`` (given at rest, carried by the mesh) [m];
* ``obstacles/poses`` (geometry_msgs/PoseArray, only when an obstacle of the collision
  section has a ``motion``): every obstacle's translation from its declared pose [m], with
  the truth topics (the controller's model detects contacts against them);
* ``visualization/robot`` (visualization_msgs/MarkerArray): deformed surface, cables,
  effector and target spheres, and (robots with a collision section) the obstacles at
  their current pose, the contact points and normal contact forces, at
  ``visualization_rate_hz`` (≤ 5 Hz);
* /diagnostics: real-time factor, step times, skipped steps, Newton iterations,
  tensions; with contact: contacts, total contact force, how far the free motion went
  in, Gauss–Seidel iterations and residual, detection and solve times.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from soft_inverse_ros_msgs.msg import ActuatorCommand
from visualization_msgs.msg import MarkerArray

from soft_inverse_ros import topics
from soft_inverse_ros.core.sim.plant import ConvergenceError, PlantConfig, make_plant
from soft_inverse_ros.nodes import diagnostics as diag
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.conversions import obstacle_poses_msg, to_seconds
from soft_inverse_ros.nodes.markers import ScenePublisher
from soft_inverse_ros.nodes.plant_clock import CLOCK_MODES, LockstepConfig, PlantClock, make_lockstep
from soft_inverse_ros.nodes.periodic import create_timer
from soft_inverse_ros.nodes.polled_subscription import PolledSubscription
from soft_inverse_ros.nodes.scheduling import apply_scheduling
from soft_inverse_ros.nodes.node_runtime import (
    NodeConfigError,
    check_known_parameters,
    config_parameter_names,
    declare_config,
    main_for,
)

INPUT_MODES = ("servo_states", "command")
#: the lockstep's name for the plant's input stream (core/sim/lockstep.py)
INPUT_STREAM = "inputs"
#: inputs beyond these are refused as absurd (a broken driver or a hostile message), not
#: simulated: |pressure| [Pa], |force| [N]; cable strokes beyond the robot's size [m]
MAX_ABS_PRESSURE = 2e6
MAX_ABS_FORCE = 1e3
#: wall seconds without an input after which the diagnostics warn (the drivers publish at 100 Hz)
STALE_INPUT_S = 1.0
START_MODES = ("slack", "equilibrium", "rest")
#: servo driver config used when ``servo_config`` is empty (under the package's config/)
DEFAULT_SERVO_CONFIG = "drivers/servo_sim.yaml"


@dataclass(frozen=True)
class PlantSimNodeConfig:
    input: str = field(default="servo_states", metadata={
        "description": "what drives the cables: the servo driver's joint states or the "
                       "controller's actuator command directly", "choices": INPUT_MODES})
    servo_config: str = field(default="", metadata={
        "description": "servo driver YAML whose calibration converts servo angles to cable "
                       "strokes (a path, or under config/ or config/drivers/); empty: "
                       + DEFAULT_SERVO_CONFIG})
    start: str = field(default="slack", metadata={
        "description": "initial state: slack = static equilibrium under gravity with every "
                       "cable just taut (strokes set there); equilibrium = static "
                       "equilibrium under zero strokes; rest = undeformed mesh",
        "choices": START_MODES})
    marker_points: tuple[float, ...] = field(default=(), metadata={
        "description": "material points published on plant/markers_true, x y z triples at "
                       "rest [m] in the robot frame; empty: the effector points"})
    publish_every: int = field(default=1, metadata={
        "description": "publish the true effector/markers every this many plant steps",
        "range": (1, 1000)})
    visualization_rate_hz: float = field(default=5.0, metadata={
        "description": "MarkerArray rate of the deformed surface [Hz] (0: off)",
        "range": (0.0, 5.0)})
    max_catch_up_steps: int = field(default=4, metadata={
        "description": "most plant steps per timer tick when behind real time (more are "
                       "skipped: the simulated clock slips)", "range": (1, 100)})
    frame_id: str = field(default="", metadata={
        "description": "frame of the published positions; empty: the description's"})
    clock: str = field(default="wall", metadata={
        "description": "wall: the plant steps on the wall clock (a late tick is caught up, "
                       "beyond max_catch_up_steps the simulated clock slips, counted); sim: "
                       "the plant is the graph's clock: it publishes /clock and every other "
                       "node runs with use_sim_time, so a plant slower than real time slows "
                       "the whole graph down instead of falsifying it",
        "choices": CLOCK_MODES})
    clock_rate_hz: float = field(default=1000.0, metadata={
        "description": "clock: sim: /clock ticks per simulated second (ROS-time timers fire "
                       "at most once per tick: the controller's 1 kHz loop needs 1000)",
        "range": (10.0, 10000.0)})
    max_real_time_factor: float = field(default=1.0, metadata={
        "description": "clock: sim: simulated seconds per wall second at most (1: never "
                       "faster than real time)", "range": (0.01, 100.0)})
    realtime_priority: int = field(default=0, metadata={
        "description": "SCHED_FIFO priority of the plant process's threads (1-99, below the "
                       "controller's; 0: normal scheduling): the simulated robot stands in "
                       "for physics, which does not wait for a busy CPU (needs root or an "
                       "rtprio limit, else a warning)", "range": (0, 99)})

    def __post_init__(self) -> None:
        if len(self.marker_points) % 3:
            raise ValueError(
                f"marker_points must hold x y z triples, got {len(self.marker_points)} numbers")
        if not all(math.isfinite(v) for v in self.marker_points):
            raise ValueError("marker_points must be finite")
        if self.clock not in CLOCK_MODES:
            raise ValueError(f"clock must be one of {list(CLOCK_MODES)}, got {self.clock!r}")


class PlantSimNode(Node):
    def __init__(self, node_name: str = "plant_sim_node", **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, PlantSimNodeConfig)
        self.plant_config = declare_config(self, PlantConfig)
        self.lockstep_config = declare_config(self, LockstepConfig)
        check_known_parameters(
            self, config_parameter_names(PlantSimNodeConfig) + config_parameter_names(PlantConfig)
            + config_parameter_names(LockstepConfig))
        self._check_clock_mode()
        # at its priority already while the model is built (seconds of CPU: a reduced plant
        # computes its basis), or the busy real-time nodes that start with it starve the
        # build (28 s under load); again after set-up for the threads created since
        self._set_scheduling()
        self.plant = make_plant(self.plant_config)
        self.frame_id = self.config.frame_id or self.plant.frame_id
        self._map_points()
        self._start()
        self._create_inputs()
        self._create_lockstep()
        self._create_outputs()
        self._init_counters()
        self._set_scheduling()
        self._start_timers()
        self._diag = diag.DiagnosticsPublisher(self, self._diagnostics)
        plant, cfg = self.plant, self.config
        hyper = getattr(plant, "hyper", None)
        model = plant.config.model + (
            "" if hyper is None else
            f" (ECSW: forces of {len(hyper.elements)} of {hyper.mesh_elements} elements, "
            f"training error {hyper.training_error:.4f})")
        if hasattr(plant, "from_cache"):  # the reduced plants (core/sim/build_cache.py)
            model += (f", {'loaded from the build cache' if plant.from_cache else 'reduction built'} "
                      f"in {plant.build_time:.1f} s")
        self.get_logger().info(
            f"plant '{plant.description.name}': model {model}, {plant.mesh.n_points} nodes, "
            f"{plant.mesh.n_tets} tets, dt {plant.config.dt * 1e3:.1f} ms, input "
            f"{cfg.input}, cables {list(plant.cable_names)}, effector at "
            f"{np.round(self.effector_point(), 4).tolist()} m"
        )

    # ------------------------------------------------------------------ setup
    def _check_clock_mode(self) -> None:
        """Refuse ``clock: sim`` with ``use_sim_time`` (this node would be its own clock)."""
        if self.config.clock == "sim" and self.get_parameter("use_sim_time").value:
            raise NodeConfigError(
                f"{self.get_name()}: clock: sim makes this node the clock source: it cannot "
                "also use_sim_time (the graph sets use_sim_time on the other nodes only)")

    def _map_points(self) -> None:
        """Map the effector point (barycentre of the first effector) and the markers (rest
        positions [m]) into the mesh once; the largest plausible cable stroke [m]."""
        plant, cfg = self.plant, self.config
        eff = plant.description.effectors[0]
        self._effector_map = plant.map_points(eff.points, name=f"effector {eff.name}")
        self._effector_weights = np.asarray(eff.weights, float) / float(np.sum(eff.weights))
        markers = (np.asarray(cfg.marker_points, float).reshape(-1, 3) if cfg.marker_points
                   else np.asarray(eff.points, float))
        self._marker_map = plant.map_points(markers, name="marker")
        #: a cable cannot shorten or lengthen by more than the robot's size [m]
        self._max_abs_stroke = float(np.linalg.norm(np.ptp(plant.fem.rest_points, axis=0)))

    def _create_inputs(self) -> None:
        """Subscribe to the cable input (servo states, with their calibration, or the
        actuator command), chamber pressures (robots with cavities) and the target."""
        cfg = self.config
        self._servo_index: dict[str, tuple[int, int]] = {}
        if cfg.input == "servo_states":
            self._calibration = self._load_calibration(cfg.servo_config)
            self.create_subscription(JointState, topics.SERVO_STATES, self._on_servo_states,
                                     qos.HIGH_RATE)
        else:
            self.create_subscription(ActuatorCommand, topics.ACTUATOR_COMMAND, self._on_command,
                                     qos.HIGH_RATE)
        if self.plant.pressure_names:
            self.create_subscription(JointState, topics.CHAMBER_PRESSURES, self._on_pressures,
                                     qos.HIGH_RATE)
        # the target is only drawn (visualization_rate_hz): read when drawn, not woken for
        # each of its ~250 messages/s (polled_subscription.py)
        self._targets = (PolledSubscription(self, PointStamped, topics.TARGET, qos.HIGH_RATE)
                         if self.config.visualization_rate_hz > 0 else None)

    def _create_lockstep(self) -> None:
        """clock: sim: the streams the clock waits for (plant_clock.make_lockstep): the
        plant's input, stamped in :meth:`_accepted`, the snapshots and the mocap's frames."""
        self.lockstep = make_lockstep(self, self.lockstep_config, self.config.clock, INPUT_STREAM)

    def _create_outputs(self) -> None:
        """Publishers of the true effector, the true markers and the robot's MarkerArray."""
        from sensor_msgs.msg import PointCloud2

        self._effector_pub = self.create_publisher(PointStamped, topics.PLANT_EFFECTOR_TRUE,
                                                   qos.HIGH_RATE)
        self._markers_pub = self.create_publisher(PointCloud2, topics.PLANT_MARKERS_TRUE,
                                                  qos.HIGH_RATE)
        self._viz_pub = self.create_publisher(MarkerArray, topics.ROBOT_MARKERS, qos.MARKERS)
        self._scene_pub = ScenePublisher(self._viz_pub)
        self._obstacles_pub = None
        if self.plant.contact is not None and self.plant.contact.moving:
            from geometry_msgs.msg import PoseArray

            self._obstacles_pub = self.create_publisher(PoseArray, topics.OBSTACLE_POSES, qos.HIGH_RATE)

    def _init_counters(self) -> None:
        """Input, step and failure counters, step statistics and the real-time bookkeeping
        (wall times from time.monotonic() [s], plant times [s])."""
        self._inputs = 0
        self._rejected = 0
        self._last_input = -math.inf
        self._last_error = ""
        self._failures = 0
        self._steps = 0
        self._step_times: deque[float] = deque(maxlen=1000)
        self._newton: deque[int] = deque(maxlen=1000)
        self._target: np.ndarray | None = None
        self._faces = None
        self.plant_clock = PlantClock(self, dt=self.plant.config.dt, plant_time=lambda: self.plant.time,
                                      step=self._step_once,
                                      max_catch_up_steps=self.config.max_catch_up_steps,
                                      lockstep=self.lockstep)

    def _set_scheduling(self) -> None:
        """SCHED_FIFO at ``realtime_priority`` when > 0 for every thread so far; a refusal
        is a warning (once: a second call after a refusal does nothing)."""
        if getattr(self, "_scheduling", None) == "normal" and self.config.realtime_priority > 0:
            return  # refused before
        self._scheduling = apply_scheduling(self, self.config.realtime_priority,
                                            "the plant may fall behind real time on a busy machine")

    def _start_timers(self) -> None:
        """Step on /clock ticks (``clock: sim``) or a wall timer every ``dt`` [s]; the
        MarkerArray timer at ``visualization_rate_hz`` [Hz] (0: none)."""
        cfg = self.config
        if cfg.clock == "sim":
            self.plant_clock.start_sim(cfg.clock_rate_hz, cfg.max_real_time_factor)
        else:
            self.plant_clock.start_wall()
        if cfg.visualization_rate_hz > 0:
            create_timer(self, 1.0 / cfg.visualization_rate_hz, self._publish_visualization)

    def _start(self) -> None:
        mode = self.config.start
        if mode == "slack":
            self.plant.equilibrate(slack_cables=True)
        elif mode == "equilibrium":
            self.plant.equilibrate()

    def _load_calibration(self, value: str):
        from soft_inverse_ros.nodes.driver_lifecycle import load_servo_config_for

        servo = load_servo_config_for(self.get_name(), value, DEFAULT_SERVO_CONFIG, self.plant.cable_names,
                                      "cable(s)")
        self._servo_names = servo.names
        return servo.calibration

    # ------------------------------------------------------------------ inputs
    def _accepted(self, stamp: float) -> None:
        self._inputs += 1
        self._last_input = time.monotonic()
        self.lockstep.stamp(INPUT_STREAM, stamp)

    def _set_inputs(self, what: str, stamp, *, safe: bool = False, **inputs) -> None:
        """Apply inputs after the plausibility checks (refused inputs keep the old ones).
        ``stamp``: the message's header stamp. ``safe`` (a SAFE command): cables go only
        where they shorten less than now."""
        bounds = {"cable_strokes": self._max_abs_stroke, "pressures": MAX_ABS_PRESSURE,
                  "forces": MAX_ABS_FORCE}
        for key, value in inputs.items():
            a = np.asarray(value, float)
            if a.size and np.any(np.abs(a) > bounds[key]):
                self._reject(f"{what}: {key} {np.round(a, 6).tolist()} beyond the plausible "
                             f"+/-{bounds[key]:g} (SI): refused, inputs held")
                return
        if safe and "cable_strokes" in inputs:
            inputs["cable_strokes"] = np.minimum(inputs["cable_strokes"], self.plant.cable_strokes)
        try:
            self.plant.set_inputs(**inputs)
        except ValueError as exc:
            self._reject(f"{what} rejected: {exc}")
            return
        self._accepted(to_seconds(stamp))

    def _reject(self, why: str) -> None:
        self._rejected += 1
        self._last_error = why
        self.get_logger().warning(why, throttle_duration_sec=2.0)

    def _on_servo_states(self, msg: JointState) -> None:
        if len(msg.position) != len(msg.name):
            self._reject(f"servo states: {len(msg.name)} names but {len(msg.position)} positions")
            return
        angle = dict(zip(msg.name, msg.position))
        strokes = self.plant.cable_strokes
        cal = self._calibration
        used = 0
        for i, name in enumerate(self.plant.cable_names):
            q = angle.get(name)
            if q is None or not math.isfinite(q):
                continue  # servo absent or not answering: hold that cable
            j = self._servo_names.index(name)
            strokes[i] = (q - cal.zero_offset[j]) / cal.rad_per_m[j]
            used += 1
        if used:
            self._set_inputs("servo states", msg.header.stamp, cable_strokes=strokes)

    def _on_command(self, msg: ActuatorCommand) -> None:
        n = len(msg.names)
        if not (len(msg.modes) == len(msg.values) == n):
            self._reject(f"command: {n} names, {len(msg.modes)} modes, {len(msg.values)} values")
            return
        index = {name: i for i, name in enumerate(msg.names)}
        plant = self.plant
        values = {}
        for group, names, mode in (
            ("cables", plant.cable_names, ActuatorCommand.MODE_DISPLACEMENT),
            ("pressures", plant.pressure_names, ActuatorCommand.MODE_PRESSURE),
            ("forces", plant.force_names, ActuatorCommand.MODE_FORCE),
        ):
            out = []
            for name in names:
                i = index.get(name)
                if i is None:
                    self._reject(f"command lacks actuator {name!r} (has {list(msg.names)})")
                    return
                if msg.modes[i] == mode:
                    out.append(msg.values[i])
                elif group == "cables" and len(msg.strokes) == n:
                    out.append(msg.strokes[i])  # force-mode cable: its predicted stroke
                else:
                    self._reject(f"command: actuator {name!r} in mode {msg.modes[i]}, the plant "
                                 f"needs mode {mode}")
                    return
            values[group] = out
        self._set_inputs("command", msg.header.stamp, safe=msg.status == ActuatorCommand.STATUS_SAFE,
                         cable_strokes=values["cables"], pressures=values["pressures"],
                         forces=values["forces"])

    def _on_pressures(self, msg: JointState) -> None:
        if len(msg.effort) != len(msg.name):
            self._reject(f"chamber states: {len(msg.name)} names but {len(msg.effort)} efforts")
            return
        p_by_name = dict(zip(msg.name, msg.effort))
        pressures = self.plant.pressures
        used = 0
        for i, name in enumerate(self.plant.pressure_names):
            p = p_by_name.get(name)
            if p is not None and math.isfinite(p):
                pressures[i] = p
                used += 1
        if used:
            self._set_inputs("chamber states", msg.header.stamp, pressures=pressures)

    # ------------------------------------------------------------------ simulation time
    # ------------------------------------------------------------------ stepping
    def effector_point(self) -> np.ndarray:
        """True effector point (3,) [m]: weighted barycentre of the first effector."""
        return self._effector_weights @ self._effector_map.apply(self.plant.positions)

    def _step_once(self) -> bool:
        """One plant step under the held inputs, then the truth topics; False when the
        step failed (the plant recovered to a static state)."""
        try:
            state = self.plant.step()
        except (ConvergenceError, ArithmeticError, ValueError) as exc:
            self._recover(exc)
            return False
        self._steps += 1
        self._step_times.append(state.wall_time)
        self._newton.append(state.newton_iterations)
        if self._steps % self.config.publish_every == 0:
            self._publish_truth()
        return True

    def _recover(self, exc: Exception) -> None:
        """A failed step: back to a static equilibrium (the previous state is kept). With
        contact the previous state itself is kept (at rest): the static equilibrium knows no
        contact and would push the surfaces through each other."""
        self._failures += 1
        self._last_error = f"plant step failed: {exc}"
        self.get_logger().error(self._last_error, throttle_duration_sec=1.0)
        if self.plant.contact is not None:
            self.plant.set_state(self.plant.positions)
            return
        try:
            self.plant.equilibrate()
        except (ConvergenceError, ValueError, ArithmeticError):
            strokes = self.plant.cable_strokes
            self.plant.reset()
            try:
                self.plant.equilibrate(slack_cables=True)
            except (ConvergenceError, ValueError, ArithmeticError) as again:
                # stay at the rest shape; the next step retries from there
                self._last_error += f"; recovery failed too ({again}), plant reset to rest"
                self.get_logger().error(self._last_error, throttle_duration_sec=1.0)
            self.plant.set_inputs(cable_strokes=strokes)

    def _publish_truth(self) -> None:
        from soft_inverse_ros.nodes.point_cloud import cloud_from_points

        stamp = self.get_clock().now().to_msg()
        tip = self.effector_point()
        msg = PointStamped()
        msg.header.stamp = stamp
        msg.header.frame_id = self.frame_id
        msg.point.x, msg.point.y, msg.point.z = (float(v) for v in tip)
        self._effector_pub.publish(msg)
        self._markers_pub.publish(cloud_from_points(
            self._marker_map.apply(self.plant.positions), self.frame_id, stamp))
        if self._obstacles_pub is not None:
            self._obstacles_pub.publish(obstacle_poses_msg(self.plant.contact.obstacle_offsets,
                                                           self.frame_id, stamp))

    def _publish_visualization(self) -> None:
        from soft_inverse_ros.core.model.visualization import boundary_faces, robot_scene
        if self._viz_pub.get_subscription_count() == 0:
            return  # nobody looks: save the 10-40 ms
        if (msg := self._targets.take_newest()) is not None:
            p = np.array([msg.point.x, msg.point.y, msg.point.z])
            self._target = p if np.all(np.isfinite(p)) else None
        positions = np.array(self.plant.positions)
        if self._faces is None:
            self._faces = boundary_faces(self.plant.fem.tets, positions)
        scene = robot_scene(positions, self._faces, effector=self.effector_point(),
                            target=self._target, cables=self.plant.cable_paths(),
                            frame_id=self.frame_id, contacts=self._contacts_drawn(),
                            obstacles=() if self.plant.contact is None else self.plant.contact.obstacles)
        self._scene_pub.publish(scene, self.get_clock().now().to_msg())

    def _contacts_drawn(self):
        """(points, normals, forces) of the last contact correction; None without contact."""
        if self.plant.contact is None:
            return None
        stats = self.plant.last_contact
        if stats is None or stats.contact_set is None or not stats.contacts:
            return np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0)
        cs = stats.contact_set
        forces = stats.forces if len(stats.forces) == cs.size else np.zeros(cs.size)
        return cs.points, cs.normals, forces

    def _contact_values(self) -> dict:
        """Diagnostics of the last contact correction (empty without contact)."""
        if self.plant.contact is None:
            return {}
        c = self.plant.last_contact
        if c is None:
            return {"contacts": 0}
        return {
            "contacts": c.contacts,
            "contact_force_total_N": float(c.forces.sum()) if len(c.forces) else 0.0,
            "contact_free_penetration_mm": 1e3 * c.penetration_before,
            "contact_gs_iterations": c.gs_iterations,
            "contact_complementarity_residual_m": c.complementarity_residual,
            "contact_detect_ms": 1e3 * c.detect_time,
            "contact_solve_ms": 1e3 * c.solve_time,
        }

    # ------------------------------------------------------------------ health
    def _diagnostics(self):
        rtf = self.plant_clock.update_real_time_factor()
        times = np.asarray(self._step_times) if self._step_times else np.zeros(1)
        level = diag.OK
        message = "ok"
        self._last_error = self._last_error or self.lockstep.last_error
        self.lockstep.last_error = ""
        input_age = time.monotonic() - self._last_input
        if self._last_error:
            level, message = diag.WARN, self._last_error
        elif rtf < 0.9 and self.config.clock == "wall":
            level, message = diag.WARN, f"behind real time (factor {rtf:.2f})"
        elif self._inputs and input_age > STALE_INPUT_S:  # a driver that stopped: said, not OK
            level, message = diag.WARN, (f"no {self.config.input} input for {input_age:.1f} s: "
                                         "holding the last one")
        self._last_error = ""
        tensions = self.plant.efforts()
        values = {
            "sim_time_s": self.plant.time,
            "real_time_factor": rtf,
            "steps": self._steps,
            "skipped_steps": self.plant_clock.skipped,
            "failed_steps": self._failures,
            "dt_ms": 1e3 * self.plant.config.dt,
            "step_time_p50_ms": 1e3 * float(np.median(times)),
            "step_time_p99_ms": 1e3 * float(np.percentile(times, 99)),
            "step_time_max_ms": 1e3 * float(times.max()),
            "newton_iterations_mean": float(np.mean(self._newton)) if self._newton else 0.0,
            "tangent_assemblies": self.plant.tangent_assemblies,
            "input": self.config.input,
            "clock": self.config.clock,
            "scheduling": self._scheduling,
            "model": self.plant.config.model,
            "inputs_received": self._inputs,
            "inputs_rejected": self._rejected,
            "last_input_age_s": input_age,
        }
        if self.lockstep.active:
            values.update(self.lockstep.counters())
        for name, value in zip(self.plant.actuator_names, tensions):
            values[f"effort.{name}"] = float(value)
        values.update(self._contact_values())
        return [diag.status(f"{self.get_name()}: plant", level, message, values)]


def main(args=None) -> int:
    return main_for(PlantSimNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
