"""Load one run from a bag into numpy time series (SI units).

Times are in seconds since ``RunData.origin_ns`` (the earliest time of the loaded series,
integer ns of ROS time), so float64 keeps sub-nanosecond resolution even for wall-clock
stamps. They are the publishers' ``header.stamp`` (the time each message describes); a series
whose stamps are zero falls back to the bag (receive) time and says so in
``time_source`` (messages stamped 0 in a stamped series are dropped, with a note), and
times that go back in recording order are listed in ``RunData.clock_jumps``. Topics are looked up by their names in :mod:`soft_inverse_ros.topics`,
in the root namespace or, when unique, in any namespace (``/robot1/target``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from soft_inverse_ros import topics as T
from soft_inverse_ros.recording.bag_reader import BagReader

#: Effector sources compared with the target: label -> topic.
EFFECTOR_TOPICS = {"plant": T.PLANT_EFFECTOR_TRUE, "mocap": T.MOCAP_EFFECTOR}


def find_topic(available: Iterable[str], name: str, namespace: str | None = None) -> str | None:
    """Bag topic for the graph topic ``name``.

    With ``namespace`` only ``<namespace>/<name>`` matches, except for an absolute ``name``
    (``/diagnostics``: a node in a namespace publishes there too), which matches itself
    first. Without, ``/<name>`` if present, else the single topic ending in ``/<name>``;
    None when absent.

    Raises:
        ValueError: several namespaced candidates (pass ``namespace``).
    """
    available = list(available)
    rel = name.lstrip("/")
    if namespace is not None:
        if name.startswith("/") and name in available:
            return name
        full = f"/{namespace.strip('/')}/{rel}" if namespace.strip("/") else f"/{rel}"
        return full if full in available else None
    if f"/{rel}" in available:
        return f"/{rel}"
    matches = [t for t in available if t.endswith(f"/{rel}")]
    if len(matches) > 1:
        raise ValueError(f"several topics match {name!r}: {matches}; give the namespace")
    return matches[0] if matches else None


def _ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _stamp(msg: Any) -> int:
    return _ns(msg.header.stamp)


#: a series whose times go back by more than this [s] in recording order had its clock
#: restarted (a simulated clock started again, two runs in one bag); message reordering on
#: the way to the recorder is milliseconds
CLOCK_JUMP_S = 0.5


def _times(topic: str, stamps: np.ndarray, receive: np.ndarray, notes: list[str],
           clock_jumps: list[str]) -> tuple[np.ndarray, str, np.ndarray]:
    """(times [ns], ``"header"`` or ``"receive"``, which messages to keep) of one series:
    the header stamps when the publisher stamps (messages stamped 0 among stamped ones are
    dropped, with a note: mixing the bag's receive time in put wall-clock times among
    simulated ones), else the bag's receive times. Times going back by more than
    :data:`CLOCK_JUMP_S` in recording order are reported in ``clock_jumps``."""
    stamped = stamps > 0
    if len(stamps) and stamped.any():
        if not stamped.all():
            notes.append(f"{topic}: {int(np.sum(~stamped))} of {len(stamps)} messages stamped 0 "
                         "ignored (the rest are stamped)")
        t, source, keep = stamps, "header", stamped
    else:
        t, source, keep = receive, "receive", np.ones(len(stamps), dtype=bool)
    kept = t[keep]
    if len(kept) > 1:
        back = np.diff(kept)
        k = int(np.argmin(back))
        if back[k] < -CLOCK_JUMP_S * 1e9:
            clock_jumps.append(f"{topic}: its {source} times go back {-back[k] * 1e-9:.2f} s after "
                               f"message {k + 1} of {len(kept)}")
    return t, source, keep


#: Time fields of the series dataclasses (int64 ns while loading, then s since the origin).
_TIME_FIELDS = ("t", "t_receive", "target_t")
_UNSET = np.iinfo(np.int64).min


def _rebase(series: Any, origin_ns: int) -> Any:
    changes = {}
    for f in fields(series):
        if f.name in _TIME_FIELDS:
            ns = getattr(series, f.name)
            sec = (ns - origin_ns).astype(float) * 1e-9
            sec[ns == _UNSET] = np.nan
            changes[f.name] = sec
    return replace(series, **changes)


@dataclass(frozen=True)
class PointSeries:
    """Points of a ``geometry_msgs/PointStamped`` topic."""

    topic: str
    t: np.ndarray  # (n,) [s]
    xyz: np.ndarray  # (n, 3) [m]
    t_receive: np.ndarray  # (n,) bag time [s]
    time_source: str  # "header" or "receive"
    frame_id: str

    def __len__(self) -> int:
        return len(self.t)


@dataclass(frozen=True)
class CommandSeries:
    """``soft_inverse_ros_msgs/ActuatorCommand`` messages with the run's actuator set."""

    topic: str
    t: np.ndarray  # (n,) header stamp: time computed [s]
    t_receive: np.ndarray  # (n,) [s]
    target_t: np.ndarray  # (n,) stamp of the answered target [s], NaN when unset
    seq: np.ndarray  # (n,)
    names: tuple[str, ...]  # n_a
    modes: np.ndarray  # (n_a,) MODE_*
    values: np.ndarray  # (n, n_a) setpoints
    efforts: np.ndarray  # (n, n_a) [N or Pa]
    strokes: np.ndarray  # (n, n_a) [m or m^3]
    status: np.ndarray  # (n,) STATUS_*
    time_source: str
    #: Commands dropped because their actuator set differed from the run's (most common) one.
    dropped: int = 0

    def __len__(self) -> int:
        return len(self.t)


