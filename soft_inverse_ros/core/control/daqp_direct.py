"""The arguments of the compiled inverse-QP tick that calls DAQP's C solver directly.

Measured on this project's 2-core machine (``bench qp``, 4 actuators × 3 effector rows):
a tick through ``daqp.Model.update`` + ``Model.solve`` and the two numba kernels of
:mod:`tick_kernels` around them cost ~4.7× a bare ``daqp.solve`` call, most of it the
dispatch of five Python-level calls with ~10 array arguments each. With
:data:`tick_kernels.direct_tick` the whole tick — the linear term and bounds
(:func:`tick_kernels.prepare`), DAQP's ``daqp_quadprog`` on them, and the command
(:func:`tick_kernels.finish`) — is one numba call with four array arguments; this module
builds them: the snapshot's constants packed in one array, DAQP's C structs (ctypes) and
the buffers they point into.

``daqp_quadprog`` sets the problem up every tick (a Cholesky factor of the n × n
Hessian, allocated and freed again): for the few actuators of a soft robot that is
cheaper than the Python calls a persistent ``daqp.Model`` needs. Its working set starts
from the last tick's multipliers (``daqp_dual_init_active``; carried over to the next
snapshot, dropped after a failed solve). The problem is strictly convex, so the solution
is the persistent model's (within the solver's tolerances; ``test_daqp_direct.py``
compares them).

The C structs are transcribed from DAQP's ``types.h``/``api.h`` of the versions in
:data:`VERIFIED_VERSIONS`; a different version, no numba, ``SOFT_INVERSE_ROS_QP_KERNELS=numpy``,
a settings layout that does not read back DAQP's own defaults, or a test problem whose
solution differs from ``daqp.solve``'s makes :func:`unavailable_reason` say why, and the
solver then uses the Python interface (:class:`qp_backends.DaqpBackend`).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os

import numpy as np

from soft_inverse_ros.core.control import tick_kernels
from soft_inverse_ros.core.control.qp_backends import BackendSettings, DaqpBackend

#: daqp releases whose C structs are the ones below (checked by hand against the sdist).
VERIFIED_VERSIONS = ("0.11.0",)


class _Problem(ctypes.Structure):
    """DAQPProblem (types.h): min ½xᵀHx + fᵀx s.t. blower ≤ [x[:ms]; A x] ≤ bupper."""

    _fields_ = [
        ("n", ctypes.c_int), ("m", ctypes.c_int), ("ms", ctypes.c_int),
        ("H", ctypes.c_void_p), ("f", ctypes.c_void_p), ("A", ctypes.c_void_p),
        ("bupper", ctypes.c_void_p), ("blower", ctypes.c_void_p), ("sense", ctypes.c_void_p),
        ("break_points", ctypes.c_void_p), ("nh", ctypes.c_int), ("problem_type", ctypes.c_int),
    ]


class _Result(ctypes.Structure):
    """DAQPResult (api.h); x and lam point into caller-owned buffers."""

    _fields_ = [
        ("x", ctypes.c_void_p), ("lam", ctypes.c_void_p), ("fval", ctypes.c_double),
        ("soft_slack", ctypes.c_double), ("exitflag", ctypes.c_int), ("iter", ctypes.c_int),
        ("nodes", ctypes.c_int), ("solve_time", ctypes.c_double), ("setup_time", ctypes.c_double),
    ]


_SETTINGS_FLOATS_1 = ("primal_tol", "dual_tol", "zero_tol", "pivot_tol", "progress_tol")
_SETTINGS_FLOATS_2 = ("fval_bound", "eps_prox", "eta_prox", "rho_soft", "rel_subopt", "abs_subopt",
                      "sing_tol", "refactor_tol", "time_limit", "w_soft")


class _Settings(ctypes.Structure):
    """DAQPSettings (types.h)."""

    _fields_ = (
        [(k, ctypes.c_double) for k in _SETTINGS_FLOATS_1]
        + [("cycle_tol", ctypes.c_int), ("iter_limit", ctypes.c_int)]
        + [(k, ctypes.c_double) for k in _SETTINGS_FLOATS_2]
        + [("eq_reduction", ctypes.c_int), ("presolve", ctypes.c_int)]
    )


def pack(e_free, g_map, k_mat, static_lower, static_upper, step, d, effort_min, effort_max, stroke_min,
         stroke_max, da_free, w_aa, w_ea, active_tolerance: float, feasibility_tolerance: float) -> np.ndarray:
    """A snapshot's constant arrays in the order the kernel reads them (one argument)."""
    parts = (e_free, g_map, k_mat, static_lower, static_upper, step, d, effort_min, effort_max,
             stroke_min, stroke_max, da_free, w_aa, w_ea, np.array([active_tolerance, feasibility_tolerance]))
    return np.concatenate([np.ascontiguousarray(a, dtype=float).ravel() for a in parts])


