"""Stiff two-node length constraints (penalty springs), vectorized.

Used for the link's inextensible layer, the chambers' radial fibres, the rigid end plate
and the pressure actuation (a rest length scaled by the pressure-induced strain, the
paper's eq. 7–8 compliant distance constraint with compliance 1/k).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class SpringSet:
    """Springs between node pairs.

    Attributes:
        pairs: (S, 2) node indices.
        rest: (S,) rest lengths [m].
        stiffness: (S,) stiffness [N/m].
    """

    pairs: np.ndarray
    rest: np.ndarray
    stiffness: np.ndarray

    @staticmethod
    def between(points: np.ndarray, pairs: np.ndarray, stiffness: float | np.ndarray) -> "SpringSet":
        """Springs at rest in ``points`` (N, 3) [m] over ``pairs`` (S, 2)."""
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        rest = np.linalg.norm(points[pairs[:, 1]] - points[pairs[:, 0]], axis=1)
        k = np.broadcast_to(np.asarray(stiffness, dtype=float), rest.shape).copy()
        return SpringSet(pairs, rest, k)

    def with_rest(self, rest: np.ndarray) -> "SpringSet":
        return SpringSet(self.pairs, np.asarray(rest, dtype=float), self.stiffness)


def concat(sets: list[SpringSet]) -> SpringSet:
    """One set holding all springs of ``sets``."""
    return SpringSet(np.concatenate([s.pairs for s in sets]), np.concatenate([s.rest for s in sets]),
                     np.concatenate([s.stiffness for s in sets]))


def spring_forces(springs: SpringSet, x: np.ndarray) -> np.ndarray:
    """Nodal forces (N, 3) [N] of the springs at positions x (N, 3) [m]."""
    a, b = springs.pairs[:, 0], springs.pairs[:, 1]
    d = x[b] - x[a]
    length = np.linalg.norm(d, axis=1)
    f = (springs.stiffness * (length - springs.rest) / np.maximum(length, 1e-15))[:, None] * d
    out = np.zeros_like(x)
    np.add.at(out, a, f)
    np.add.at(out, b, -f)
    return out


def spring_stiffness(springs: SpringSet, x: np.ndarray) -> sp.csr_matrix:
    """Exact tangent stiffness −∂f/∂x (3N, 3N) [N/m] of the springs at x (material +
    geometric term; compressed springs make the geometric term negative)."""
    a, b = springs.pairs[:, 0], springs.pairs[:, 1]
    d = x[b] - x[a]
    length = np.maximum(np.linalg.norm(d, axis=1), 1e-15)
    n = d / length[:, None]
    geo = 1.0 - springs.rest / length
    nn = n[:, :, None] * n[:, None, :]
    blk = springs.stiffness[:, None, None] * ((1.0 - geo)[:, None, None] * nn + geo[:, None, None] * np.eye(3))
    r3 = np.arange(3)
    rows, cols, vals = [], [], []
    for p, q, s in ((a, a, 1.0), (b, b, 1.0), (a, b, -1.0), (b, a, -1.0)):
        rows.append((3 * p[:, None, None] + r3[None, :, None]).repeat(3, axis=2))
        cols.append((3 * q[:, None, None] + r3[None, None, :]).repeat(3, axis=1))
        vals.append(s * blk)
    n_dof = 3 * len(x)
    return sp.csr_matrix((np.concatenate(vals).ravel(), (np.concatenate(rows).ravel(),
                          np.concatenate(cols).ravel())), shape=(n_dof, n_dof))