@dataclass(frozen=True)
class SnapshotSeries:
    """``ComplianceSnapshot`` timing (the matrices are not needed by the analysis)."""

    topic: str
    t: np.ndarray  # (n,) time of the FEM state [s]
    t_receive: np.ndarray
    seq: np.ndarray
    fem_step_time: np.ndarray  # (n,) [s]
    compliance_time: np.ndarray  # (n,) [s]
    time_source: str

    def __len__(self) -> int:
        return len(self.t)


@dataclass(frozen=True)
class SolverSeries:
    """``InverseSolverStatus`` per controller tick."""

    topic: str
    t: np.ndarray
    solve_time: np.ndarray  # [s]
    iterations: np.ndarray
    snapshot_age: np.ndarray  # [s]
    command_status: np.ndarray
    effector_error: np.ndarray  # predicted [m]
    time_source: str
    #: whether the closed loop corrected the tick (None: the bag's messages lack the field)
    closed_loop_active: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.t)


@dataclass
class RunData:
    """Everything the metrics and plots need from one bag."""

    bag: Path
    topic_counts: dict[str, int]
    #: ROS time [ns] that the series' times [s] count from.
    origin_ns: int = 0
    target: PointSeries | None = None
    effectors: dict[str, PointSeries] = field(default_factory=dict)
    commands: CommandSeries | None = None
    snapshots: SnapshotSeries | None = None
    solver: SolverSeries | None = None
    markers_topic: str | None = None
    notes: list[str] = field(default_factory=list)
    #: series whose times went back in recording order (:data:`CLOCK_JUMP_S`), described
    clock_jumps: list[str] = field(default_factory=list)

    @property
    def t0(self) -> float:
        """Earliest time of any loaded series [s] (origin of the plots)."""
        starts = [s.t[0] for s in self._series() if len(s)]
        return float(min(starts)) if starts else 0.0

    def _series(self) -> list:
        items: list = [self.target, self.commands, self.snapshots, self.solver]
        items += list(self.effectors.values())
        return [s for s in items if s is not None]


def _order(t: np.ndarray) -> np.ndarray:
    return np.argsort(t, kind="stable")


def _read(reader: BagReader, topic: str, run: RunData) -> tuple[list, np.ndarray, np.ndarray, str]:
    """The messages of ``topic`` kept for the analysis, in time order: (``(receive ns,
    message)`` list, their times [ns], their receive times [ns], time source); see
    :func:`_times`."""
    msgs = reader.read_topic(topic)
    recv = np.array([t for t, _ in msgs], dtype=np.int64)
    stamps = np.array([_stamp(m) for _, m in msgs], dtype=np.int64)
    t, source, keep = _times(topic, stamps, recv, run.notes, run.clock_jumps)
    idx = np.flatnonzero(keep)
    idx = idx[_order(t[idx])]
    return [msgs[i] for i in idx], t[idx], recv[idx], source


def _load_points(reader: BagReader, topic: str, run: RunData) -> PointSeries | None:
    msgs, t, recv, source = _read(reader, topic, run)
    if not msgs:
        return None
    xyz = np.array([[m.point.x, m.point.y, m.point.z] for _, m in msgs], dtype=float)
    return PointSeries(topic, t, xyz, recv, source, msgs[0][1].header.frame_id)


def _load_commands(reader: BagReader, topic: str, run: RunData) -> CommandSeries | None:
    msgs, t_all, recv_all, source = _read(reader, topic, run)
    notes = run.notes
    if not msgs:
        return None
    keys = [tuple(m.names) for _, m in msgs]
    names = max(set(keys), key=keys.count)
    keep = [(t, m) for (t, m), k in zip(msgs, keys) if k == names]
    same = np.array([k == names for k in keys])
    t, recv = t_all[same], recv_all[same]
    dropped = len(msgs) - len(keep)
    if dropped:
        notes.append(f"{topic}: {dropped} commands with another actuator set than {names} ignored")
    target = np.array([_ns(m.target_stamp) for _, m in keep], dtype=np.int64)
    target[target <= 0] = _UNSET
    n_a = len(names)

    def rows(attr: str) -> np.ndarray:
        out = np.full((len(keep), n_a), np.nan)
        for i, (_, m) in enumerate(keep):
            v = np.asarray(getattr(m, attr), dtype=float)
            if len(v) == n_a:
                out[i] = v
        return out

    return CommandSeries(
        topic=topic, t=t, t_receive=recv, target_t=target,
        seq=np.array([m.seq for _, m in keep], dtype=np.int64),
        names=names,
        modes=np.asarray(keep[-1][1].modes, dtype=np.uint8) if len(keep[-1][1].modes) == n_a
        else np.zeros(n_a, dtype=np.uint8),
        values=rows("values"), efforts=rows("efforts"), strokes=rows("strokes"),
        status=np.array([m.status for _, m in keep], dtype=np.uint8),
        time_source=source, dropped=dropped,
    )