class DirectTick:
    """One snapshot's tick kernel arguments: the packed constants, DAQP's C structs and the
    buffers they point into, and the scaled reference command of the per-tick limits.

    The structs hold raw pointers into ``h``, ``a`` and the buffers: this object keeps them
    alive. Used by one thread at a time (InverseSolver's lock).
    """

    __slots__ = ("consts", "ints", "io", "_n", "_multipliers", "_keep")

    def __init__(self, consts: np.ndarray, h: np.ndarray, a: np.ndarray, n_e: int, has_steps: bool,
                 settings: BackendSettings) -> None:
        n = h.shape[0]
        if a.shape != (n, n):
            raise ValueError(f"direct daqp tick: stroke rows must be ({n}, {n}), got {a.shape}")
        m = 2 * n
        h = np.ascontiguousarray(h, dtype=float)
        a = np.ascontiguousarray(a, dtype=float)
        # io = [f (n) | bupper (m) | blower (m) | x (n) | lam (m) | reference (n)], float64
        io = np.zeros(3 * n + 3 * m)
        at = io.ctypes.data
        f_at, bupper_at, blower_at, x_at, lam_at = at, at + 8 * n, at + 8 * (n + m), at + 8 * (n + 2 * m), \
            at + 8 * (2 * n + 2 * m)
        # ints = [meta (META_WORDS) | sense (m C ints = n words) | DAQPResult (64 bytes)], int64
        meta_words = tick_kernels.META_WORDS
        if ctypes.sizeof(_Result) != 64:
            raise ValueError(f"DAQPResult has {ctypes.sizeof(_Result)} bytes, not 64")
        ints = np.zeros(meta_words + n + 8, dtype=np.int64)
        sense_at, result_at = 8 * meta_words, 8 * (meta_words + n)
        result = _Result.from_buffer(ints, result_at)
        result.x, result.lam = x_at, lam_at
        problem = _Problem(n, m, n, h.ctypes.data, f_at, a.ctypes.data, bupper_at, blower_at,
                           ints.ctypes.data + sense_at, None, 0, 0)
        c_settings = _settings(settings)
        ints[:meta_words] = (
            n, n_e, int(has_steps), ints.ctypes.data + result_at, ctypes.addressof(problem),
            ctypes.addressof(c_settings), (result_at + _Result.exitflag.offset) // 4,
            (result_at + _Result.iter.offset) // 4, 0, lam_at,
        )
        self.consts, self.ints, self.io, self._n = consts, ints, io, n
        self._multipliers = slice(2 * n + 2 * m, 2 * n + 3 * m)  # DAQP's λ of the last tick, in io
        self._keep = (h, a, problem, c_settings)

    @property
    def qp_calls(self) -> int:
        """Ticks on this snapshot that reached DAQP."""
        return int(self.ints[tick_kernels.QP_CALLS_WORD])

    def take_warm_start(self, previous: "DirectTick") -> None:
        """Start from the working set of ``previous`` (the last snapshot's) when the
        problem has the same size."""
        if previous._n == self._n:
            self.io[self._multipliers] = previous.io[previous._multipliers]

    def reset_warm_start(self) -> None:
        """The next tick starts with no constraint active."""
        self.io[self._multipliers] = 0.0

    def set_reference(self, ref_mu: np.ndarray) -> None:
        """The scaled command the next tick's per-tick limits are taken around."""
        self.io[-self._n:] = ref_mu

    def last_problem(self) -> tuple[np.ndarray, ...]:
        """Copies of (H, f, A, bupper, blower) of the last QP handed to DAQP (bench replay)."""
        h, a = self._keep[0], self._keep[1]
        n, m, io = self._n, 2 * self._n, self.io
        return h.copy(), io[:n].copy(), a.copy(), io[n:n + m].copy(), io[n + m:n + 2 * m].copy()

    def warm(self, n_e: int) -> None:
        """Run one tick for a zero target and restore every buffer it wrote: the kernel's
        constants, DAQP's structs and the buffers are then in the cache and mapped when the
        first real tick on this snapshot comes (a cold first tick took ~17 µs more than the
        others at 4 × 3, `bench qp`). For the low-rate path (set_snapshot), never a tick."""
        io, ints = self.io.copy(), self.ints.copy()
        try:
            self.run(np.zeros(n_e))
        finally:
            self.io[:] = io
            self.ints[:] = ints

    def run(self, target: np.ndarray):
        """One tick for ``target`` (n_e,) [m], a writable float64 array.

        Returns:
            (out, code, exitflag, iterations, error, margin): out = [efforts | strokes |
            residual | μ | lower | upper | δ_e] (NaN where not reached); code 0 = solved (the
            reference command is now this one), 1 = target not finite, 2 = stroke bounds and
            per-tick limits do not intersect, 3 = DAQP did not solve (see exitflag), 4 = the
            solution violates the bounds by more than the tolerance (see margin).
        """
        return tick_kernels.direct_tick(self.consts, self.ints, target, self.io)


