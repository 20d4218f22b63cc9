"""PNG figures of the experiments (matplotlib, Agg backend; imported only with ``--out``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_qp_variation(table: dict, path: Path) -> Path:
    """Max and mean variation of ‖W_eaᵀW_ea‖∞ per snapshot vs speed, one line per robot."""
    plt = _pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    for name, robot in table["robots"].items():
        if "skipped" in robot:
            continue
        rows = robot["rows"]
        v = [r["speed_mm_s"] for r in rows]
        ax[0].plot(v, [r["max_variation_percent"] for r in rows], "o-", label=f"{name} max")
        ax[0].plot(v, [r["mean_variation_percent"] for r in rows], "x--", label=f"{name} mean")
        ax[1].plot(v, [r["max_variation_percent_per_s"] for r in rows], "o-", label=name)
    ax[0].set(xlabel="speed [mm/s]", ylabel="|Δ‖WᵀW‖∞| per snapshot [%]", xscale="log", yscale="log")
    ax[1].set(xlabel="speed [mm/s]", ylabel="max rate [%/s]", xscale="log", yscale="log")
    for a in ax:
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=7)
    fig.suptitle("QP matrix variation between FEM snapshots (20 mm square)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_runs(runs: dict, path: Path, *, title: str, window: tuple[float, float] | None = None,
              actuator: int | None = None) -> Path:
    """Top view of the effector paths, error vs time and one actuator's command vs time
    for runs ``{label: CosimResult}`` (the figures of ICRA 2015 Figs. 4–6)."""
    plt = _pyplot()
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    first = next(iter(runs.values()))
    w = first.window(*window) if window else np.ones(len(first.t), bool)
    ax[0].plot(first.target[w, 0] * 1e3, first.target[w, 1] * 1e3, "k--", lw=1, label="target")
    for label, res in runs.items():
        rw = res.window(*window) if window else np.ones(len(res.t), bool)
        ax[0].plot(res.effector[rw, 0] * 1e3, res.effector[rw, 1] * 1e3, lw=1, label=label)
        fw = rw & res.effector_fresh
        ax[1].plot(res.t[fw], res.error[fw] * 1e3, lw=0.8, label=label)
    ax[0].set(xlabel="x [mm]", ylabel="y [mm]", title="effector (top view)")
    ax[0].set_aspect("equal", adjustable="datalim")
    ax[1].set(xlabel="t [s]", ylabel="‖effector − target‖ [mm]", title="tracking error")
    j = 0 if actuator is None else actuator
    for label, res in runs.items():
        rw = res.window(*window) if window else np.ones(len(res.t), bool)
        ax[2].plot(res.t[rw], res.command_strokes[rw, j] * 1e3, lw=0.8, label=f"{label} command")
        fw = rw & res.effector_fresh
        ax[2].plot(res.t[fw], res.delivered[fw, j] * 1e3, lw=0.8, ls=":", label=f"{label} servo")
    ax[2].set(xlabel="t [s]", ylabel="stroke [mm]", title=f"actuator {first.actuator_names[j]}")
    for a in ax:
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
