"""Hyper-reduction of the reduced co-rotational plant: Energy-Conserving Sampling and
Weighting (ECSW; Farhat, Avery, Chapman & Cortial, IJNME 2014), the element sampling that
SOFA's ModelOrderReduction plugin applies to its reduced FEM force fields.

A Galerkin-reduced model x = x_eq + Φ q (core/sim/modal_plant.py) has r unknowns but still
evaluates every element for its projected forces Φᵀ f(x) = Σ_e Φ_eᵀ f_e(x), so a step costs
what the full mesh's forces cost. ECSW keeps a few elements E with weights w_e ≥ 0 such that
the weighted sum reproduces the sum over all elements on training configurations x_s::

    min |E|  subject to  ‖G w − b‖ ≤ τ ‖b‖,  w ≥ 0,
    G[(s, :), e] = Φ_eᵀ (f_e(x_s) − f_e(x_eq)) / ‖b_s‖,   b_s = Σ_e G[(s, :), e],

solved approximately by the non-negative least-squares active-set method of Lawson and
Hanson, stopped as soon as the tolerance holds (:func:`ecsw_weights`): each step adds the
element whose column most reduces the residual, so the sample stays small. Each training
configuration weighs the same (its rows are normalized).

The training rows are the force *changes* from x_eq, and a constant offset makes the
sampled forces exact at x_eq (the slack start, where elasticity balances gravity)::

    Φᵀ f_hr(x) = Σ_E w_e Φ_eᵀ f_e(x) + c,   c = Φᵀ f(x_eq) − Σ_E w_e Φ_eᵀ f_e(x_eq),

so the error of the sampled forces is that of the force changes, which the training
bounds. The sampled forces are those of a FEM of the elements E whose volumes are scaled by
w_e (:class:`~soft_inverse_ros.core.model.fem.CorotationalFEM` ``element_weights``): its
tangent Σ_E w_e R K0 Rᵀ is the reduced tangent of the same sum, and the weighted strain
energy minus cᵀq is their potential (hence "energy-conserving").

Units SI (N, m); the robot's base frame.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.linalg as la

from soft_inverse_ros.core.model.fem import CorotationalFEM

#: configurations whose force change from x_eq is below this fraction of the largest one
#: are not trained on (at x_eq itself the offset is exact)
_NEGLIGIBLE_CHANGE = 1e-6


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class HyperReduction:
    """The sampled elements of a reduced FEM and their weights.

    Attributes:
        elements: indices of the sampled elements in the full mesh's ``tets``.
        weights: (len(elements),) their weights w_e > 0.
        fem: the weighted FEM of the sampled elements (same nodes, fixed nodes, material).
        offset: c (r,) [N per unit coordinate], added to Φᵀ f of ``fem``.
        training_error: ‖G w − b‖ / ‖b‖ reached on the training rows.
        configurations: training configurations used.
        build_time: wall time of the training and the sampling [s].
        mesh_elements: elements of the full mesh.
    """

    elements: np.ndarray
    weights: np.ndarray
    fem: CorotationalFEM
    offset: np.ndarray
    training_error: float
    configurations: int
    build_time: float
    mesh_elements: int

    @property
    def fraction(self) -> float:
        """Sampled elements / all elements of the mesh."""
        return len(self.elements) / self.mesh_elements

    def to_arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        """Everything but the sampled FEM (rebuilt by :meth:`from_arrays`), as arrays."""
        return {f"{prefix}elements": self.elements, f"{prefix}weights": self.weights,
                f"{prefix}offset": self.offset,
                f"{prefix}training_error": np.array(self.training_error),
                f"{prefix}configurations": np.array(self.configurations),
                f"{prefix}build_time": np.array(self.build_time)}

    @classmethod
    def from_arrays(cls, fem: CorotationalFEM, arrays, prefix: str = "") -> "HyperReduction":
        """The sample :meth:`to_arrays` stored, for the full mesh's ``fem``."""
        elements = np.asarray(arrays[f"{prefix}elements"], dtype=np.int64)
        weights = np.asarray(arrays[f"{prefix}weights"], dtype=float)
        return cls(elements, weights, sampled_fem(fem, elements, weights),
                   np.asarray(arrays[f"{prefix}offset"], dtype=float),
                   float(arrays[f"{prefix}training_error"]), int(arrays[f"{prefix}configurations"]),
                   float(arrays[f"{prefix}build_time"]), fem.n_elements)


