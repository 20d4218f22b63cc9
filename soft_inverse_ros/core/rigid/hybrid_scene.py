"""The built-in hybrid scene (Coevoet et al. Figs 8-9): the 5-joint arm ``hybrid_arm.urdf``
carrying a soft rod whose base nodes are rigidified to the flange, pressing a soft block whose
bottom is clamped. Quasi-static: :meth:`HybridScene.settle` finds the equilibrium at the
commanded joint angles (Newton on the hybrid statics, each step's contacts solved exactly as
an LCP with W summed over both bodies, eq. 12); :meth:`HybridScene.linearize` gives the data
of one inverse step. World frame, SI units (m, N, rad, Pa). The block is linear elastic (its
rest stiffness, small strains); the rod is co-rotational. The probe axis is the line through
the centroids of the rod's two last node layers (its tip face and the layer behind it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from soft_inverse_ros.core.contact.signorini import solve_signorini_exact
from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.model.mesh_generation import box_mesh
from soft_inverse_ros.core.rigid.chain import RigidChain
from soft_inverse_ros.core.rigid.hybrid import HybridCompliance
from soft_inverse_ros.core.rigid.mapping import RigidMapping

NORMAL = np.array([0.0, 0.0, 1.0])  # the block's top-face normal (world +z)


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

    def __post_init__(self) -> None:
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
    block_nodes: np.ndarray  # (m,) block node paired with each rod tip node
    block_fields: np.ndarray  # (3 Nb, m) block displacement per unit contact force
    gap_free: np.ndarray  # (m,) gaps at zero contact force [m]
    w_cc: np.ndarray  # (m, m) W_rod + W_block (eq. 12) [m/N]


class HybridScene:
    """Arm + soft rod + soft block (module docstring)."""

    def __init__(self, cfg: HybridSceneConfig = HybridSceneConfig()) -> None:
        self.cfg = cfg
        self.chain = RigidChain.from_urdf("hybrid_arm")
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

    def _build_rod(self, q: np.ndarray) -> None:
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
        """(3 Nb, k) block displacements under a unit force −n at each of ``nodes``."""
        rhs = np.zeros((3 * self.block.n_free_nodes, len(nodes)))
        rhs[3 * self._free_index[nodes] + 2, np.arange(len(nodes))] = -1.0
        out = np.zeros((3 * self.block.n_nodes, len(nodes)))
        out[self.block.free_dofs] = self._block_lu.solve(rhs)
        return out

    def linearize(self) -> Linearization:
        """The hybrid statics linearised at the current state, with the contact pairs."""
        x = self.rod_positions()
        k = self.rod.stiffness(self.rod.element_state(x))
        hybrid = HybridCompliance(self.mapping, self.z, k, self.kj)
        tau = self.mapping.forces_to_coords(self.z, self.rod.internal_forces(x).ravel())
        nq = self.chain.nq
        tau[:nq] -= self.kj * (self.q - self.q_cmd)
        dz_free = hybrid.solve(tau)
        rows = hybrid.node_rows(self.tip, np.tile(NORMAL, (len(self.tip), 1)))
        surf = self.block.rest_points[self.block_surface]
        pair = self.block_surface[np.argmin(
            np.linalg.norm(x[self.tip, None, :2] - surf[None, :, :2], axis=-1), axis=1)]
        fields = self._block_fields(pair)
        w_block = -fields[3 * pair + 2]  # gap change per unit force: +C_zz
        gap_free = (x[self.tip] @ NORMAL + rows @ dz_free) - self.block.rest_points[pair] @ NORMAL
        w_cc = hybrid.compliance(rows) + w_block
        return Linearization(hybrid, tau, dz_free, rows, pair, fields, gap_free, 0.5 * (w_cc + w_cc.T))

    def settle(self, iterations: int = 4) -> float:
        """Equilibrium at ``q_cmd``: Newton steps with the exact contact LCP; returns the last
        step's ‖dz‖ (rad and m mixed: a convergence indicator)."""
        step = np.inf
        for _ in range(iterations):
            lin = self.linearize()
            lam = solve_signorini_exact(lin.w_cc, lin.gap_free).forces
            dz = lin.hybrid.solve(lin.residual + lin.contact_rows.T @ lam)
            self.z = self.z + dz
            self.forces, self.block_u = lam, lin.block_fields @ lam
            step = float(np.linalg.norm(dz))
        return step
