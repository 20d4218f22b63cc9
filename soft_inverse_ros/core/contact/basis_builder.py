"""Building a reduced contact basis from a sweep of postures (Goury et al. 2021, §III-C, §IV).

1. **Sweep.** The simulated robot (:class:`~soft_inverse_ros.core.sim.plant.SoftRobotPlant`,
   the dynamic FEM plant, with FULL contact: the description's ``collision`` section
   without any reduced basis) is driven through actuator postures, each reached by a
   linear ramp from rest. One actuator: a ramp from LO to HI (the steps from rest to LO,
   if LO ≠ 0, are taken but not recorded). Several actuators: a two-level
   Plackett–Burman-style design (the columns of a Hadamard matrix,
   :func:`scipy.linalg.hadamard`, of the smallest power-of-two order > n: 4 runs for up
   to 3 actuators, 8 for up to 7, …) with every actuator at LO or HI in each run; each
   run ramps all actuators together from rest (0) to its posture, every step recorded —
   the paper sweeps a multi-section arm the same way.
2. **Snapshots.** After each step the normal contact forces summed per potential contact
   vertex (the boundary-surface nodes) are one column of S (n_c × n_s, [N]).
3. **Basis.** S's columns with contact force are factorized by NNMF
   (:mod:`~soft_inverse_ros.core.contact.nnmf`, its nested path: each k starts from k − 1's
   factorization, so the HALS error never grows with k): S ≈ Ψ B, Ψ ≥ 0 with k columns,
   and the relative error for k = 1 … ``kmax`` (the paper's Fig. 12).

The sweep specs (``NAME=LO:HI[:STEP]UNIT``) and the posture design are in
:mod:`~soft_inverse_ros.core.contact.sweep`.

Units SI, robot base frame of the description.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from soft_inverse_ros.core.contact.sweep import Sweep, SweepError
from soft_inverse_ros.core.model.snapshot import ActuatorKind

ProgressFn = Callable[[int, int], None]
#: a swept state past this many times a physical bound is a diverged plant, not a posture: an
#: effort (a cable's tension) past its actuator's bound in the description, or a node farther
#: from rest than the robot's size (its rest bounding-box diagonal). A converged finger sweep
#: stays within 0.9 of each; a diverging one grows by orders of magnitude per step
DIVERGED_FACTOR = 10.0


@dataclass
class SweepRun:
    """One driven sequence: per step the effector rows ``tips`` (n_s, n_e) [m], the contact
    forces per vertex ``forces`` (n_c, n_s) [N] (None without ``nodes``), the contact count,
    and the wall time and the process CPU time of the plant steps alone [s] (CPU time does
    not count the time other jobs took the core: the cost comparison of a loaded machine),
    in total and per recorded step (``step_wall_s``, ``step_cpu_s`` (n_s,))."""

    tips: np.ndarray
    forces: np.ndarray | None
    contacts: np.ndarray
    wall_s: float
    cpu_s: float = float("nan")
    step_wall_s: np.ndarray | None = None
    step_cpu_s: np.ndarray | None = None

    @property
    def steps(self) -> int:
        return int(self.tips.shape[0])


def forces_per_node(stats, index: np.ndarray) -> np.ndarray:
    """The normal contact forces [N] of a correction's ``stats`` summed per potential
    contact vertex (the vertex of each vertex–triangle or vertex–obstacle pair): ``index``
    maps a mesh node to its row (−1: not a contact vertex)."""
    column = np.zeros(int(index.max()) + 1)
    if stats is not None and stats.contacts > 0:
        rows = index[np.asarray(stats.contact_set.vertex, dtype=np.int64)]
        keep = rows >= 0
        np.add.at(column, rows[keep], np.asarray(stats.forces, dtype=float)[keep])
    return column


def divergence_bounds(plant) -> tuple[np.ndarray, float]:
    """What no converged state of ``plant`` exceeds: per actuator the largest |effort| [N or Pa]
    and the largest node displacement from rest [m] (:data:`DIVERGED_FACTOR` times the
    description's effort bound, inf where it has none, and times the robot's size)."""
    from soft_inverse_ros.core.control.actuator_limits import limits_from_description

    limits = limits_from_description(plant.description)
    bound = np.maximum(np.abs(limits.effort_min), np.abs(limits.effort_max))
    efforts = np.where(bound > 0, DIVERGED_FACTOR * bound, np.inf)
    size = float(np.linalg.norm(np.ptp(plant.fem.rest_points, axis=0)))
    return efforts, DIVERGED_FACTOR * size


def check_converged(plant, state, bounds: tuple[np.ndarray, float], step: int) -> None:
    """Refuse ``state`` (after step ``step`` of a run, counted from 1) beyond :func:`divergence_bounds` ``bounds``.

    Raises:
        ConvergenceError: an effort or a node displacement past its bound (one line naming it).
    """
    from soft_inverse_ros.core.model.linear_solvers import ConvergenceError

    efforts, reach = bounds
    over = np.flatnonzero(np.abs(state.efforts) > efforts)
    if over.size:
        i = int(over[0])
        unit = "Pa" if plant.actuator_kinds[i] == ActuatorKind.PRESSURE else "N"
        raise ConvergenceError(
            f"step {step}: {plant.actuator_names[i]} at {float(state.efforts[i]):.3g} {unit}, more than "
            f"{DIVERGED_FACTOR:g} times its bound in the description ({efforts[i] / DIVERGED_FACTOR:g} {unit})")
    moved = float(np.linalg.norm(state.positions - plant.fem.rest_points, axis=1).max())
    if moved > reach:
        raise ConvergenceError(f"step {step}: a node {moved:.3g} m from rest, more than {DIVERGED_FACTOR:g} "
                               f"times the robot's size ({reach / DIVERGED_FACTOR:.3g} m)")


def drive(plant, inputs: np.ndarray, *, nodes: np.ndarray | None = None, record_from: int = 0,
          on_step: Callable | None = None, progress: Callable[[], None] | None = None) -> SweepRun:
    """Step ``plant`` through ``inputs`` (steps, n_a) [m, Pa or N per the actuator kinds,
    the plant's actuator order] and record steps ``record_from`` on.

    Args:
        nodes: the potential contact vertices (rows of the force snapshots), or None: mesh
            node ids, or surface vertex ids when the plant's contact runs on a mapped
            collision surface.
        on_step: called as ``on_step(state, plant.last_contact)`` after each recorded step
            (not timed).
        progress: called after every step.

    Raises:
        ConvergenceError: the plant diverged (a non-finite step, or a state past
            :func:`divergence_bounds`).
    """
    bounds = divergence_bounds(plant)
    kinds = np.array([int(k) for k in plant.actuator_kinds])
    cables, pressures, forces_idx = (np.flatnonzero(kinds == int(k)) for k in
                                     (ActuatorKind.CABLE, ActuatorKind.PRESSURE, ActuatorKind.FORCE))
    index = None
    if nodes is not None:
        nodes = np.asarray(nodes, dtype=np.int64)
        index = np.full(max(plant.fem.n_nodes, int(nodes.max(initial=-1)) + 1), -1, dtype=np.int64)
        index[nodes] = np.arange(len(nodes))
    tips, columns, contacts, walls, cpus = [], [], [], [], []
    for i, u in enumerate(np.asarray(inputs, dtype=float)):
        t0, c0 = time.perf_counter(), time.process_time()
        state = plant.step(cable_strokes=u[cables], pressures=u[pressures], forces=u[forces_idx])
        if i >= record_from:
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        check_converged(plant, state, bounds, i + 1)
        if progress is not None:
            progress()
        if i < record_from:
            continue
        c = plant.last_contact
        tips.append(state.effector_position.copy())
        contacts.append(c.contacts if c is not None else 0)
        if index is not None:
            columns.append(forces_per_node(c, index))
        if on_step is not None:
            on_step(state, c)
    walls, cpus = np.array(walls), np.array(cpus)
    return SweepRun(np.array(tips), np.array(columns).T if index is not None else None,
                    np.array(contacts, dtype=np.int64), float(walls.sum()), float(cpus.sum()), walls, cpus)


def active_snapshots(s: np.ndarray) -> np.ndarray:
    """The snapshot columns that carry contact force."""
    return s[:, s.sum(axis=0) > 0]


def factorize(active: np.ndarray, k: int, kmax: int, *, method: str = "hals", iterations: int = 500,
              progress: ProgressFn | None = None):
    """The NNMF path of the snapshots with contact (:func:`~soft_inverse_ros.core.contact.nnmf.nnmf_path`,
    k = 1 … max(k, kmax) within the matrix's size): (the factorization of size ``k``, the
    relative error ‖S − ΨB‖_F / ‖S‖_F per k ≤ kmax)."""
    from soft_inverse_ros.core.contact.nnmf import nnmf_path

    top = min(max(k, kmax), *active.shape)
    if k > top:
        raise SweepError(f"k = {k} is more than the snapshot matrix allows ({top}: {active.shape[0]} contact "
                         f"vertices, {active.shape[1]} snapshots with contact)")
    path = nnmf_path(active, top, method=method, iterations=iterations,
                     on_k=None if progress is None else (lambda i: progress(i, top)))
    return path[k - 1], {i + 1: r.relative_error for i, r in enumerate(path[:min(kmax, top)])}


def compare_on_model(desc, basis, states: Sequence[tuple[np.ndarray, np.ndarray]],
                     updates: Sequence[int] = (3, 100)) -> dict:
    """The basis in the controller's model: :class:`~soft_inverse_ros.core.model.robot_model.RobotModel`
    of ``desc`` (its description contact, full) against the same with ``basis`` (a
    :class:`~soft_inverse_ros.core.contact.correction.ReducedContactBasis`), each started at
    ``states`` ((N, 3) positions [m], (n_a,) efforts) and advanced by ``updates`` low-rate
    updates under those efforts.

    Returns ``{"tip_distance": {n: largest tip distance reduced vs full [m]}, "contact_effect":
    largest tip distance full vs no contact over the shortest horizon [m]}``; a horizon whose
    updates did not converge (ConvergenceError) maps to None.
    """
    from soft_inverse_ros.core.model.linear_solvers import ConvergenceError
    from soft_inverse_ros.core.model.robot_model import RobotModel

    desc = dataclasses.replace(desc, collision=dataclasses.replace(desc.collision, reduced_basis=None, basis=None))
    full, reduced = RobotModel.from_description(desc), RobotModel.from_description(desc)
    reduced.set_contact(dataclasses.replace(reduced.contact, basis=basis))
    free = RobotModel.from_description(desc, contact=False)
    shortest = min(updates)
    distance: dict[int, float | None] = {int(n): 0.0 for n in updates}
    effect = 0.0
    for x, lam in states:
        for n in distance:
            models = (full, reduced, free) if n == shortest else (full, reduced)
            try:
                tips = [_advance(model, x, lam, n) for model in models]
            except ConvergenceError:
                distance[n] = None
                continue
            if distance[n] is not None:
                distance[n] = max(distance[n], float(np.linalg.norm(tips[1] - tips[0])))
            if len(tips) == 3:
                effect = max(effect, float(np.linalg.norm(tips[2] - tips[0])))
    return {"tip_distance": distance, "contact_effect": effect}


def _advance(model, x: np.ndarray, lam: np.ndarray, updates: int) -> np.ndarray:
    """The effector rows [m] after ``updates`` updates of ``model`` from state (x, λ)."""
    model.set_state(x, lam)
    for i in range(updates):
        _, snap = model.update(lam, seq=i, stamp=0.0)
    return snap.effector_position


@dataclass(frozen=True)
class BuildResult:
    """What :func:`build_basis` made: the basis file content and the sweep's figures."""

    data: object  # BasisFile
    snapshots: int  # columns recorded
    contacts_max: int
    wall_s: float  # [s] plant steps alone
    states: tuple = ()  # up to 3 recorded (positions (N, 3) [m], efforts (n_a,)) with contact force


@dataclass(frozen=True, eq=False)
class _Vertices:
    vertex: np.ndarray  # (m,) the mesh node of each contact


@dataclass(frozen=True, eq=False)
class _ModelContacts:
    """The contacts of a model update, as :func:`forces_per_node` reads a correction's."""

    contacts: int
    contact_set: _Vertices
    forces: np.ndarray  # (m,) [N]


@dataclass(frozen=True, eq=False)
class _ModelState:
    positions: np.ndarray  # (N, 3) [m]
    efforts: np.ndarray  # (n_a,) [N or Pa]
    effector_position: np.ndarray  # (n_e,) [m]


class ModelSimulator:
    """The controller's quasi-static model (:class:`~soft_inverse_ros.core.model.robot_model.RobotModel`
    of a description, FULL contact) driven like the plant by :func:`drive`: each step is one
    low-rate update under the efforts — cable tensions [N] (where the plant takes strokes),
    pressures [Pa], forces [N] — and its contacts are the update's (the snapshot's block).
    A sweep of it loads the contact configurations the controller's model itself reaches."""

    def __init__(self, desc) -> None:
        from soft_inverse_ros.core.model.robot_model import RobotModel

        self.description = desc
        self.model = RobotModel.from_description(desc)
        self.contact, self.fem = self.model.contact, self.model.fem
        self.actuator_kinds, self.actuator_names = self.model.actuator_kinds, self.model.actuator_names
        kinds = np.array([int(k) for k in self.actuator_kinds])
        self._order = [np.flatnonzero(kinds == int(k)) for k in
                       (ActuatorKind.CABLE, ActuatorKind.PRESSURE, ActuatorKind.FORCE)]
        self.last_contact: _ModelContacts | None = None
        self._seq = 0

    def surface_faces(self) -> np.ndarray:
        return self.model.mesh.boundary_faces()

    def reset(self) -> None:
        self.model.reset()
        self.last_contact = None

    def step(self, cable_strokes: np.ndarray, pressures: np.ndarray, forces: np.ndarray) -> _ModelState:
        """One update under cable TENSIONS ``cable_strokes`` [N] (the plant's argument name),
        ``pressures`` [Pa] and ``forces`` [N]."""
        lam = np.zeros(len(self.actuator_kinds))
        for idx, values in zip(self._order, (cable_strokes, pressures, forces)):
            lam[idx] = values
        _, snap = self.model.update(lam, seq=self._seq, stamp=0.0)
        self._seq += 1
        c = snap.contacts
        self.last_contact = None if c is None else _ModelContacts(c.size, _Vertices(c.ids), np.asarray(c.force))
        return _ModelState(self.model.positions.copy(), lam, snap.effector_position)


def _full_contact(robot):
    """The description of ``robot`` (name, YAML path or RobotDescription) with its contact
    made FULL (any reduced basis removed: a stale basis, e.g. of an older mesh, does not stop
    its own rebuild).

    Raises:
        SweepError: the robot has no ``collision`` section (nothing to reduce).
    """
    from soft_inverse_ros.core.model.description import (
        RobotDescription,
        parse_robot_description,
        read_description_yaml,
    )

    if isinstance(robot, RobotDescription):
        desc = robot
    else:  # the YAML without its basis key: the file it names may not exist yet, or be broken
        path, data = read_description_yaml(robot)
        if isinstance(data, dict) and isinstance(data.get("collision"), dict):
            data["collision"].pop("reduced_basis", None)
        desc = parse_robot_description(data, source=path)
    if desc.collision is None:
        raise SweepError(f"robot {desc.name!r} has no collision section: it has no contact to reduce")
    return dataclasses.replace(desc, collision=dataclasses.replace(desc.collision, reduced_basis=None, basis=None))


def sweep_model(robot) -> ModelSimulator:
    """The controller's model of ``robot`` (see :func:`sweep_plant`) as a sweep simulator."""
    return ModelSimulator(_full_contact(robot))


def sweep_plant(robot, *, dt: float = 0.01, cable_stiffness: float = 1e5):
    """The plant a sweep drives: the dynamic FEM plant of ``robot`` (a name or YAML path,
    or a :class:`~soft_inverse_ros.core.model.description.RobotDescription`) with the
    description's contact made FULL (any reduced basis removed: a stale basis, e.g. of an
    older mesh, does not stop its own rebuild).

    Raises:
        SweepError: the robot has no ``collision`` section (nothing to reduce).
    """
    from soft_inverse_ros.core.sim.plant import PlantConfig, SoftRobotPlant

    desc = _full_contact(robot)
    cfg = PlantConfig(robot=desc.name, model="fem", contact="description", dt=dt, newton_iterations=3,
                      newton_rtol=1e-4, cable_stiffness=cable_stiffness)
    return SoftRobotPlant(desc, cfg)


def build_basis(plant, sweep: Sweep, k: int, *, kmax: int = 30, method: str = "hals", iterations: int = 500,
                progress: Callable[[str, int, int], None] | None = None):
    """Drive ``plant`` (full contact: :func:`sweep_plant`, or the controller's model:
    :func:`sweep_model`, whose sweep is in efforts) through ``sweep``, factorize
    its contact-force snapshots and return a :class:`BuildResult` (its ``data`` a
    :class:`~soft_inverse_ros.core.contact.basis_file.BasisFile` of size ``k``).

    ``progress(phase, done, total)``: phase ``"sweep"`` (plant steps) or ``"nnmf"`` (k).

    Raises:
        SweepError: fewer than ``k`` snapshots with contact force (nothing to reduce).
    """
    from soft_inverse_ros.core.contact.basis_file import BasisFile, collision_model_of, rest_checksum

    if plant.contact is None or plant.contact.basis is not None:
        raise ValueError("build_basis needs a plant with full contact (see sweep_plant)")
    nodes = np.unique(plant.surface_faces())
    names = list(plant.actuator_names)
    columns = [names.index(r.name) for r in sweep.ranges]
    total, done = sweep.total_steps(), [0]

    def tick() -> None:
        done[0] += 1
        if progress is not None:
            progress("sweep", done[0], total)

    runs, loaded = [], []

    def keep_loaded(state, c) -> None:
        if c is not None and c.contacts > 0 and float(np.sum(c.forces)) > 0:
            loaded.append((state.positions.copy(), state.efforts.copy()))

    for ramp, first in sweep.ramps():
        inputs = np.zeros((len(ramp), len(names)))
        inputs[:, columns] = ramp
        plant.reset()
        runs.append(drive(plant, inputs, nodes=nodes, record_from=first, progress=tick, on_step=keep_loaded))
    s = np.hstack([r.forces for r in runs])
    active = active_snapshots(s)
    if active.shape[1] < k:
        raise SweepError(f"only {active.shape[1]} of {s.shape[1]} snapshots carry contact forces (fewer than "
                         f"k = {k}): sweep further (the robot must touch itself or its obstacles)")
    chosen, errors = factorize(active, k, kmax, method=method, iterations=iterations,
                               progress=None if progress is None else (lambda i, n: progress("nnmf", i, n)))
    psi = chosen.basis
    data = BasisFile(nodes=nodes, psi=psi, robot=plant.description.name, mesh_nodes=plant.fem.n_nodes,
                     rest_checksum=rest_checksum(plant.fem.rest_points), sweep=sweep.specs, nnmf=method,
                     snapshots=int(active.shape[1]), error_vs_k=errors,
                     simulator="model" if isinstance(plant, ModelSimulator) else "plant", hold=sweep.hold,
                     collision_model=collision_model_of(plant.description.collision))
    picks = sorted({int(round(q * (len(loaded) - 1))) for q in (1 / 3, 2 / 3, 1.0)}) if loaded else []
    return BuildResult(data, int(s.shape[1]), int(max(int(r.contacts.max(initial=0)) for r in runs)),
                       float(sum(r.wall_s for r in runs)), tuple(loaded[i] for i in picks))
