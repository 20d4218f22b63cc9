"""The report of a hybrid-robot run (``soft-inverse-ros demo --robot hybrid_arm``), from its bag.

Figures (JSON ``metrics.json``, table ``metrics.md``, plot ``hybrid.png``):

* **alignment error** [mm]: the distance from the target to the probe axis of the simulated
  robot (``plant/markers_true``: probe tip and the point behind it; ``target``), at the first
  recorded sample, over the last ``final_window_s`` of the run (mean, max) and its minimum;
  and per **held target** (``targets``: each interval of at least ``min_hold_s`` in which the
  target stood still, e.g. the four targets of ``config/trajectories/hybrid_four_targets.csv``
  in sequence): over the last ``final_window_s`` of each hold (mean, max), with the contact
  force sum the plant reported in that window;
  and at the start (``alignment_error_start_mm``: the plant's own figure for the pose its
  first target found, from /diagnostics — the recorder subscribes to a topic only once it
  has discovered it, so with ``--clock sim`` the first recorded sample may come after the
  controller has already moved the arm);
* **contact force sum** [N] of the simulated robot against the soft block: its maximum
  over the run (from the plant's per-window maxima on /diagnostics, every step counted) and
  at the end, against the description's limit (``contact_force_sum_limit_n``), and the
  controller's predicted sum (``inverse_status``);
* **the 1 kHz loop**: the inverse QP's solve time p50/p99 [ms] (``inverse_status``, OK
  ticks) and the command rate [Hz] (commands sent per second of the graph's clock, from
  their sequence numbers: the recorder may keep only part of the 1 kHz stream,
  ``commands_recorded_fraction``);
* **soft force actuators** (if any): the efforts commanded [N] against their bounds;
* **joint commands**: the position setpoints sent [rad] (``actuator_command``, MODE
  displacement) and the servo angles measured (``servo/joint_states``) against the joint
  ranges of the description, and the largest change of a servo angle per servo period;
* **validity** (analysis/validity.py): the plant's real-time factor p5 ≥ 0.95 in wall-clock
  mode (``--clock sim`` makes a slow plant valid), SAFE commands after start-up, the
  controller commanding at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from soft_inverse_ros import finite_json
from soft_inverse_ros import topics as T
from soft_inverse_ros.analysis.metrics import rate_stats
from soft_inverse_ros.analysis.run_data import find_topic, load_run
from soft_inverse_ros.analysis.validity import assess_bag, diagnostic_statuses, headline, plant_statuses
from soft_inverse_ros.recording.bag_reader import BagReader


def _stamp_s(msg: Any) -> float:
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def _alignment(tip: np.ndarray, back: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Distances [m] of targets (n, 3) to the axes through back → tip (n, 3 each)."""
    u = tip - back
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    r = target - tip
    return np.linalg.norm(r - np.sum(r * u, axis=1, keepdims=True) * u, axis=1)


def target_holds(t: np.ndarray, points: np.ndarray, min_hold_s: float = 1.0,
                 tolerance_m: float = 1e-6) -> list[tuple[float, float, np.ndarray]]:
    """The intervals in which a target series stood still: (start, end [s], point (3,) [m])
    for each maximal run of samples (times ``t`` (n,), ``points`` (n, 3)) within
    ``tolerance_m`` of the run's first sample that lasts at least ``min_hold_s``; a run
    lasts until the next sample that moved (or the last sample)."""
    holds: list[tuple[float, float, np.ndarray]] = []
    n = len(t)
    i = 0
    while i < n:
        moved = np.nonzero(np.linalg.norm(points[i:] - points[i], axis=1) > tolerance_m)[0]
        j = i + int(moved[0]) if moved.size else n  # first sample that left points[i]
        end = t[j] if j < n else t[-1]
        if end - t[i] >= min_hold_s:
            holds.append((float(t[i]), float(end), points[i].copy()))
        i = j
    return holds


#: the hybrid model node's /diagnostics status name ends so (nodes/hybrid_model_node.py)
HYBRID_MODEL_STATUS_SUFFIX = ": hybrid model"


def is_hybrid_bag(bag: str | Path) -> bool:
    """Whether ``bag`` records the hybrid graph (its model node's status on /diagnostics):
    its figure is the probe's alignment (this report), not the effector's distance to the
    target of the soft robots' report."""
    return next(diagnostic_statuses(bag, (HYBRID_MODEL_STATUS_SUFFIX,)), None) is not None


