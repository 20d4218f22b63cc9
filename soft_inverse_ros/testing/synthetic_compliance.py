"""Synthetic but physically shaped compliance data (for tests and benchmarks).

A :class:`SyntheticRobot` is a random linear-elastic body: an SPD stiffness ``K``
[N/m] over ``3·n_nodes`` DOFs (log-uniform spectrum, like a FEM stiffness), effector
rows that pick node coordinates, and actuators acting on nodes:

- cable / linear force: a unit direction on one node (stroke = displacement along it, m);
- pressure cavity: area-weighted normals on a few nodes (stroke = volume growth, m³;
  the cavity force on the nodes is ``J_aᵀ p``).

Compliances are the exact ``W_ea = J_e K⁻¹ J_aᵀ``, ``W_aa = J_a K⁻¹ J_aᵀ``,
``W_ee = J_e K⁻¹ J_eᵀ`` (≈1e-3 m/N for cables, ≈1e-7 m/Pa for pressures with the
defaults), so the snapshots have the scales and conditioning of real ones. It stands in
for the FEM model (``core/model/robot_model.py``) wherever a real mesh is not needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from soft_inverse_ros.core.control.actuator_limits import ActuatorLimits
from soft_inverse_ros.core.model.snapshot import ActuatorKind, ComplianceSnapshot

_AXES = ("x", "y", "z")


@dataclass(frozen=True)
class SyntheticRobot:
    """A random linear-elastic robot (see module docstring); all arrays SI."""

    stiffness: np.ndarray  #: (n_dof, n_dof) SPD [N/m]
    effector_jacobian: np.ndarray  #: (n_e, n_dof) [-]
    actuator_jacobian: np.ndarray  #: (n_a, n_dof) [-] (cables) or [m²] (cavities)
    actuator_kinds: tuple[ActuatorKind, ...]
    effector_rest: np.ndarray  #: (n_e,) effector rows at zero effort [m]
    actuator_names: tuple[str, ...]
    effector_names: tuple[str, ...]

    @property
    def n_actuators(self) -> int:
        return len(self.actuator_kinds)

    @property
    def n_effector_rows(self) -> int:
        return int(self.effector_jacobian.shape[0])

    def compliance(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(W_ea, W_aa, W_ee) from one Cholesky solve of K."""
        from scipy.linalg import cho_factor, cho_solve

        factor = cho_factor(self.stiffness)
        j_e, j_a = self.effector_jacobian, self.actuator_jacobian
        kinv_ja = cho_solve(factor, j_a.T)
        kinv_je = cho_solve(factor, j_e.T)
        w_aa = j_a @ kinv_ja
        w_ee = j_e @ kinv_je
        return j_e @ kinv_ja, 0.5 * (w_aa + w_aa.T), 0.5 * (w_ee + w_ee.T)

    def snapshot(
        self, lambda0: np.ndarray | None = None, *, seq: int = 0, stamp: float = 0.0
    ) -> ComplianceSnapshot:
        """The exact snapshot of this (linear) robot at efforts ``lambda0`` (default 0)."""
        w_ea, w_aa, w_ee = self.compliance()
        lam0 = np.zeros(self.n_actuators) if lambda0 is None else np.asarray(lambda0, float)
        return ComplianceSnapshot(
            seq=seq,
            stamp=stamp,
            actuator_names=self.actuator_names,
            actuator_kinds=self.actuator_kinds,
            effector_names=self.effector_names,
            w_ea=w_ea,
            w_aa=w_aa,
            w_ee=w_ee,
            effector_position=self.effector_rest + w_ea @ lam0,
            actuator_stroke=w_aa @ lam0,
            lambda0=lam0,
        )

    def stiffened(self, factor: float) -> "SyntheticRobot":
        """The same robot with K scaled by ``factor`` (compliance divided by it)."""
        return SyntheticRobot(
            self.stiffness * factor,
            self.effector_jacobian,
            self.actuator_jacobian,
            self.actuator_kinds,
            self.effector_rest,
            self.actuator_names,
            self.effector_names,
        )

    def limits(
        self,
        *,
        cable_max: float = 20.0,
        force_max: float = 20.0,
        pressure_max: float = 1.0e5,
        stroke_fraction: float = 0.6,
        max_effort_step: float | None = None,
        max_stroke_step: float | None = None,
    ) -> ActuatorLimits:
        """Typical limits: cables [0, cable_max] N, forces ±force_max N, pressures
        [0, pressure_max] Pa; stroke_max = ``stroke_fraction`` of the stroke each actuator
        reaches alone at its maximum effort (so stroke limits do become active)."""
        kinds = np.array(self.actuator_kinds)
        a_max = np.select(
            [kinds == ActuatorKind.CABLE, kinds == ActuatorKind.FORCE],
            [cable_max, force_max],
            pressure_max,
        )
        a_min = np.where(kinds == ActuatorKind.FORCE, -force_max, 0.0)
        _, w_aa, _ = self.compliance()
        l_max = stroke_fraction * np.diag(w_aa) * a_max
        return ActuatorLimits(
            a_min,
            a_max,
            None,
            l_max,
            max_effort_step,
            max_stroke_step,
            names=self.actuator_names,
        )


