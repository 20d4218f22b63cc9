"""Replaying recorded mocap: a long-form CSV, or a rosbag2 (MCAP or sqlite3) bag.

CSV format (header required, ``#`` lines are comments), one row per item::

    stamp,kind,name,x,y,z,qx,qy,qz,qw,frame_id
    0.010,body,tip,0.10,0.02,0.30,0,0,0,1,mocap
    0.010,marker,m1,0.11,0.02,0.30,,,,,mocap
    0.010,point,,0.12,0.02,0.30,,,,,mocap

``kind`` is ``body`` (pose; quaternion x, y, z, w), ``marker`` (labeled marker) or
``point`` (unlabeled marker). Consecutive rows with the same ``stamp`` [s] form one
frame; ``frame_id`` is optional (default ``mocap``). Positions are in the unit of the
recording (the pipeline's ``mocap_unit_scale`` converts them).

Bags are read with ``rosbags`` (no ROS installation needed): ``geometry_msgs/PoseStamped``
topics become rigid bodies and ``geometry_msgs/PointStamped`` topics labeled markers.
Messages whose header stamps agree within ``stamp_tolerance`` form one frame, stamped
with the header time (the log time when the header stamp is zero).
"""

from __future__ import annotations

import csv
import math
import pathlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.mocap.frame import MOCAP_FRAME_ID, BodyPose, MocapFrame

CSV_COLUMNS = ("stamp", "kind", "name", "x", "y", "z", "qx", "qy", "qz", "qw", "frame_id")
POSE_TYPE = "geometry_msgs/msg/PoseStamped"
POINT_TYPE = "geometry_msgs/msg/PointStamped"


class ReplayError(ValueError):
    """A recording cannot be read as mocap frames."""


class _FrameIterSource:
    """``next_frame()`` over an iterator of frames; None once exhausted."""

    def __init__(self, frames: Iterator[MocapFrame]) -> None:
        self._frames = frames
        self.frames_read = 0

    def next_frame(self) -> MocapFrame | None:
        frame = next(self._frames, None)
        if frame is not None:
            self.frames_read += 1
        return frame

    def __iter__(self) -> Iterator[MocapFrame]:
        while (frame := self.next_frame()) is not None:
            yield frame


# --------------------------------------------------------------------------- CSV


def write_frames_csv(path: str | pathlib.Path, frames: Iterable[MocapFrame]) -> int:
    """Write frames in the long CSV format; returns the number of rows written."""
    path = pathlib.Path(path)
    rows = 0
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_COLUMNS)
        for frame in frames:
            t = repr(float(frame.stamp))
            for name, body in frame.bodies.items():
                writer.writerow(
                    [t, "body", name, *map(repr, map(float, body.position)),
                     *map(repr, map(float, body.orientation)), frame.frame_id]
                )
                rows += 1
            for name, p in frame.labeled_markers.items():
                writer.writerow([t, "marker", name, *map(repr, map(float, p)), "", "", "", "",
                                 frame.frame_id])
                rows += 1
            for p in frame.markers:
                writer.writerow([t, "point", "", *map(repr, map(float, p)), "", "", "", "",
                                 frame.frame_id])
                rows += 1
    return rows


