"""The arithmetic of one inverse-QP tick around the backend call, written once.

:class:`~soft_inverse_ros.core.control.inverse_qp.InverseSolver` spends most of a 1 kHz
tick not in the QP solver but in ~30 small numpy operations before and after it (each
~0.5 µs on 4-element arrays). The two functions here hold that arithmetic in a form
that numba compiles (one call instead of ~15 each) and that plain numpy runs unchanged:
with numba installed (``requirements/core.txt``) :data:`prepare` and :data:`finish` are
the compiled versions, otherwise the same Python functions. ``SOFT_INVERSE_ROS_QP_KERNELS=numpy``
forces the interpreted path (the tests compare both).

:data:`contact_bounds` and :data:`contact_finish` are the same for a tick with contacts
(``InverseSolver._solve_contact``): the tick's bounds before the contact QP, and after it
the predicted strokes, the post-solve check, the clipped command and its active bounds.

:data:`direct_tick` is the whole contact-free tick in one compiled call: the arithmetic of
:func:`prepare_py`, DAQP's C ``daqp_quadprog`` and that of :func:`finish_py` (see
:mod:`daqp_direct`, which owns its arguments), written as loops that allocate nothing but
the result. It lives here, next to the two functions whose arithmetic it repeats, so that
an edit to one is seen beside the other; ``test_tick_kernels.py`` holds the three to the
same results on every outcome.

Notation as in :mod:`inverse_qp`: scaled efforts μ = λ / d, constraint matrix
K = [I; A_s] (rows: n efforts, then n scaled strokes).
"""

from __future__ import annotations

import os

import numpy as np


