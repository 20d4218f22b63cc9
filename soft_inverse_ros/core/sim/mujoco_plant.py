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
  site per cable point. **Approximation**: the FEM plants carry a cable point
  barycentrically (its force spread over the nodes of its tet); a MuJoCo site rides on one
  body, so the cable's force acts on one node:

  - ``cable_sites="exact"`` (default): the point becomes a node of MuJoCo's mesh (the
    tets around it are split, volume and masses kept; the point snaps onto its face or
    edge when a barycentric weight is below 5 %): the path is exact, the force is
    concentrated on that node;
  - ``cable_sites="nearest"``: the site is the mesh node nearest to the point: the path,
    rest length and line of action move by that distance (a few mm);
  - (a site kept at the point but riding on the nearest node would keep the path yet drop
    the force's moment about the node, a node having no rotation: ~5 % off on
    builtin_diamond, worse than both.)

  Static effector response to each cable, relative to the FEM plant: builtin_diamond
  (7 mm cells) 0.2–0.3 % exact, 0.7–0.9 % nearest; the SOFA Diamond (~1 cm tets) 1.6–6 %
  exact, 6–9 % nearest (there the FEM itself moves by 6–9 % when its cable points are
  moved to the nearest nodes, and the concentrated load on a coarse mesh is what is left
  with exact sites).

  An actuator per cable realizes the plant's cable law: actuator force
  ``F = −k_c (s − δ)`` with ``δ = L0 − L`` the tendon's shortening and control s the
  commanded stroke, limited to ``forcerange = [−inf, 0]``: tension
  ``−F = k_c max(0, s − δ)``, pull-only (MuJoCo's positive tendon force lengthens the
  tendon). Under the ``discrete`` integrator its stiffness k_c is implicit too.
* **Pressure cavities and force actuators**: node forces ``J_aᵀ λ`` evaluated at the start
  of every sub-step (explicitly) and applied as ``qfrc_applied``: for a cavity, p times the
  area-weighted outward normals of its triangles, carried barycentrically to the nodes.
* **Effector, markers, cavity strokes**: barycentric mappings into the plant's tets,
  evaluated on MuJoCo's positions of the plant's nodes (``positions`` are those N nodes;
  MuJoCo's extra cable nodes are not part of the plant's state).

