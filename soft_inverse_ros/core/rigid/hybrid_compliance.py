"""Static condensation of a soft FEM body whose rigidified nodes follow a frame of a rigid
chain, in mixed coordinates (Coevoet et al. §III, eq. 2–6, quasi-static).

Coordinates: u = (x_f, q) — the displacements of the soft body's free DOFs x_f (3 n_f,
world axes) [m] followed by the joint positions q (n_q) [rad or m]. The attached nodes
move with the chain, δx_a = J_a δq (see :mod:`rigid_mapping`). Projecting the FEM stiffness
K (partitioned into free f and attached a DOFs) through this mapping and adding the joint
(servo) stiffness K_q gives the hybrid stiffness

    K_h = [[K_ff,        K_fa J_a            ],
           [J_aᵀ K_af,   J_aᵀ K_aa J_a + K_q ]]

and, for rows H over (x_f, q) (effector or contact directions), the compliance
W_h = H K_h⁻¹ Hᵀ [m/N, rad/(N·m), ...].

The linearisation is taken about an unloaded reference (soft body at rest, chain at q_ref):
the geometric term (∂J_aᵀ/∂q) f of a preloaded mapping is zero there and is not included.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.rigid.rigid_mapping import RigidAttachment
from soft_inverse_ros.core.rigid.urdf_chain import UrdfChain


def hybrid_stiffness(
    stiffness: sp.spmatrix,
    attached_nodes: np.ndarray,
    attached_jacobian: np.ndarray,
    joint_stiffness: np.ndarray,
) -> tuple[sp.csc_matrix, np.ndarray]:
    """Hybrid stiffness K_h over (x_f, q) and the free node indices.

    Args:
        stiffness: (3N, 3N) FEM stiffness of the whole soft body, no node fixed [N/m].
        attached_nodes: (n_a,) indices of the nodes carried by the chain.
        attached_jacobian: (3 n_a, n_q) J_a, rows node-major in ``attached_nodes`` order.
        joint_stiffness: (n_q,) diagonal joint stiffness K_q, > 0 [N·m/rad or N/m].
    """
    n_dof = stiffness.shape[0]
    attached = np.asarray(attached_nodes, dtype=np.int64).ravel()
    k_q = np.asarray(joint_stiffness, dtype=float).ravel()
    j_a = np.asarray(attached_jacobian, dtype=float)
    if stiffness.shape != (n_dof, n_dof) or n_dof % 3:
        raise ValueError(f"stiffness must be (3N, 3N), got {stiffness.shape}")
    n_nodes = n_dof // 3
    if attached.size == 0 or len(np.unique(attached)) != attached.size:
        raise ValueError("attached_nodes must be a non-empty list of distinct node indices")
    if attached.min() < 0 or attached.max() >= n_nodes:
        raise ValueError("attached_nodes reference nodes outside the mesh")
    if j_a.shape != (3 * attached.size, k_q.size):
        raise ValueError(f"attached_jacobian must be ({3 * attached.size}, {k_q.size}), got {j_a.shape}")
    if not np.all(np.isfinite(k_q)) or np.any(k_q <= 0.0):
        raise ValueError("joint_stiffness must be finite and > 0 [N·m/rad]")
    mask = np.ones(n_nodes, dtype=bool)
    mask[attached] = False
    free_nodes = np.flatnonzero(mask)
    if free_nodes.size == 0:
        raise ValueError("every soft node is attached: nothing deformable is left")
    f_dofs = (3 * free_nodes[:, None] + np.arange(3)).ravel()
    a_dofs = (3 * attached[:, None] + np.arange(3)).ravel()
    k = sp.csr_matrix(stiffness)
    k_ff = k[f_dofs][:, f_dofs]
    k_fa_j = k[f_dofs][:, a_dofs] @ j_a  # (3 n_f, n_q) dense
    k_qq = j_a.T @ (k[a_dofs][:, a_dofs] @ j_a) + np.diag(k_q)
    k_qq = 0.5 * (k_qq + k_qq.T)
    k_h = sp.bmat([[k_ff, sp.csr_matrix(k_fa_j)], [sp.csr_matrix(k_fa_j.T), sp.csr_matrix(k_qq)]])
    return sp.csc_matrix(k_h), free_nodes


class HybridCompliance:
    """Compliance of a soft body carried by a rigid chain, in coordinates u = (x_f, q).

    Attributes:
        attachment: The rigid mapping of the attached nodes.
        attached_nodes: (n_a,) soft node indices carried by the chain.
        free_nodes: (n_f,) the other soft nodes.
        n_q: number of joints; n: size of u (3 n_f + n_q).
        stiffness: K_h (n, n) [SI].
    """

    def __init__(
        self,
        stiffness: sp.spmatrix,
        attachment: RigidAttachment,
        attached_nodes: np.ndarray,
        q_ref: np.ndarray,
        joint_stiffness: np.ndarray,
    ) -> None:
        self.attachment = attachment
        self.attached_nodes = np.asarray(attached_nodes, dtype=np.int64).ravel()
        if self.attached_nodes.size != attachment.n_nodes:
            raise ValueError("attached_nodes and the attachment offsets differ in length")
        self.q_ref = np.asarray(q_ref, dtype=float).ravel()
        self.attached_jacobian = attachment.jacobian(self.q_ref)
        self.stiffness, self.free_nodes = hybrid_stiffness(
            stiffness, self.attached_nodes, self.attached_jacobian, joint_stiffness
        )
        self.n_q = attachment.chain.n_q
        self.n = self.stiffness.shape[0]
        self._lu = spla.splu(self.stiffness)
        self._free_slot = np.full(stiffness.shape[0] // 3, -1, dtype=np.int64)
        self._free_slot[self.free_nodes] = np.arange(self.free_nodes.size)
        self._attached_slot = np.full(stiffness.shape[0] // 3, -1, dtype=np.int64)
        self._attached_slot[self.attached_nodes] = np.arange(self.attached_nodes.size)

    @classmethod
    def from_fem(
        cls,
        fem: CorotationalFEM,
        chain: UrdfChain,
        frame: str,
        attached_nodes: np.ndarray,
        q_ref: np.ndarray,
        joint_stiffness: np.ndarray,
    ) -> "HybridCompliance":
        """Soft body ``fem`` (rest points in world axes at q_ref, no fixed nodes) whose
        ``attached_nodes`` are rigidly fixed to ``frame`` of ``chain``."""
        if fem.n_free != 3 * fem.n_nodes:
            raise ValueError("the soft FEM must have no fixed nodes: its attached nodes follow the chain")
        nodes = np.asarray(attached_nodes, dtype=np.int64).ravel()
        if nodes.size == 0 or nodes.min() < 0 or nodes.max() >= fem.n_nodes:
            raise ValueError("attached_nodes must be non-empty node indices of the soft mesh")
        attachment = RigidAttachment.capture(chain, frame, fem.rest_points[nodes], q_ref)
        return cls(fem.rest_stiffness(), attachment, nodes, q_ref, joint_stiffness)

    def node_rows(self, nodes: np.ndarray) -> np.ndarray:
        """(3k, n) rows H giving the world displacement of soft nodes (free or attached)."""
        nodes = np.asarray(nodes, dtype=np.int64).ravel()
        if nodes.size and (nodes.min() < 0 or nodes.max() >= self._free_slot.size):
            raise ValueError("nodes reference nodes outside the soft mesh")
        rows = np.zeros((3 * nodes.size, self.n))
        xyz = np.arange(3)
        free = self._free_slot[nodes] >= 0
        i_free = np.flatnonzero(free)
        rows[(3 * i_free[:, None] + xyz).ravel(), (3 * self._free_slot[nodes[free]][:, None] + xyz).ravel()] = 1.0
        i_att = np.flatnonzero(~free)
        a_rows = (3 * self._attached_slot[nodes[~free]][:, None] + xyz).ravel()
        rows[(3 * i_att[:, None] + xyz).ravel(), -self.n_q:] = self.attached_jacobian[a_rows]
        return rows

    def joint_rows(self) -> np.ndarray:
        """(n_q, n) rows H selecting the joint positions q."""
        rows = np.zeros((self.n_q, self.n))
        rows[:, -self.n_q:] = np.eye(self.n_q)
        return rows

    def solve(self, load: np.ndarray) -> np.ndarray:
        """Displacement u = K_h⁻¹ g of a generalised load g over (x_f, q) [N, N·m]."""
        return self._lu.solve(np.asarray(load, dtype=float))

    def compliance(self, rows: np.ndarray) -> np.ndarray:
        """W_h = H K_h⁻¹ Hᵀ for rows H (k, n) [m/N, rad/(N·m), ...]."""
        h = np.asarray(rows, dtype=float)
        if h.ndim != 2 or h.shape[1] != self.n:
            raise ValueError(f"rows must be (k, {self.n}), got {h.shape}")
        w = h @ self._lu.solve(np.ascontiguousarray(h.T))
        return 0.5 * (w + w.T)