def _csv_frames(path: pathlib.Path) -> Iterator[MocapFrame]:
    with path.open(newline="") as fh:
        lines = (line for line in fh if line.strip() and not line.lstrip().startswith("#"))
        reader = csv.DictReader(lines)
        header = [h.strip() for h in (reader.fieldnames or [])]
        reader.fieldnames = header
        missing = [c for c in ("stamp", "kind", "name", "x", "y", "z") if c not in header]
        if missing:
            raise ReplayError(f"{path}: missing CSV columns {missing} (header: {header})")
        current: dict | None = None
        for line_no, row in enumerate(reader, start=2):
            try:
                stamp = float(row["stamp"])
                pos = [float(row[c]) for c in ("x", "y", "z")]
            except (TypeError, ValueError) as exc:
                raise ReplayError(f"{path}: row {line_no}: stamp and x, y, z must be numbers") from exc
            kind = (row["kind"] or "").strip()
            name = (row["name"] or "").strip()
            frame_id = (row.get("frame_id") or "").strip() or MOCAP_FRAME_ID
            if current is None or stamp != current["stamp"]:
                if current is not None:
                    yield _build(current)
                current = {"stamp": stamp, "bodies": {}, "labeled": {}, "points": [],
                           "frame_id": frame_id}
            elif frame_id != current["frame_id"]:
                raise ReplayError(
                    f"{path}: row {line_no}: frame_id {frame_id!r} differs within a frame"
                )
            if kind == "body":
                try:
                    quat = [float(row[c]) for c in ("qx", "qy", "qz", "qw")]
                except (KeyError, TypeError, ValueError) as exc:
                    raise ReplayError(
                        f"{path}: row {line_no}: body {name!r} needs qx, qy, qz, qw"
                    ) from exc
                current["bodies"][name] = BodyPose(pos, quat)
            elif kind == "marker":
                current["labeled"][name] = pos
            elif kind == "point":
                current["points"].append(pos)
            else:
                raise ReplayError(
                    f"{path}: row {line_no}: kind must be body, marker or point, got {kind!r}"
                )
        if current is not None:
            yield _build(current)


def _build(acc: dict) -> MocapFrame:
    return MocapFrame(
        stamp=acc["stamp"],
        bodies=acc["bodies"],
        labeled_markers=acc["labeled"],
        markers=np.asarray(acc["points"], dtype=float).reshape(-1, 3),
        frame_id=acc["frame_id"],
    )


class CsvReplaySource(_FrameIterSource):
    """Frames from a long-form mocap CSV (see the module docstring), read and checked whole
    when the source is created (a bad row is an error at start, not a replay that stops
    half-way), then replayed in time order (a file whose rows are out of order was replayed
    in file order, with stamps going back; ``reordered`` says it was sorted)."""

    def __init__(self, path: str | pathlib.Path) -> None:
        self.path = pathlib.Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"mocap CSV not found: {self.path}")
        try:
            frames = list(_csv_frames(self.path))
        except UnicodeDecodeError as exc:
            raise ReplayError(f"{self.path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        stamps = np.array([f.stamp for f in frames], dtype=float)
        finite = stamps[np.isfinite(stamps)]
        self.reordered = bool(np.any(np.diff(finite) < 0))
        if self.reordered:
            frames.sort(key=lambda f: f.stamp if math.isfinite(f.stamp) else -math.inf)
        super().__init__(iter(frames))


# --------------------------------------------------------------------------- rosbag


def default_item_name(topic: str) -> str:
    """Item name from a topic: the last segment that is not ``pose``/``point``/``position``.

    ``/vrpn_client_node/tip/pose`` → ``tip``; ``/mocap/marker3`` → ``marker3``.
    """
    parts = [p for p in topic.split("/") if p]
    while len(parts) > 1 and parts[-1] in ("pose", "point", "position"):
        parts.pop()
    if not parts:
        raise ReplayError(f"cannot derive an item name from topic {topic!r}")
    return parts[-1]


@dataclass(frozen=True)
class _Item:
    stamp: float
    kind: str
    name: str
    frame_id: str
    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float] | None


