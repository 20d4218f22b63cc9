"""The hybrid robot in the live graph: its scene from a description, the compliance snapshot
the low-rate loop publishes for the 1 kHz inverse QP, and what RViz draws.

Snapshot (core/model/snapshot.py, no message change): the joints are the actuator columns
(kind FORCE: bilateral; effort λ = k (q_cmd − q_home) [N m], stroke the joint angle q [rad],
see core/model/hybrid_description.py), the contacts of the probe's tip nodes with the soft
block are the contact block (W_cc summed over both bodies, eq. 12), and the effector rows
are the paper's alignment objective written as a point: ``y = t − e = a + u uᵀ (t − a)``,
the projection of the target t on the probe axis (a the tip, u the axis), so that
``|y − t|`` is the alignment distance |e| and the QP's ``‖W_ea λ + δ_e_free‖`` is the
linearised alignment error (Coevoet §IV-C). The rows are exact at the snapshot's target;
for another target t' the along-axis part of t' − t is counted as error too (the target
moves slowly compared with the snapshot rate).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from soft_inverse_ros.core.model.hybrid_description import HybridDescription
from soft_inverse_ros.core.model.snapshot import ComplianceSnapshot, ContactBlock
from soft_inverse_ros.core.rigid.chain import RigidChain
from soft_inverse_ros.core.rigid.effectors import alignment_error
from soft_inverse_ros.core.rigid.hybrid_scene import NORMAL, HybridScene, HybridSceneConfig


def scene_config(desc: HybridDescription) -> HybridSceneConfig:
    """The quasi-static scene's settings from a description (joint stiffness: the largest;
    :class:`DescribedScene` then sets each joint's own)."""
    soft, env = desc.soft_part, desc.environment
    return HybridSceneConfig(
        rod_young=soft.young_modulus, rod_poisson=soft.poisson_ratio,
        block_young=env.young_modulus, block_poisson=env.poisson_ratio,
        joint_stiffness=float(desc.joint_stiffness.max()),
        rod_size=soft.size, rod_divisions=soft.divisions,
        block_size=env.size, block_divisions=env.divisions,
        clearance=env.clearance, home=tuple(desc.home),
        # the live model and plant keep the nearest-node contact pairing: with the bilinear
        # pairing of experiment hybrid-alignment the snapshot's prediction misses the
        # settled model by 19 % of the motion (its rows lack the deformed surface's slope)
        contact_pairing="nearest")