def sampled_fem(fem: CorotationalFEM, elements: np.ndarray, weights: np.ndarray) -> CorotationalFEM:
    """The FEM of ``fem``'s ``elements`` (indices into its tets), weighted: same nodes,
    fixed nodes, material and kernels."""
    return CorotationalFEM(
        fem.rest_points, fem.tets[elements], fem.young_modulus, fem.poisson_ratio,
        fixed_nodes=np.flatnonzero(fem.fixed_mask), density=fem.density,
        kernels=fem.kernels, element_weights=weights)


def ecsw_weights(g: np.ndarray, b: np.ndarray, tolerance: float,
                 max_elements: int | None = None) -> np.ndarray:
    """Sparse non-negative w with ‖g w − b‖ ≤ ``tolerance`` ‖b‖ (module doc).

    Lawson–Hanson active-set NNLS, stopped at the tolerance or at ``max_elements`` columns.
    The least-squares problem on the active columns is solved through their Gram matrix,
    grown by one row and column per added element (a solve of |E|² instead of a
    factorization of the |rows| × |E| block).

    Args:
        g: (rows, M) columns of the elements.
        b: (rows,) the target.
        tolerance: relative residual to reach (> 0).
        max_elements: most columns kept (default: all).

    Returns:
        w (M,) ≥ 0, zero outside the sample.
    """
    g = np.asfortranarray(g, dtype=float)  # columns contiguous
    b = np.asarray(b, dtype=float)
    if g.ndim != 2 or b.shape != (g.shape[0],):
        raise ValueError(f"g must be (rows, M) and b (rows,), got {g.shape} and {b.shape}")
    if not tolerance > 0:
        raise ValueError(f"tolerance must be > 0, got {tolerance}")
    rows, m = g.shape
    limit = m if max_elements is None else max(1, min(int(max_elements), m))
    weights = np.zeros(m)
    goal = tolerance * float(np.linalg.norm(b))
    active: list[int] = []
    chosen = np.zeros(m, dtype=bool)  # active, or rejected at once (degenerate): not picked
    columns = np.empty((rows, min(64, limit)), order="F")  # g[:, active], grown by doubling
    gram = np.zeros((0, 0))
    rhs = np.zeros(0)
    residual = b.copy()
    sketch = g.astype(np.float32)  # the gradient only ranks columns: half the memory traffic
    steps = 0
    while float(np.linalg.norm(residual)) > goal and len(active) < limit and steps < 3 * m:
        steps += 1  # Lawson–Hanson terminates in exact arithmetic; a guard for round-off
        gradient = (sketch.T @ residual.astype(np.float32)).astype(float)
        gradient[chosen] = -np.inf
        j = int(np.argmax(gradient))
        if not gradient[j] > 0:
            break  # the non-negative optimum: no column reduces the residual further
        column = g[:, j]
        n = len(active)
        if n == columns.shape[1]:
            columns = np.asfortranarray(np.hstack((columns, np.empty((rows, n)))))
        cross = columns[:, :n].T @ column
        columns[:, n] = column
        gram = np.block([[gram, cross[:, None]], [cross[None, :], np.array([[column @ column]])]])
        rhs = np.append(rhs, column @ b)
        active.append(j)
        chosen[j] = True
        current = np.append(weights[active[:-1]], 0.0)
        entering = True
        while True:
            z = _solve_gram(gram, rhs, columns[:, :len(active)], b)
            if np.all(z > 0):
                current = z
                break
            # step from the feasible weights towards z until one reaches 0; drop it
            negative = z <= 0
            alpha = float(np.min(current[negative] / (current[negative] - z[negative])))
            current = current + alpha * (z - current)
            keep = current > 1e-12 * max(float(current.max()), 1e-300)
            index = np.flatnonzero(keep)
            for i in np.flatnonzero(~keep):
                # a dropped column may come back later, unless it is the new one and could
                # not enter at all (degenerate): then picking it again would loop
                chosen[active[i]] = entering and active[i] == j
            entering = False
            active = [active[i] for i in index]
            columns[:, :len(index)] = columns[:, index]
            gram = gram[np.ix_(index, index)]
            rhs = rhs[index]
            current = current[index]
            if not active:
                break
        weights[:] = 0.0
        weights[active] = current
        residual = b - columns[:, :len(active)] @ current
    return weights