def hybrid_metrics(bag: str | Path, final_window_s: float = 2.0, min_hold_s: float = 3.0) -> dict[str, Any]:
    """The figures of the module docstring (times in s from the first probe sample)."""
    from soft_inverse_ros.core.model.hybrid_description import load_hybrid_description
    from soft_inverse_ros.nodes.point_cloud import points_from_cloud

    run = load_run(bag)
    validity = assess_bag(bag, run, tracking=False)  # the probe's alignment is judged here
    with BagReader(bag) as reader:
        names = reader.topics
        probe, targets, servo, status_sum = [], [], [], []
        topic = find_topic(names, T.PLANT_MARKERS_TRUE)
        for _, msg in reader.read_topic(topic) if topic else []:
            pts = points_from_cloud(msg)
            if pts.shape == (2, 3):
                probe.append((_stamp_s(msg), pts[0], pts[1]))
        topic = find_topic(names, T.TARGET)
        for _, msg in reader.read_topic(topic) if topic else []:
            targets.append((_stamp_s(msg), np.array([msg.point.x, msg.point.y, msg.point.z])))
        topic = find_topic(names, T.SERVO_STATES)
        for _, msg in reader.read_topic(topic) if topic else []:
            servo.append((_stamp_s(msg), list(msg.name), np.array(msg.position, float)))
        topic = find_topic(names, T.INVERSE_STATUS)
        solve = []
        for _, msg in reader.read_topic(topic) if topic else []:
            if len(msg.contact_force):
                status_sum.append(float(msg.contact_force_sum))
            if msg.command_status == 0 and msg.solve_time > 0:
                solve.append(msg.solve_time)
    statuses = list(plant_statuses(bag))  # (receive [ns], stamp [ns], key -> value), read once
    plant = [values for _, _, values in statuses]
    robot = None
    out: dict[str, Any] = {"validity": validity.as_dict(), "probe_samples": len(probe)}
    if not probe or not targets:
        out["missing"] = "no probe samples (plant/markers_true) or no target in the bag"
        return out
    t = np.array([p[0] for p in probe])
    tt = np.array([x[0] for x in targets])
    idx = np.clip(np.searchsorted(tt, t, side="right") - 1, 0, len(tt) - 1)
    target = np.array([x[1] for x in targets])[idx]
    err = _alignment(np.array([p[1] for p in probe]), np.array([p[2] for p in probe]), target)
    rel = t - t[0]
    final = rel >= rel[-1] - final_window_s
    out.update({
        "duration_s": float(rel[-1]),
        "alignment_error_initial_mm": 1e3 * float(err[0]),
        "alignment_error_final_mean_mm": 1e3 * float(err[final].mean()),
        "alignment_error_final_max_mm": 1e3 * float(err[final].max()),
        "alignment_error_min_mm": 1e3 * float(err.min()),
        "final_window_s": final_window_s,
    })
    plant_t, plant_sum = [], []
    for receive_ns, stamp_ns, values in statuses:
        if "contact_force_sum_n" in values:
            plant_t.append(1e-9 * (stamp_ns or receive_ns))
            plant_sum.append(float(values["contact_force_sum_n"]))
    plant_t = np.array(plant_t) - t[0]
    plant_sum = np.array(plant_sum)
    held, missed = [], []
    for start_s, end_s, point in target_holds(tt, np.array([x[1] for x in targets]), min_hold_s):
        a, b = max(start_s, end_s - final_window_s) - t[0], end_s - t[0]
        window = (rel >= a) & (rel <= b)
        if not window.any():  # a hold the plant's recorded samples do not cover
            missed.append([round(1e3 * float(v), 1) for v in point])
            continue
        forces = plant_sum[(plant_t >= a) & (plant_t <= b)]
        held.append({
            "target_m": [float(v) for v in point],
            "start_s": float(start_s - t[0]), "end_s": float(b),
            "alignment_error_final_mean_mm": 1e3 * float(err[window].mean()),
            "alignment_error_final_max_mm": 1e3 * float(err[window].max()),
            "contact_force_sum_n": [float(forces.min()), float(forces.max())] if forces.size else None,
        })
    out["targets"] = held
    out["targets_missed_mm"] = missed
    if missed:  # the per-target figures would be those of fewer targets than the run held
        validity.invalid_reasons.append(
            f"{len(missed)} of {len(missed) + len(held)} held targets ({missed} mm) fall before the "
            "simulated robot's first recorded sample or after its last: it started late or stopped "
            "early, and the per-target figures leave them out")
        validity.valid = False
        out["validity"] = validity.as_dict()
    out["alignment_error_per_target_max_mm"] = [h["alignment_error_final_max_mm"] for h in held]
    start = [float(v["alignment_error_first_target_mm"]) for v in plant
             if "alignment_error_first_target_mm" in v]
    start = [v for v in start if np.isfinite(v)]
    out["alignment_error_start_mm"] = start[0] if start else None
    sums = [float(v["contact_force_sum_max_n"]) for v in plant if "contact_force_sum_max_n" in v]
    limit = next((float(v["contact_force_sum_limit_n"]) for v in plant if "contact_force_sum_limit_n" in v), None)
    ends = [float(v["contact_force_sum_n"]) for v in plant if "contact_force_sum_n" in v]
    robot = next((v.get("robot") for v in plant if "robot" in v), None)
    out.update({
        "contact_force_sum_max_n": max(sums) if sums else None,
        "contact_force_sum_final_n": ends[-1] if ends else None,
        "contact_force_sum_limit_n": limit,
        "contact_force_sum_within_limit": (max(sums) <= limit + 1e-9) if sums and limit is not None else None,
        "predicted_contact_force_sum_max_n": max(status_sum) if status_sum else None,
    })
    if solve:  # the inverse QP's solve time (every status_every-th tick, joints + contacts)
        out["qp_solve_time_p50_ms"] = 1e3 * float(np.median(solve))
        out["qp_solve_time_p99_ms"] = 1e3 * float(np.percentile(solve, 99))
    cmds = run.commands
    if cmds is not None and len(cmds) > 1 and cmds.t[-1] > cmds.t[0]:
        # the commands the controller sent (their sequence numbers over the graph's time), not
        # those the recorder kept: under load the bag holds a fraction of a 1 kHz stream
        rates = rate_stats(cmds.t, seq=cmds.seq)
        out["command_rate_hz"] = rates["rate_hz"]
        out["commands_recorded_fraction"] = rates.get("received_fraction")
    desc = load_hybrid_description(robot or "hybrid_arm")
    lo = np.array([j.min_position for j in desc.joints])
    hi = np.array([j.max_position for j in desc.joints])
    if cmds is not None and len(cmds):
        order = [cmds.names.index(n) for n in desc.joint_names if n in cmds.names]
        ok = cmds.status == 0
        vals = cmds.values[:, order]
        out["joint_setpoints_within_limits"] = bool(np.all((vals[ok] >= lo - 1e-9) & (vals[ok] <= hi + 1e-9)))
        out["joint_setpoint_range_rad"] = [[float(a), float(b)] for a, b in zip(vals[ok].min(0), vals[ok].max(0))] \
            if ok.any() else None
        soft = [a for a in desc.soft_actuators if a.name in cmds.names]
        if soft and ok.any():  # soft force actuators: the efforts commanded [N] vs their bounds
            f = cmds.values[:, [cmds.names.index(a.name) for a in soft]][ok]
            lo_f = np.array([a.min_force for a in soft])
            hi_f = np.array([a.max_force for a in soft])
            out["soft_efforts_within_limits"] = bool(np.all((f >= lo_f - 1e-9) & (f <= hi_f + 1e-9)))
            out["soft_effort_range_n"] = {a.name: [float(f[:, i].min()), float(f[:, i].max())]
                                          for i, a in enumerate(soft)}
    if servo:
        by_name = [[s[2][s[1].index(n)] if n in s[1] else np.nan for n in desc.joint_names] for s in servo]
        q = np.array(by_name)
        good = np.all(np.isfinite(q), axis=1)
        out["servo_samples"] = int(good.sum())
        out["servo_angles_within_limits"] = bool(np.all((q[good] >= lo - 1e-9) & (q[good] <= hi + 1e-9)))
        out["servo_angle_moved_rad"] = [float(v) for v in q[good][-1] - q[good][0]] if good.any() else None
        out["servo_angle_step_max_rad"] = float(np.max(np.abs(np.diff(q[good], axis=0)))) if good.sum() > 1 else None
    out["robot"] = desc.name
    out["_series"] = {"t": rel, "alignment_mm": 1e3 * err}
    return out


