"""The soft snake's locomotion from a bag: centre-of-mass path, per-link curvature, speed.

Sources (SI units, header stamps; times in s from the first plate sample):

* ``mocap``: the motion-captured plates, ``mocap/plate<k>/pose`` (PoseStamped, one rigid
  body of four markers per plate, k = 0 at link 0). The CoM is estimated from the plate
  centres as the centroid of the polyline through them (a body of uniform mass per length:
  trapezoid weights ½, 1, …, 1, ½); frames where a plate is missing are skipped.
* ``plant``: the simulated snake's truth, ``plant/plate_poses`` (PoseArray) and
  ``plant/com_true`` (its true CoM, plates and silicone).

Per-link curvature (the paper's: yaw difference between the link's two end plates) is
yaw(plate i+1) − yaw(plate i), wrapped to (−π, π]. Forward is the direction the snake
faces at its first sample, from plate 0 to the last plate, in the ground plane: the eq. 9
gait (link i's phase ahead of link i−1's by φ > 0) sends its wave from the last link toward
link 0, and lateral undulation pushes the body the opposite way, head (last plate) first; the forward speed is the least-squares slope of the CoM's
forward displacement over time after ``settle_s`` (the gait's oscillation averages out
over whole periods; the slope is what a straight path would give).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from soft_inverse_ros import topics as T
from soft_inverse_ros.recording.bag_reader import BagReader

_PLATE_TOPIC = re.compile(r"^(?:/.*)?/mocap/plate(\d+)/pose$")


@dataclass(frozen=True)
class PlateSeries:
    """Plate poses over time: ``t`` (n,) [s], positions (n, P, 3) [m], yaw (n, P) [rad]."""

    source: str
    t: np.ndarray
    positions: np.ndarray
    yaw: np.ndarray

    def com(self) -> np.ndarray:
        """(n, 3) centroid of the polyline through the plate centres [m]."""
        w = np.ones(self.positions.shape[1])
        if len(w) > 1:
            w[[0, -1]] = 0.5
        return np.einsum("p,npk->nk", w / w.sum(), self.positions)

    def curvature(self) -> np.ndarray:
        """(n, P−1) yaw difference between each link's end plates [rad]."""
        d = np.diff(self.yaw, axis=1)
        return (d + np.pi) % (2 * np.pi) - np.pi


def _yaw(q: np.ndarray) -> np.ndarray:
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def _ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _pose(p: Any) -> tuple[list[float], list[float]]:
    return ([p.position.x, p.position.y, p.position.z],
            [p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w])


def load_snake(bag: str | Path) -> dict[str, Any] | None:
    """{"mocap": PlateSeries | None, "plant": PlateSeries | None, "com_true": (t, xyz) |
    None, "t0_ns": int, "nonfinite_frames": {series: frames dropped}} from ``bag``; None when
    the bag holds no snake plates. Frames with a non-finite position or heading (a marker
    the motion capture lost) are dropped and counted."""
    with BagReader(bag) as reader:
        topics = list(reader.topics)
        plates = sorted(((int(m.group(1)), t) for t in topics if (m := _PLATE_TOPIC.match(t))))
        poses_topic = next((t for t in topics if t.endswith("/" + T.PLANT_PLATE_POSES)), None)
        com_topic = next((t for t in topics if t.endswith("/" + T.PLANT_COM_TRUE)), None)
        if not plates and poses_topic is None:
            return None
        mocap = None
        if plates and [k for k, _ in plates] == list(range(len(plates))):
            by_stamp: dict[int, dict[int, tuple]] = {}
            for k, topic in plates:
                for _, msg in reader.read_topic(topic):
                    by_stamp.setdefault(_ns(msg.header.stamp), {})[k] = _pose(msg.pose)
            full = sorted(s for s, v in by_stamp.items() if len(v) == len(plates))
            if full:
                pos = np.array([[by_stamp[s][k][0] for k in range(len(plates))] for s in full])
                quat = np.array([[by_stamp[s][k][1] for k in range(len(plates))] for s in full])
                mocap = (np.array(full, dtype=np.int64), pos, _yaw(quat))
        plant = None
        if poses_topic is not None:
            rows = [(_ns(m.header.stamp), [_pose(p) for p in m.poses]) for _, m in reader.read_topic(poses_topic)]
            rows = [r for r in rows if r[1]]
            if rows:
                n = min(len(r[1]) for r in rows)
                pos = np.array([[p[0] for p in r[1][:n]] for r in rows])
                quat = np.array([[p[1] for p in r[1][:n]] for r in rows])
                plant = (np.array([r[0] for r in rows], dtype=np.int64), pos, _yaw(quat))
        com = None
        if com_topic is not None:
            rows = [(_ns(m.header.stamp), [m.point.x, m.point.y, m.point.z]) for _, m in reader.read_topic(com_topic)]
            if rows:
                com = (np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows]))
    starts = [s[0][0] for s in (mocap, plant, com) if s is not None]
    if not starts:
        return None
    t0 = int(min(starts))

    dropped: dict[str, int] = {}

    def finite(name, data):
        """``data`` without its frames holding a non-finite value (counted in ``dropped``)."""
        if data is None:
            return None
        good = np.all(np.isfinite(data[1].reshape(len(data[0]), -1)), axis=1)
        good &= np.all(np.isfinite(np.reshape(data[-1], (len(data[0]), -1))), axis=1)
        if not good.all():
            dropped[name] = int(np.sum(~good))
        return None if not good.any() else tuple(part[good] for part in data)

    def series(name, data):
        data = finite(name, data)
        if data is None:
            return None
        return PlateSeries(name, (data[0] - t0) * 1e-9, data[1], np.unwrap(data[2], axis=0))

    plates_mocap, plates_plant = series("mocap", mocap), series("plant", plant)
    com = finite("com_true", com)
    return {"mocap": plates_mocap, "plant": plates_plant,
            "com_true": None if com is None else ((com[0] - t0) * 1e-9, com[1]), "t0_ns": t0,
            "nonfinite_frames": dropped}