class DescribedScene(HybridScene):
    """:class:`HybridScene` built from a description: its URDF, sizes, materials, home
    posture, per-joint servo stiffness, and its soft force actuators (each between a flange
    point and the rod node nearest its point; efforts ``soft_efforts`` [N], > 0 pushing
    apart, enter the statics through :meth:`linearize`)."""

    def __init__(self, desc: HybridDescription) -> None:
        super().__init__(scene_config(desc), urdf=desc.urdf)  # the rod and block at its home
        self.kj = desc.joint_stiffness.copy()
        p, r = self.chain.frame_pose(desc.home, self.mapping.frame)
        acts = desc.soft_actuators
        self.soft_anchors = np.array([a.anchor for a in acts]).reshape(-1, 3)  # flange frame [m]
        points = np.array([a.point for a in acts]).reshape(-1, 3)
        rest = self.rod.rest_points
        self.soft_nodes = np.array([int(np.argmin(np.linalg.norm(rest - (p + r @ x), axis=1))) for x in points],
                                   dtype=np.int64)
        self.soft_efforts = np.zeros(len(acts))
        self.soft_lengths0 = self._soft_lengths(self.z)

    def _soft_geometry(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World anchors (k, 3) and rod node positions (k, 3) [m] at z."""
        q = z[: self.chain.nq]
        p, r = self.chain.frame_pose(q, self.mapping.frame)
        return p + self.soft_anchors @ r.T, self.mapping.positions(z)[self.soft_nodes]

    def _soft_lengths(self, z: np.ndarray) -> np.ndarray:
        anchors, nodes = self._soft_geometry(z)
        return np.linalg.norm(nodes - anchors, axis=1)

    def soft_strokes(self, z: np.ndarray | None = None) -> np.ndarray:
        """Soft actuator strokes [m]: anchor-to-node distance change from home."""
        return self._soft_lengths(self.z if z is None else z) - self.soft_lengths0

    def soft_rows(self, z: np.ndarray | None = None) -> sp.csr_matrix:
        """(k, nz) rows h = dᵀ (dx_node/dz − dx_anchor/dz), d the unit anchor→node direction:
        the stroke's Jacobian, and hᵀ f the generalised force of efforts f (virtual work)."""
        z = self.z if z is None else z
        k = len(self.soft_nodes)
        if k == 0:
            return sp.csr_matrix((0, self.mapping.n_coords))
        anchors, nodes = self._soft_geometry(z)
        d = nodes - anchors
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        jac = self.mapping.jacobian(z)
        q = z[: self.chain.nq]
        p, r = self.chain.frame_pose(q, self.mapping.frame)
        jf = self.chain.frame_jacobian(q, self.mapping.frame)
        rows = np.zeros((k, self.mapping.n_coords))
        for i, n in enumerate(self.soft_nodes):
            rows[i] = d[i] @ jac[3 * n:3 * n + 3].toarray()
            arm = anchors[i] - p  # anchor velocity: v + ω × arm
            rows[i, : self.chain.nq] -= d[i] @ (jf[:3] - _skew(arm) @ jf[3:])
        return sp.csr_matrix(rows)

    def linearize(self):
        """:meth:`HybridScene.linearize` with the soft actuators' forces in the residual."""
        return self._with_soft_forces(super().linearize())

    def _chord(self, lin):
        """:meth:`HybridScene._chord` with the soft actuators' forces in the residual."""
        return self._with_soft_forces(super()._chord(lin))

    def _with_soft_forces(self, lin):
        """``lin`` with the soft actuators' forces at the current state added to its residual
        (and its free motion and gaps moved accordingly)."""
        import dataclasses

        if len(self.soft_nodes) == 0 or not np.any(self.soft_efforts):
            return lin
        extra = np.asarray(self.soft_rows().T @ self.soft_efforts).ravel()
        dz = lin.hybrid.solve(extra)
        return dataclasses.replace(lin, residual=lin.residual + extra, dz_free=lin.dz_free + dz,
                                   gap_free=lin.gap_free + lin.contact_rows @ dz)

    def probe_points(self, positions: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Probe tip and the point behind it on its axis (centroids of the rod's two last
        node layers) [m], world."""
        x = self.rod_positions() if positions is None else positions
        return x[self.tip].mean(0), x[self.back].mean(0)


def _skew(v: np.ndarray) -> np.ndarray:
    """[v]x (3, 3)."""
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def alignment_distance(tip: np.ndarray, back: np.ndarray, target: np.ndarray) -> float:
    """Distance [m] from ``target`` to the probe axis through ``back`` → ``tip``."""
    return float(np.linalg.norm(alignment_error(tip, back, target)[0]))


class HybridSnapshotModel:
    """The controller's model of the hybrid robot (the low-rate loop): settles the
    quasi-static scene at the joint setpoints and linearises it into a snapshot."""

    def __init__(self, desc: HybridDescription, newton_iterations: int = 3) -> None:
        if newton_iterations < 1:
            raise ValueError(f"newton_iterations must be >= 1, got {newton_iterations}")
        self.desc = desc
        self.iterations = newton_iterations
        self.scene = DescribedScene(desc)
        self.scene.settle()

    def snapshot(self, q_cmd: np.ndarray, target: np.ndarray, seq: int, stamp: float,
                 soft_efforts: np.ndarray | None = None) -> ComplianceSnapshot:
        """Settle at joint setpoints ``q_cmd`` [rad] under the soft actuators' efforts
        ``soft_efforts`` [N] (None: zero) and linearise with ``target`` [m] (base frame) for
        the alignment rows (module docstring)."""
        import time

        desc, scene = self.desc, self.scene
        q_cmd = np.asarray(q_cmd, float)
        target = np.asarray(target, float)
        if q_cmd.shape != desc.home.shape or not np.all(np.isfinite(q_cmd)):
            raise ValueError(f"joint setpoints must be {desc.home.size} finite angles [rad]")
        k = len(desc.soft_actuators)
        soft = np.zeros(k) if soft_efforts is None else np.asarray(soft_efforts, float)
        if soft.shape != (k,) or not np.all(np.isfinite(soft)):
            raise ValueError(f"soft actuator efforts must be {k} finite forces [N]")
        t0 = time.perf_counter()
        scene.q_cmd = q_cmd.copy()
        scene.soft_efforts = soft.copy()
        scene.settle(self.iterations)
        t1 = time.perf_counter()
        lin = scene.linearize()
        h = lin.hybrid
        nq = scene.chain.nq
        a, b = scene.probe_points()
        e0, de = alignment_error(a, b, target)
        ra, rb = scene.centroid_rows(h, scene.tip), scene.centroid_rows(h, scene.back)
        y_z = -(de[:, :3] @ ra.toarray() + de[:, 3:] @ rb.toarray())  # (3, nz)
        h_a = sp.vstack([h.joint_rows(np.arange(nq)), scene.soft_rows()]).tocsr()  # joints, soft
        sa = h.solve(h_a.T.toarray())  # (nz, n_a) per N m / N
        sc = lin.contact_solve  # (nz, m) per N of contact
        w_aa = np.asarray(h_a @ sa)
        w_ee = y_z @ h.solve(y_z.T)
        contacts = ContactBlock(
            ids=scene.tip.astype(np.int64),
            points=scene.block_positions()[lin.block_nodes],
            normals=np.tile(NORMAL, (len(scene.tip), 1)),
            gap=lin.gap_free + lin.w_cc @ scene.forces,
            force=scene.forces.copy(),
            w_cc=lin.w_cc, w_ca=np.asarray(sp.csr_matrix(lin.contact_rows) @ sa), w_ec=y_z @ sc)
        return ComplianceSnapshot(
            seq=seq, stamp=stamp, actuator_names=desc.actuator_names, actuator_kinds=desc.actuator_kinds,
            effector_names=desc.effector_row_names, w_ea=y_z @ sa, w_aa=0.5 * (w_aa + w_aa.T),
            w_ee=0.5 * (w_ee + w_ee.T), effector_position=target - e0,
            actuator_stroke=np.concatenate([scene.q, scene.soft_strokes()]),
            lambda0=np.concatenate([desc.joint_efforts(q_cmd), soft]), fem_step_time=t1 - t0,
            compliance_time=time.perf_counter() - t1, contacts=contacts)


def arm_frame_origins(chain: RigidChain, q: np.ndarray) -> np.ndarray:
    """(n_joints + 2, 3) world origins [m] of the base, every joint and the flange, in
    chain order: the arm drawn as segments between consecutive points."""
    import pinocchio as pin

    q = np.asarray(q, float)
    pin.forwardKinematics(chain.model, chain.data, q)
    pin.updateFramePlacements(chain.model, chain.data)
    pts = [np.zeros(3)] + [chain.data.oMi[i].translation.copy() for i in range(1, chain.model.njoints)]
    flange = chain.model.getFrameId("flange")
    pts.append(chain.data.oMf[flange].translation.copy())
    return np.array(pts)


def hybrid_visual_scene(scene: HybridScene, rod_positions: np.ndarray, block_positions: np.ndarray,
                        q: np.ndarray, forces: np.ndarray, contact_points: np.ndarray,
                        target: np.ndarray | None, frame_id: str = "base_link"):
    """A :class:`~soft_inverse_ros.core.model.visualization.Scene` of the hybrid robot: the
    soft rod (orange) and the block (grey) as one triangle surface, the arm as segments
    ``arm_links`` between its joint origins with ``arm_joints`` spheres, the probe tip and
    the target as spheres, the contacts with their normal forces (1 N drawn 20 mm)."""
    from soft_inverse_ros.core.model.visualization import (
        PointSet,
        Scene,
        Segments,
        Sphere,
        contact_items,
        triangle_list,
    )

    rod_faces, block_faces = scene.surface_faces
    positions = np.vstack([rod_positions, block_positions])
    faces = np.vstack([rod_faces, block_faces + len(rod_positions)])
    rgba = np.vstack([np.tile([1.0, 0.55, 0.1, 1.0], (len(rod_faces), 1)),
                      np.tile([0.6, 0.6, 0.65, 0.6], (len(block_faces), 1))])
    arm = arm_frame_origins(scene.chain, q)
    spheres = [Sphere("effector", rod_positions[scene.tip].mean(0), 0.003, (0.1, 0.4, 1.0, 1.0))]
    if target is not None:
        spheres.append(Sphere("target", np.asarray(target, float), 0.0025, (1.0, 0.1, 0.1, 1.0)))
    active = np.asarray(forces, float).reshape(-1) > 0
    contact_set, contact_forces = contact_items(
        np.asarray(contact_points, float).reshape(-1, 3)[active], np.tile(NORMAL, (int(active.sum()), 1)),
        np.asarray(forces, float).reshape(-1)[active], radius=0.0015, newton_length=0.02)
    point_sets, segments = (contact_set,), (contact_forces,)
    return Scene(
        surface=triangle_list(positions, faces, rgba), spheres=tuple(spheres), frame_id=frame_id,
        segments=(Segments("arm_links", arm[:-1], arm[1:], 0.012, (0.3, 0.3, 0.8, 1.0)), *segments),
        point_sets=(PointSet("arm_joints", arm, 0.01, (0.1, 0.1, 0.3, 1.0)), *point_sets))