def prepare_py(
    e_free: np.ndarray,
    target: np.ndarray,
    g_map: np.ndarray,
    k_mat: np.ndarray,
    ref_mu: np.ndarray,
    static_lower: np.ndarray,
    static_upper: np.ndarray,
    step: np.ndarray,
    has_steps: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Linear term and bounds of this tick's QP.

    Args:
        e_free: (n_e,) free effector position δ_e_free + target offset, i.e. x_e0 − W_ea λ0 [m].
        target: (n_e,) effector target [m].
        g_map: (n, n_e) map from δ_e = e_free − target to the scaled linear term.
        k_mat: (2n, n) K = [I; A_s].
        ref_mu: (n,) scaled reference command of the per-tick limits (unused without steps).
        static_lower, static_upper: (2n,) scaled effort and stroke bounds.
        step: (2n,) scaled per-tick limits (unused without steps).
        has_steps: whether per-tick limits apply.

    Returns:
        (delta_e [m], g, lower, upper, code): code 0 = ready, 1 = target not finite,
        2 = stroke bounds and per-tick stroke limit do not intersect.
    """
    delta_e = e_free - target
    if not np.isfinite(delta_e).all():
        return delta_e, delta_e, static_lower, static_upper, 1
    g = g_map @ delta_e
    if has_steps:
        b = k_mat @ ref_mu
        lower = np.maximum(static_lower, b - step)
        upper = np.minimum(static_upper, b + step)
        if (lower > upper).any():
            return delta_e, g, lower, upper, 2
    else:
        lower = static_lower.copy()
        upper = static_upper.copy()
    return delta_e, g, lower, upper, 0


def finish_py(
    mu: np.ndarray,
    k_mat: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    tol: float,
    d: np.ndarray,
    effort_min: np.ndarray,
    effort_max: np.ndarray,
    w_aa: np.ndarray,
    da_free: np.ndarray,
    stroke_min: np.ndarray,
    stroke_max: np.ndarray,
    w_ea: np.ndarray,
    delta_e: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Command from the backend's scaled solution ``mu`` (n,).

    Efforts within ``tol`` (scaled) of a bound are snapped onto it (0 N, not 1e-10 N),
    then clipped exactly to the effort limits; strokes W_aa λ + δ_a_free are clipped to
    the stroke limits.

    Returns:
        (efforts [N|Pa], strokes [m|m³], effector residual [m], its norm [m],
        margin = smallest slack of K μ to its bounds (scaled; < 0 = violated, NaN = NaN
        solution)). Which bounds are active is :func:`slacks` of the same ``mu``.
    """
    n = mu.shape[0]
    above, below = slacks(mu, k_mat, lower, upper)  # the module's (compiled when finish is)
    margin = np.minimum(above, below).min()
    if not np.isfinite(mu).all():  # the caller rejects the solution
        margin = np.nan
    snapped = np.where(below[:n] <= tol, upper[:n], np.where(above[:n] <= tol, lower[:n], mu))
    efforts = np.minimum(np.maximum(snapped * d, effort_min), effort_max)
    strokes = np.minimum(np.maximum(w_aa @ efforts + da_free, stroke_min), stroke_max)
    residual = w_ea @ efforts + delta_e
    scale = np.abs(residual).max() if residual.shape[0] else 0.0
    if scale > 0.0 and scale < np.inf:  # scaled 2-norm: no overflow for absurd targets
        error = scale * np.sqrt(((residual / scale) ** 2).sum())
    else:
        error = scale
    return efforts, strokes, residual, float(error), float(margin)


def slacks_py(mu: np.ndarray, k_mat: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(K μ − lower, upper − K μ): the (scaled) slack of every effort and stroke bound."""
    y = k_mat @ mu
    return y - lower, upper - y


def contact_strokes_py(efforts: np.ndarray, forces: np.ndarray, w_aa: np.ndarray, w_ca: np.ndarray,
                       a_free: np.ndarray) -> np.ndarray:
    """A contact tick's predicted strokes δ_a = W_aa λ + W_caᵀ λ_c + a_free [m|m³] for efforts
    (n,) and contact forces (m,)."""
    return w_aa @ efforts + w_ca.T @ forces + a_free


def contact_bounds_py(
    ref: np.ndarray,
    forces: np.ndarray,
    w_aa: np.ndarray,
    w_ca: np.ndarray,
    a_free: np.ndarray,
    effort_min: np.ndarray,
    effort_max: np.ndarray,
    stroke_min: np.ndarray,
    stroke_max: np.ndarray,
    max_effort_step: np.ndarray,
    max_stroke_step: np.ndarray,
    has_steps: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """A contact tick's bounds: the effort and stroke limits intersected with the per-tick
    limits around the last command ``ref`` (n,) [N|Pa], its strokes predicted with the
    last tick's contact forces ``forces`` (m,) (δ_a = W_aa λ + W_caᵀ λ_c + a_free).

    Returns:
        (e_lo, e_hi, s_lo, s_hi, empty): new arrays; ``empty`` when a bound pair does not
        intersect.
    """
    if has_steps:
        s_ref = contact_strokes(ref, forces, w_aa, w_ca, a_free)  # the module's (compiled when this is)
        e_lo = np.maximum(effort_min, ref - max_effort_step)
        e_hi = np.minimum(effort_max, ref + max_effort_step)
        s_lo = np.maximum(stroke_min, s_ref - max_stroke_step)
        s_hi = np.minimum(stroke_max, s_ref + max_stroke_step)
    else:
        e_lo, e_hi, s_lo, s_hi = effort_min.copy(), effort_max.copy(), stroke_min.copy(), stroke_max.copy()
    empty = bool((e_lo > e_hi).any() or (s_lo > s_hi).any())
    return e_lo, e_hi, s_lo, s_hi, empty


def contact_finish_py(
    efforts: np.ndarray,
    forces: np.ndarray,
    e_lo: np.ndarray,
    e_hi: np.ndarray,
    s_lo: np.ndarray,
    s_hi: np.ndarray,
    d: np.ndarray,
    r: np.ndarray,
    w_aa: np.ndarray,
    w_ca: np.ndarray,
    a_free: np.ndarray,
    effort_min: np.ndarray,
    effort_max: np.ndarray,
    stroke_min: np.ndarray,
    stroke_max: np.ndarray,
    tol: float,
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """A contact tick's command from the contact QP's efforts (n,) and forces (m,).

    The strokes are predicted (δ_a = W_aa λ + W_caᵀ λ_c + a_free); ``margin`` is the
    smallest slack to the tick's bounds in the scaled units of the contact-free path
    (efforts / d, strokes × r; < 0 violated, NaN for a NaN solution); efforts and strokes
    are then clipped to the limits, and ``active`` (6, n) says which of the tick's bounds
    hold within ``tol`` (scaled): effort lower, effort upper, stroke lower, stroke upper,
    and whether an active effort / stroke bound is a per-tick one (tighter than the limit).

    Returns:
        (efforts [N|Pa], strokes [m|m³], margin, active).
    """
    strokes = contact_strokes(efforts, forces, w_aa, w_ca, a_free)
    margin = min(((efforts - e_lo) / d).min(), ((e_hi - efforts) / d).min(),
                 ((strokes - s_lo) * r).min(), ((s_hi - strokes) * r).min())
    if not (np.isfinite(efforts).all() and np.isfinite(strokes).all()):
        margin = np.nan
    efforts = np.minimum(np.maximum(efforts, effort_min), effort_max)
    strokes = np.minimum(np.maximum(strokes, stroke_min), stroke_max)
    n = efforts.shape[0]
    active = np.zeros((6, n), dtype=np.bool_)
    effort_tol, stroke_tol = tol * d, tol / r
    active[0] = efforts - e_lo <= effort_tol
    active[1] = e_hi - efforts <= effort_tol
    active[2] = strokes - s_lo <= stroke_tol
    active[3] = s_hi - strokes <= stroke_tol
    active[4] = (active[0] & (e_lo > effort_min)) | (active[1] & (e_hi < effort_max))
    active[5] = (active[2] & (s_lo > stroke_min)) | (active[3] & (s_hi < stroke_max))
    return efforts, strokes, float(margin), active


def _kernels() -> tuple:
    """(prepare, finish, slacks, contact_strokes, contact_bounds, contact_finish, path): numba-compiled unless
    numba is absent or ``SOFT_INVERSE_ROS_QP_KERNELS=numpy``."""
    py = (prepare_py, finish_py, slacks_py, contact_strokes_py, contact_bounds_py, contact_finish_py)
    if os.environ.get("SOFT_INVERSE_ROS_QP_KERNELS", "auto") == "numpy":
        return (*py, "numpy")
    try:
        from numba import njit
    except ImportError:
        return (*py, "numpy")
    return (*(njit(cache=True)(f) for f in py), "numba")


#: The functions the solver calls, and which path they are ("numba" or "numpy").
prepare, finish, slacks, contact_strokes, contact_bounds, contact_finish, KERNELS = _kernels()


def dry_run(e_free, g_map, k_mat, ref_mu, static_lower, static_upper, step, has_steps, tol, d,
            effort_min, effort_max, w_aa, da_free, stroke_min, stroke_max, w_ea) -> None:
    """One tick on a snapshot's own arrays with the target at the free position.

    Numba compiles one version per argument type (read-only and writable arrays differ):
    running this from the low-rate thread when a snapshot is accepted makes the
    compilation (~1 s the first time, a disk-cache load after) happen there, never in
    a control tick.
    """
    target = np.array(e_free, dtype=float)  # a tick's target is a fresh writable copy too
    delta_e, g, lower, upper, _ = prepare(
        e_free, target, g_map, k_mat, ref_mu, static_lower, static_upper, step, has_steps
    )
    finish(np.zeros(k_mat.shape[1]), k_mat, lower, upper, tol, d, effort_min, effort_max, w_aa, da_free,
           stroke_min, stroke_max, w_ea, delta_e)


def _declare_daqp_quadprog():
    """numba's declarations of DAQP's C ``daqp_quadprog`` and ``daqp_dual_init_active``,
    after loading the daqp extension module (which exports DAQP's C API) for the JIT
    linker; raises when that fails. The functions are resolved by name, so numba's
    on-disk cache keeps working."""
    import daqp
    from llvmlite import binding
    from numba import types

    binding.load_library_permanently(daqp.__file__)
    # void daqp_quadprog(DAQPResult*, DAQPProblem*, DAQPSettings*) and
    # void daqp_dual_init_active(DAQPProblem*, c_float* lam): pointers passed as 64-bit
    # integers (the same registers in the x86-64 and AArch64 calling conventions)
    return (types.ExternalFunction("daqp_quadprog", types.void(types.int64, types.int64, types.int64)),
            types.ExternalFunction("daqp_dual_init_active", types.void(types.int64, types.int64)))


#: Why :data:`direct_tick` is None ("" when it is not).
DIRECT_ERROR = ""
if KERNELS == "numba":
    try:
        _quadprog, _dual_init_active = _declare_daqp_quadprog()
    except Exception as _exc:  # noqa: BLE001 - reported by daqp_direct.unavailable_reason()
        DIRECT_ERROR = f"daqp's C library cannot be linked: {type(_exc).__name__}: {_exc}"
        _quadprog = None
else:
    DIRECT_ERROR = "the tick kernels are not compiled (no numba, or SOFT_INVERSE_ROS_QP_KERNELS=numpy)"
    _quadprog = None

# The layout of daqp_direct.DirectTick.ints (int64 words): the meta block, then DAQP's
# sense vector (m C ints = n words), then the DAQPResult struct (8 words).
_N, _NE, _HAS_STEPS, _RESULT, _PROBLEM, _SETTINGS, _EXITFLAG_WORD, _ITER_WORD, QP_CALLS_WORD, _LAM = range(10)
META_WORDS = 10

if _quadprog is not None:
    from numba import njit

    @njit(cache=True)
    def direct_tick(consts, ints, target, io):
        """The whole contact-free tick with DAQP's C solver (see daqp_direct.DirectTick.run,
        which documents the result). consts: the snapshot's packed arrays (daqp_direct.pack);
        ints: the meta block, DAQP's sense and result struct (layout above); io: the C
        buffers [f (n) | bupper (2n) | blower (2n) | x (n) | lam (2n)] and the scaled
        reference command of the per-tick limits (n).

        The arithmetic is :func:`prepare_py`'s and :func:`finish_py`'s, written as loops
        over the packed constants that allocate nothing but the result: their array
        expressions allocate ~30 temporaries a tick, which took ~4 µs of a ~9 µs call at
        4 × 3 (``bench qp``). Sums run in the same order as a matrix–vector product's
        definition, so results agree with the vectorized path to rounding
        (``test_tick_kernels.py`` compares them on every outcome code).
        """
        n, ne = ints[_N], ints[_NE]
        m = 2 * n
        # offsets of the packed constants (daqp_direct.pack's order)
        o_g = ne  # after e_free (ne): g_map (n, ne)
        o_k = o_g + n * ne  # K = [I; A_s] (m, n)
        o_lo = o_k + m * n  # static lower (m)
        o_hi = o_lo + m  # static upper (m)
        o_step = o_hi + m  # per-tick limits (m)
        o_d = o_step + m  # scaling d (n)
        o_emin = o_d + n
        o_emax = o_emin + n
        o_smin = o_emax + n
        o_smax = o_smin + n
        o_da = o_smax + n  # δ_a_free (n)
        o_waa = o_da + n  # W_aa (n, n)
        o_wea = o_waa + n * n  # W_ea (ne, n)
        o_tol = o_wea + ne * n
        active_tol, feasibility_tol = consts[o_tol], consts[o_tol + 1]
        has_steps = ints[_HAS_STEPS] != 0
        o_x, o_lam, o_ref = n + 2 * m, 2 * n + 2 * m, 2 * n + 3 * m  # in io

        # out = [efforts | strokes | residual | μ | lower | upper | δ_e]
        base = 3 * n + ne
        o_de = base + 2 * m
        out = np.empty(3 * n + 2 * m + 2 * ne)
        out[:] = np.nan
        finite = True
        for i in range(ne):  # δ_e = e_free − target
            v = consts[i] - target[i]
            out[o_de + i] = v
            finite = finite and np.isfinite(v)
        if not finite:
            return out, 1, 0, 0, np.nan, np.nan
        for j in range(n):  # the linear term g = G δ_e
            s = 0.0
            for i in range(ne):
                s += consts[o_g + j * ne + i] * out[o_de + i]
            io[j] = s
        empty = False
        for k in range(m):  # the bounds, intersected with the per-tick limits around K μ_ref
            lo, hi = consts[o_lo + k], consts[o_hi + k]
            if has_steps:
                b = 0.0
                for j in range(n):
                    b += consts[o_k + k * n + j] * io[o_ref + j]
                lo = max(lo, b - consts[o_step + k])
                hi = min(hi, b + consts[o_step + k])
                empty = empty or lo > hi
            io[n + k] = hi
            io[n + m + k] = lo
            out[base + k] = lo
            out[base + m + k] = hi
        if empty:
            return out, 2, 0, 0, np.nan, np.nan
        words = ints.view(np.int32)
        # warm start: the working set of the last tick's multipliers (zero after a failure,
        # and on a new snapshot's first tick: no constraint active)
        words[2 * META_WORDS:2 * META_WORDS + m] = 0
        _dual_init_active(ints[_PROBLEM], ints[_LAM])
        ints[QP_CALLS_WORD] += 1
        words[ints[_EXITFLAG_WORD]] = 0  # a failed set-up writes the exit flag only
        words[ints[_ITER_WORD]] = 0
        _quadprog(ints[_RESULT], ints[_PROBLEM], ints[_SETTINGS])
        flag = words[ints[_EXITFLAG_WORD]]
        iterations = words[ints[_ITER_WORD]]
        for i in range(n):
            out[2 * n + ne + i] = io[o_x + i]
        if flag != 1 and flag != 2:  # DAQP's "optimal" and "soft optimal" (as DaqpBackend._FLAGS)
            io[o_lam:o_lam + m] = 0.0  # no warm start from a failed solve
            return out, 3, flag, iterations, np.nan, np.nan
        # finish_py: slacks of K μ, efforts snapped onto a bound within tol, then clipped
        margin = np.inf
        mu_finite = True
        for k in range(m):
            y = 0.0
            for j in range(n):
                y += consts[o_k + k * n + j] * io[o_x + j]
            above = y - out[base + k]
            below = out[base + m + k] - y
            margin = min(margin, above, below)
            if k < n:
                mu = io[o_x + k]
                mu_finite = mu_finite and np.isfinite(mu)
                if below <= active_tol:
                    mu = out[base + m + k]
                elif above <= active_tol:
                    mu = out[base + k]
                out[k] = min(max(mu * consts[o_d + k], consts[o_emin + k]), consts[o_emax + k])
        if not mu_finite:  # the caller rejects the solution
            margin = np.nan
        for i in range(n):  # strokes W_aa λ + δ_a_free, clipped
            s = 0.0
            for j in range(n):
                s += consts[o_waa + i * n + j] * out[j]
            out[n + i] = min(max(s + consts[o_da + i], consts[o_smin + i]), consts[o_smax + i])
        scale = 0.0
        for r in range(ne):  # residual W_ea λ + δ_e and its (scaled) 2-norm
            s = 0.0
            for j in range(n):
                s += consts[o_wea + r * n + j] * out[j]
            s += out[o_de + r]
            out[2 * n + r] = s
            scale = max(scale, abs(s))
        error = scale
        if scale > 0.0 and scale < np.inf:  # no overflow for absurd targets
            acc = 0.0
            for r in range(ne):
                q = out[2 * n + r] / scale
                acc += q * q
            error = scale * np.sqrt(acc)
        if not margin >= -feasibility_tol:  # also catches NaN
            io[o_lam:o_lam + m] = 0.0
            for i in range(2 * n + ne):
                out[i] = np.nan
            return out, 4, flag, iterations, error, margin
        if has_steps:
            for i in range(n):
                io[o_ref + i] = out[i] / consts[o_d + i]
        return out, 0, flag, iterations, error, margin
else:
    direct_tick = None