def _forward(plates: PlateSeries) -> np.ndarray:
    d = plates.positions[0, -1, :2] - plates.positions[0, 0, :2]
    return d / max(np.linalg.norm(d), 1e-12)


def _speed(t: np.ndarray, com: np.ndarray, forward: np.ndarray, settle_s: float) -> tuple[float | None, float]:
    keep = t >= t[0] + settle_s
    if np.count_nonzero(keep) < 3 or np.ptp(t[keep]) <= 0:
        return None, 0.0
    s = (com[keep, :2] - com[0, :2]) @ forward
    slope = np.polyfit(t[keep], s, 1)[0]
    return float(slope), float(np.ptp(t[keep]))


def snake_metrics(data: dict[str, Any], settle_s: float = 1.0) -> dict[str, Any]:
    """Forward speed [mm/s] (mocap and true), travel, curvature amplitude per link [deg],
    the mocap CoM estimate's offset from the true CoM [mm]."""
    out: dict[str, Any] = {"settle_s": settle_s, "nonfinite_frames": dict(data.get("nonfinite_frames", {}))}
    ref = data["mocap"] or data["plant"]
    if ref is None:  # every plate frame held a non-finite value
        out.update(source=None, forward_speed_mm_s=None)
        return out
    forward = _forward(ref)
    out["forward_direction_xy"] = forward.tolist()
    for name in ("mocap", "plant"):
        s: PlateSeries | None = data[name]
        if s is None:
            continue
        com = s.com()
        speed, span = _speed(s.t, com, forward, settle_s)
        curv = np.degrees(s.curvature())
        after = s.t >= s.t[0] + settle_s
        out[name] = {
            "frames": int(len(s.t)),
            "duration_s": float(np.ptp(s.t)),
            "forward_speed_mm_s": None if speed is None else 1e3 * speed,
            "speed_window_s": span,
            "com_travel_mm": 1e3 * float(np.linalg.norm(com[-1, :2] - com[0, :2])),
            "heading_change_deg": float(np.degrees(np.mean(s.yaw[-1] - s.yaw[0]))),
            # √2 × RMS about the mean: a sine's amplitude, robust to marker noise
            "curvature_amplitude_deg": [float(v) for v in
                                        (np.sqrt(2) * np.std(curv[after], axis=0) if np.any(after) else [])],
        }
    if data["com_true"] is not None:
        t, xyz = data["com_true"]
        speed, span = _speed(t, xyz, forward, settle_s)
        out["true_com_forward_speed_mm_s"] = None if speed is None else 1e3 * speed
        if data["mocap"] is not None and len(t) > 1:
            m = data["mocap"]
            est = m.com()
            true_at = np.stack([np.interp(m.t, t, xyz[:, k]) for k in range(2)], axis=1)
            inside = (m.t >= t[0]) & (m.t <= t[-1])
            if np.any(inside):
                out["mocap_com_offset_mm"] = 1e3 * float(np.mean(np.linalg.norm(est[inside, :2] - true_at[inside], axis=1)))
    main = out.get("mocap") or out.get("plant")
    out["source"] = "mocap" if "mocap" in out else "plant"
    out["forward_speed_mm_s"] = main["forward_speed_mm_s"]
    return out