def _solve_gram(gram: np.ndarray, rhs: np.ndarray, columns: np.ndarray,
                b: np.ndarray) -> np.ndarray:
    """Least squares on the active columns: their normal equations, or a QR-based lstsq
    of the columns themselves when the Gram matrix is numerically singular (near-parallel
    columns of neighbouring elements; the normal equations square the condition)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", la.LinAlgWarning)
        try:
            return la.solve(gram, rhs, assume_a="pos", check_finite=False)
        except (la.LinAlgError, la.LinAlgWarning, ValueError):
            pass
    return np.linalg.lstsq(columns, b, rcond=None)[0]


def build_ecsw(fem: CorotationalFEM, basis: np.ndarray, x_eq: np.ndarray,
               configurations: Sequence[np.ndarray], tolerance: float,
               max_elements: int | None = None) -> HyperReduction:
    """Sample and weigh the elements of ``fem`` for the reduced basis ``basis`` (n_free, r)
    about ``x_eq`` (N, 3) [m], trained on ``configurations`` (each (N, 3) [m], ideally
    in the span of the basis) to the relative ``tolerance`` (module doc).

    Raises:
        ValueError: no configuration moves away from x_eq.
    """
    t0 = time.perf_counter()
    r = basis.shape[1]
    per_node = np.zeros((3 * fem.n_nodes, r))
    per_node[fem.free_dofs] = basis
    per_element = per_node.reshape(fem.n_nodes, 3, r)[fem.tets]  # (M, 4, 3, r): Φ_e
    forces_eq = fem.element_forces(x_eq)
    blocks = []
    for x in configurations:
        change = fem.element_forces(np.asarray(x, dtype=float)) - forces_eq
        blocks.append(np.einsum("mic,micr->rm", change, per_element, optimize=True))
    sums = [float(np.linalg.norm(block.sum(axis=1))) for block in blocks]
    largest = max(sums, default=0.0)
    if not largest > 0:
        raise ValueError("hyper-reduction: no training configuration moves away from x_eq")
    kept = [block / size for block, size in zip(blocks, sums) if size > _NEGLIGIBLE_CHANGE * largest]
    g = np.concatenate(kept)
    b = g.sum(axis=1)
    w = ecsw_weights(g, b, tolerance, max_elements)
    elements = np.flatnonzero(w > 0)
    error = float(np.linalg.norm(g[:, elements] @ w[elements] - b) / np.linalg.norm(b))
    sample = sampled_fem(fem, elements, w[elements])
    full_eq = basis.T @ fem.reduce(fem.internal_forces(x_eq))
    sampled_eq = basis.T @ sample.reduce(sample.internal_forces(x_eq))
    result = HyperReduction(elements, w[elements], sample, full_eq - sampled_eq, error,
                            len(kept), time.perf_counter() - t0, fem.n_elements)
    if not math.isfinite(error):
        raise ValueError("hyper-reduction: non-finite training residual")
    return result
