"""Figures of a co-simulated run: tracking error, distance to the path, actuator smoothness.

Inputs are a :class:`~soft_inverse_ros.experiments.cosim.CosimResult` and a time window;
outputs are plain JSON-able dicts with the unit in each key (``_mm``, ``_s``), ``None``
where a value cannot be computed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from soft_inverse_ros.analysis.metrics import error_stats, total_variation
from soft_inverse_ros.experiments.cosim import CosimResult


def _mm(x: float) -> float | None:
    return float(x) * 1e3 if math.isfinite(x) else None


def polyline_distance(points: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """Distance [m] from each of ``points`` (n, 3) to the polyline through ``vertices``
    (k, 3) (segments between consecutive vertices; close it by repeating the first)."""
    p = np.asarray(points, float)[:, None, :]
    a = np.asarray(vertices, float)[:-1][None, :, :]
    b = np.asarray(vertices, float)[1:][None, :, :]
    ab = b - a
    length2 = np.einsum("ijk,ijk->ij", ab, ab)
    s = np.einsum("ijk,ijk->ij", p - a, ab) / np.where(length2 > 0, length2, 1.0)
    s = np.clip(s, 0.0, 1.0)
    closest = a + s[..., None] * ab
    return np.linalg.norm(p - closest, axis=2).min(axis=1)


def square_vertices(center: np.ndarray, size: float) -> np.ndarray:
    """Closed horizontal square (5, 3) around ``center`` [m] with side ``size`` [m]."""
    c = np.asarray(center, float)
    half = 0.5 * size
    return np.array([c + half * np.array([sx, sy, 0.0])
                     for sx, sy in ((1, 1), (-1, 1), (-1, -1), (1, -1), (1, 1))])


def smoothness(signal: np.ndarray, t: np.ndarray) -> dict[str, Any]:
    """Smoothness of an actuator signal (n, n_a) [m] sampled at times ``t`` (n,) [s].

    - ``total_variation_mm``: Σ over actuators of Σ_k |u_{k+1} − u_k| (the travel);
    - ``total_variation_mm_per_s``: the same per second of signal;
    - ``max_step_mm``: largest change of one actuator between two samples (a jump);
    - ``max_speed_mm_s``: the largest change over its sample interval;
    - ``second_difference_mm``: Σ over actuators of Σ_k |u_{k+1} − 2u_k + u_{k−1}|, the
      total variation of the per-sample increments: ≈ 0 for a ramp, twice the step for
      each stair of a staircase.
    """
    u = np.asarray(signal, float)
    if u.ndim != 2 or len(u) < 3:
        return {"total_variation_mm": None, "total_variation_mm_per_s": None,
                "max_step_mm": None, "max_speed_mm_s": None, "second_difference_mm": None}
    duration = float(t[-1] - t[0])
    tv = float(total_variation(u).sum())
    d = np.diff(u, axis=0)
    dt = np.diff(np.asarray(t, float))
    return {
        "total_variation_mm": tv * 1e3,
        "total_variation_mm_per_s": tv * 1e3 / duration if duration > 0 else None,
        "max_step_mm": float(np.nanmax(np.abs(d))) * 1e3,
        "max_speed_mm_s": float(np.nanmax(np.abs(d) / dt[:, None])) * 1e3 if np.all(dt > 0) else None,
        "second_difference_mm": float(total_variation(d).sum()) * 1e3,
    }


def lag_fit(result: CosimResult, mask: np.ndarray, max_delay: float = 0.2) -> tuple[float, float]:
    """The delay τ [s] (whole record periods, 0 … ``max_delay``) minimizing the mean of
    ‖effector(t) − target(t − τ)‖ over the samples of ``mask``, and that mean [m]: how
    much of the tracking error is lag along the path rather than shape."""
    idx = np.flatnonzero(mask)
    step = float(np.median(np.diff(result.t))) if len(result.t) > 1 else 0.0
    if not len(idx) or step <= 0:
        return math.nan, math.nan
    shifts = np.arange(0, min(int(round(max_delay / step)), int(idx[0])) + 1)
    lagged = result.target[idx[None, :] - shifts[:, None]]  # (n_shifts, n, 3)
    errors = np.linalg.norm(result.effector[idx][None] - lagged, axis=2).mean(axis=1)
    best = int(np.argmin(errors))
    return float(shifts[best] * step), float(errors[best])


def run_metrics(result: CosimResult, start: float, end: float | None = None, *,
                path: np.ndarray | None = None) -> dict[str, Any]:
    """Tracking and smoothness figures of ``result`` over ``start ≤ t < end`` [s].

    Errors use the samples where the effector is the robot's state at ``t``
    (``effector_fresh``: the plant steps at 100 Hz while the target moves every 1 ms; the
    held samples would add a saw-tooth of up to speed × plant period).

    ``path``: optional closed polyline (k, 3) [m] of the target path, for the distance of
    the effector to the path (shape error without the lag along the path).
    """
    w = result.window(start, end)
    if not w.any():
        raise ValueError(f"no samples in the window [{start}, {end}) s of a {result.config.duration} s run")
    f = w & result.effector_fresh  # effector samples that are the robot's state at t
    err = error_stats(result.error[f])
    out: dict[str, Any] = {
        "window_s": [float(result.t[w][0]), float(result.t[w][-1])],
        "mean_error_mm": err["mean_mm"],
        "max_error_mm": err["max_mm"],
        "rms_error_mm": err["rms_mm"],
        "p95_error_mm": err["p95_mm"],
        "bias_mm": ((result.effector[f] - result.target[f]).mean(axis=0) * 1e3).tolist(),
        "error_samples": int(f.sum()),
    }
    delay, lagged = lag_fit(result, f)
    out["delay_fit_ms"] = delay * 1e3 if math.isfinite(delay) else None
    out["mean_error_at_delay_mm"] = _mm(lagged)
    if path is not None:
        d = polyline_distance(result.effector[f], path)
        out["mean_path_error_mm"] = float(d.mean()) * 1e3
        out["max_path_error_mm"] = float(d.max()) * 1e3
    measured = result.measured[f]
    ok = np.all(np.isfinite(measured), axis=1)
    if ok.any():  # latest measurement vs the present truth: noise, latency and motion
        noise = np.linalg.norm(measured[ok] - result.effector[f][ok], axis=1)
        out["mean_measured_minus_true_mm"] = float(noise.mean()) * 1e3
    t = result.t[w]
    cables = np.array([k.name == "CABLE" for k in result.actuator_kinds])
    out["command_smoothness"] = smoothness(result.command_strokes[w][:, cables], t)
    # the servo output at the plant's steps (the plant samples it there)
    out["delivered_smoothness"] = smoothness(result.delivered[f][:, cables], result.t[f])
    stop = end if end is not None else math.inf
    in_window = (result.snapshot_stamps >= start) & (result.snapshot_stamps < stop)
    out["snapshots"] = int(in_window.sum())
    periods = np.diff(result.snapshot_stamps[in_window])
    out["snapshot_rate_hz"] = float(1.0 / periods.mean()) if len(periods) else None
    solved = (result.qp_solve_t >= start) & (result.qp_solve_t < stop)
    out["qp_solves"] = int(solved.sum())
    statuses = np.asarray(result.qp_solve_status, dtype=object)[solved] if solved.any() else []
    out["qp_status_counts"] = {name: int(np.sum(statuses == name)) for name in dict.fromkeys(statuses)}
    return out
