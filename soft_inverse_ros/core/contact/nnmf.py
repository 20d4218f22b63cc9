"""Non-negative matrix factorization of contact-force snapshots (Goury et al. 2021, §III-C).

Contact forces collected over a sweep of postures, S (n_c × n_s, S ≥ 0), are approximated by
S ≈ Ψ B with a non-negative basis Ψ (n_c × k) and non-negative coefficients B (k × n_s)
(eq. 23: min ‖S − Ψ B‖_F), so that any reduced force Ψ β with β ≥ 0 is a valid (pushing)
contact force and the reduced LCP keeps Signorini's law (eq. 18–21).

Two algorithms:

- ``"als"``: the paper's Algorithm 1 — alternating least squares, each half-step the
  unconstrained solution with its negative entries set to 0. A heuristic: the objective
  need not decrease at every iteration (the history shows it).
- ``"hals"`` (default): hierarchical ALS — each column of Ψ (row of B) is updated in turn
  by its exact non-negative least-squares minimizer with the others fixed, so the objective
  never increases (block coordinate descent on a convex problem per block).

:func:`nnmf_path` gives k = 1 … kmax, each started from the previous factorization plus
one vector, so that with HALS the error never grows with k.

Both return Ψ with unit-norm columns (B scaled to compensate), sorted by decreasing
contribution ‖B_i‖. scikit-learn's ``NMF(solver="cd")`` (BSD) is an independent check
in the tests, not a dependency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class NNMFResult:
    """Ψ (n_c, k) ≥ 0 with unit columns, B (k, n_s) ≥ 0, and the relative error
    ‖S − Ψ B‖_F / ‖S‖_F after each iteration (``history``)."""

    basis: np.ndarray
    coefficients: np.ndarray
    history: np.ndarray
    iterations: int

    @property
    def relative_error(self) -> float:
        return float(self.history[-1]) if self.history.size else float("nan")


def _check(snapshots: np.ndarray, k: int) -> np.ndarray:
    s = np.asarray(snapshots, dtype=float)
    if s.ndim != 2 or s.size == 0:
        raise ValueError(f"nnmf: snapshots must be a non-empty (n_c, n_s) matrix, got shape {s.shape}")
    if not np.isfinite(s).all() or (s < 0).any():
        raise ValueError("nnmf: contact-force snapshots must be finite and >= 0")
    if not (isinstance(k, (int, np.integer)) and 1 <= k <= min(s.shape)):
        raise ValueError(f"nnmf: k must be an integer in [1, {min(s.shape)}], got {k!r}")
    return s


def _normalized(psi: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    norms = np.linalg.norm(psi, axis=0)
    norms[norms == 0.0] = 1.0
    psi, b = psi / norms, b * norms[:, None]
    order = np.argsort(-np.linalg.norm(b, axis=1), kind="stable")
    return psi[:, order], b[order]


def nnmf(
    snapshots: np.ndarray,
    k: int,
    *,
    method: str = "hals",
    iterations: int = 500,
    tolerance: float = 1e-6,
    seed: int = 0,
    init: tuple[np.ndarray, np.ndarray] | None = None,
) -> NNMFResult:
    """S ≈ Ψ B with Ψ, B ≥ 0 (see the module docstring).

    Args:
        snapshots: (n_c, n_s) contact forces [N], one column per posture.
        k: basis size.
        method: ``"hals"`` (monotone) or ``"als"`` (Goury's Algorithm 1).
        iterations: at most this many sweeps.
        tolerance: stop when the relative error improves by less than this in a sweep.
        seed: the random initial Ψ (Algorithm 1, line 2).
        init: a starting (Ψ (n_c, k), B (k, n_s)) ≥ 0 instead of the random one.

    Raises:
        ValueError: negative or non-finite snapshots, a bad k, method or init.
    """
    s = _check(snapshots, k)
    if method not in ("hals", "als"):
        raise ValueError(f"nnmf: method must be 'hals' or 'als', got {method!r}")
    n_c, n_s = s.shape
    if init is None:
        rng = np.random.default_rng(seed)
        scale = np.sqrt(s.mean() / k) if s.mean() > 0 else 1.0
        psi = scale * rng.random((n_c, k))
        b = scale * rng.random((k, n_s))
    else:
        psi, b = (np.array(a, dtype=float) for a in init)
        if psi.shape != (n_c, k) or b.shape != (k, n_s) or (psi < 0).any() or (b < 0).any():
            raise ValueError(f"nnmf: init must be (Ψ {(n_c, k)}, B {(k, n_s)}) >= 0")
    norm_s = float(np.linalg.norm(s)) or 1.0
    history = []
    it = 0
    for it in range(1, iterations + 1):
        if method == "als":
            b = np.maximum(np.linalg.lstsq(psi, s, rcond=None)[0], 0.0)
            psi = np.maximum(np.linalg.lstsq(b.T, s.T, rcond=None)[0].T, 0.0)
        else:
            b = _hals_rows(s, psi, b)
            psi = _hals_rows(s.T, b.T, psi.T).T
        history.append(float(np.linalg.norm(s - psi @ b)) / norm_s)
        if len(history) > 1 and abs(history[-2] - history[-1]) < tolerance:
            break
    psi, b = _normalized(psi, b)
    return NNMFResult(psi, b, np.asarray(history), it)


def nnmf_path(
    snapshots: np.ndarray,
    kmax: int,
    *,
    method: str = "hals",
    iterations: int = 500,
    tolerance: float = 1e-6,
    seed: int = 0,
    on_k: Callable[[int], None] | None = None,
) -> list[NNMFResult]:
    """The factorizations for k = 1 … kmax, each started from the previous one plus one
    vector: the positive part of the largest residual column of S − Ψ_{k−1} B_{k−1}
    (coefficients 0), so the start has the previous error and HALS, which never increases
    the objective, gives error(k) ≤ error(k − 1) (independent random starts can land in
    worse local minima for a larger k). k = 1 starts at random (``seed``). ``on_k(k)`` is
    called after each k.

    Raises:
        ValueError: as :func:`nnmf`, or kmax outside [1, min(n_c, n_s)].
    """
    s = _check(snapshots, kmax)
    out = [nnmf(s, 1, method=method, iterations=iterations, tolerance=tolerance, seed=seed)]
    if on_k is not None:
        on_k(1)
    for k in range(2, kmax + 1):
        prev = out[-1]
        residual = np.maximum(s - prev.basis @ prev.coefficients, 0.0)
        column = residual[:, int(np.argmax(np.linalg.norm(residual, axis=0)))]
        if not column.any():  # an exact fit already: any non-negative direction
            column = np.ones(s.shape[0])
        psi = np.column_stack((prev.basis, column / np.linalg.norm(column)))
        b = np.vstack((prev.coefficients, np.zeros((1, s.shape[1]))))
        out.append(nnmf(s, k, method=method, iterations=iterations, tolerance=tolerance, init=(psi, b)))
        if on_k is not None:
            on_k(k)
    return out


def _hals_rows(s: np.ndarray, w: np.ndarray, h: np.ndarray) -> np.ndarray:
    """One HALS sweep over the rows of H in S ≈ W H (W, H ≥ 0): each row is set to the
    non-negative minimizer with the others fixed."""
    h = h.copy()
    wts = w.T @ s  # (k, n)
    wtw = w.T @ w  # (k, k)
    for i in range(h.shape[0]):
        if wtw[i, i] <= 0.0:
            h[i] = 0.0
            continue
        h[i] = np.maximum(h[i] + (wts[i] - wtw[i] @ h) / wtw[i, i], 0.0)
    return h


def project_forces(basis: np.ndarray, forces: np.ndarray) -> np.ndarray:
    """β ≥ 0 minimizing ‖Ψ β − λ‖ (the reduced coordinates of full contact forces λ)."""
    from scipy.optimize import nnls

    return nnls(np.asarray(basis, dtype=float), np.asarray(forces, dtype=float))[0]
