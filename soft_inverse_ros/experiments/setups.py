"""Building blocks of the experiments: controller model and solver, servos, mocap, targets.

Everything here builds the same core objects the ROS nodes build from their parameters
(``nodes/model_params.build_model``, ``inverse_controller_node``, the servo driver node,
the mocap node), so the co-simulation exercises the shipped code paths. SI units.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from soft_inverse_ros.core.control.actuator_limits import limits_from_description
from soft_inverse_ros.core.model.description import RobotDescription
from soft_inverse_ros.core.control.inverse_qp import InverseSolver, InverseSolverConfig
from soft_inverse_ros.core.model.robot_model import RobotModel
from soft_inverse_ros.core.model.snapshot import ComplianceSnapshot
from soft_inverse_ros.core.control.trajectory import Trajectory, TrajectoryConfig
from soft_inverse_ros.experiments.plant_spec import PlantSpec

#: Speeds of the ICRA 2015 table [m/s] (6.25 … 150 mm/s).
PAPER_SPEEDS = (0.00625, 0.0125, 0.025, 0.05, 0.1, 0.15)


@dataclass
class Controller:
    """The controller's FEM model at its initial equilibrium, restorable between runs.

    Attributes:
        description: The robot description the model was built from.
        model: The FEM model (state mutated by runs: call :meth:`restore` before each).
        rest_positions: (N, 3) node positions of the initial equilibrium [m].
        rest_efforts: (n_a,) efforts of that equilibrium [N or Pa].
        build_time: Wall time of building and equilibrating the model [s].
    """

    description: RobotDescription
    model: RobotModel
    rest_positions: np.ndarray
    rest_efforts: np.ndarray
    build_time: float

    @classmethod
    def build(cls, description: RobotDescription, *, mesh=None, young_modulus_scale: float = 1.0,
              solver: str = "auto") -> "Controller":
        """Model of ``description`` (optionally on another mesh) at equilibrium under
        gravity with zero efforts (as ``fem_node`` starts)."""
        t0 = time.perf_counter()
        model = RobotModel.from_description(description, mesh=mesh, solver=solver,
                                            young_modulus_scale=young_modulus_scale)
        efforts = np.zeros(model.n_actuators)
        model.equilibrate(efforts, from_rest=True)
        return cls(description, model, model.positions.copy(), efforts, time.perf_counter() - t0)

    def restore(self) -> RobotModel:
        """Put the model back in its initial equilibrium (fresh solver guesses) and return it."""
        self.model.reset()
        self.model.set_state(self.rest_positions, self.rest_efforts)
        return self.model

    def initial_snapshot(self) -> ComplianceSnapshot:
        """Snapshot of the initial equilibrium (seq 0, stamp 0): usable from t = 0."""
        return self.restore().snapshot(seq=0, stamp=0.0)

    def solver(self, config: InverseSolverConfig | None = None) -> InverseSolver:
        """A fresh inverse solver with the description's actuator limits."""
        return InverseSolver(config or InverseSolverConfig(), limits_from_description(self.description))

    def measure_update_time(self, updates: int = 12) -> tuple[float, float]:
        """Median (thread CPU time, wall time) [s] of ``model.update`` on this machine, after
        two warm-up updates, under small efforts around the initial state; restores the
        model. The CPU time is what an update costs on a core of its own (the wall time of
        a shared, loaded machine is inflated by other processes)."""
        model = self.restore()
        limits = model.actuator_limits()
        scale = np.where(np.isfinite(limits.effort_max), limits.effort_max, 1.0) * 0.05
        cpu, wall = [], []
        for i in range(updates + 2):
            efforts = scale * (1.0 + np.sin(0.3 * i + np.arange(model.n_actuators))) * 0.5
            c0, w0 = time.thread_time(), time.perf_counter()
            model.update(efforts, seq=i + 1, stamp=0.0)
            if i >= 2:
                cpu.append(time.thread_time() - c0)
                wall.append(time.perf_counter() - w0)
        self.restore()
        return float(np.median(cpu)), float(np.median(wall))

    @property
    def rest_effector(self) -> np.ndarray:
        """Effector rows at the initial equilibrium [m]."""
        model = self.restore()
        return np.asarray(model.effector_position, float)