def plot_snake(data: dict[str, Any], out_dir: Path) -> list[Path]:
    """snake_com_path.png (CoM paths, plates at start and end) and snake_curvature.png."""
    from soft_inverse_ros.analysis.plots import _figure, _save

    files = []
    fig, axes = _figure(1, 2, size=(12.0, 5.5))
    whole, zoom = axes[0, 0], axes[0, 1]
    colors = {"mocap": "tab:green", "plant": "tab:blue"}
    for name in ("plant", "mocap"):
        s = data[name]
        if s is None:
            continue
        com = 1e3 * s.com()
        for ax in (whole, zoom):
            ax.plot(com[:, 0], com[:, 1], color=colors[name], lw=1.0, label=f"{name} CoM (plate polyline)")
        for i, style in ((0, ":"), (-1, "-")):
            whole.plot(1e3 * s.positions[i, :, 0], 1e3 * s.positions[i, :, 1], style, marker="o", ms=3,
                       color=colors[name], alpha=0.5, label=f"{name} plates ({'start' if i == 0 else 'end'})")
    if data["com_true"] is not None:
        xyz = 1e3 * data["com_true"][1]
        zoom.plot(xyz[:, 0], xyz[:, 1], "--", color="k", lw=0.8, label="true CoM")
    for ax, title in ((whole, "the snake at start and end, CoM path"), (zoom, "CoM path (zoom)")):
        ax.set_xlabel("x [mm]")
        ax.set_ylabel("y [mm]")
        ax.set_aspect("equal", adjustable="datalim")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(f"soft snake: {title} (XY, base_link)", fontsize=9)
    files.append(_save(fig, out_dir / "snake_com_path.png"))
    s = data["mocap"] or data["plant"]
    fig, axes = _figure(2, 1, size=(9.0, 7.0))
    curv = np.degrees(s.curvature())
    last = s.t >= s.t[-1] - 3.0
    for ax, keep, title in ((axes[0, 0], slice(None), "whole run"), (axes[1, 0], last, "last 3 s")):
        for i in range(curv.shape[1]):
            ax.plot(s.t[keep], curv[keep, i], lw=1.0, label=f"link {i}")
        ax.set_xlabel("time [s]")
        ax.set_ylabel("yaw(plate i+1) − yaw(plate i) [deg]")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
        ax.set_title(f"per-link curvature ({s.source}), {title}", fontsize=9)
    files.append(_save(fig, out_dir / "snake_curvature.png"))
    return files


def snake_markdown(m: dict[str, Any]) -> list[str]:
    """The report's "Soft snake" section."""
    def f(v, fmt="{:.3f}"):
        return "–" if v is None else fmt.format(v)

    lines = ["## Soft snake", "",
             f"**Forward speed ({m['source']}): {f(m['forward_speed_mm_s'])} mm/s** "
             f"(least-squares slope of the CoM along the initial heading after {m['settle_s']:g} s)", "",
             "| source | frames | duration [s] | forward speed [mm/s] | CoM travel [mm] | heading change [deg] | curvature amplitude per link [deg] |",
             "|---|---|---|---|---|---|---|"]
    for name in ("mocap", "plant"):
        if s := m.get(name):
            amp = ", ".join(f"{a:.1f}" for a in s["curvature_amplitude_deg"])
            lines.append(f"| {name} | {s['frames']} | {s['duration_s']:.1f} | {f(s['forward_speed_mm_s'])} | "
                         f"{s['com_travel_mm']:.2f} | {s['heading_change_deg']:.2f} | {amp} |")
    if m.get("nonfinite_frames"):
        lines += ["", "Frames dropped for a non-finite position or heading: "
                  + ", ".join(f"{k} {v}" for k, v in m["nonfinite_frames"].items()) + "."]
    if "true_com_forward_speed_mm_s" in m:
        lines.append("")
        lines.append(f"True CoM forward speed: {f(m['true_com_forward_speed_mm_s'])} mm/s; mocap CoM estimate "
                     f"offset from the true CoM: {f(m.get('mocap_com_offset_mm'), '{:.2f}')} mm (mean, XY).")
    return lines + [""]
