"""Compliance matrices of a linearized FEM state (after Largilliere et al., ICRA 2015).

With the tangent stiffness K over the free DOFs and the constraint Jacobians J_a
(actuators) and J_e (effectors) at the same state, the compliance matrices are

    W_aa = J_a K⁻¹ J_aᵀ,   W_ea = J_e K⁻¹ J_aᵀ,   W_ee = J_e K⁻¹ J_eᵀ

computed by solving ``K X = [J_aᵀ J_eᵀ]`` for the n_a + n_e constraint columns only (never
K⁻¹ itself). From columns solved inexactly (PCG), with their residual R = B − K X, the
blocks are the second-order estimate Bᵀ X + Xᵀ R (:func:`gram_from_columns`). Units: [m/N]
for cables and forces, [m/Pa] and [m³/Pa] (W_aa) for cavities.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from soft_inverse_ros.core.model.linear_solvers import (
    DirectSolver,
    FactorReuseSolver,
    gram_from_columns,
    solve_linear,
)
from soft_inverse_ros.core.model.snapshot import ActuatorKind, ComplianceSnapshot, ContactBlock

__all__ = ["ComplianceMatrices", "compliance_from_columns", "compute_compliance", "make_snapshot"]


@dataclass(frozen=True)
class ComplianceMatrices:
    """W blocks and the solved columns X = K⁻¹ [J_aᵀ J_eᵀ] (n_free, n_a + n_e)."""

    w_aa: np.ndarray
    w_ea: np.ndarray
    w_ee: np.ndarray
    columns: np.ndarray
    solve_iterations: int = 0
    wall_time: float = 0.0


def compliance_from_columns(
    ja_t: np.ndarray, je_t: np.ndarray, columns: np.ndarray, *, iterations: int = 0,
    wall_time: float = 0.0, residual: np.ndarray | None = None,
) -> ComplianceMatrices:
    """W blocks from X ≈ K⁻¹ [J_aᵀ J_eᵀ] (symmetric W_aa and W_ee).

    ``residual``: [J_aᵀ J_eᵀ] − K X of inexact columns (None: X exact); the blocks are then
    the second-order estimate of :func:`gram_from_columns`.
    """
    n_a = ja_t.shape[1]
    g = gram_from_columns(np.hstack((ja_t, je_t)), columns, residual)
    return ComplianceMatrices(
        g[:n_a, :n_a], g[n_a:, :n_a], g[n_a:, n_a:], columns, iterations, wall_time
    )


def compute_compliance(
    stiffness: sp.spmatrix,
    ja_t: np.ndarray,
    je_t: np.ndarray,
    solver: DirectSolver | FactorReuseSolver,
    *,
    x0: np.ndarray | None = None,
) -> ComplianceMatrices:
    """Solve K X = [J_aᵀ J_eᵀ] and form the W blocks.

    Args:
        stiffness: K over the free DOFs (n_free, n_free) [N/m].
        ja_t: J_aᵀ (n_free, n_a); je_t: J_eᵀ (n_free, n_e).
        solver: a direct solver (factorizes K) or a factor-reuse PCG solver.
        x0: warm start for the PCG solver (previous columns).
    """
    t0 = time.perf_counter()
    rhs = np.hstack((ja_t, je_t))
    columns, iterations = solve_linear(solver, stiffness, rhs, x0)
    return compliance_from_columns(
        ja_t, je_t, columns, iterations=iterations, wall_time=time.perf_counter() - t0
    )


def make_snapshot(
    matrices: ComplianceMatrices,
    *,
    seq: int,
    stamp: float,
    actuator_names: Sequence[str],
    actuator_kinds: Sequence[ActuatorKind],
    effector_names: Sequence[str],
    effector_position: np.ndarray,
    actuator_stroke: np.ndarray,
    lambda0: np.ndarray,
    fem_step_time: float = 0.0,
    contacts: ContactBlock | None = None,
) -> ComplianceSnapshot:
    """The FEM → QP contract from the W blocks and the state they linearize."""
    return ComplianceSnapshot(
        seq=int(seq),
        stamp=float(stamp),
        actuator_names=tuple(actuator_names),
        actuator_kinds=tuple(actuator_kinds),
        effector_names=tuple(effector_names),
        w_ea=matrices.w_ea,
        w_aa=matrices.w_aa,
        w_ee=matrices.w_ee,
        effector_position=np.asarray(effector_position, float),
        actuator_stroke=np.asarray(actuator_stroke, float),
        lambda0=np.asarray(lambda0, float),
        fem_step_time=float(fem_step_time),
        compliance_time=float(matrices.wall_time),
        contacts=contacts,
    )