def write_hybrid_report(bag: str | Path, out_dir: str | Path, plot: bool = True) -> dict[str, Any]:
    """Write metrics.json, metrics.md and (``plot``) hybrid.png into ``out_dir``; the metrics."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = hybrid_metrics(bag)
    series = metrics.pop("_series", None)
    (out_dir / "metrics.json").write_text(finite_json.dumps(metrics, indent=2))
    from soft_inverse_ros.analysis.validity import RunValidity

    lines = [*headline(RunValidity(**metrics["validity"])), "", "| figure | value |", "|---|---|"]
    for key, value in metrics.items():
        if key not in ("validity", "targets"):
            lines.append(f"| {key} | {value if not isinstance(value, float) else f'{value:.4g}'} |")
    v = metrics["validity"]
    for key in ("clock", "plant_real_time_factor_p5", "safe_command_fraction", "compliance_rate_hz", "startup_s"):
        lines.append(f"| {key} | {v.get(key)} |")
    if metrics.get("targets"):
        lines += ["", f"Held targets (last {metrics['final_window_s']:g} s of each hold):", "",
                  "| target [mm] | held [s] | alignment error mean / max [mm] | contact force sum [N] |",
                  "|---|---|---|---|"]
        for h in metrics["targets"]:
            force = h["contact_force_sum_n"]
            lines.append(
                f"| ({', '.join(f'{1e3 * v:.1f}' for v in h['target_m'])}) | {h['start_s']:.1f}–{h['end_s']:.1f} | "
                f"{h['alignment_error_final_mean_mm']:.3f} / {h['alignment_error_final_max_mm']:.3f} | "
                f"{'–' if force is None else f'{force[0]:.3f}–{force[1]:.3f}'} |")
    (out_dir / "metrics.md").write_text("\n".join(lines) + "\n")
    if series is not None and plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.semilogy(series["t"], np.maximum(series["alignment_mm"], 1e-3))
        ax.set_xlabel("time [s]")
        ax.set_ylabel("alignment error [mm]")
        ax.set_title(f"{metrics.get('robot')}: target to probe axis")
        fig.tight_layout()
        fig.savefig(out_dir / "hybrid.png", dpi=110)
        plt.close(fig)
    return metrics