Cost: the ``discrete`` integrator solves its effective metric M + hD + h²K by conjugate
gradients with a 3×3 block preconditioner, capped by ``SOLVER_ITERATIONS`` (MuJoCo's
default 100). At dt = 10 ms this solve is ill-conditioned (tiny nodal masses, stiff
elasticity) and stops under-converged every step while the robot moves
(:attr:`MujocoPlant.metric_warnings`): on builtin_diamond that moves the trajectory by
< 1 mm (of 14) from a converged solve, which would cost ~8x more. Statics are exact.

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
from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.model.linear_solvers import ConvergenceError, make_solver
from soft_inverse_ros.core.model.mapping import map_points
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
#: where a cable runs (see MujocoPlant's ``cable_sites``)
CABLE_SITES = ("exact", "nearest")
#: barycentric weights of a cable point below this are dropped before its tet is split
#: (the point snaps onto the face/edge: no sliver tets)
_SPLIT_MIN_WEIGHT = 0.05
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

    Args:
        description: the robot.
        config: plant configuration (``model`` is not read: this is the MuJoCo plant).
        cable_sites: ``"exact"`` (default): each cable point becomes a node of MuJoCo's
            mesh (the tets around it split); ``"nearest"``: the cable runs through the
            mesh node nearest to each point.

    Attributes:
        mj_model, mj_data: the compiled ``mujoco.MjModel`` and its ``MjData``.
        mj_fem: the FEM of MuJoCo's mesh (the plant's mesh, plus one node per cable point
            with ``cable_sites="exact"``): its nodes, tets, masses and tangent.
        xml: the generated MJCF.
        cable_nodes: per cable, the node of MuJoCo's mesh carrying each of its points.
        build_time, compile_time: wall times of the construction and the MJCF compile [s].
    """

    def __init__(self, description: RobotDescription, config: PlantConfig | None = None,
                 *, cable_sites: str = "exact") -> None:
        mujoco = require_mujoco()
        t0 = time.perf_counter()
        cfg = PlantConfig(robot=description.name, model="mujoco") if config is None else config
        if cfg.mass != "lumped":
            raise PlantConfigError(
                f"plant config: mass: the mujoco plant has lumped nodal masses only, got {cfg.mass!r}")
        if cable_sites not in CABLE_SITES:
            raise ValueError(f"cable_sites must be one of {list(CABLE_SITES)}, got {cable_sites!r}")
        self._mujoco = mujoco
        self.cable_sites = cable_sites
        #: False until the MuJoCo model exists (the FEM base builds first)
        self._built = False
        super().__init__(description, cfg)
        self._mujoco_mesh()
        mf = self.mj_fem
        self._x0 = np.array(mf.rest_points, float)
        self._node_mass = mf.lumped_mass()
        self._dof_mass = np.repeat(self._node_mass[mf.free_nodes], 3)
        self._f_g_mj = self._dof_mass * np.tile(np.asarray(self.description.gravity, float),
                                                mf.n_free_nodes)
        self._loads_idx = np.concatenate((self._pressure_idx, self._force_idx)).astype(int)
        self._svk_reference()
        self.xml = self._mjcf()
        t1 = time.perf_counter()
        with _warnings_logged(mujoco):
            self.mj_model = mujoco.MjModel.from_xml_string(self.xml)
        self.compile_time = time.perf_counter() - t1
        m = self.mj_model
        if m.nv != mf.n_free:
            raise RuntimeError(f"MuJoCo model has {m.nv} DOFs, its mesh {mf.n_free} free DOFs")
        # exact rest lengths of the compiled tendons: zero force at s = 0 at rest
        for c in range(len(self._cable_idx)):
            m.actuator_biasprm[c, 0] = self.cable_stiffness * m.tendon_length0[c]
        self._tendon_l0 = np.array(m.tendon_length0[: len(self._cable_idx)], float)
        self.mj_data = mujoco.MjData(m)
        self._built = True
        self.reset()
        self.build_time = time.perf_counter() - t0

    @classmethod
    def from_config(cls, config: PlantConfig, **kwargs) -> "MujocoPlant":
        require_mujoco()  # before loading the description: fail fast, one line
        from soft_inverse_ros.core.model.description import load_robot_description

        return cls(load_robot_description(config.robot), config, **kwargs)

    # ------------------------------------------------------------------ model
    def _mujoco_mesh(self) -> None:
        """MuJoCo's mesh and the cable sites: per cable point, the nearest node
        (``"nearest"``), or a new node at the point (``"exact"``): the point, snapped to
        the face/edge it lies on (barycentric weights below ``_SPLIT_MIN_WEIGHT`` dropped),
        replaces in turn each node of that face/edge in every tet holding it, so the tets
        are split without changing the volume. New nodes come after the plant's (free DOFs
        in the same order first); a new node is clamped when its face/edge is."""
        fem = self.fem
        n = fem.n_nodes
        points, tets, fixed = np.array(fem.rest_points, float), np.array(fem.tets), fem.fixed_mask.copy()
        tree = None
        self.cable_nodes: list[np.ndarray] = []
        self._cable_pull: list[np.ndarray | None] = []
        for i in self._cable_idx:
            cable = self.actuators.constraints[i]
            nodes = []
            for p in cable.mapping.apply(fem.rest_points):
                if self.cable_sites == "nearest":
                    if tree is None:
                        from scipy.spatial import cKDTree

                        tree = cKDTree(fem.rest_points)
                    nodes.append(int(tree.query(p)[1]))
                    continue
                located = map_points(points, tets, p[None, :], name=f"cable {cable.name}")
                w, carrier = located.weights[0], located.nodes[0]
                keep = w >= _SPLIT_MIN_WEIGHT
                corners, w = carrier[keep], w[keep] / w[keep].sum()
                if len(corners) == 1:  # at a node
                    nodes.append(int(corners[0]))
                    continue
                new = len(points)
                points = np.vstack((points, w @ points[corners]))
                fixed = np.append(fixed, bool(fixed[corners].all()))
                around = np.isin(tets, corners).sum(axis=1) == len(corners)
                pieces = [np.where(t == c, new, t) for t in tets[around] for c in corners]
                tets = np.vstack((tets[~around], np.array(pieces)))
                nodes.append(new)
            self.cable_nodes.append(np.array(nodes, int))
            self._cable_pull.append(None if cable.pull_point is None else np.array(cable.pull_point, float))
        if len(points) == n:
            self.mj_fem, self._extra_map = fem, None
            return
        self.mj_fem = CorotationalFEM(points, tets, fem.young_modulus, fem.poisson_ratio,
                                      np.flatnonzero(fixed), density=fem.density)
        #: the new nodes, carried by the plant's mesh (to set MuJoCo's state from the plant's)
        self._extra_map = map_points(fem.rest_points, fem.tets, points[n:], name="cable site")

    def _svk_reference(self) -> None:
        """Rest shape matrices of MuJoCo's tets, for its elastic energy (see
        :meth:`elastic_energy`)."""
        x0, tets = self._x0, np.asarray(self.mj_fem.tets)
        dm = np.stack([x0[tets[:, k]] - x0[tets[:, 0]] for k in (1, 2, 3)], axis=-1)
        self._dm_inv = np.linalg.inv(dm)
        self._tet_volume = np.abs(np.linalg.det(dm)) / 6.0
        self._mu, self._lam = self.mj_fem.mu, self.mj_fem.lam

    def elastic_energy(self, positions: np.ndarray | None = None) -> float:
        """MuJoCo's Saint Venant–Kirchhoff strain energy [J] at node positions (plant's
        (N, 3) or MuJoCo's mesh's) [m] (default: the current state):
        Σ_tets V (μ tr(E²) + λ/2 tr(E)²), E the Green strain (the energy whose gradient is
        MuJoCo's flex elastic force)."""
        x = self._geo.state if positions is None else self._full(np.asarray(positions, float))
        tets = self.mj_fem.tets
        ds = np.stack([x[tets[:, k]] - x[tets[:, 0]] for k in (1, 2, 3)], axis=-1)
        f = ds @ self._dm_inv
        e = 0.5 * (np.einsum("eki,ekj->eij", f, f) - np.eye(3))
        tr = np.trace(e, axis1=1, axis2=2)
        density = self._mu * np.einsum("eij,eij->e", e, e) + 0.5 * self._lam * tr**2
        return float(self._tet_volume @ density)

    def _mjcf(self) -> str:
        mf, desc, cfg = self.mj_fem, self.description, self.config
        x0 = self._x0
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
                if mf.fixed_mask[node]:  # a clamped node: a site on the world at its position
                    world_sites.append(f'<site name="c{c}_{j}" pos="{_fmt(x0[node])}"/>')
                else:  # a site on the node's body
                    body_sites.setdefault(node, []).append(f'<site name="c{c}_{j}"/>')
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
        for n in mf.free_nodes:
            n = int(n)
            bodies.append(
                f'<body name="n{n}" pos="{_fmt(x0[n])}"><inertial pos="0 0 0" '
                f'mass="{_fmt(self._node_mass[n])}" diaginertia="1e-12 1e-12 1e-12"/>{joints}'
                + "".join(body_sites.get(n, ())) + "</body>")
        vertex_body = ["world" if mf.fixed_mask[n] else f"n{n}" for n in range(mf.n_nodes)]
        vertex = np.where(mf.fixed_mask[:, None], x0, 0.0)
        g = np.asarray(desc.gravity, float)
        return (
            f'<mujoco model="{desc.name}">'
            f'<option timestep="{_fmt(cfg.dt / cfg.substeps)}" integrator="discrete" solver="Newton" '
            f'iterations="{SOLVER_ITERATIONS}" tolerance="{_fmt(SOLVER_TOLERANCE)}" gravity="{_fmt(g)}">'
            '<flag contact="disable" autoreset="disable"/></option>'
            f'<worldbody>{"".join(world_sites)}{"".join(bodies)}</worldbody>'
            f'<deformable><flex name="robot" dim="3" radius="0" body="{" ".join(vertex_body)}" '
            f'vertex="{_fmt(vertex)}" element="{" ".join(map(str, np.ravel(mf.tets)))}">'
            '<contact contype="0" conaffinity="0" selfcollide="none"/>'
            f'<elasticity young="{_fmt(mf.young_modulus)}" poisson="{_fmt(mf.poisson_ratio)}" '
            f'damping="{_fmt(self.rayleigh_stiffness)}"/></flex></deformable>'
            f'<tendon>{"".join(tendons)}</tendon><actuator>{"".join(actuators)}</actuator>'
            "</mujoco>"
        )

    # ------------------------------------------------------------------ geometry
    # Positions named ``xm`` are MuJoCo's mesh's (N + new nodes, 3); ``x`` the plant's (N, 3).
    def _full(self, x: np.ndarray) -> np.ndarray:
        """MuJoCo-mesh positions from the plant's (N, 3) (new nodes carried
        barycentrically); MuJoCo-mesh positions are returned as they are."""
        if self._extra_map is None or len(x) == self.mj_fem.n_nodes:
            return x
        return np.vstack((x, self._extra_map.apply(x)))

    def _cable_path(self, c: int, xm: np.ndarray) -> np.ndarray:
        """The tendon polyline of cable c (its sites) [m]."""
        pts = xm[self.cable_nodes[c]]
        if self._cable_pull[c] is not None:
            pts = np.vstack((self._cable_pull[c][None, :], pts))
        return pts

    def _tendon_strokes(self, xm: np.ndarray) -> np.ndarray:
        """δ = L0 − L of every cable tendon [m]."""
        lengths = [np.linalg.norm(np.diff(self._cable_path(c, xm), axis=0), axis=1).sum()
                   for c in range(len(self._cable_idx))]
        return self._tendon_l0 - np.asarray(lengths, float)

    def _tendon_gradients(self, xm: np.ndarray, cables: np.ndarray) -> np.ndarray:
        """dδ/dx over MuJoCo's free DOFs (nv, len(cables)) of the cables ``cables``."""
        mf = self.mj_fem
        out = np.zeros((3 * mf.n_nodes, len(cables)))
        for col, c in enumerate(cables):
            path = self._cable_path(c, xm)
            seg = np.diff(path, axis=0)
            unit = seg / np.maximum(np.linalg.norm(seg, axis=1), 1e-300)[:, None]
            grad = np.zeros_like(path)  # dL/d(site)
            grad[1:] += unit
            grad[:-1] -= unit
            grad = grad[1:] if self._cable_pull[c] is not None else grad
            for node, gvec in zip(self.cable_nodes[c], grad):
                out[3 * node: 3 * node + 3, col] -= gvec  # δ = L0 − L (clamped rows dropped)
        return out[mf.free_dofs]

    def _geometry(self, xm: np.ndarray) -> _Geometry:
        """The plant's geometry at MuJoCo-mesh positions: the plant's nodes, actuator
        strokes (tendon shortening for the cables, the barycentric geometry for the
        others); ``state`` holds the MuJoCo-mesh positions, no Jacobian (MuJoCo computes
        the forces)."""
        x = xm[: self.fem.n_nodes]
        strokes = np.asarray(self.actuators.values(x), float).copy()
        if len(self._cable_idx):
            strokes[self._cable_idx] = self._tendon_strokes(xm)
        return _Geometry(x, xm, strokes, None)

    def _evaluate(self, x: np.ndarray) -> _Geometry:
        if not self._built:
            return super()._evaluate(x)
        return self._geometry(self._full(np.asarray(x, float)))

    def _loads(self, xm: np.ndarray) -> np.ndarray:
        """Node forces (nv,) [N] of the pressures and force actuators (on the plant's
        nodes, carried barycentrically)."""
        out = np.zeros(self.mj_fem.n_free)
        if not len(self._loads_idx) or not (np.any(self._p) or np.any(self._f)):
            return out
        _, jt = self.actuators.values_and_jacobian_t(xm[: self.fem.n_nodes])
        out[: self.fem.n_free] = np.asarray(jt)[:, self._loads_idx] @ np.concatenate((self._p, self._f))
        return out

    def _positions_from(self, qpos: np.ndarray) -> np.ndarray:
        xm = self._x0.copy()
        xm[self.mj_fem.free_nodes] += np.asarray(qpos).reshape(-1, 3)
        return xm

    def _push(self, xm: np.ndarray, vm: np.ndarray) -> None:
        """Write MuJoCo-mesh positions, velocities (nv,) and the controls into MuJoCo."""
        d = self.mj_data
        free = self.mj_fem.free_nodes
        d.qpos[:] = (xm[free] - self._x0[free]).ravel()
        d.qvel[:] = vm
        self._controls()

    def _controls(self) -> None:
        self.mj_data.ctrl[:] = np.nan_to_num(self._s, neginf=_SLACK_STROKE, posinf=-_SLACK_STROKE)

    def _pull(self) -> None:
        """Read MuJoCo's state into the plant's."""
        d = self.mj_data
        self._geo = self._geometry(self._positions_from(d.qpos))
        self._vm = np.array(d.qvel, float)
        self._v = self._vm[: self.fem.n_free].copy()  # the plant's free DOFs come first

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
        self._mujoco.mj_resetData(self.mj_model, self.mj_data)
        self._push(self._x0, np.zeros(self.mj_fem.n_free))
        self._pull()

    def set_state(self, positions: np.ndarray, velocities: np.ndarray | None = None) -> None:
        """Set the plant's node positions (N, 3) [m] and velocities (MuJoCo's extra cable
        nodes follow barycentrically)."""
        super().set_state(positions, velocities)
        vm = self.mj_fem.reduce(self._full(self.fem.expand(self._v)))
        self._push(self._geo.state, vm)
        self._pull()

    def kinetic_energy(self) -> float:
        """½ vᵀ M v of MuJoCo's nodes [J]."""
        return 0.5 * float(self._dof_mass @ self._vm**2)

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
        h_total = self._begin_step(dt, cable_strokes, pressures, forces)
        mujoco, m, d = self._mujoco, self.mj_model, self.mj_data
        n_sub = self.config.substeps
        m.opt.timestep = h_total / n_sub
        self._push(self._geo.state, self._vm)  # MuJoCo's data may hold a statics trial
        damping = self.rayleigh_mass * self._dof_mass
        with _warnings_logged(mujoco):
            for k in range(n_sub):
                if len(self._loads_idx) or self.rayleigh_mass > 0:
                    xm = self._geo.state if k == 0 else self._positions_from(d.qpos)
                    d.qfrc_applied[:] = self._loads(xm) - damping * d.qvel
                mujoco.mj_step(m, d)
        if not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
            self._push(self._geo.state, self._vm)
            raise ConvergenceError("mujoco plant step: non-finite state")
        self._pull()
        self._time += h_total
        return self._state(0.0, 0, 0, time.perf_counter() - t0)

    # ------------------------------------------------------------------ statics
    def _static_forces(self, xm: np.ndarray) -> tuple[np.ndarray, float]:
        """MuJoCo's net force at rest at xm: (elastic + gravity + cables + loads (nv,)
        [N], a force scale [N] for the tolerance)."""
        mujoco, m, d = self._mujoco, self.mj_model, self.mj_data
        self._push(xm, np.zeros(self.mj_fem.n_free))
        loads = self._loads(xm)
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
        f, _ = self._static_forces(self._geo.state)
        self._push(self._geo.state, self._vm)
        return float(np.linalg.norm(f))

    def potential_energy(self) -> float:
        """MuJoCo's strain energy + gravity + cable-spring energy [J], minus the work
        potential of the pressures and forces (zero at rest with zero inputs)."""
        return self._potential_at(self._geo.state)

    def _potential_at(self, xm: np.ndarray) -> float:
        geo = self._geometry(xm)
        u = self.mj_fem.reduce(xm - self._x0)
        springs = 0.0
        if len(self._cable_idx):
            stretch = np.maximum(0.0, self._s - geo.strokes[self._cable_idx])
            springs = 0.5 * self.cable_stiffness * float(stretch @ stretch)
        return (self.elastic_energy(xm) - float(self._f_g_mj @ u) + springs
                - float(self._p @ geo.strokes[self._pressure_idx])
                - float(self._f @ geo.strokes[self._force_idx]))

    def _inputs_changed(self) -> None:
        """The slack-cable start set the strokes: MuJoCo's controls follow."""
        self._controls()

    def _equilibrate(self, max_iterations: int, rtol: float) -> int:
        """MuJoCo's static equilibrium (``equilibrate`` of the base class calls this):
        Newton-like iterations on MuJoCo's net force (its SVK elasticity, gravity, cable
        actuators and applied loads) with the co-rotational FEM tangent of MuJoCo's mesh
        plus the taut cables' springs as approximate Jacobian (refreshed when a step is
        shortened or does not halve the residual) and an Armijo line search on the
        potential (:meth:`potential_energy`; near the solution, where it is flat to
        round-off, on the residual)."""
        mf = self.mj_fem
        atol = self.model.statics.atol
        saved_geo, saved_vm = self._geo, self._vm
        xm = np.array(saved_geo.state)
        f, scale = self._static_forces(xm)
        norm = float(np.linalg.norm(f))
        phi = self._potential_at(xm)
        direct = None
        for it in range(max_iterations + 1):
            if norm <= rtol * scale + atol:
                self._push(xm, np.zeros(mf.n_free))
                self._pull()
                return it
            if it == max_iterations:
                break
            taut = np.flatnonzero(self._s - self._tendon_strokes(xm) > 0.0)
            u = self._tendon_gradients(xm, taut)
            if direct is None:
                direct = make_solver(self.config.solver, size=mf.n_free)
                direct.factorize(mf.stiffness(mf.element_state(xm)))
            block = np.column_stack((f, u))
            sol = np.asarray(direct.solve(block)).reshape(block.shape)
            dx = self._woodbury(sol, u)
            slope = -float(f @ dx)  # dΦ/dstep at 0 (< 0: descent)
            if not slope < 0.0:
                direct = None  # the lagged tangent gives no descent: refresh it
                continue
            step, accepted = 1.0, None
            for _ in range(30):
                trial = xm + step * mf.expand(dx)
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
            xm, phi, f, scale = accepted
            previous, norm = norm, float(np.linalg.norm(f))
            if step < 1.0 or norm > 0.5 * previous:
                direct = None  # refresh the tangent at the new state
        self._push(saved_geo.state, saved_vm)
        self._pull()
        raise ConvergenceError(
            f"mujoco plant equilibrate: not converged in {it} iterations (|r| = {norm:.3e} N)")

    # ------------------------------------------------------------------ drawing
    def cable_paths(self) -> dict[str, np.ndarray]:
        """Current tendon polylines by name (pull site, then the cable's sites) (k, 3) [m]."""
        return {self.actuator_names[i]: self._cable_path(c, self._geo.state)
                for c, i in enumerate(self._cable_idx)}