def _load_snapshots(reader: BagReader, topic: str, run: RunData) -> SnapshotSeries | None:
    msgs, t, recv, source = _read(reader, topic, run)
    if not msgs:
        return None
    return SnapshotSeries(
        topic, t, recv, np.array([m.seq for _, m in msgs], dtype=np.int64),
        np.array([m.fem_step_time for _, m in msgs], dtype=float),
        np.array([m.compliance_time for _, m in msgs], dtype=float), source,
    )


def _load_solver(reader: BagReader, topic: str, run: RunData) -> SolverSeries | None:
    msgs, t, recv, source = _read(reader, topic, run)
    if not msgs:
        return None

    def col(attr: str, dtype: Any = float) -> np.ndarray:
        return np.array([getattr(m, attr) for _, m in msgs], dtype=dtype)

    closed = col("closed_loop_active", bool) if all(hasattr(m, "closed_loop_active") for _, m in msgs) else None
    return SolverSeries(
        topic, t, col("solve_time"), col("iterations", np.int64), col("snapshot_age"),
        col("command_status", np.uint8), col("effector_error"), source, closed,
    )


def load_run(bag: str | Path, namespace: str | None = None) -> RunData:
    """Read the control-loop topics of ``bag`` (folder or storage file); absent ones are None.

    Raises:
        FileNotFoundError: no such bag.
        ValueError: a topic is ambiguous across namespaces (pass ``namespace``).
    """
    with BagReader(bag) as reader:
        info = reader.topics
        run = RunData(Path(bag), {t: i.count for t, i in info.items()})
        run.notes += reader.type_warnings

        def topic_of(name: str, msgtype: str) -> str | None:
            topic = find_topic(info, name, namespace)
            if topic is None:
                return None
            if info[topic].msgtype != msgtype:
                run.notes.append(f"{topic} has type {info[topic].msgtype}, expected {msgtype}; ignored")
                return None
            return topic

        point = "geometry_msgs/msg/PointStamped"
        if topic := topic_of(T.TARGET, point):
            run.target = _load_points(reader, topic, run)
        for label, name in EFFECTOR_TOPICS.items():
            if (topic := topic_of(name, point)) and (series := _load_points(reader, topic, run)):
                run.effectors[label] = series
        if topic := topic_of(T.ACTUATOR_COMMAND, "soft_inverse_ros_msgs/msg/ActuatorCommand"):
            run.commands = _load_commands(reader, topic, run)
        if topic := topic_of(T.COMPLIANCE, "soft_inverse_ros_msgs/msg/ComplianceSnapshot"):
            run.snapshots = _load_snapshots(reader, topic, run)
        if topic := topic_of(T.INVERSE_STATUS, "soft_inverse_ros_msgs/msg/InverseSolverStatus"):
            run.solver = _load_solver(reader, topic, run)
        run.markers_topic = topic_of(T.ROBOT_MARKERS, "visualization_msgs/msg/MarkerArray")
    loop = (T.TARGET, T.ACTUATOR_COMMAND, T.COMPLIANCE, T.INVERSE_STATUS, *EFFECTOR_TOPICS.values())
    if not any(find_topic(info, name, namespace) for name in loop):
        where = f" under namespace {namespace!r}" if namespace is not None else ""
        shown = ", ".join(sorted(info)[:6]) + (", ..." if len(info) > 6 else "")
        raise ValueError(f"{bag}: no topic of the control loop ({T.TARGET}, {T.ACTUATOR_COMMAND}, "
                         f"{T.COMPLIANCE}, ...){where}; its topics: {shown or 'none'}")
    starts = [int(s.t[0]) for s in run._series() if len(s)]
    run.origin_ns = min(starts) if starts else 0
    if run.target is not None:
        run.target = _rebase(run.target, run.origin_ns)
    run.effectors = {k: _rebase(v, run.origin_ns) for k, v in run.effectors.items()}
    for name in ("commands", "snapshots", "solver"):
        if (series := getattr(run, name)) is not None:
            setattr(run, name, _rebase(series, run.origin_ns))
    return run
