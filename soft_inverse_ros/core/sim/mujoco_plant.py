"""An optional plant on an independent physics engine: MuJoCo (``model: mujoco``).

The same robot description as the FEM plants, simulated by MuJoCo (the ``mujoco-core``
package, an optional extra: ``pip install -r requirements/mujoco.txt``; the other plants
never import it). The MJCF model is generated in code:

* **Body**: one 3D ``<flex>`` whose vertices are the mesh nodes and whose elements are its
  tetrahedra. Each free node is a body with three world-axis slide joints and the
  **volume-lumped** mass of the FEM plant (ρ V / 4 of every incident tet; flexcomp would
  give every node the same mass, which on a graded mesh sags noticeably more); the
  clamped nodes are flex vertices on the world body. Elasticity: MuJoCo's
  Saint Venant–Kirchhoff ``<elasticity young poisson>`` with the plant's Young's modulus
  (times ``young_modulus_scale``) and Poisson ratio: the same Lamé parameters and small-
  strain stiffness as the co-rotational FEM, a different large-strain model (Green strain:
  with ν = 0.45 its volumetric term makes it differ at second order in the strain).
  Damping: Rayleigh β is the elasticity ``damping`` (stiffness-proportional, implicit);
  Rayleigh α a force −α m v on every node, applied explicitly at the start of each step
  (MuJoCo forbids joint damping on flex bodies; stable for α dt ≪ 2). Gravity from the
  description.
  Integrator ``discrete`` (implicit in position: stable at dt = 10 ms with stiff
  elasticity) with time step ``dt / substeps``; no contacts.
* **Cables**: a spatial tendon from a world site at the pull point (if any) through one
  site per cable point. **Approximation**: each site sits on the mesh node nearest to its
  cable point, where the FEM plants carry the point barycentrically (spread over the nodes
  of its tet); the cable's path, rest length and line of action move by that distance (a
  few mm on the Diamonds: the static response to a cable changes by ~1 % in the FEM when
  its point is moved so). A site kept at the exact point but riding on the node would keep
  the geometry yet drop the force's moment about the node (a node has no rotation) and
  is ~5 % further off. An actuator per cable realizes the plant's cable law: actuator
  force ``F = −k_c (s − δ)`` with ``δ = L0 − L`` the tendon's shortening and control s the
  commanded stroke, limited to ``forcerange = [−inf, 0]``: tension
  ``−F = k_c max(0, s − δ)``, pull-only (MuJoCo's positive tendon force lengthens the
  tendon).
* **Pressure cavities and force actuators**: node forces ``J_aᵀ λ`` evaluated at the start
  of every sub-step (explicitly) and applied as ``qfrc_applied``: for a cavity, p times the
  area-weighted outward normals of its triangles, carried barycentrically to the nodes.
* **Effector, markers, cavity strokes**: barycentric mappings into the tets, evaluated on
  MuJoCo's node positions.

:meth:`MujocoPlant.equilibrate` finds MuJoCo's own static equilibrium (its elastic,
gravity, actuator and applied forces balance) by Newton-like iterations whose tangent is
the plant's co-rotational FEM stiffness plus the taut cables' springs (an approximate
Jacobian: the iterations converge to MuJoCo's equilibrium, only their rate depends on it).

Units SI, robot base frame of the description (REP-103).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from typing import Iterator, Sequence

import numpy as np

from soft_inverse_ros.core.contact.correction import ContactModel
from soft_inverse_ros.core.model.description import RobotDescription
from soft_inverse_ros.core.model.linear_solvers import ConvergenceError, make_solver
from soft_inverse_ros.core.sim.plant import (
    PlantConfig,
    PlantConfigError,
    PlantState,
    SoftRobotPlant,
    _Geometry,
)

__all__ = ["MUJOCO_MISSING", "MujocoPlant", "require_mujoco"]

_LOG = logging.getLogger(__name__)

#: the one-line error when the optional extra is not installed
MUJOCO_MISSING = ("plant model 'mujoco' needs the optional MuJoCo extra: "
                  "pip install -r requirements/mujoco.txt")
#: MuJoCo option iterations: also caps the conjugate-gradient solve of the effective
#: metric M + h D + h² K that the discrete integrator performs every step
SOLVER_ITERATIONS = 100
#: MuJoCo option tolerance (solver and effective-metric solve)
SOLVER_TOLERANCE = 1e-8
#: control standing for "slack" (a stroke far below any cable shortening) [m]
_SLACK_STROKE = -1e3


def require_mujoco():
    """The ``mujoco`` module, or :class:`PlantConfigError` (a ValueError) with one line
    naming the optional extra."""
    try:
        import mujoco
    except ImportError as exc:
        absent = isinstance(exc, ModuleNotFoundError) and exc.name == "mujoco"
        text = str(exc).strip().splitlines()
        detail = "" if absent else f" (import failed: {text[0] if text else type(exc).__name__})"
        raise PlantConfigError(MUJOCO_MISSING + detail) from None
    return mujoco


@contextlib.contextmanager
def _warnings_logged(mujoco) -> Iterator[None]:
    """Route MuJoCo's warnings (by default printed and appended to MUJOCO_LOG.TXT in the
    working directory) to this module's logger
    while the block runs; the previous handler is restored afterwards."""
    previous = mujoco.get_mju_user_warning()

    def log(message: str) -> None:
        text = " ".join(str(message).split())
        if "has no equality constraints or passive forces" in text:
            _LOG.debug("MuJoCo: %s", text)  # flex elasticity without damping: expected
        else:
            _LOG.warning("MuJoCo: %s", text)

    mujoco.set_mju_user_warning(log)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


def _fmt(values) -> str:
    """Numbers for an MJCF attribute (shortest round-trip form)."""
    return " ".join(repr(float(v)) for v in np.ravel(values))


class MujocoPlant(SoftRobotPlant):
    """The robot simulated by MuJoCo (see the module docstring); same interface as
    :class:`SoftRobotPlant`.

    Attributes:
        mj_model, mj_data: the compiled ``mujoco.MjModel`` and its ``MjData``.
        xml: the generated MJCF.
        cable_nodes: per cable, the mesh node carrying each of its points.
        build_time, compile_time: wall times of the construction and the MJCF compile [s].
    """

    def __init__(self, description: RobotDescription, config: PlantConfig | None = None) -> None:
        mujoco = require_mujoco()
        t0 = time.perf_counter()
        cfg = PlantConfig(robot=description.name, model="mujoco") if config is None else config
        if cfg.mass != "lumped":
            raise PlantConfigError(
                f"plant config: mass: the mujoco plant has lumped nodal masses only, got {cfg.mass!r}")
        self._mujoco = mujoco
        #: False until the MuJoCo model exists (the FEM base builds first)
        self._built = False
        super().__init__(description, cfg)
        fem = self.fem
        self._x0 = np.array(fem.rest_points, float)
        self._free_nodes = np.asarray(fem.free_nodes)
        self._node_mass = fem.lumped_mass()
        self._loads_idx = np.concatenate((self._pressure_idx, self._force_idx)).astype(int)
        #: α m per free DOF [kg/s]: Rayleigh mass damping, applied explicitly (MuJoCo
        #: forbids joint damping on flex bodies)
        self._mass_damping = self.rayleigh_mass * np.repeat(self._node_mass[self._free_nodes], 3)
        self._cable_geometry()
        self._svk_reference()
        self.xml = self._mjcf()
        t1 = time.perf_counter()
        with _warnings_logged(mujoco):
            self.mj_model = mujoco.MjModel.from_xml_string(self.xml)
        self.compile_time = time.perf_counter() - t1
        m = self.mj_model
        if m.nv != fem.n_free:
            raise RuntimeError(f"MuJoCo model has {m.nv} DOFs, the mesh {fem.n_free} free DOFs")
        # exact rest lengths of the compiled tendons: zero force at s = 0 at rest
        for c in range(len(self._cable_idx)):
            m.actuator_biasprm[c, 0] = self.cable_stiffness * m.tendon_length0[c]
        self._tendon_l0 = np.array(m.tendon_length0[: len(self._cable_idx)], float)
        self.mj_data = mujoco.MjData(m)
        self._built = True
        self.reset()
        self.build_time = time.perf_counter() - t0

    @classmethod
    def from_config(cls, config: PlantConfig) -> "MujocoPlant":
        require_mujoco()  # before loading the description: fail fast, one line
        from soft_inverse_ros.core.model.description import load_robot_description

        return cls(load_robot_description(config.robot), config)

    # ------------------------------------------------------------------ model
    def _cable_geometry(self) -> None:
        """Per cable: the pull point (a world site, if any) and the mesh node nearest to
        each cable point (a site on that node; see the module docstring)."""
        from scipy.spatial import cKDTree

        tree = cKDTree(self._x0)
        self.cable_nodes: list[np.ndarray] = []
        self._cable_pull: list[np.ndarray | None] = []
        for i in self._cable_idx:
            cable = self.actuators.constraints[i]
            _, nodes = tree.query(cable.mapping.apply(self._x0))
            self.cable_nodes.append(np.asarray(nodes, int).reshape(-1))
            self._cable_pull.append(None if cable.pull_point is None else np.array(cable.pull_point, float))

    def _svk_reference(self) -> None:
        """Rest shape matrices of the tets, for MuJoCo's elastic energy (see
        :meth:`elastic_energy`)."""
        x0, tets = self._x0, np.asarray(self.fem.tets)
        dm = np.stack([x0[tets[:, k]] - x0[tets[:, 0]] for k in (1, 2, 3)], axis=-1)
        self._dm_inv = np.linalg.inv(dm)
        self._tet_volume = np.abs(np.linalg.det(dm)) / 6.0
        mat = self.description.material
        young = mat.young_modulus * self.config.young_modulus_scale
        nu = mat.poisson_ratio
        self._mu = young / (2.0 * (1.0 + nu))
        self._lam = young * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))

    def elastic_energy(self, positions: np.ndarray | None = None) -> float:
        """MuJoCo's Saint Venant–Kirchhoff strain energy [J] at node positions (N, 3) [m]
        (default: the current state): Σ_tets V (μ tr(E²) + λ/2 tr(E)²), E the Green strain
        (the energy whose gradient is MuJoCo's flex elastic force)."""
        x = np.asarray(self._geo.positions if positions is None else positions, float)
        tets = self.fem.tets
        ds = np.stack([x[tets[:, k]] - x[tets[:, 0]] for k in (1, 2, 3)], axis=-1)
        f = ds @ self._dm_inv
        e = 0.5 * (np.einsum("eki,ekj->eij", f, f) - np.eye(3))
        tr = np.trace(e, axis1=1, axis2=2)
        density = self._mu * np.einsum("eij,eij->e", e, e) + 0.5 * self._lam * tr**2
        return float(self._tet_volume @ density)

    def _mjcf(self) -> str:
        fem, desc, cfg = self.fem, self.description, self.config
        x0 = self._x0
        free_index = {int(n): k for k, n in enumerate(self._free_nodes)}
        body_sites: dict[int, list[str]] = {}
        world_sites: list[str] = []
        tendons: list[str] = []
        actuators: list[str] = []
        for c, i in enumerate(self._cable_idx):
            name = self.actuator_names[i]
            refs = []
            if self._cable_pull[c] is not None:
                world_sites.append(f'<site name="c{c}_pull" pos="{_fmt(self._cable_pull[c])}"/>')
                refs.append(f"c{c}_pull")
            for j, node in enumerate(self.cable_nodes[c]):
                node = int(node)
                if node in free_index:  # a site on the node's body
                    body_sites.setdefault(node, []).append(f'<site name="c{c}_{j}"/>')
                else:  # a clamped node: a site on the world at its position
                    world_sites.append(f'<site name="c{c}_{j}" pos="{_fmt(x0[node])}"/>')
                refs.append(f"c{c}_{j}")
            tendons.append(f'<spatial name="{name}">'
                           + "".join(f'<site site="{r}"/>' for r in refs) + "</spatial>")
            k = self.cable_stiffness
            actuators.append(
                f'<general name="{name}" tendon="{name}" gaintype="fixed" gainprm="{_fmt(-k)}" '
                f'biastype="affine" biasprm="0 {_fmt(-k)} 0" ctrllimited="false" '
                'forcelimited="true" forcerange="-inf 0"/>')
        bodies = []
        joints = "".join(f'<joint type="slide" axis="{a}"/>' for a in ("1 0 0", "0 1 0", "0 0 1"))
        for n in self._free_nodes:
            n = int(n)
            bodies.append(
                f'<body name="n{n}" pos="{_fmt(x0[n])}"><inertial pos="0 0 0" '
                f'mass="{_fmt(self._node_mass[n])}" diaginertia="1e-12 1e-12 1e-12"/>{joints}'
                + "".join(body_sites.get(n, ())) + "</body>")
        vertex_body = ["world" if n not in free_index else f"n{n}" for n in range(fem.n_nodes)]
        vertex = np.where(fem.fixed_mask[:, None], x0, 0.0)
        mat = desc.material
        young = mat.young_modulus * cfg.young_modulus_scale
        g = np.asarray(desc.gravity, float)
        return (
            f'<mujoco model="{desc.name}">'
            f'<option timestep="{_fmt(cfg.dt / cfg.substeps)}" integrator="discrete" solver="Newton" '
            f'iterations="{SOLVER_ITERATIONS}" tolerance="{_fmt(SOLVER_TOLERANCE)}" gravity="{_fmt(g)}">'
            '<flag contact="disable" autoreset="disable"/></option>'
            f'<worldbody>{"".join(world_sites)}{"".join(bodies)}</worldbody>'
            f'<deformable><flex name="robot" dim="3" radius="0" body="{" ".join(vertex_body)}" '
            f'vertex="{_fmt(vertex)}" element="{" ".join(map(str, np.ravel(fem.tets)))}">'
            '<contact contype="0" conaffinity="0" selfcollide="none"/>'
            f'<elasticity young="{_fmt(young)}" poisson="{_fmt(mat.poisson_ratio)}" '
            f'damping="{_fmt(self.rayleigh_stiffness)}"/></flex></deformable>'
            f'<tendon>{"".join(tendons)}</tendon><actuator>{"".join(actuators)}</actuator>'
            "</mujoco>"
        )

    # ------------------------------------------------------------------ geometry
    def _cable_path(self, c: int, x: np.ndarray) -> np.ndarray:
        """The tendon polyline of cable c (sites) for node positions x (N, 3) [m]."""
        pts = x[self.cable_nodes[c]]
        if self._cable_pull[c] is not None:
            pts = np.vstack((self._cable_pull[c][None, :], pts))
        return pts

    def _tendon_strokes(self, x: np.ndarray) -> np.ndarray:
        """δ = L0 − L of every cable tendon [m]."""
        lengths = [np.linalg.norm(np.diff(self._cable_path(c, x), axis=0), axis=1).sum()
                   for c in range(len(self._cable_idx))]
        return self._tendon_l0 - np.asarray(lengths, float)

    def _tendon_gradients(self, x: np.ndarray, cables: np.ndarray) -> np.ndarray:
        """dδ/dx over the free DOFs (n_free, len(cables)) for cable positions ``cables``."""
        out = np.zeros((3 * self.fem.n_nodes, len(cables)))
        for col, c in enumerate(cables):
            path = self._cable_path(c, x)
            seg = np.diff(path, axis=0)
            unit = seg / np.maximum(np.linalg.norm(seg, axis=1), 1e-300)[:, None]
            grad = np.zeros_like(path)  # dL/d(site)
            grad[1:] += unit
            grad[:-1] -= unit
            grad = grad[1:] if self._cable_pull[c] is not None else grad
            for node, gvec in zip(self.cable_nodes[c], grad):
                out[3 * node: 3 * node + 3, col] -= gvec  # δ = L0 − L (fixed rows dropped)
        return out[self.fem.free_dofs]

    def _evaluate(self, x: np.ndarray) -> _Geometry:
        """Actuator strokes at x: tendon shortening for the cables, the barycentric
        geometry (volume growth, displacement) for the others. No element state, no
        Jacobian (MuJoCo computes the forces)."""
        if not self._built:
            return super()._evaluate(x)
        strokes = np.asarray(self.actuators.values(x), float).copy()
        if len(self._cable_idx):
            strokes[self._cable_idx] = self._tendon_strokes(x)
        return _Geometry(x, None, strokes, None)

    def _loads(self, x: np.ndarray) -> np.ndarray:
        """Node forces (n_free,) [N] of the pressures and force actuators at x."""
        if not len(self._loads_idx) or not (np.any(self._p) or np.any(self._f)):
            return np.zeros(self.fem.n_free)
        _, jt = self.actuators.values_and_jacobian_t(x)
        lam = np.concatenate((self._p, self._f))
        return np.asarray(jt)[:, self._loads_idx] @ lam

    def _positions_from(self, qpos: np.ndarray) -> np.ndarray:
        x = self._x0.copy()
        x[self._free_nodes] += np.asarray(qpos).reshape(-1, 3)
        return x

    def _push(self, x: np.ndarray, v: np.ndarray) -> None:
        """Write positions (N, 3) and free-DOF velocities into MuJoCo."""
        d = self.mj_data
        d.qpos[:] = (x[self._free_nodes] - self._x0[self._free_nodes]).ravel()
        d.qvel[:] = v
        d.ctrl[:] = np.nan_to_num(self._s, neginf=_SLACK_STROKE, posinf=-_SLACK_STROKE)

    def _pull(self) -> None:
        """Read MuJoCo's state into the plant's."""
        d = self.mj_data
        self._geo = self._evaluate(self._positions_from(d.qpos))
        self._v = np.array(d.qvel, float)

    # ------------------------------------------------------------------ state
    @property
    def metric_warnings(self) -> int:
        """Steps whose effective-metric solve MuJoCo reported as under-converged or
        singular (``mjWARN_INERTIA`` count since the last reset)."""
        return int(self.mj_data.warning[self._mujoco.mjtWarning.mjWARN_INERTIA].number)

    def reset(self) -> None:
        super().reset()
        if not self._built:
            return
        mujoco = self._mujoco
        mujoco.mj_resetData(self.mj_model, self.mj_data)
        self._push(self._x0, np.zeros(self.fem.n_free))
        self._pull()

    def set_state(self, positions: np.ndarray, velocities: np.ndarray | None = None) -> None:
        super().set_state(positions, velocities)
        self._push(np.asarray(self._geo.positions), self._v)

    def set_contact(self, contact: ContactModel | None) -> None:
        if contact is not None:
            raise NotImplementedError("the mujoco plant does not model contact")
        super().set_contact(None)

    # ------------------------------------------------------------------ dynamics
    def step(
        self,
        dt: float | None = None,
        cable_strokes: Sequence[float] | np.ndarray | None = None,
        pressures: Sequence[float] | np.ndarray | None = None,
        forces: Sequence[float] | np.ndarray | None = None,
    ) -> PlantState:
        """Advance by ``dt`` [s] (default ``config.dt``) in ``config.substeps`` MuJoCo
        steps under the given inputs (None: hold the previous ones).

        Raises:
            ValueError: bad inputs or dt.
            ConvergenceError: non-finite state (the plant keeps its previous state).
        """
        t0 = time.perf_counter()
        h_total = self.config.dt if dt is None else float(dt)
        if not (math.isfinite(h_total) and h_total > 0):
            raise ValueError(f"dt must be > 0 s, got {dt!r}")
        self.set_inputs(cable_strokes, pressures, forces)
        mujoco, m, d = self._mujoco, self.mj_model, self.mj_data
        n_sub = self.config.substeps
        m.opt.timestep = h_total / n_sub
        qpos, qvel = d.qpos.copy(), d.qvel.copy()
        self._push(np.asarray(self._geo.positions), self._v)
        x = self._geo.positions
        damped = self.rayleigh_mass > 0
        with _warnings_logged(mujoco):
            for k in range(n_sub):
                if len(self._loads_idx) or damped:
                    applied = self._loads(x if k == 0 else self._positions_from(d.qpos))
                    if damped:
                        applied -= self._mass_damping * d.qvel
                    d.qfrc_applied[:] = applied
                mujoco.mj_step(m, d)
        if not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
            d.qpos[:], d.qvel[:] = qpos, qvel
            raise ConvergenceError("mujoco plant step: non-finite state")
        self._pull()
        self._time += h_total
        return self._state(0.0, 0, 0, time.perf_counter() - t0)

    # ------------------------------------------------------------------ statics
    def _static_forces(self, x: np.ndarray) -> tuple[np.ndarray, float]:
        """MuJoCo's net force at rest at x: (elastic + gravity + cables + loads (n_free,)
        [N], a force scale [N] for the tolerance)."""
        mujoco, m, d = self._mujoco, self.mj_model, self.mj_data
        self._push(x, np.zeros(self.fem.n_free))
        loads = self._loads(x)
        d.qfrc_applied[:] = loads
        with _warnings_logged(mujoco):
            mujoco.mj_fwdPosition(m, d)
            mujoco.mj_fwdVelocity(m, d)
            mujoco.mj_fwdActuation(m, d)
        f = d.qfrc_passive + d.qfrc_actuator + loads - d.qfrc_bias
        scale = (float(np.linalg.norm(d.qfrc_bias)) + float(np.linalg.norm(d.qfrc_actuator))
                 + float(np.linalg.norm(loads)))
        return np.array(f, float), scale

    def static_residual_norm(self) -> float:
        """|elastic + gravity + actuator forces| of MuJoCo at the current state [N]."""
        f, _ = self._static_forces(np.asarray(self._geo.positions))
        self._push(np.asarray(self._geo.positions), self._v)
        return float(np.linalg.norm(f))

    def potential_energy(self) -> float:
        """MuJoCo's strain energy + gravity + cable-spring energy [J], minus the work
        potential of the pressures and forces (zero at rest with zero inputs)."""
        return self._potential_at(np.asarray(self._geo.positions))

    def _potential_at(self, x: np.ndarray) -> float:
        geo = self._evaluate(x)
        u = self.fem.reduce(x - self._x0)
        springs = 0.0
        if len(self._cable_idx):
            stretch = np.maximum(0.0, self._s - geo.strokes[self._cable_idx])
            springs = 0.5 * self.cable_stiffness * float(stretch @ stretch)
        return (self.elastic_energy(x) - float(self._f_g @ u) + springs
                - float(self._p @ geo.strokes[self._pressure_idx])
                - float(self._f @ geo.strokes[self._force_idx]))

    def equilibrate(
        self, *, slack_cables: bool = False, max_iterations: int = 100, rtol: float = 1e-9
    ) -> int:
        """MuJoCo's static equilibrium under the current inputs and gravity; velocities 0.

        Newton-like iterations on MuJoCo's net force (its SVK elasticity, gravity, cable
        actuators and applied loads) with the co-rotational FEM tangent plus the taut
        cables' springs as approximate Jacobian (refreshed when an iteration does not
        halve the residual) and a backtracking line search on |f|.

        Args:
            slack_cables: solve with every cable slack, then set the commanded strokes to
                the tendons' shortenings there (each cable just taut, zero tension).

        Returns:
            Iterations taken.

        Raises:
            ConvergenceError: not converged in ``max_iterations`` (state and inputs unchanged).
        """
        if not slack_cables:
            return self._equilibrate(max_iterations, rtol)
        saved = self._s
        self._s = np.full_like(saved, -np.inf)
        try:
            its = self._equilibrate(max_iterations, rtol)
        except ConvergenceError:
            self._s = saved
            raise
        self._s = self._geo.strokes[self._cable_idx].copy()
        self._push(np.asarray(self._geo.positions), self._v)
        return its

    def _equilibrate(self, max_iterations: int, rtol: float) -> int:
        fem = self.fem
        atol = self.model.statics.atol
        saved_x, saved_v = np.array(self._geo.positions), self._v.copy()
        x = saved_x.copy()
        f, scale = self._static_forces(x)
        norm = float(np.linalg.norm(f))
        phi = self._potential_at(x)
        direct = None
        for it in range(max_iterations + 1):
            if norm <= rtol * scale + atol:
                self._geo = self._evaluate(x)
                self._v = np.zeros(fem.n_free)
                self._push(x, self._v)
                return it
            if it == max_iterations:
                break
            taut = np.flatnonzero(self._s - self._tendon_strokes(x) > 0.0)
            u = self._tendon_gradients(x, taut)
            if direct is None:
                direct = make_solver(self.config.solver)
                direct.factorize(fem.stiffness(fem.element_state(x)))
            block = np.column_stack((f, u))
            sol = np.asarray(direct.solve(block)).reshape(block.shape)
            dx = self._woodbury(sol, u)
            slope = -float(f @ dx)  # dΦ/dstep at 0 (< 0: descent)
            if not slope < 0.0:
                direct = None  # the lagged tangent gives no descent: refresh it
                continue
            step, accepted = 1.0, None
            for _ in range(30):
                trial = x + step * fem.expand(dx)
                phi_t = self._potential_at(trial)
                if math.isfinite(phi_t) and phi_t <= phi + 1e-4 * step * slope:
                    accepted = (trial, phi_t, *self._static_forces(trial))
                    break
                # near the solution Φ is flat to round-off: a smaller residual will do
                f_t, scale_t = self._static_forces(trial)
                if math.isfinite(phi_t) and np.linalg.norm(f_t) < norm:
                    accepted = (trial, phi_t, f_t, scale_t)
                    break
                step *= 0.5
            if accepted is None:
                break
            x, phi, f, scale = accepted
            previous, norm = norm, float(np.linalg.norm(f))
            if step < 1.0 or norm > 0.5 * previous:
                direct = None  # refresh the tangent at the new state
        self._geo = self._evaluate(saved_x)
        self._v = saved_v
        self._push(saved_x, saved_v)
        raise ConvergenceError(
            f"mujoco plant equilibrate: not converged in {it} iterations (|r| = {norm:.3e} N)")

    # ------------------------------------------------------------------ drawing
    def cable_paths(self) -> dict[str, np.ndarray]:
        """Current tendon polylines by name (pull site, then the cable's sites) (k, 3) [m]."""
        x = np.asarray(self._geo.positions)
        return {self.actuator_names[i]: self._cable_path(c, x)
                for c, i in enumerate(self._cable_idx)}