class StateQPStructs:
    """DAQP's C structs for :data:`contact_qp.state_solve_direct` (a contact state's QP in
    one compiled call): a DAQPProblem and a DAQPResult in one int64 buffer (the kernel
    points them at the QP's arrays and reads the exit flag back) and DAQP's default
    settings (the ones ``daqp.solve`` uses). ``layout``: the word / int32 indices the
    kernel writes (taken from the ctypes structs, not hard-coded). Kept alive by its
    owner (a :class:`contact_qp.Stacked`); one call at a time."""

    __slots__ = ("ints", "layout", "settings_address", "_keep")

    def __init__(self) -> None:
        p_words = ctypes.sizeof(_Problem) // 8
        r_words = ctypes.sizeof(_Result) // 8
        if ctypes.sizeof(_Problem) % 8 or ctypes.sizeof(_Result) % 8:
            raise ValueError("DAQP structs are not a whole number of 8-byte words")
        self.ints = np.zeros(p_words + r_words, dtype=np.int64)
        problem = _Problem.from_buffer(self.ints, 0)
        problem.nh, problem.problem_type, problem.break_points = 0, 0, None
        r0 = 8 * p_words
        words = [_Problem.H.offset, _Problem.f.offset, _Problem.A.offset, _Problem.bupper.offset,
                 _Problem.blower.offset, _Problem.sense.offset, r0 + _Result.x.offset, r0 + _Result.lam.offset]
        int32s = [_Problem.n.offset, _Problem.m.offset, _Problem.ms.offset, r0 + _Result.exitflag.offset]
        if any(w % 8 for w in words) or any(i % 4 for i in int32s):
            raise ValueError("DAQP struct fields are not aligned as the kernel expects")
        # [H, f, A, bupper, blower, sense, x, lam] (int64 words), [n, m, ms, exitflag] (int32
        # indices), then the problem's and the result's byte offsets in ints
        self.layout = np.array([w // 8 for w in words] + [i // 4 for i in int32s] + [0, r0], dtype=np.int64)
        settings = _Settings.from_buffer_copy(_default_settings())
        self.settings_address = ctypes.addressof(settings)
        self._keep = (problem, settings)


@functools.lru_cache(maxsize=1)
def _default_settings() -> bytes:
    """DAQP's own default settings (``daqp_default_settings``), as the struct's bytes."""
    import daqp

    lib = ctypes.CDLL(daqp.__file__)
    c = _Settings()
    lib.daqp_default_settings(ctypes.byref(c))
    return bytes(c)


def _settings(settings: BackendSettings) -> _Settings:
    """DAQP's defaults changed as DaqpBackend changes them (:meth:`DaqpBackend.daqp_settings`)."""
    c = _Settings.from_buffer_copy(_default_settings())
    for name, value in DaqpBackend.daqp_settings(settings).items():
        setattr(c, name, value)
    return c


def unavailable_reason() -> str | None:
    """None when the direct path can be used here, else why not (one line).

    ``SOFT_INVERSE_ROS_DAQP_DIRECT=off`` (read when a solver is built) selects daqp's
    Python interface, e.g. to compare the two paths.
    """
    if os.environ.get("SOFT_INVERSE_ROS_DAQP_DIRECT", "auto") == "off":
        return "SOFT_INVERSE_ROS_DAQP_DIRECT=off"
    return _checked()


@functools.lru_cache(maxsize=1)
def _checked() -> str | None:
    """The checks that do not change within a process (run once: they compile or load the kernel)."""
    if tick_kernels.direct_tick is None:
        return tick_kernels.DIRECT_ERROR
    try:
        version = importlib.metadata.version("daqp")
    except importlib.metadata.PackageNotFoundError:
        return "daqp is not installed"
    if version not in VERIFIED_VERSIONS:
        return f"daqp {version}: its C structs are verified for {', '.join(VERIFIED_VERSIONS)} only"
    try:
        import daqp

        defaults = _settings(BackendSettings())
        expected = daqp.Model().settings
        for name, _ in _Settings._fields_:
            if name in DaqpBackend.daqp_settings(BackendSettings()):
                continue  # set from BackendSettings
            if name in expected and getattr(defaults, name) != expected[name]:
                return f"daqp {version}: settings field {name} reads {getattr(defaults, name)!r}, " \
                       f"daqp says {expected[name]!r} (layout differs)"
        return _self_test(daqp)
    except Exception as exc:  # noqa: BLE001 - any failure means: use the Python interface
        return f"{type(exc).__name__}: {exc}"


def _self_test(daqp) -> str | None:
    """Solve a small bounded QP through the kernel and through ``daqp.solve``; None if they agree."""
    rng = np.random.default_rng(3)
    n, n_e = 3, 2
    w_ea = rng.standard_normal((n_e, n))
    h = w_ea.T @ w_ea + 0.1 * np.eye(n)
    a = np.eye(n) + 0.1 * rng.standard_normal((n, n))
    lower, upper = np.full(2 * n, -0.3), np.full(2 * n, 0.4)
    g_map = w_ea.T.copy()
    e_free, target = np.array([0.5, -0.7]), np.zeros(n_e)
    k_mat = np.vstack((np.eye(n), a))
    ones, zeros = np.ones(n), np.zeros(n)
    consts = pack(e_free, g_map, k_mat, lower, upper, np.zeros(2 * n), ones, -ones * 1e3, ones * 1e3,
                  -ones * 1e3, ones * 1e3, zeros, a, w_ea, 0.0, 1e-9)
    tick = DirectTick(consts, h, a, n_e, False, BackendSettings())
    out, code, flag, _, _, _ = tick.run(target)
    expected, _, expected_flag, _ = daqp.solve(h, g_map @ e_free, a, upper.copy(), lower.copy(),
                                               np.zeros(2 * n, dtype=np.intc))
    mu = out[2 * n + n_e:3 * n + n_e]
    if code != 0 or flag != expected_flag or not np.allclose(mu, expected, rtol=1e-9, atol=1e-12):
        return f"self-test: direct call gave {mu} (flag {flag}), daqp.solve {expected} (flag {expected_flag})"
    return None
