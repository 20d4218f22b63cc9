"""Metrics of a control run: tracking error, loop rates, latency, actuator smoothness.

Pure functions on numpy arrays plus :func:`compute_metrics` over a
:class:`~soft_inverse_ros.analysis.run_data.RunData`. Inputs in SI (s, m); the reported
figures use the units in their key names (``_mm``, ``_ms``, ``_hz``). Results are plain
JSON-able dicts; a value that cannot be computed is ``None``, never NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from soft_inverse_ros.core.control.deadlines import missed_slots, missed_slots_seq
from soft_inverse_ros.analysis.run_data import CommandSeries, PointSeries, RunData, load_run

STATUS_NAMES = {0: "ok", 1: "held", 2: "safe"}
Interp = Literal["linear", "hold"]


@dataclass(frozen=True)
class ErrorSeries:
    """Effector minus target at the effector sample times (within the target's time span)."""

    t: np.ndarray  # (n,) [s]
    diff: np.ndarray  # (n, 3) effector - target [m]
    target: np.ndarray  # (n, 3) target at t [m]
    moving: np.ndarray  # (n,) bool, target moving faster than the threshold at t

    @property
    def norm(self) -> np.ndarray:
        return np.linalg.norm(self.diff, axis=1)


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def target_at(
    t: np.ndarray, t_target: np.ndarray, xyz_target: np.ndarray, method: Interp = "linear"
) -> tuple[np.ndarray, np.ndarray]:
    """Target position at times ``t``: (positions (n, 3), valid mask (n,)).

    ``linear`` interpolates between target samples and is valid inside their span;
    ``hold`` keeps the last published target (what the controller acts on) and is valid
    from the first one on.
    """
    t = np.asarray(t, dtype=float)
    out = np.full((len(t), 3), np.nan)
    if not len(t_target):
        return out, np.zeros(len(t), dtype=bool)
    if method == "linear":
        valid = (t >= t_target[0]) & (t <= t_target[-1])
        for k in range(3):
            out[:, k] = np.interp(t, t_target, xyz_target[:, k])
    elif method == "hold":
        idx = np.searchsorted(t_target, t, side="right") - 1
        valid = idx >= 0
        out[valid] = xyz_target[idx[valid]]
    else:
        raise ValueError(f"target interpolation must be 'linear' or 'hold', got {method!r}")
    out[~valid] = np.nan
    return out, valid


def target_speed_at(t: np.ndarray, t_target: np.ndarray, xyz_target: np.ndarray) -> np.ndarray:
    """Speed [m/s] of the target on the sample interval containing each time of ``t``."""
    if len(t_target) < 2:
        return np.zeros(len(t))
    dt = np.diff(t_target)
    step = np.linalg.norm(np.diff(xyz_target, axis=0), axis=1)
    speed = np.divide(step, dt, out=np.full_like(step, np.inf), where=dt > 0)
    speed[(dt <= 0) & (step == 0)] = 0.0
    idx = np.clip(np.searchsorted(t_target, t, side="right") - 1, 0, len(speed) - 1)
    return speed[idx]


def tracking_error(
    effector: PointSeries,
    target: PointSeries,
    method: Interp = "linear",
    moving_threshold: float = 1e-3,
) -> ErrorSeries:
    """Time-align ``effector`` with ``target`` (see :func:`target_at`) and subtract.

    Samples are "moving" when the target speed exceeds ``moving_threshold`` [m/s].
    """
    pos, valid = target_at(effector.t, target.t, target.xyz, method)
    speed = target_speed_at(effector.t, target.t, target.xyz)
    return ErrorSeries(
        effector.t[valid], effector.xyz[valid] - pos[valid], pos[valid],
        speed[valid] > moving_threshold,
    )


def error_stats(error_m: np.ndarray) -> dict[str, Any]:
    """Mean / RMS / max / p95 / final of an error norm series [m], reported in mm, over its
    finite samples (``nonfinite``: how many were not; they are never averaged in as NaN)."""
    e = np.asarray(error_m, dtype=float) * 1e3
    finite = np.isfinite(e)
    nonfinite = int(np.sum(~finite))
    e = e[finite]
    if not len(e):
        return {"n": 0, "mean_mm": None, "rms_mm": None, "max_mm": None, "p95_mm": None,
                "final_mm": None, "nonfinite": nonfinite}
    return {
        "nonfinite": nonfinite,
        "n": int(len(e)),
        "mean_mm": float(e.mean()),
        "rms_mm": float(np.sqrt(np.mean(e**2))),
        "max_mm": float(e.max()),
        "p95_mm": float(np.percentile(e, 95)),
        "final_mm": float(e[-1]),
    }


def tracking_metrics(error: ErrorSeries) -> dict[str, Any]:
    """Overall error statistics, per-axis mean error (bias), and per target phase."""
    stats = error_stats(error.norm)
    finite = np.all(np.isfinite(error.diff), axis=1)
    stats["bias_mm"] = (error.diff[finite].mean(axis=0) * 1e3).tolist() if finite.any() else None
    stats["phases"] = {
        "moving": error_stats(error.norm[error.moving]),
        "holding": error_stats(error.norm[~error.moving]),
    }
    return stats


#: a sequence number lower than the one before by more than this is a restarted publisher
#: (a restarted node, two runs in one bag), not messages reordered on their way
RESTART_SEQ_DROP = 100


def sequence_restarts(seq: np.ndarray) -> int:
    """How many times the sequence numbers ``seq`` (in time order) start again
    (:data:`RESTART_SEQ_DROP`): the runs of :func:`sequence_span` but the first."""
    return max(0, sequence_span(seq)[1] - 1)


def sequence_span(seq: np.ndarray) -> tuple[int, int]:
    """(sequence steps sent, runs of sequence numbers) over ``seq`` in time order: each run
    between restarts (:func:`sequence_restarts`) counts ``max - min`` steps, so a restarted
    publisher does not make the count negative or double it."""
    seq = np.asarray(seq, dtype=np.int64)
    if not len(seq):
        return 0, 0
    cuts = np.flatnonzero(np.diff(seq) < -RESTART_SEQ_DROP) + 1
    parts = np.split(seq, cuts)
    return int(sum(int(p.max() - p.min()) for p in parts)), len(parts)


def rate_stats(t: np.ndarray, nominal_hz: float | None = None, tolerance: float = 0.5,
               seq: np.ndarray | None = None) -> dict[str, Any]:
    """Achieved rate, period jitter and missed deadlines of event times ``t`` [s].

    The nominal rate is ``nominal_hz`` or, when None, 1 / median period. Missed deadlines
    are nominal slots without an event (:mod:`soft_inverse_ros.core.control.deadlines`);
    with the events' sequence numbers ``seq``, events lost by the recorder are not counted
    as missed, the rate is that of the events sent (sequence numbers over time) and the
    periods (mean, max, jitter) are those between consecutive sequence numbers only (a gap
    the recorder lost is not a period of the sender); ``received_fraction`` is the share
    of the sent events the recording holds (a restarted publisher's sequence counts per
    run, :func:`sequence_span`). ``jitter_std_ms`` is the standard deviation of the periods,
    ``jitter_p99_ms`` the 99th percentile of |period - nominal period|. ``tolerance`` is
    kept for callers; slot counting needs none.
    """
    t0 = np.asarray(t, dtype=float)
    t = np.sort(t0)
    n = len(t)
    out: dict[str, Any] = {"n": int(n), "duration_s": float(t[-1] - t[0]) if n else 0.0}
    keys = ("rate_hz", "nominal_hz", "period_mean_ms", "period_median_ms", "period_max_ms",
            "jitter_std_ms", "jitter_p99_ms", "missed_slot_fraction", "missed_slots")
    if n < 2 or t[-1] <= t[0]:
        out.update({k: None for k in keys})
        out["nominal_source"] = None
        return out
    if nominal_hz is not None and not nominal_hz > 0:
        raise ValueError(f"nominal rate must be > 0 Hz, got {nominal_hz}")
    if not tolerance >= 0:
        raise ValueError(f"missed-deadline tolerance must be >= 0, got {tolerance}")
    dt = np.diff(t)
    sent = n - 1
    if seq is not None:
        seq_sorted = np.asarray(seq, dtype=np.int64)[np.argsort(t0, kind="stable")]
        step = np.diff(seq_sorted)
        sent, runs = sequence_span(seq_sorted)
        out["received_fraction"] = float(n / (sent + runs)) if sent > 0 else None
        if np.any(step == 1):
            dt = dt[step == 1]
    median = float(np.median(dt))
    nominal_period = 1.0 / nominal_hz if nominal_hz else median
    deviation = np.abs(dt - nominal_period)
    out.update({
        "rate_hz": float(sent / (t[-1] - t[0])) if sent > 0 else float((n - 1) / (t[-1] - t[0])),
        "nominal_hz": _finite(1.0 / nominal_period) if nominal_period > 0 else None,
        "nominal_source": "given" if nominal_hz else "median period",
        "period_mean_ms": float(dt.mean() * 1e3),
        "period_median_ms": median * 1e3,
        "period_max_ms": float(dt.max() * 1e3),
        "jitter_std_ms": float(dt.std() * 1e3),
        "jitter_p99_ms": float(np.percentile(deviation, 99) * 1e3),
    })
    if not nominal_period > 0:  # most events share a stamp: no period to judge slots by
        out["missed_slots"] = out["missed_slot_fraction"] = None
        return out
    if seq is not None:
        missed, total = missed_slots_seq(t, np.asarray(seq)[np.argsort(t0)], nominal_period)
    else:
        missed, total = missed_slots(t, nominal_period)
    out["missed_slots"] = int(missed)
    out["missed_slot_fraction"] = missed / total if total > 1 else None
    return out


def total_variation(x: np.ndarray) -> np.ndarray:
    """Sum of |x[k+1] - x[k]| along time for each column of (n, m) ``x`` (NaN rows skipped)."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    out = np.zeros(x.shape[1])
    for j in range(x.shape[1]):  # loop over actuators (a handful), vectorized over time
        col = x[:, j][np.isfinite(x[:, j])]
        out[j] = np.abs(np.diff(col)).sum() if len(col) > 1 else 0.0
    return out


def smoothness_metrics(commands: CommandSeries) -> dict[str, Any]:
    """Total variation of efforts and strokes per actuator (absolute and per second)."""
    duration = float(commands.t[-1] - commands.t[0]) if len(commands) > 1 else 0.0
    out: dict[str, Any] = {"duration_s": duration}
    for key in ("efforts", "strokes"):
        tv = total_variation(getattr(commands, key))
        out[f"{key}_total_variation"] = dict(zip(commands.names, tv.tolist()))
        out[f"{key}_total_variation_per_s"] = (
            dict(zip(commands.names, (tv / duration).tolist())) if duration > 0 else None
        )
    return out


def latency_stats(commands: CommandSeries) -> dict[str, Any]:
    """Target → tick latency [ms]: for each new target, ``header.stamp − target_stamp`` of
    the first recorded command that answers it (later commands reusing the same target
    measure how long the target stayed unchanged, not latency). The command's stamp is the
    start of the tick that computed it: this is not end to end (the solve, the publish and
    the delivery come after; ``bench pipeline`` measures end to end at a subscriber), and a
    command the recorder lost moves the figure to the next one that answers the target."""
    valid = np.isfinite(commands.target_t)
    t, target_t = commands.t[valid], commands.target_t[valid]
    first = np.concatenate([[True], target_t[1:] != target_t[:-1]]) if len(t) else valid[:0]
    lat = (t - target_t)[first] * 1e3
    if not len(lat):
        return {"n": 0, "mean_ms": None, "p50_ms": None, "p99_ms": None, "max_ms": None,
                "min_ms": None}
    return {
        "n": int(len(lat)),
        "mean_ms": float(lat.mean()),
        "p50_ms": float(np.median(lat)),
        "p99_ms": float(np.percentile(lat, 99)),
        "max_ms": float(lat.max()),
        "min_ms": float(lat.min()),
    }


def _summary_ms(x: np.ndarray) -> dict[str, Any]:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)] * 1e3
    if not len(x):
        return {"mean_ms": None, "p50_ms": None, "p99_ms": None, "max_ms": None}
    return {"mean_ms": float(x.mean()), "p50_ms": float(np.median(x)),
            "p99_ms": float(np.percentile(x, 99)), "max_ms": float(x.max())}


def compute_metrics(
    run: RunData,
    *,
    nominal_command_hz: float | None = None,
    nominal_snapshot_hz: float | None = None,
    tolerance: float = 0.5,
    target_interp: Interp = "linear",
    moving_threshold: float = 1e-3,
) -> dict[str, Any]:
    """All metrics of ``run`` as a JSON-able dict (absent topics give ``None`` sections)."""
    out: dict[str, Any] = {
        "bag": str(run.bag),
        "topics": dict(sorted(run.topic_counts.items())),
        "notes": list(run.notes),
        "tracking": {},
        "rates": {},
    }
    if run.target is None:
        out["notes"].append("no target topic: tracking error not computed")
    for label, effector in run.effectors.items():
        if run.target is None:
            out["tracking"][label] = None
            continue
        error = tracking_error(effector, run.target, target_interp, moving_threshold)
        stats = tracking_metrics(error)
        stats.update({"topic": effector.topic, "target_interp": target_interp})
        out["tracking"][label] = stats
    if run.target is not None and not run.effectors:
        out["notes"].append("no effector topic (plant or mocap): tracking error not computed")
    out["rates"]["actuator_command"] = (
        rate_stats(run.commands.t, nominal_command_hz, tolerance, seq=run.commands.seq)
        if run.commands else None
    )
    out["rates"]["compliance"] = (
        rate_stats(run.snapshots.t, nominal_snapshot_hz, tolerance, seq=run.snapshots.seq)
        if run.snapshots else None
    )
    if run.commands is not None:
        out["latency_target_to_command"] = latency_stats(run.commands)
        out["smoothness"] = smoothness_metrics(run.commands)
        counts = {name: int(np.sum(run.commands.status == k)) for k, name in STATUS_NAMES.items()}
        out["command_status"] = {**counts, "n": int(len(run.commands))}
    else:
        out["latency_target_to_command"] = out["smoothness"] = out["command_status"] = None
    if run.snapshots is not None:
        out["fem"] = {"fem_step_time": _summary_ms(run.snapshots.fem_step_time),
                      "compliance_time": _summary_ms(run.snapshots.compliance_time)}
    else:
        out["fem"] = None
    if run.solver is not None:
        out["solver"] = {
            "solve_time": _summary_ms(run.solver.solve_time),
            "snapshot_age": _summary_ms(run.solver.snapshot_age),
            "not_ok_fraction": float(np.mean(run.solver.command_status != 0)),
        }
    else:
        out["solver"] = None
    return out


def analyze_bag(bag: str | Path, namespace: str | None = None, **options: Any) -> dict[str, Any]:
    """:func:`load_run` then :func:`compute_metrics` (``options`` are the latter's)."""
    return compute_metrics(load_run(bag, namespace), **options)