def make_synthetic_robot(
    n_actuators: int,
    n_effector_rows: int,
    *,
    kinds: Sequence[ActuatorKind] | None = None,
    n_nodes: int = 24,
    stiffness_range: tuple[float, float] = (3.0e2, 3.0e4),
    cavity_area: float = 2.0e-4,
    rng: np.random.Generator | int | None = None,
) -> SyntheticRobot:
    """A random :class:`SyntheticRobot`.

    Args:
        n_actuators: Actuator columns (≥ 1).
        n_effector_rows: Effector rows (≥ 1, at most ``3·n_nodes``); rows are x, y, z of
            successive effector nodes.
        kinds: One kind per actuator (default: all cables).
        n_nodes: Nodes of the synthetic body (DOFs = 3·n_nodes).
        stiffness_range: Range of K's eigenvalues [N/m] (log-uniform).
        cavity_area: Total wall area of a pressure cavity [m²].
        rng: Generator or seed.
    """
    rng = np.random.default_rng(rng)
    if n_actuators < 1 or n_effector_rows < 1:
        raise ValueError("a synthetic robot needs at least one actuator and one effector row")
    n_dof = 3 * n_nodes
    if n_effector_rows > n_dof:
        raise ValueError(f"n_effector_rows {n_effector_rows} exceeds the {n_dof} DOFs")
    kinds = (ActuatorKind.CABLE,) * n_actuators if kinds is None else tuple(map(ActuatorKind, kinds))
    if len(kinds) != n_actuators:
        raise ValueError(f"kinds has {len(kinds)} entries, expected {n_actuators}")

    q, _ = np.linalg.qr(rng.standard_normal((n_dof, n_dof)))
    eig = np.exp(rng.uniform(*np.log(stiffness_range), n_dof))
    stiffness = (q * eig) @ q.T
    stiffness = 0.5 * (stiffness + stiffness.T)

    # effector rows: x, y, z of nodes 0, 1, ... (the "tip")
    j_e = np.zeros((n_effector_rows, n_dof))
    j_e[np.arange(n_effector_rows), np.arange(n_effector_rows)] = 1.0

    j_a = np.zeros((n_actuators, n_dof))
    free_nodes = rng.permutation(np.arange(n_nodes))
    for i, kind in enumerate(kinds):
        if kind == ActuatorKind.PRESSURE:
            nodes = rng.choice(n_nodes, size=min(6, n_nodes), replace=False)
            normals = rng.standard_normal((nodes.size, 3))
            normals /= np.linalg.norm(normals, axis=1, keepdims=True)
            weights = rng.uniform(0.5, 1.5, nodes.size)
            weights *= cavity_area / weights.sum()
            for node, normal, w in zip(nodes, normals, weights):
                j_a[i, 3 * node : 3 * node + 3] += w * normal
        else:
            node = free_nodes[i % n_nodes]
            direction = rng.standard_normal(3)
            j_a[i, 3 * node : 3 * node + 3] = direction / np.linalg.norm(direction)

    prefix = {ActuatorKind.CABLE: "cable", ActuatorKind.FORCE: "force", ActuatorKind.PRESSURE: "cavity"}
    return SyntheticRobot(
        stiffness=stiffness,
        effector_jacobian=j_e,
        actuator_jacobian=j_a,
        actuator_kinds=kinds,
        effector_rest=rng.uniform(-0.05, 0.05, n_effector_rows) + np.tile([0.0, 0.0, 0.1], 3 * n_nodes)[
            :n_effector_rows
        ],
        actuator_names=tuple(f"{prefix[k]}{i}" for i, k in enumerate(kinds)),
        effector_names=tuple(f"tip{r // 3}.{_AXES[r % 3]}" for r in range(n_effector_rows)),
    )