def _bag_items(path: pathlib.Path, topics: dict[str, str] | None) -> list[_Item]:
    from soft_inverse_ros.recording.bag_reader import BagReader

    items: list[_Item] = []
    with BagReader(path) as reader:
        available = {t: info.msgtype for t, info in reader.topics.items()}
        if topics is None:
            wanted = {t: default_item_name(t) for t, m in available.items()
                      if m in (POSE_TYPE, POINT_TYPE)}
            if not wanted:
                raise ReplayError(
                    f"{path}: no {POSE_TYPE} or {POINT_TYPE} topics (topics: {available})"
                )
        else:
            wanted = dict(topics)
            for topic in wanted:
                if topic not in available:
                    raise ReplayError(f"{path}: topic {topic!r} not in bag (has {sorted(available)})")
                if available[topic] not in (POSE_TYPE, POINT_TYPE):
                    raise ReplayError(
                        f"{path}: topic {topic!r} is {available[topic]}, "
                        f"expected {POSE_TYPE} or {POINT_TYPE}"
                    )
        sources: dict[str, set[str]] = {}  # topic -> "header" / "recording" times used
        for message, msg in reader.decoded(wanted):
            log_time_ns = message.timestamp_ns
            header = msg.header
            stamp_ns = int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)
            stamp = (stamp_ns if stamp_ns else log_time_ns) * 1e-9
            sources.setdefault(message.topic, set()).add("header" if stamp_ns else "recording")
            frame_id = header.frame_id or MOCAP_FRAME_ID
            name = wanted[message.topic]
            if message.msgtype == POSE_TYPE:
                p, q = msg.pose.position, msg.pose.orientation
                items.append(_Item(stamp, "body", name, frame_id, (p.x, p.y, p.z),
                                   (q.x, q.y, q.z, q.w)))
            else:
                p = msg.point
                items.append(_Item(stamp, "marker", name, frame_id, (p.x, p.y, p.z), None))
    used = set().union(*sources.values()) if sources else set()
    if len(used) > 1:  # two time bases (e.g. a simulated 100 s against the 1.7e9 s of the recording)
        by = {src: sorted(t for t, u in sources.items() if src in u) for src in sorted(used)}
        raise ReplayError(f"{path}: some messages carry header stamps ({by['header']}) and some none, "
                          f"timed by the recording ({by['recording']}): two time bases cannot be replayed "
                          "together")
    items.sort(key=lambda it: it.stamp)
    return items


def _group_items(items: list[_Item], tolerance: float, path: pathlib.Path) -> Iterator[MocapFrame]:
    i = 0
    while i < len(items):
        t0 = items[i].stamp
        j = i
        while j < len(items) and items[j].stamp - t0 <= tolerance:
            j += 1
        group = items[i:j]
        frame_ids = {it.frame_id for it in group}
        if len(frame_ids) > 1:
            raise ReplayError(f"{path}: frame ids {sorted(frame_ids)} mixed at t={t0:.9f} s")
        bodies = {it.name: BodyPose(it.position, it.orientation) for it in group
                  if it.kind == "body"}
        labeled = {it.name: it.position for it in group if it.kind == "marker"}
        # The frame is stamped with its newest item so that no item is in the future.
        stamp = group[-1].stamp
        yield MocapFrame(stamp, bodies, labeled, frame_id=frame_ids.pop())
        i = j


class RosbagReplaySource(_FrameIterSource):
    """Frames from a rosbag2 bag (a ``.mcap``/``.db3`` file or a bag directory).

    Args:
        path: The bag.
        topics: Topic → item name (bodies for PoseStamped, labeled markers for
            PointStamped); None takes every such topic, named by :func:`default_item_name`.
        stamp_tolerance: Largest header-stamp spread within one frame [s] (0: equal stamps).

    The bag's messages are loaded and sorted by stamp when the source is created.
    """

    def __init__(
        self,
        path: str | pathlib.Path,
        topics: dict[str, str] | None = None,
        stamp_tolerance: float = 0.0,
    ) -> None:
        self.path = pathlib.Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"bag not found: {self.path}")
        if not (math.isfinite(stamp_tolerance) and stamp_tolerance >= 0):
            raise ValueError(f"replay.stamp_tolerance must be ≥ 0 s, got {stamp_tolerance!r}")
        items = _bag_items(self.path, topics)
        super().__init__(_group_items(items, stamp_tolerance, self.path))
