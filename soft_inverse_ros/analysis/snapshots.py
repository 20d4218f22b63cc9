"""3D snapshots of the robot from the ``visualization/robot`` MarkerArrays of a bag.

The markers are decoded back into a :class:`~soft_inverse_ros.core.model.visualization.Scene`
(the inverse of :func:`soft_inverse_ros.nodes.markers.scene_to_marker_array`), replaying
ADD / DELETE / DELETEALL as RViz would, and rendered offscreen to PNG. Works on rosbags or
rclpy message objects alike (same field names).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from soft_inverse_ros.core.model.visualization import Polyline, Scene, Sphere, SurfaceMesh, render_scene_png
from soft_inverse_ros.recording.bag_reader import BagReader

# visualization_msgs/Marker constants
SPHERE, LINE_STRIP, TRIANGLE_LIST = 2, 4, 11
ADD, DELETE, DELETEALL = 0, 2, 3


def _rotation(q: Any) -> np.ndarray:
    x, y, z, w = q.x, q.y, q.z, q.w
    n = x * x + y * y + z * z + w * w
    if n == 0:
        return np.eye(3)  # an all-zero quaternion is treated as identity, as RViz does
    s = 2.0 / n
    return np.array([
        [1 - s * (y * y + z * z), s * (x * y - z * w), s * (x * z + y * w)],
        [s * (x * y + z * w), 1 - s * (x * x + z * z), s * (y * z - x * w)],
        [s * (x * z - y * w), s * (y * z + x * w), 1 - s * (x * x + y * y)],
    ])


def _points(marker: Any, scale: bool) -> np.ndarray:
    pts = np.array([[p.x, p.y, p.z] for p in marker.points], dtype=float).reshape(-1, 3)
    if scale:
        pts = pts * np.array([marker.scale.x, marker.scale.y, marker.scale.z])
    pos = marker.pose.position
    return pts @ _rotation(marker.pose.orientation).T + np.array([pos.x, pos.y, pos.z])


def _rgba(c: Any) -> tuple[float, float, float, float]:
    return (float(c.r), float(c.g), float(c.b), float(c.a))


class MarkerState:
    """Markers currently shown, keyed by (ns, id), updated message by message."""

    def __init__(self) -> None:
        self.markers: dict[tuple[str, int], Any] = {}
        self.frame_id = "base_link"

    def apply(self, marker_array: Any) -> None:
        for m in marker_array.markers:
            if m.action == DELETEALL:
                self.markers.clear()
            elif m.action == DELETE:
                self.markers.pop((m.ns, m.id), None)
            else:
                self.markers[(m.ns, m.id)] = m
                self.frame_id = m.header.frame_id or self.frame_id

    def scene(self) -> Scene:
        return scene_from_markers(self.markers.values(), self.frame_id)


def scene_from_markers(markers: Iterable[Any], frame_id: str = "base_link") -> Scene:
    """Scene of TRIANGLE_LIST, SPHERE and LINE_STRIP markers (others, and the ``obstacles``
    namespace, are ignored: the snapshots frame the robot)."""
    verts, colors, spheres, lines = [], [], [], []
    for m in markers:
        if m.type == TRIANGLE_LIST and m.ns != "obstacles":
            pts = _points(m, scale=True)
            n = len(pts) - len(pts) % 3
            if len(m.colors) == len(pts):
                rgba = np.array([_rgba(c) for c in m.colors], dtype=float)
            else:
                rgba = np.tile(_rgba(m.color), (len(pts), 1))
            verts.append(pts[:n])
            colors.append(rgba[:n])
        elif m.type == SPHERE:
            p = m.pose.position
            spheres.append(Sphere(m.ns, np.array([p.x, p.y, p.z]), 0.5 * float(m.scale.x), _rgba(m.color)))
        elif m.type == LINE_STRIP and len(m.points) >= 2:
            lines.append(Polyline(m.text or f"{m.ns}/{m.id}", _points(m, scale=False),
                                  float(m.scale.x), _rgba(m.color)))
    surface = SurfaceMesh(np.concatenate(verts), np.concatenate(colors)) if verts else None
    return Scene(surface, tuple(spheres), tuple(lines), frame_id)


@dataclass(frozen=True)
class SnapshotImage:
    path: Path
    time_s: float  # bag time of the MarkerArray drawn [s]


def render_marker_snapshots(
    bag: str | Path, topic: str, out_dir: str | Path, count: int = 3, t0: float | None = None
) -> list[SnapshotImage]:
    """Render the marker state after ``count`` evenly spaced messages of ``topic`` to PNGs.

    ``t0`` [s] is subtracted from the times in the titles (default: first marker time).
    """
    if count < 1:
        return []
    out_dir = Path(out_dir)
    with BagReader(bag) as reader:
        raw = list(reader.messages([topic]))
        if not raw:
            return []
        picks = sorted(set(np.linspace(0, len(raw) - 1, min(count, len(raw))).round().astype(int)))
        origin = raw[0].timestamp_ns * 1e-9 if t0 is None else t0
        state = MarkerState()
        images = []
        for k, message in enumerate(raw[: picks[-1] + 1]):
            state.apply(reader.deserialize(message.data, message.msgtype))
            if k in picks:
                scene = state.scene()
                t = message.timestamp_ns * 1e-9
                if scene.surface is None and not scene.spheres and not scene.polylines:
                    continue
                path = out_dir / f"robot_{len(images):02d}.png"
                render_scene_png(scene, path, title=f"robot at t = {t - origin:.2f} s")
                images.append(SnapshotImage(path, t))
    return images