def square_target(center: Sequence[float], size: float, speed: float,
                  start_delay: float, shape: str = "square") -> tuple[Callable[[float], np.ndarray], Trajectory]:
    """The ICRA 2015 square (side ``size`` [m], horizontal, around ``center`` [m]) at
    ``speed`` [m/s], held at its centre for ``start_delay`` [s] first (as ``target_node``
    with ``start_delay``); ``shape="circle"``: the circle of diameter ``size`` instead.
    Returns ``(target(t), trajectory)``."""
    trajectory = Trajectory(TrajectoryConfig(shape=shape, center=tuple(float(c) for c in center),
                                             size=float(size), speed=float(speed), loop=True))
    delay = float(start_delay)

    def target(t: float) -> np.ndarray:
        return trajectory.position(t - delay)

    return target, trajectory


def approach_time(trajectory: Trajectory) -> float:
    """Time [s] from the start of the trajectory to its first lap (the approach segment)."""
    return trajectory.duration - trajectory.lap_time


def sim_servo_driver(
    names: Sequence[str],
    *,
    initial_displacement: Sequence[float] | np.ndarray | None = None,
    config_file: str = "drivers/servo_sim.yaml",
):
    """A configured :class:`ServoDriver` over simulated servos, one per cable in ``names``,
    activated at t = 0 holding ``initial_displacement`` [m] (default 0).

    Period, dynamics, calibration, displacement range and speed limit are those of
    ``config_file`` (the live graph's ``config/drivers/servo_sim.yaml``): its first
    actuator's settings serve every cable of ``names``.
    """
    import dataclasses

    from soft_inverse_ros.core.config_files import find_config
    from soft_inverse_ros.core.drivers.servo_config import load_servo_config
    from soft_inverse_ros.core.drivers.servo_driver import ServoDriver
    from soft_inverse_ros.core.drivers.sim_servo import SimServoBackend

    n = len(names)
    base = load_servo_config(find_config(config_file))
    cal = base.calibration
    first = {field.name: np.full(n, getattr(cal, field.name)[0])
             for field in dataclasses.fields(cal)}
    config = dataclasses.replace(
        base, names=tuple(names), ids=tuple(range(1, n + 1)),
        calibration=dataclasses.replace(cal, **first),
        min_displacement=np.full(n, base.min_displacement[0]),
        max_displacement=np.full(n, base.max_displacement[0]),
        max_speed=np.full(n, base.max_speed[0]), backend="sim",
    )
    start = np.zeros(n) if initial_displacement is None else np.asarray(initial_displacement, float)
    if start.shape != (n,) or not np.all(np.isfinite(start)):
        raise ValueError(f"initial_displacement must be {n} finite values [m], got {initial_displacement!r}")
    start = np.clip(start, config.min_displacement, config.max_displacement)
    limits = config.calibration.position_limits(config.min_displacement, config.max_displacement)
    backend = SimServoBackend(config.sim, limits, config.calibration.position_from_displacement(start))
    driver = ServoDriver(config, backend)
    driver.configure()
    driver.activate(0.0)
    return driver


def sim_yaml_mocap_faults(params_file: str = "sim.yaml") -> dict:
    """The simulated mocap's fault settings of the live graph (``mocap_node``'s ``sim.*``
    dropout, burst and outlier parameters in ``params_file``), as keyword arguments of
    :func:`simulated_mocap`."""
    from soft_inverse_ros.core.drivers.config_reader import read_yaml_section
    from soft_inverse_ros.graph import resolve_params_file

    params = read_yaml_section(resolve_params_file(params_file), "mocap_node").get("ros__parameters", {})
    keys = ("dropout_probability", "burst_probability", "burst_mean_length", "occlusion_probability",
            "outlier_probability", "outlier_magnitude")
    return {k: float(params[f"sim.{k}"]) for k in keys if f"sim.{k}" in params}


def simulated_mocap(*, noise_std: float = 0.0002, latency: float = 0.005, seed: int = 1,
                    stale_after: float = 0.1, max_jump: float = 0.02, **faults):
    """Simulated mocap of the effector (labeled marker ``tip``, identity registration)
    with its hygiene pipeline: a :class:`MocapLink`. ``faults``: dropout, burst, occlusion
    and outlier settings of :class:`SimulatedMocapConfig` (none by default; the live graph's:
    :func:`sim_yaml_mocap_faults`)."""
    from soft_inverse_ros.core.mocap.effector import EffectorConfig
    from soft_inverse_ros.core.mocap.pipeline import MocapPipeline
    from soft_inverse_ros.core.mocap.registration import FrameRegistration
    from soft_inverse_ros.core.mocap.sample_filter import SampleFilterConfig
    from soft_inverse_ros.core.mocap.simulated_source import SimulatedMocapConfig, SimulatedMocapSource
    from soft_inverse_ros.experiments.cosim import EFFECTOR_MARKER, MocapLink

    registration = FrameRegistration.identity()
    source = SimulatedMocapSource(SimulatedMocapConfig(noise_std=noise_std, latency=latency, seed=seed,
                                                       **faults), registration)
    pipeline = MocapPipeline(registration, SampleFilterConfig(max_jump=max_jump, stale_after=stale_after),
                             EffectorConfig(mode="labeled_marker", name=EFFECTOR_MARKER))
    return MocapLink(source, pipeline)


