"""The built-in hybrid scene (Coevoet et al. Figs 8-9): the 5-joint arm ``hybrid_arm.urdf``
carrying a soft rod whose base nodes are rigidified to the flange, pressing a soft block whose
bottom is clamped. Quasi-static: :meth:`HybridScene.settle` finds the equilibrium at the
commanded joint angles (Newton on the hybrid statics, each step's contacts solved exactly as
an LCP with W summed over both bodies, eq. 12); :meth:`HybridScene.linearize` gives the data
of one inverse step. World frame, SI units (m, N, rad, Pa). The block is linear elastic (its
rest stiffness, small strains); the rod is co-rotational. The probe axis is the line through
the centroids of the rod's two last node layers (its tip face and the layer behind it).
Each rod tip node is a contact with the block's top face: its force is spread bilinearly
over the 4 corner nodes of the top-face cell under it and the block's surface motion is
read back the same way (continuous as the tip slides; a nearest-node pairing made the gap
jump at cell edges and the Newton iterations cycle).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from soft_inverse_ros.core.contact.signorini import solve_signorini_exact
from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.model.linear_solvers import ConvergenceError
from soft_inverse_ros.core.model.mesh_generation import box_mesh
from soft_inverse_ros.core.rigid.chain import RigidChain
from soft_inverse_ros.core.rigid.hybrid import HybridCompliance, SharedFactor
from soft_inverse_ros.core.rigid.mapping import RigidMapping

NORMAL = np.array([0.0, 0.0, 1.0])  # the block's top-face normal (world +z)
#: a settle step that moved the nodes at most this fraction of the step before it is followed
#: by a modified-Newton step on the same factor (HybridScene.settle)
CHORD_CONTRACTION = 0.5


@dataclass(frozen=True)
class HybridSceneConfig:
    """Scene parameters: Young's moduli (Pa), Poisson ratios, joint servo stiffness (N m/rad),
    rod and block sizes (m) and hex divisions, clearance tip→block at home (m), home q (rad)."""

    rod_young: float = 0.8e6
    rod_poisson: float = 0.45
    block_young: float = 30e3
    block_poisson: float = 0.45
    joint_stiffness: float = 50.0
    rod_size: tuple[float, float, float] = (0.012, 0.012, 0.05)
    rod_divisions: tuple[int, int, int] = (2, 2, 5)
    block_size: tuple[float, float, float] = (0.08, 0.08, 0.04)
    block_divisions: tuple[int, int, int] = (8, 8, 4)
    clearance: float = 0.002
    home: tuple[float, ...] = (0.0, 0.7, 1.6, 0.0, 0.8416)
    contact_pairing: str = "bilinear"  # "bilinear" (module docstring) or "nearest": each tip
    # node paired with its nearest block top node (the gap jumps at cell edges)

    def __post_init__(self) -> None:
        if self.contact_pairing not in ("bilinear", "nearest"):
            raise SystemExit(f"hybrid scene: contact_pairing must be 'bilinear' or 'nearest', "
                             f"got {self.contact_pairing!r}")
        for name in ("rod_young", "block_young", "joint_stiffness", "clearance"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise SystemExit(f"hybrid scene: {name} must be positive and finite, got {v!r}")


@dataclass
class Linearization:
    """One linearisation at the current state (rows on z = [q, x_free] of the rod)."""

    hybrid: HybridCompliance
    residual: np.ndarray  # τ(z) without contact forces
    dz_free: np.ndarray  # A⁻¹ τ: the motion with zero contact forces
    contact_rows: sp.csr_matrix  # (m, nz) n·dx_tip/dz
    block_nodes: np.ndarray  # (m,) the block top node nearest each contact (largest weight)
    block_fields: np.ndarray  # (3 Nb, m) block displacement per unit contact force
    gap_free: np.ndarray  # (m,) gaps at zero contact force [m]
    w_block: np.ndarray  # (m, m) the block's share of W_cc [m/N]
    _contact_solve: np.ndarray | None = field(default=None, repr=False)
    _w_cc: np.ndarray | None = field(default=None, repr=False)

    @property
    def contact_solve(self) -> np.ndarray:
        """(nz, m) A⁻¹ contact_rowsᵀ: the motion per unit contact force, solved at the first
        use (a settle's Newton iterations need only W_cc)."""
        if self._contact_solve is None:
            self._contact_solve = self.hybrid.solve(self.contact_rows.T.toarray())
        return self._contact_solve

    @property
    def w_cc(self) -> np.ndarray:
        """(m, m) W_rod + W_block (eq. 12) [m/N], symmetric: from :attr:`contact_solve` when
        it was solved, else from the forward half of that solve (HybridCompliance.compliance)."""
        if self._w_cc is None:
            if self._contact_solve is not None:
                w_rod = np.asarray(self.contact_rows @ self._contact_solve)
            else:
                w_rod = self.hybrid.compliance(self.contact_rows)
            w = w_rod + self.w_block
            self._w_cc = 0.5 * (w + w.T)
        return self._w_cc


class HybridScene:
    """Arm + soft rod + soft block (module docstring)."""

    def __init__(self, cfg: HybridSceneConfig = HybridSceneConfig(), urdf: str | Path = "hybrid_arm") -> None:
        self.cfg = cfg
        self.chain = RigidChain.from_urdf(urdf)
        q = np.asarray(cfg.home, float)
        if q.shape != (self.chain.nq,):
            raise SystemExit(f"hybrid scene: home must have {self.chain.nq} joint angles")
        self._build_rod(q)
        self._build_block()
        self.z = np.concatenate([q, self.rod.rest_points[self.mapping.free].ravel()])
        self.q_cmd = q.copy()
        self.kj = np.full(self.chain.nq, cfg.joint_stiffness)
        self.forces = np.zeros(len(self.tip))
        self.block_u = np.zeros(3 * self.block.n_nodes)
        self.last_motion = np.inf  # largest node motion of the last settle step (m)
        self._factor = SharedFactor()  # the hybrid stiffness's LDLᵀ, analysed once
        # the last linearisations by state (z, joint stiffness): (joint setpoints, linearisation)
        self._linearizations: dict[bytes, tuple[np.ndarray, Linearization]] = {}

    def _build_rod(self, q: np.ndarray) -> None:
        self._linearizations = {}
        cfg = self.cfg
        sx, sy, sz = cfg.rod_size
        mesh = box_mesh(cfg.rod_size, cfg.rod_divisions, origin=(-sx / 2, -sy / 2, 0.0))
        local = np.asarray(mesh.points)
        p, r = self.chain.frame_pose(q, self.chain.frame_id("flange"))
        pts = p + local @ r.T
        self.rod = CorotationalFEM(pts, np.asarray(mesh.tets), cfg.rod_young, cfg.rod_poisson)
        eps = 1e-9
        layer = sz / cfg.rod_divisions[2]
        self.tip = np.flatnonzero(local[:, 2] > sz - eps)
        self.back = np.flatnonzero(np.abs(local[:, 2] - (sz - layer)) < eps)
        self.mapping = RigidMapping(self.chain, "flange", pts, np.flatnonzero(local[:, 2] < eps), q)

    def _build_block(self) -> None:
        self._linearizations = {}
        cfg = self.cfg
        bx, by, bz = cfg.block_size
        centre = self.rod.rest_points[self.tip].mean(axis=0)
        top = self.rod.rest_points[self.tip, 2].min() - cfg.clearance
        mesh = box_mesh(cfg.block_size, cfg.block_divisions, origin=(centre[0] - bx / 2, centre[1] - by / 2, top - bz))
        pts = np.asarray(mesh.points)
        self.block = CorotationalFEM(pts, np.asarray(mesh.tets), cfg.block_young, cfg.block_poisson,
                                     fixed_nodes=np.flatnonzero(pts[:, 2] < top - bz + 1e-9))
        self.block_top_z = top
        self.block_surface = np.flatnonzero(pts[:, 2] > top - 1e-9)
        self._block_lu = spla.splu(self.block.rest_stiffness().tocsc())
        self._free_index = np.full(self.block.n_nodes, -1)
        self._free_index[self.block.free_nodes] = np.arange(self.block.n_free_nodes)
        # column j: the block's displacements (3 Nb,) under a unit force −n at the top-face
        # node block_surface[j], solved the first time that node is a contact corner
        self._surface_column = np.full(self.block.n_nodes, -1)
        self._surface_column[self.block_surface] = np.arange(self.block_surface.size)
        self._fields = np.zeros((3 * self.block.n_nodes, self.block_surface.size))
        self._field_known = np.zeros(self.block_surface.size, bool)
        top = pts[self.block_surface]
        gx, gy = np.unique(np.round(top[:, 0], 12)), np.unique(np.round(top[:, 1], 12))
        grid = np.full((len(gx), len(gy)), -1)
        grid[np.searchsorted(gx, np.round(top[:, 0], 12)), np.searchsorted(gy, np.round(top[:, 1], 12))] = \
            self.block_surface
        self._top_grid = (gx, gy, grid)  # the top face's node grid (x, y coordinates, node ids)

    @cached_property
    def surface_faces(self) -> tuple[np.ndarray, np.ndarray]:
        """Boundary triangles (F, 3) of the rod and of the block, outward at rest: the
        meshes' topology, found once (``np.unique`` over every tet face cost the simulated
        robot ~7 % of a core at 5 Hz of markers)."""
        from soft_inverse_ros.core.model.visualization import boundary_faces

        return (boundary_faces(self.rod.tets, self.rod.rest_points),
                boundary_faces(self.block.tets, self.block.rest_points))

    def save(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A copy of the state (z, q_cmd, contact forces, block displacements) for :meth:`restore`."""
        return self.z.copy(), self.q_cmd.copy(), self.forces.copy(), self.block_u.copy()

    def restore(self, state: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Go back to a state from :meth:`save` (quasi-static and frictionless: the settled
        state depends on the commands only, so this equals commanding them again)."""
        self.z, self.q_cmd, self.forces, self.block_u = (a.copy() for a in state)

    @property
    def q(self) -> np.ndarray:
        """Current joint angles (rad)."""
        return self.z[: self.chain.nq]

    def rod_positions(self) -> np.ndarray:
        """Rod node positions (N, 3) m."""
        return self.mapping.positions(self.z)

    def block_positions(self) -> np.ndarray:
        """Block node positions (Nb, 3) m."""
        return self.block.rest_points + self.block_u.reshape(-1, 3)

    def centroid_rows(self, hybrid: HybridCompliance, nodes: np.ndarray) -> sp.csr_matrix:
        """(3, nz) Jacobian of the centroid of rod ``nodes``."""
        return (hybrid.node_rows(np.repeat(nodes, 3), np.tile(np.eye(3), (len(nodes), 1))).T
                @ sp.csr_matrix(np.tile(np.eye(3), (len(nodes), 1)) / len(nodes))).T.tocsr()

    def _block_fields(self, nodes: np.ndarray) -> np.ndarray:
        """(3 Nb, k) block displacements under a unit force −n at each of the top-face
        ``nodes`` (the block is linear: each node's field is solved once and kept)."""
        columns = self._surface_column[np.asarray(nodes, int)]
        if np.any(columns < 0):
            raise ValueError("contact forces act on the block's top face only")
        missing = np.unique(columns[~self._field_known[columns]])
        if missing.size:
            free = self._free_index[self.block_surface[missing]]
            rhs = np.zeros((3 * self.block.n_free_nodes, missing.size))
            rhs[3 * free + 2, np.arange(missing.size)] = -1.0
            self._fields[np.ix_(self.block.free_dofs, missing)] = self._block_lu.solve(rhs)
            self._field_known[missing] = True
        return self._fields[:, columns]

    def _top_face_weights(self, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(m, 4) block top-face corner nodes of the cell under each point ``xy`` (m, 2) m and
        their bilinear weights (points outside the face: the nearest edge cell, clamped)."""
        gx, gy, grid = self._top_grid
        ix = np.clip(np.searchsorted(gx, xy[:, 0]) - 1, 0, len(gx) - 2)
        iy = np.clip(np.searchsorted(gy, xy[:, 1]) - 1, 0, len(gy) - 2)
        tx = np.clip((xy[:, 0] - gx[ix]) / (gx[ix + 1] - gx[ix]), 0.0, 1.0)
        ty = np.clip((xy[:, 1] - gy[iy]) / (gy[iy + 1] - gy[iy]), 0.0, 1.0)
        corners = np.stack([grid[ix, iy], grid[ix + 1, iy], grid[ix, iy + 1], grid[ix + 1, iy + 1]], axis=1)
        weights = np.stack([(1 - tx) * (1 - ty), tx * (1 - ty), (1 - tx) * ty, tx * ty], axis=1)
        return corners, weights

    def linearize(self) -> Linearization:
        """The hybrid statics linearised at the current state, with the contact pairs.

        The joint setpoints q_cmd enter only the residual (the servos' torque k_j (q_cmd − q)),
        so a state linearised before (the inverse step's, which the settle starts from, or
        the state a rejected trial returns to; the last two are kept) is not linearised again:
        its residual, free motion and free gaps are moved to the new setpoints with one solve
        on the same factor. Everything else of a linearisation depends on z alone."""
        key = self.z.tobytes() + self.kj.tobytes()
        kept = self._linearizations.get(key)
        if kept is not None:
            q_cmd, lin = kept
            if np.array_equal(q_cmd, self.q_cmd):
                return lin
            nq = self.chain.nq
            change = np.zeros_like(lin.residual)
            change[:nq] = self.kj * (self.q_cmd - q_cmd)
            dz = lin.hybrid.solve(change)
            return dataclasses.replace(lin, residual=lin.residual + change, dz_free=lin.dz_free + dz,
                                       gap_free=lin.gap_free + lin.contact_rows @ dz)
        lin = self._linearize_now()
        self._linearizations = {k: v for k, v in list(self._linearizations.items())[-1:]}
        self._linearizations[key] = (self.q_cmd.copy(), lin)
        return lin

    def _linearize_now(self) -> Linearization:
        x = self.rod_positions()
        state = self.rod.element_state(x)  # the rotations, the stiffness and the forces' one state
        hybrid = HybridCompliance(self.mapping, self.z, self.rod.stiffness(state), self.kj, self._factor)
        tau = self._residual(state.forces, hybrid.jacobian)
        dz_free = hybrid.solve(tau)
        rows = hybrid.node_rows(self.tip, np.tile(NORMAL, (len(self.tip), 1)))
        pair, fields, w_block = self._contact_pairing(x)
        gap_free = (x[self.tip] @ NORMAL + rows @ dz_free) - self.block_top_z
        return Linearization(hybrid, tau, dz_free, rows, pair, fields, gap_free, w_block)

    def _residual(self, forces: np.ndarray, jac: sp.csr_matrix) -> np.ndarray:
        """τ(z) without contact forces: Jᵀ f_int and the joint servos' k_j (q_cmd − q)."""
        tau = self.mapping.forces_to_coords(self.z, forces, jac=jac)
        nq = self.chain.nq
        tau[:nq] -= self.kj * (self.q - self.q_cmd)
        return tau

    def _contact_pairing(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(block node nearest each contact, block fields (3 Nb, m), W_block (m, m)) for the
        rod at ``x``."""
        if self.cfg.contact_pairing == "bilinear":
            corners, weights = self._top_face_weights(x[self.tip, :2])
        else:
            surf = self.block.rest_points[self.block_surface]
            nearest = self.block_surface[np.argmin(
                np.linalg.norm(x[self.tip, None, :2] - surf[None, :, :2], axis=-1), axis=1)]
            corners = np.repeat(nearest[:, None], 4, axis=1)
            weights = np.tile([1.0, 0.0, 0.0, 0.0], (len(self.tip), 1))
        # each contact: its force on the block spread bilinearly over the 4 corners of the top
        # face cell under the tip node, the block's surface motion read back the same way
        # (continuous in the tip position, unlike a nearest-node pairing, and symmetric)
        node_fields = self._block_fields(corners.ravel())  # (3 Nb, 4 m)
        m = len(self.tip)
        fields = np.einsum("dmk,mk->dm", node_fields.reshape(-1, m, 4), weights)
        # gap change at contact i per unit force at contact j: −u_z read at i's corners (+C_zz)
        w_block = -np.einsum("ik,ikj->ij", weights, fields[3 * corners + 2])
        pair = corners[np.arange(m), np.argmax(weights, axis=1)]
        return pair, fields, w_block

    def _chord(self, lin: Linearization) -> Linearization:
        """``lin``'s factor, rod compliance and contact rows with the residual, the free
        gaps and the block's pairing of the current state (a modified-Newton step: no new
        factorization)."""
        x = self.rod_positions()
        tau = self._residual(self.rod.element_state(x).forces, self.mapping.jacobian(self.z))
        dz_free = lin.hybrid.solve(tau)
        pair, fields, w_block = self._contact_pairing(x)
        gap_free = (x[self.tip] @ NORMAL + lin.contact_rows @ dz_free) - self.block_top_z
        w_cc = lin.w_cc - lin.w_block + w_block
        return Linearization(lin.hybrid, tau, dz_free, lin.contact_rows, pair, fields, gap_free, w_block,
                             _contact_solve=lin._contact_solve, _w_cc=0.5 * (w_cc + w_cc.T))

    def settle(self, iterations: int = 4, tolerance: float | None = None) -> float:
        """Equilibrium at ``q_cmd``: Newton steps with the exact contact LCP; returns the last
        step's ‖dz‖ (rad and m mixed: a convergence indicator).

        ``tolerance`` (m): stop once a step moves no rod or block node by more than this
        (``iterations`` is then the cap); None: exactly ``iterations`` Newton steps. The
        largest node motion of the last step is kept in ``last_motion`` (m).

        With a tolerance, a step that moved the nodes at most half as far as the step before
        it is followed by a modified-Newton step (:meth:`_chord`: the same factor and rod
        compliance, the residual, free gaps and block pairing of the new state; ~3 ms
        against ~11 ms for a linearisation of the grid-7 rod); the first step has no step
        before it and is always followed by a Newton step, and a modified step that does
        not contract that much is followed by a Newton step again. The equilibrium is the
        same (the residual is exact); only the path to it is cheaper.

        Raises:
            ConvergenceError: a step gave non-finite values, or, with a tolerance, no step
                within ``iterations`` moved the nodes by at most it. The scene is left at
                the last step's state (:meth:`save` / :meth:`restore` undo a settle).
        """
        step = np.inf
        lin: Linearization | None = None
        chord, previous = False, None
        for _ in range(iterations):
            lin = self._chord(lin) if chord else self.linearize()
            lam = solve_signorini_exact(lin.w_cc, lin.gap_free).forces
            dz = lin.hybrid.solve(lin.residual + lin.contact_rows.T @ lam)
            x_before, u_before = self.rod_positions(), self.block_u
            self.z = self.z + dz
            self.forces, self.block_u = lam, lin.block_fields @ lam
            step = float(np.linalg.norm(dz))
            self.last_motion = max(float(np.abs(self.rod_positions() - x_before).max()),
                                   float(np.abs(self.block_u - u_before).max()))
            if not np.isfinite(self.last_motion):
                raise ConvergenceError("hybrid scene: a settle step gave non-finite positions")
            if tolerance is not None and self.last_motion <= tolerance:
                return step
            chord = tolerance is not None and _contracted(self.last_motion, previous)
            previous = self.last_motion
        if tolerance is not None:
            raise ConvergenceError(f"hybrid scene: no equilibrium at the joint setpoints "
                                   f"{np.round(self.q_cmd, 4).tolist()} rad: {iterations} Newton steps, the last "
                                   f"moved a node {self.last_motion:.3g} m (tolerance {tolerance:g} m)")
        return step


def _contracted(motion: float, previous: float | None) -> bool:
    """Whether a settle step that moved the nodes ``motion`` [m] contracted against the step
    before it (``previous`` [m], None for the first step): at most CHORD_CONTRACTION of it."""
    return previous is not None and motion <= CHORD_CONTRACTION * previous
