"""Persistent dense QP backends for the high-rate inverse solver.

Every backend solves the same (already scaled, O(1)) problem

    minimize ½ xᵀ H x + gᵀ x   subject to   lower ≤ [I; A] x ≤ upper

with ``H`` (n, n) symmetric positive definite and ``A`` (k, n): the first n entries of
``lower``/``upper`` bound x itself, the last k bound ``A x`` (±inf = no bound).
Precondition: ``lower ≤ upper`` — the caller must check it (measured: daqp then reports
"optimal" for an empty interval and OSQP keeps its previous bounds after printing an
error).
``setup(H, A)`` is called once per compliance snapshot (factorizations happen there);
``solve(g, lower, upper)`` is called every tick and only changes the linear term and the
bounds, warm-started from the previous tick.

Backends:

- ``daqp``: dual active-set (Arnström et al. 2022), persistent ``daqp.Model``.
- ``osqp``: ADMM (Stellato et al. 2020), persistent ``osqp.OSQP``; exact only with tight
  ``eps_abs``/``eps_rel`` and polishing, and weak on ill-conditioned H (cond ≥ 1e6, i.e.
  redundant actuation with a tiny ε): it may then stop early ("solved inaccurate",
  reported as not converged) or polish to a slightly wrong active set.
- ``quadprog``: Goldfarb–Idnani dual active-set; not warm-startable, but H is factorized
  once per snapshot and passed as R⁻¹.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple, Protocol

import numpy as np

#: Backend names accepted by :func:`make_backend` (and InverseSolverConfig.backend).
BACKENDS = ("daqp", "osqp", "quadprog")


class BackendStatus(IntEnum):
    SOLVED = 0
    INFEASIBLE = 1
    MAX_ITERATIONS = 2
    TIME_LIMIT = 3
    INACCURATE = 4  #: stopped at a point that does not meet the tolerances
    NUMERICAL_ERROR = 5


@dataclass(frozen=True)
class BackendSettings:
    """Backend-independent settings (validated by InverseSolverConfig)."""

    max_iterations: int = 1000  #: active-set iteration cap (daqp)
    primal_tolerance: float = 1e-9  #: constraint tolerance in scaled units (daqp)
    time_limit: float = 0.0  #: [s] per solve, 0 = none (osqp; the daqp wheel ignores it)
    osqp_eps_abs: float = 1e-9
    osqp_eps_rel: float = 1e-9
    osqp_max_iterations: int = 20000
    osqp_polish: bool = True


class BackendSolution(NamedTuple):
    x: np.ndarray  #: (n,) solution (meaningless unless status is SOLVED)
    status: BackendStatus
    iterations: int
    detail: str  #: the backend's own status text


class QpBackend(Protocol):
    name: str

    def setup(self, h: np.ndarray, a: np.ndarray) -> None:
        """New problem matrices (per snapshot); raises ValueError if unusable."""

    def solve(self, g: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> BackendSolution:
        """Solve with new linear term and bounds (per tick), warm-started."""

    def reset_warm_start(self) -> None:
        """Forget the warm start (after a failure)."""


class DaqpBackend:
    """DAQP dual active-set solver, one persistent ``daqp.Model`` per snapshot shape."""

    name = "daqp"
    # DAQP exit flags (daqp/include/constants.h)
    _FLAGS = {
        1: (BackendStatus.SOLVED, "optimal"),
        2: (BackendStatus.SOLVED, "soft optimal"),
        -1: (BackendStatus.INFEASIBLE, "infeasible"),
        -2: (BackendStatus.NUMERICAL_ERROR, "cycling"),
        -3: (BackendStatus.NUMERICAL_ERROR, "unbounded"),
        -4: (BackendStatus.MAX_ITERATIONS, "iteration limit"),
        -5: (BackendStatus.NUMERICAL_ERROR, "non-convex"),
        -6: (BackendStatus.NUMERICAL_ERROR, "overdetermined initial active set"),
    }

    @staticmethod
    def daqp_settings(settings: BackendSettings) -> dict[str, float | int]:
        """The DAQP settings (DAQP's names) the inverse solver changes from DAQP's defaults:
        for ``daqp.Model``, ``daqp.solve`` and the compiled tick's C struct alike."""
        return {
            "iter_limit": int(settings.max_iterations),
            "primal_tol": float(settings.primal_tolerance),
            "time_limit": float(settings.time_limit),
            # H is made strictly positive definite upstream: no proximal iterations.
            "eps_prox": 0.0,
        }

    def __init__(self, settings: BackendSettings) -> None:
        import daqp

        self._daqp = daqp
        self._settings = self.daqp_settings(settings)
        self._model = None
        self._m = 0  # n bounds + k rows
        self._shape = (0, 0)
        self._data: tuple[np.ndarray, np.ndarray] | None = None  # (H, A) of the current problem

    def setup(self, h: np.ndarray, a: np.ndarray) -> None:
        n, k = h.shape[0], a.shape[0]
        h = np.array(h, dtype=float, order="C")  # daqp keeps (writable) references
        a = np.array(a, dtype=float, order="C")
        if self._model is not None and self._shape == (n, k):
            # same structure: refactorize in place, keeping the working set (warm start)
            if self._model.update(H=h, A=a) >= 0:
                self._data = (h, a)
                return
        try:
            self._model = self._new_model(h, a)
            self._data, self._m, self._shape = (h, a), n + k, (n, k)
        except ValueError:
            if self._data is not None:  # keep solving the previous problem
                self._model = self._new_model(*self._data)
            raise

    def _new_model(self, h: np.ndarray, a: np.ndarray):
        n, k = h.shape[0], a.shape[0]
        model = self._daqp.Model()
        lower = np.full(n + k, -np.inf)
        flag, _ = model.setup(h, np.zeros(n), a, -lower, lower)
        if flag < 0:
            raise ValueError(f"daqp setup failed (exit flag {flag}): H not positive definite?")
        model.settings = self._settings
        return model

    @classmethod
    def exit_status(cls, flag: int) -> tuple[BackendStatus, str]:
        """(status, DAQP's own text) of a DAQP exit flag."""
        return cls._FLAGS.get(flag, (BackendStatus.NUMERICAL_ERROR, f"exit flag {flag}"))

    def solve(self, g: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> BackendSolution:
        model = self._model
        model.update(f=g, bupper=upper, blower=lower)
        x, _, flag, info = model.solve()
        status, text = self.exit_status(flag)
        return BackendSolution(x, status, int(info["iterations"]), text)

    def reset_warm_start(self) -> None:
        if self._model is not None:
            self._model.update(sense=np.zeros(self._m, dtype=np.int32))


class OsqpBackend:
    """OSQP (ADMM) kept persistent: set up per snapshot, ``update(q, l, u)`` per tick."""

    name = "osqp"

    def __init__(self, settings: BackendSettings) -> None:
        import osqp
        import scipy.sparse as sp

        self._osqp, self._sp = osqp, sp
        self._opts = dict(
            verbose=False,
            eps_abs=float(settings.osqp_eps_abs),
            eps_rel=float(settings.osqp_eps_rel),
            max_iter=int(settings.osqp_max_iterations),
            polishing=bool(settings.osqp_polish),
            warm_starting=True,
            time_limit=float(settings.time_limit) if settings.time_limit > 0 else 1e10,
        )
        self._solver = None
        self._solved = osqp.SolverStatus.OSQP_SOLVED
        self._map = {
            osqp.SolverStatus.OSQP_SOLVED: BackendStatus.SOLVED,
            osqp.SolverStatus.OSQP_SOLVED_INACCURATE: BackendStatus.INACCURATE,
            osqp.SolverStatus.OSQP_PRIMAL_INFEASIBLE: BackendStatus.INFEASIBLE,
            osqp.SolverStatus.OSQP_PRIMAL_INFEASIBLE_INACCURATE: BackendStatus.INFEASIBLE,
            osqp.SolverStatus.OSQP_MAX_ITER_REACHED: BackendStatus.MAX_ITERATIONS,
            osqp.SolverStatus.OSQP_TIME_LIMIT_REACHED: BackendStatus.TIME_LIMIT,
        }
        self._x = None
        self._y = None

    def setup(self, h: np.ndarray, a: np.ndarray) -> None:
        sp = self._sp
        n = h.shape[0]
        # Keep the full dense pattern (explicit zeros included) so matrices stay fixed-shape.
        triu = np.triu(np.ones((n, n), dtype=bool))
        rows, cols = np.nonzero(triu.T)  # row-major over the transpose = CSC of triu(H)
        p = sp.csc_matrix((h[cols, rows], (cols, rows)), shape=(n, n))
        full_a = np.vstack((np.eye(n), a))
        m = full_a.shape[0]
        ar, ac = np.nonzero(np.ones((m, n), dtype=bool))
        amat = sp.csc_matrix((full_a[ar, ac], (ar, ac)), shape=(m, n))
        solver = self._osqp.OSQP()
        try:
            solver.setup(p, np.zeros(n), amat, np.full(m, -np.inf), np.full(m, np.inf), **self._opts)
        except Exception as exc:  # OSQPException for a non-convex P, among others
            raise ValueError(f"osqp setup failed: {type(exc).__name__} {exc}") from None
        if self._x is not None and self._x.shape == (n,) and self._y.shape == (m,):
            solver.warm_start(x=self._x, y=self._y)
        self._solver = solver

    def solve(self, g: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> BackendSolution:
        solver = self._solver
        solver.update(q=g, l=lower, u=upper)
        res = solver.solve(raise_error=False)
        info = res.info
        status = self._map.get(info.status_val, BackendStatus.NUMERICAL_ERROR)
        x = np.array(res.x)  # own copy: the caller may modify it
        if status is BackendStatus.SOLVED:
            self._x, self._y = x.copy(), np.array(res.y)
        return BackendSolution(x, status, int(info.iter), str(info.status))

    def reset_warm_start(self) -> None:
        self._x = self._y = None
        if self._solver is not None:
            n = self._solver.n
            self._solver.warm_start(x=np.zeros(n), y=np.zeros(self._solver.m))


class QuadprogBackend:
    """quadprog (Goldfarb–Idnani); H's inverse Cholesky factor is computed per snapshot."""

    name = "quadprog"

    def __init__(self, settings: BackendSettings) -> None:
        import quadprog

        self._quadprog = quadprog
        self._rinv = None
        self._ct = None  # (n + k, n) = [I; A]

    def setup(self, h: np.ndarray, a: np.ndarray) -> None:
        try:
            chol = np.linalg.cholesky(h)  # h = L Lᵀ, R = Lᵀ
        except np.linalg.LinAlgError as exc:
            raise ValueError(f"quadprog needs a positive definite H: {exc}") from None
        n = h.shape[0]
        rinv = np.linalg.solve(chol.T, np.eye(n))
        self._rinv, self._ct = rinv, np.vstack((np.eye(n), a))

    def solve(self, g: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> BackendSolution:
        lo = np.isfinite(lower)
        hi = np.isfinite(upper)
        ct = self._ct
        c = np.concatenate((ct[lo], -ct[hi])).T
        b = np.concatenate((lower[lo], -upper[hi]))
        try:
            x, _, _, iters, _, _ = self._quadprog.solve_qp(self._rinv, -g, c, b, 0, True)
        except ValueError as exc:
            text = str(exc)
            status = (
                BackendStatus.INFEASIBLE if "inconsistent" in text else BackendStatus.NUMERICAL_ERROR
            )
            return BackendSolution(np.full(g.shape, np.nan), status, 0, text)
        return BackendSolution(x, BackendStatus.SOLVED, int(iters[0]), "optimal")

    def reset_warm_start(self) -> None:
        pass


def make_backend(name: str, settings: BackendSettings) -> QpBackend:
    """Backend by name; ValueError naming the choices if unknown or not installed."""
    classes = {"daqp": DaqpBackend, "osqp": OsqpBackend, "quadprog": QuadprogBackend}
    if name not in classes:
        raise ValueError(f"unknown QP backend {name!r}; choose one of {', '.join(BACKENDS)}")
    try:
        return classes[name](settings)
    except ImportError as exc:
        raise ValueError(f"QP backend {name!r} is not installed ({exc})") from None