class PlantRig:
    """A plant at its initial state, restorable between runs.

    The initial state is the static equilibrium under gravity with every cable just taut
    (``equilibrate(slack_cables=True)``: servos zeroed on the hanging robot); the servos
    start holding those strokes.
    """

    def __init__(self, spec: PlantSpec, description: RobotDescription | None = None) -> None:
        from soft_inverse_ros.core.sim.modal_plant import ModalPlant
        from soft_inverse_ros.core.sim.plant import SoftRobotPlant, make_plant

        t0 = time.perf_counter()
        self.spec = spec
        cfg = spec.config()
        if description is None:
            self.plant = make_plant(cfg)
        else:
            self.plant = (ModalPlant if cfg.model == "modal" else SoftRobotPlant)(description, cfg)
        self.plant.equilibrate(slack_cables=True)
        self.positions = self.plant.positions.copy()
        self.cable_strokes = self.plant.cable_strokes
        self.build_time = time.perf_counter() - t0

    def restore(self):
        """The plant back at its initial state (zero velocity, initial strokes)."""
        plant = self.plant
        plant.reset()
        plant.set_state(self.positions)
        plant.set_inputs(cable_strokes=self.cable_strokes)
        return plant

    @property
    def rest_effector(self) -> np.ndarray:
        plant = self.restore()
        return np.asarray(plant.effector_position, float)


def run_tracking(controller: Controller, rig: PlantRig | None, target: Callable[[float], np.ndarray], *,
                 duration: float, mode: str, fem_compute_time: float, fem_period: float,
                 qp_config: InverseSolverConfig | None = None, servos: bool = True,
                 servo_options: dict | None = None, mocap_options: dict | None = None,
                 feedback_config=None, mocap_period: float = 0.01, record_every: int = 1,
                 initial_snapshot: bool = True):
    """One co-simulated tracking run from the initial state of ``controller`` and ``rig``.

    Args:
        rig: The plant (None: the controller's model is the robot, ideal actuators).
        mode: ``"async"`` or ``"sync"``.
        servos: Simulated servos between the commands and the plant (else ideal).
        servo_options: Keyword arguments of :func:`sim_servo_driver`.
        mocap_options: Keyword arguments of :func:`simulated_mocap` (None: no mocap unless
            feedback is on, then the defaults).
        feedback_config: A :class:`~soft_inverse_ros.core.control.feedback.FeedbackConfig` (closed
            loop; enabled from t = 0) or None (open loop).
        initial_snapshot: Start with the snapshot of the initial state usable at t = 0
            (else the QP waits for the first FEM update and commands nothing until then).

    Returns:
        The :class:`~soft_inverse_ros.experiments.cosim.CosimResult`.
    """
    from dataclasses import replace

    from soft_inverse_ros.core.control.feedback import TargetFeedback
    from soft_inverse_ros.experiments.cosim import CosimConfig, CosimParts, run_cosim

    snapshot = controller.initial_snapshot() if initial_snapshot else None
    model = controller.restore()
    plant = rig.restore() if rig is not None else None
    servo = None
    if servos and plant is not None:
        servo = sim_servo_driver(plant.cable_names, initial_displacement=plant.cable_strokes,
                                 **(servo_options or {}))
    mocap = None
    if mocap_options is not None or feedback_config is not None:
        mocap = simulated_mocap(**(mocap_options or {}))
    feedback = None
    if feedback_config is not None:
        feedback = TargetFeedback(replace(feedback_config, enabled=True), model.n_effector_rows)
    config = CosimConfig(
        duration=duration, mode=mode, fem_period=fem_period, fem_compute_time=fem_compute_time,
        servo_period=servo.config.period_s if servo is not None else 0.01,
        plant_period=rig.spec.dt if rig is not None else 0.001,
        mocap_period=mocap_period, record_every=record_every,
    )
    parts = CosimParts(model=model, solver=controller.solver(qp_config), target=target, plant=plant,
                       servo=servo, mocap=mocap, feedback=feedback, initial_snapshot=snapshot)
    return run_cosim(config, parts)
