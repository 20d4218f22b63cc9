"""Report plots (matplotlib, Agg, no display): each function writes one PNG and returns its
path, or None when the run lacks the data. Times are shown relative to ``run.t0`` [s],
positions in mm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from soft_inverse_ros.analysis.metrics import ErrorSeries
from soft_inverse_ros.analysis.run_data import RunData

_EFFECTOR_STYLE = {"plant": dict(color="tab:blue"), "mocap": dict(color="tab:green")}
_MODE_UNITS = {0: ("N", "m"), 1: ("N", "m"), 2: ("Pa", "m³")}


def _figure(rows: int = 1, cols: int = 1, size: tuple[float, float] = (9.0, 5.0), **kw):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=100, layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, **kw)
    return fig, axes


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


def plot_trajectory_xy(run: RunData, path: str | Path) -> Path | None:
    """Effector paths and target path in the XY plane of the base frame [mm]."""
    if run.target is None and not run.effectors:
        return None
    fig, ax = _figure(size=(7.0, 6.5))
    ax = ax[0, 0]
    if run.target is not None:
        ax.plot(*(run.target.xyz[:, :2] * 1e3).T, "--", color="tab:red", lw=1.5, label="target")
    for label, s in run.effectors.items():
        ax.plot(*(s.xyz[:, :2] * 1e3).T, lw=1.0, label=f"{label} effector",
                **_EFFECTOR_STYLE.get(label, {}))
    ax.set_xlabel("x [mm]")
    ax.set_ylabel("y [mm]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title("trajectory vs target (XY, base_link)")
    return _save(fig, Path(path))


def plot_trajectory_time(run: RunData, path: str | Path) -> Path | None:
    """x, y, z of target and effectors over time [mm]."""
    if run.target is None and not run.effectors:
        return None
    fig, axes = _figure(3, 1, size=(9.0, 7.0), sharex=True)
    t0 = run.t0
    for k, name in enumerate("xyz"):
        ax = axes[k, 0]
        if run.target is not None:
            ax.step(run.target.t - t0, run.target.xyz[:, k] * 1e3, where="post", ls="--",
                    color="tab:red", lw=1.2, label="target")
        for label, s in run.effectors.items():
            ax.plot(s.t - t0, s.xyz[:, k] * 1e3, lw=1.0, label=f"{label} effector",
                    **_EFFECTOR_STYLE.get(label, {}))
        ax.set_ylabel(f"{name} [mm]")
        ax.grid(True, alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle("effector and target over time")
    return _save(fig, Path(path))


def plot_tracking_error(run: RunData, errors: dict[str, ErrorSeries], path: str | Path) -> Path | None:
    """Error norm [mm] over time per effector source; target-moving intervals shaded."""
    errors = {k: e for k, e in errors.items() if len(e.t)}
    if not errors:
        return None
    fig, ax = _figure(size=(9.0, 4.5))
    ax = ax[0, 0]
    t0 = run.t0
    for label, e in errors.items():
        ax.plot(e.t - t0, e.norm * 1e3, lw=1.0, label=f"{label} |effector - target|",
                **_EFFECTOR_STYLE.get(label, {}))
    ref = next(iter(errors.values()))
    moving = ref.moving.astype(int)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], moving, [0]])))
    for start, stop in zip(edges[::2], edges[1::2]):
        ax.axvspan(ref.t[start] - t0, ref.t[stop - 1] - t0, color="0.85", lw=0)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("tracking error [mm]")
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title("tracking error (grey: target moving)")
    return _save(fig, Path(path))


def plot_actuators(run: RunData, path: str | Path) -> Path | None:
    """Efforts and predicted strokes of every actuator over time."""
    c = run.commands
    if c is None or not len(c):
        return None
    fig, axes = _figure(2, 1, size=(9.0, 6.5), sharex=True)
    t = c.t - run.t0
    for j, name in enumerate(c.names):
        axes[0, 0].plot(t, c.efforts[:, j], lw=1.0, label=name)
        axes[1, 0].plot(t, c.strokes[:, j], lw=1.0, label=name)
    units = {_MODE_UNITS.get(int(m), ("", ""))for m in c.modes}
    effort_unit = " / ".join(sorted({u[0] for u in units}))
    stroke_unit = " / ".join(sorted({u[1] for u in units}))
    axes[0, 0].set_ylabel(f"effort λ [{effort_unit}]")
    axes[1, 0].set_ylabel(f"stroke [{stroke_unit}]")
    axes[1, 0].set_xlabel("time [s]")
    for ax in axes[:, 0]:
        ax.grid(True, alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8, ncols=min(4, len(c.names)))
    fig.suptitle("actuator signals (ActuatorCommand)")
    return _save(fig, Path(path))


def plot_rates(
    run: RunData, path: str | Path, nominal_hz: Sequence[float | None] = (None, None)
) -> Path | None:
    """Instantaneous rates (1 / period) of actuator commands and compliance snapshots."""
    series = [(name, s, nom) for (name, s), nom in zip(
        (("actuator_command", run.commands), ("compliance", run.snapshots)), nominal_hz)
        if s is not None and len(s) > 1]
    if not series:
        return None
    fig, axes = _figure(len(series), 2, size=(10.0, 3.2 * len(series)),
                        gridspec_kw={"width_ratios": (3, 1)})
    for row, (name, s, nominal) in enumerate(series):
        dt = np.diff(s.t)
        rate = np.divide(1.0, dt, out=np.full_like(dt, np.nan), where=dt > 0)
        ax, hist = axes[row, 0], axes[row, 1]
        ax.plot(s.t[1:] - run.t0, rate, ".", ms=2, color="tab:purple")
        ref = nominal if nominal else 1.0 / np.median(dt)
        ax.axhline(ref, color="k", lw=0.8, ls="--", label=f"nominal {ref:.1f} Hz")
        ax.set_ylabel(f"{name} rate [Hz]")
        ax.set_xlabel("time [s]")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
        hist.hist(dt * 1e3, bins=50, color="tab:purple")
        hist.axvline(1e3 / ref, color="k", lw=0.8, ls="--")
        hist.set_xlabel("period [ms]")
        hist.set_ylabel("count")
    fig.suptitle("loop rates")
    return _save(fig, Path(path))
