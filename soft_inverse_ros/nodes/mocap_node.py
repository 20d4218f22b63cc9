"""mocap_node: motion capture in the robot frame (live, simulated or replayed).

Every frame a source delivers goes through :class:`~soft_inverse_ros.core.mocap.pipeline.
MocapPipeline` (unit scale + registration into the robot frame, NaN/jump/stale hygiene,
effector extraction), then is published:

* ``mocap/<body>/pose`` (geometry_msgs/PoseStamped) per accepted rigid body;
* ``mocap/markers`` (sensor_msgs/PointCloud2, x y z float32): the accepted markers,
  labeled ones first (sorted by name), then the unlabeled ones;
* ``mocap/effector`` (geometry_msgs/PointStamped): the effector position, only when a
  fresh sample was accepted (never NaN; nothing is published while it is lost);
* /diagnostics: frame rate, per-track accepted / rejected / dropped counters, the stale
  tracks (WARN while the effector is stale).

Stamps are capture times on the node clock (live: receive time minus the configured
latency; simulated: the capture instant; replay: the recorded times shifted so the
first frame is "now"). Frame: the registration's robot frame (``base_link``).

Backends (``backend``; empty: the ``source_config``'s own):

* ``sim``: a :class:`~soft_inverse_ros.core.mocap.simulated_source.SimulatedMocapSource`
  observing the simulated plant (``plant/markers_true``, ``plant/effector_true``) at
  ``rate`` Hz: the plant's effector as the labeled marker ``effector_marker``, its
  markers as ``marker_names`` (default ``m0``, ``m1``...), corrupted with noise,
  latency, dropouts and outliers (the source config's ``simulated`` block, with the
  ``sim.*`` parameters overriding it). With ``rigid_bodies`` and ``markers_per_body``
  the markers are grouped, in order, into rigid bodies (``<body>_m<j>``, e.g. the soft
  snake's plates, four markers each) whose poses are solved from the measured markers
  (:class:`~soft_inverse_ros.core.mocap.rigid_bodies.MarkerRigidBodies`, as a mocap
  system's rigid-body solver does) and published on ``mocap/<body>/pose``. Delivery happens on the capture ticks, so the
  latency is rounded up to a multiple of 1/``rate``.
* ``motioncapture``: a live system through libmotioncapture (vicon, optitrack, ...,
  ``mock`` for tests), read in a background thread (``waitForNextFrame`` blocks).
* ``replay``: a CSV or rosbag2 recording (``replay_csv`` / ``replay_bag`` in the source
  config; ``replay`` picks by the file suffix), paced by its stamps times ``replay.rate``,
  after ``start_delay`` seconds; it stops at the end (diagnostics: "replay finished").
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from geometry_msgs.msg import PointStamped, PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import PointCloud2

from soft_inverse_ros import topics
from soft_inverse_ros.core.mocap.config import (
    MocapConfig,
    MocapConfigError,
    load_mocap_config,
    noise_filter_problem,
    resolve_source_config,
)
from soft_inverse_ros.core.mocap.frame import MocapFrame
from soft_inverse_ros.core.mocap.pipeline import EFFECTOR_TRACK, MocapEstimate, MocapPipeline
from soft_inverse_ros.nodes import diagnostics as diag
from soft_inverse_ros.nodes import qos
from soft_inverse_ros.nodes.conversions import to_time
from soft_inverse_ros.nodes.periodic import create_periodic
from soft_inverse_ros.nodes.scheduling import apply_scheduling, check_scheduling, nice_field_metadata
from soft_inverse_ros.nodes.node_runtime import (
    NodeConfigError,
    check_known_parameters,
    config_parameter_names,
    declare_config,
    main_for,
)
from soft_inverse_ros.nodes.point_cloud import cloud_from_points, points_from_cloud
from soft_inverse_ros.nodes.polled_subscription import PolledSubscription

BACKENDS = ("", "sim", "motioncapture", "replay")
#: frames after which a node that found no effector in them says what it looks for
_NAME_CHECK_FRAMES = 50
#: node backend -> mocap config backends it accepts
_CONFIG_BACKENDS = {
    "sim": ("simulated",),
    "motioncapture": ("motioncapture",),
    "replay": ("replay_csv", "replay_bag"),
}


@dataclass(frozen=True)
class MocapNodeConfig:
    backend: str = field(default="", metadata={
        "description": "frame source; empty: the source_config's backend",
        "choices": BACKENDS})
    source_config: str = field(default="", metadata={
        "description": "mocap YAML (its 'mocap' block): a path or a file under config/; "
                       "empty: mocap_simulated.yaml (sim), mocap_vicon.yaml "
                       "(motioncapture), mocap_replay.yaml (replay)"})
    rate: float = field(default=200.0, metadata={
        "description": "sim: capture rate of the simulated system [Hz]", "range": (1.0, 2000.0)})
    effector_marker: str = field(default="tip", metadata={
        "description": "sim: label of the marker placed at plant/effector_true (empty: none)"})
    marker_names: tuple[str, ...] = field(default=(), metadata={
        "description": "sim: labels of the plant/markers_true points in order (empty: m0, "
                       "m1, ...)"})
    rigid_bodies: tuple[str, ...] = field(default=(), metadata={
        "description": "sim: rigid bodies made of the plant/markers_true points, "
                       "markers_per_body each in order (markers named <body>_m<j>); "
                       "empty: none"})
    markers_per_body: int = field(default=4, metadata={
        "description": "sim: markers per rigid body (at least 3 visible to solve a pose)",
        "range": (3, 100)})
    start_delay: float = field(default=1.0, metadata={
        "description": "replay: wait this long before the first frame [s] (subscribers "
                       "connect meanwhile)", "range": (0.0, 3600.0)})
    diagnostics_period: float = field(default=1.0, metadata={
        "description": "period of /diagnostics [s]", "range": (0.05, 60.0)})
    realtime_priority: int = field(default=0, metadata={
        "description": "SCHED_FIFO priority of this process's threads (1-99; 0: normal "
                       "scheduling): measurements reach the closed loop fresh on a busy CPU "
                       "(needs root or an rtprio limit, else a warning)",
        "range": (0, 99)})
    nice: int = field(default=0, metadata=nice_field_metadata("the capture system"))

    def __post_init__(self) -> None:
        check_scheduling(self.realtime_priority, self.nice)


@dataclass(frozen=True)
class SimOverrides:
    """``sim.*`` parameters: override the source config's ``simulated`` block (a negative
    value keeps the file's)."""

    noise_std: float = field(default=-1.0, metadata={
        "description": "position noise per axis [m] (negative: the source config's)",
        "range": (-1.0, 1.0)})
    latency: float = field(default=-1.0, metadata={
        "description": "capture-to-delivery latency [s] (negative: the source config's)",
        "range": (-1.0, 10.0)})
    dropout_probability: float = field(default=-1.0, metadata={
        "description": "independent whole-frame dropout probability (negative: the source "
                       "config's)", "range": (-1.0, 1.0)})
    burst_probability: float = field(default=-1.0, metadata={
        "description": "probability per frame that a dropout burst starts (negative: the "
                       "source config's)", "range": (-1.0, 1.0)})
    outlier_probability: float = field(default=-1.0, metadata={
        "description": "outlier probability per item (negative: the source config's)",
        "range": (-1.0, 1.0)})
    outlier_magnitude: float = field(default=-1.0, metadata={
        "description": "outlier displacement [m] (negative: the source config's)",
        "range": (-1.0, 10.0)})
    seed: int = field(default=-1, metadata={
        "description": "random seed (negative: the source config's)",
        "range": (-1, 2**31 - 1)})

    def apply(self, simulated):
        """``simulated`` (a SimulatedMocapConfig) with the non-negative overrides.

        Raises:
            ValueError: an override the simulated config refuses.
        """
        changes = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                   if getattr(self, f.name) >= 0}
        return dataclasses.replace(simulated, **changes) if changes else simulated


def estimate_messages(estimate: MocapEstimate, frame_id: str):
    """The messages one processed frame is published as: ``(poses, cloud, effector)`` —
    body name → PoseStamped, the PointCloud2 of its labeled then unlabeled markers (None
    without markers), the effector's PointStamped (None unless a fresh finite one)."""
    frame = estimate.frame
    stamp = to_time(frame.stamp)
    poses = {}
    for name, body in frame.bodies.items():
        msg = PoseStamped()
        msg.header.stamp = stamp
        msg.header.frame_id = frame_id
        p, q = body.position, body.orientation
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = map(float, p)
        (msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z,
         msg.pose.orientation.w) = map(float, q)
        poses[name] = msg
    labeled = [frame.labeled_markers[n] for n in sorted(frame.labeled_markers)]
    points = np.vstack([np.reshape(labeled, (-1, 3)), frame.markers])
    cloud = cloud_from_points(points, frame_id, stamp) if len(points) else None
    effector = None
    eff = estimate.effector
    if eff.fresh and eff.position is not None and np.all(np.isfinite(eff.position)):
        effector = PointStamped()
        effector.header.stamp = to_time(eff.stamp)
        effector.header.frame_id = frame_id
        effector.point.x, effector.point.y, effector.point.z = map(float, eff.position)
    return poses, cloud, effector


def _topic_name(body: str) -> str:
    """``mocap/<body>/pose`` with the body name made a valid ROS topic token."""
    token = re.sub(r"[^A-Za-z0-9_]", "_", body) or "_"
    if token[0].isdigit():
        token = "_" + token
    return f"{topics.MOCAP_BODY_PREFIX}/{token}/pose"


class MocapNode(Node):
    def __init__(self, node_name: str = "mocap_node", **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, MocapNodeConfig)
        self.sim_overrides = declare_config(self, SimOverrides, prefix="sim.")
        check_known_parameters(
            self, config_parameter_names(MocapNodeConfig)
            + config_parameter_names(SimOverrides, prefix="sim.")
        )
        cfg = self.config
        path = resolve_source_config(cfg.source_config, cfg.backend)
        try:
            mocap = load_mocap_config(path)
        except (MocapConfigError, OSError) as exc:
            raise NodeConfigError(f"{self.get_name()}: source_config {path}: {exc}") from None
        backend = cfg.backend or {"simulated": "sim", "replay_csv": "replay",
                                  "replay_bag": "replay"}.get(mocap.backend, mocap.backend)
        mocap = self._adapt(mocap, backend, path)
        self.mocap_config = mocap
        self.backend = backend
        self.pipeline = MocapPipeline.from_config(mocap)
        self.frame_id = self.pipeline.robot_frame
        self._lock = threading.Lock()  # pipeline + counters (reader thread vs diagnostics)
        self._pose_pubs: dict[str, object] = {}
        self._markers_pub = self.create_publisher(PointCloud2, topics.MOCAP_MARKERS, qos.SENSOR_DATA)
        self._effector_pub = self.create_publisher(PointStamped, topics.MOCAP_EFFECTOR,
                                                   qos.SENSOR_DATA)
        self._frames = 0
        self._effector_published = 0
        self._last_frame_time = -math.inf
        self._rate_window = (self._now(), 0)  # frames per second of the node clock
        self._frame_rate = 0.0
        self._status = "running"
        self._last_error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.source = None

        if backend == "sim":
            self._setup_sim(mocap)
        else:
            self._setup_reader(mocap, backend)
        self._diag = diag.DiagnosticsPublisher(self, self._diagnostics,
                                               period=cfg.diagnostics_period)
        self._scheduling = apply_scheduling(self, cfg.realtime_priority,
                                            "measurements may reach the closed loop late on a busy machine",
                                            cfg.nice)
        self.get_logger().info(
            f"mocap backend {backend} ({mocap.backend}) from {path}; robot frame "
            f"{self.frame_id}; effector "
            f"{'none' if mocap.effector is None else mocap.effector.mode}"
        )

    # ------------------------------------------------------------------ setup
    def _adapt(self, mocap: MocapConfig, backend: str, path: Path) -> MocapConfig:
        accepted = _CONFIG_BACKENDS[backend]
        if backend == "sim" and mocap.simulated is None:
            raise NodeConfigError(
                f"{self.get_name()}: backend sim needs a 'simulated' block in {path}")
        if backend == "motioncapture" and mocap.motioncapture is None:
            raise NodeConfigError(
                f"{self.get_name()}: backend motioncapture needs a 'motioncapture' block in {path}")
        if backend == "replay":
            if mocap.replay is None:
                raise NodeConfigError(f"{self.get_name()}: backend replay needs a 'replay' block "
                                      f"in {path}")
            if mocap.backend not in accepted:
                kind = "replay_csv" if mocap.replay.path.suffix.lower() == ".csv" else "replay_bag"
                mocap = dataclasses.replace(mocap, backend=kind)
        elif mocap.backend not in accepted:
            mocap = dataclasses.replace(mocap, backend=accepted[0])
        if backend == "sim":
            try:
                sim = self.sim_overrides.apply(mocap.simulated)
            except ValueError as exc:
                raise NodeConfigError(f"{self.get_name()}: sim.*: {exc}") from None
            problem = noise_filter_problem(sim, mocap.filter)
            if problem:
                raise NodeConfigError(f"{self.get_name()}: noise_std: {problem}")
            mocap = dataclasses.replace(mocap, simulated=sim)
        return mocap

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _setup_sim(self, mocap: MocapConfig) -> None:
        from soft_inverse_ros.core.mocap.simulated_source import SimulatedMocapSource

        self.source = SimulatedMocapSource(mocap.simulated, mocap.registration)
        self._truth_markers: np.ndarray | None = None
        self._truth_effector: np.ndarray | None = None
        self._truth_bad = 0
        self._last_capture = -math.inf
        from soft_inverse_ros.core.mocap.rigid_bodies import MarkerRigidBodies

        names = tuple(self.config.marker_names)
        self._rigid_bodies = None
        if self.config.rigid_bodies:
            if names:
                raise NodeConfigError(f"{self.get_name()}: give rigid_bodies or marker_names, "
                                      "not both (rigid-body markers are named <body>_m<j>)")
            groups = MarkerRigidBodies.grouped(self.config.rigid_bodies,
                                               self.config.markers_per_body)
            try:
                self._rigid_bodies = MarkerRigidBodies(groups)
            except ValueError as exc:
                raise NodeConfigError(f"{self.get_name()}: {exc}") from None
            names = tuple(m for group in groups.values() for m in group)
        self._marker_names = names
        # the plant's newest truth, taken at each capture (polled_subscription.py): no
        # callback per plant step (2 x 100 messages/s that only kept the newest)
        self._truth = (
            (PolledSubscription(self, PointCloud2, topics.PLANT_MARKERS_TRUE, qos.HIGH_RATE),
             self._on_true_markers),
            (PolledSubscription(self, PointStamped, topics.PLANT_EFFECTOR_TRUE, qos.HIGH_RATE),
             self._on_true_effector))
        create_periodic(self, 1.0 / self.config.rate, self._sim_tick)

    def _setup_reader(self, mocap: MocapConfig, backend: str) -> None:
        from soft_inverse_ros.core.mocap.sources import open_source

        if mocap.motioncapture is not None and mocap.backend == "motioncapture":
            # connect() blocks (no timeout, SIGINT only honoured afterwards): say what for
            mc = mocap.motioncapture
            self.get_logger().info(f"connecting to {mc.system} at {mc.hostname} ...")
        try:
            self.source = open_source(mocap, clock=self._now)
        except (ConnectionError, OSError, ValueError) as exc:
            raise NodeConfigError(f"{self.get_name()}: cannot open the {mocap.backend} source: "
                                  f"{exc}") from None
        if getattr(self.source, "reordered", False):
            self.get_logger().warning(f"{mocap.replay.path}: rows out of time order: replayed sorted by stamp")
        target = self._read_live if backend == "motioncapture" else self._read_replay
        self._thread = threading.Thread(target=self._reader_guard, args=(target,),
                                        name="mocap-reader", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ sim backend
    def _on_true_markers(self, msg: PointCloud2) -> None:
        try:
            pts = points_from_cloud(msg)
        except ValueError:
            self._truth_bad += 1
            return
        self._truth_markers = pts

    def _on_true_effector(self, msg: PointStamped) -> None:
        self._truth_effector = np.array([msg.point.x, msg.point.y, msg.point.z])

    def _sim_tick(self) -> None:
        now = self._now()
        if now <= self._last_capture:
            return
        for subscription, take in self._truth:
            subscription.deliver_newest(take)
        markers: dict[str, np.ndarray] = {}
        if self._truth_markers is not None:
            pts = self._truth_markers
            names = self._marker_names or tuple(f"m{i}" for i in range(len(pts)))
            if len(names) != len(pts):
                self._last_error = (f"plant/markers_true has {len(pts)} points but "
                                    f"{len(names)} marker_names")
            finite = np.all(np.isfinite(pts), axis=1)
            markers.update({n: p for n, p, ok in zip(names, pts, finite) if ok})
        if self.config.effector_marker and self._truth_effector is not None:
            if np.all(np.isfinite(self._truth_effector)):
                markers[self.config.effector_marker] = self._truth_effector
        if markers:
            self.source.observe(now, markers=markers)
            self._last_capture = now
        for frame in self.source.poll(now):
            if self._rigid_bodies is not None:
                frame = self._rigid_bodies.solve(frame)
            self._process(frame)

    # ------------------------------------------------------------------ reader threads
    def _reader_guard(self, read) -> None:
        """Run a reader loop; an unexpected error ends it loudly (status + error log),
        not silently: the effector then goes stale and the controller falls back."""
        try:
            read()
        except Exception as exc:  # noqa: BLE001 -- report whatever stopped the reader
            self._last_error = f"mocap reader stopped: {type(exc).__name__}: {exc}"
            self._status = "reader stopped"
            self.get_logger().error(self._last_error)

    def _read_live(self) -> None:
        while not self._stop.is_set():
            try:
                frame = self.source.next_frame()
            except Exception as exc:  # a lost connection: report and retry slowly
                self._last_error = f"motioncapture read failed: {exc}"
                self._status = "read error"
                time.sleep(0.5)
                continue
            self._status = "running"
            if frame is not None and not self._stop.is_set():
                self._process(frame)

    def _read_replay(self) -> None:
        rate = self.mocap_config.replay.rate
        if self._stop.wait(self.config.start_delay):
            return
        first = None
        start_wall = start_ros = 0.0
        while not self._stop.is_set():
            try:
                frame = self.source.next_frame()
            except (ValueError, OSError) as exc:
                self._last_error = f"replay read failed: {exc}"
                self._status = "replay error"
                self.get_logger().error(self._last_error)
                return
            if frame is None:
                self._status = "replay finished"
                self.get_logger().info(f"replay finished after {self._frames} frames")
                return
            if not math.isfinite(frame.stamp):
                self._process(frame)  # the pipeline counts and drops it
                continue
            if first is None:
                first, start_wall, start_ros = frame.stamp, time.monotonic(), self._now()
            offset = (frame.stamp - first) / rate
            delay = start_wall + offset - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            self._process(dataclasses.replace(frame, stamp=start_ros + offset))

    # ------------------------------------------------------------------ publishing
    def _process(self, frame: MocapFrame) -> None:
        with self._lock:
            estimate = self.pipeline.process(frame)
            self._frames += 1
            self._last_frame_time = self._now()
        self._publish(estimate)
        if self._frames == _NAME_CHECK_FRAMES and not self._effector_published:
            self._say_missing_effector(frame)

    def _say_missing_effector(self, frame: MocapFrame) -> None:
        """Once, when frames come but none gave the effector: the name it looks for, and the
        names the frames hold (a label spelled otherwise, ``Tip`` for ``tip``)."""
        eff = self.mocap_config.effector
        if eff is None:  # (the snake's plates: no effector point is asked for)
            return
        wanted = list(eff.markers) if eff.markers else [eff.name]
        self.get_logger().warning(
            f"{self._frames} frames and no effector: it is the {eff.mode} of {wanted}; the frames hold "
            f"bodies {sorted(frame.bodies)} and labeled markers {sorted(frame.labeled_markers)}")

    def _pose_pub(self, body: str):
        pub = self._pose_pubs.get(body)
        if pub is None:
            pub = self.create_publisher(PoseStamped, _topic_name(body), qos.SENSOR_DATA)
            self._pose_pubs[body] = pub
        return pub

    def _publish(self, estimate: MocapEstimate) -> None:
        poses, cloud, effector = estimate_messages(estimate, self.frame_id)
        for name, msg in poses.items():
            self._pose_pub(name).publish(msg)
        if cloud is not None:
            self._markers_pub.publish(cloud)
        if effector is not None:
            self._effector_pub.publish(effector)
            self._effector_published += 1

    # ------------------------------------------------------------------ health
    def _diagnostics(self):
        now = self._now()
        with self._lock:
            stale = self.pipeline.stale_names(now)
            stats = self.pipeline.statistics()
            effector = self.pipeline.effector(now)
            frames = self._frames
        wall0, frames0 = self._rate_window
        if now > wall0:  # frames per second of the node clock (simulated s in sim time)
            self._frame_rate = (frames - frames0) / (now - wall0)
        self._rate_window = (now, frames)
        level, message = diag.OK, "ok"
        if self._status not in ("running",):
            level, message = diag.WARN, self._status
        if self.mocap_config.effector is not None and effector.stale:
            level = diag.WARN
            message = "effector stale" if effector.position is not None else "no effector yet"
        if self._last_error:
            level, message = diag.WARN, self._last_error
            self._last_error = ""
        total = stats.get("total", {})
        values: dict[str, object] = {
            "backend": self.backend,
            "scheduling": getattr(self, "_scheduling", "normal"),
            "frames": frames,
            "frame_rate_hz": self._frame_rate,
            "last_frame_age_s": now - self._last_frame_time,
            "effector_published": self._effector_published,
            "effector_stale": bool(effector.stale),
            "stale_tracks": ", ".join(stale) or "none",
        }
        values.update({f"total.{k}": v for k, v in total.items()})
        eff_stats = stats.get(EFFECTOR_TRACK)
        if eff_stats:
            values.update({f"effector.{k}": v for k, v in eff_stats.items()})
        if self.backend == "sim":
            s = self.source.stats
            values.update({"sim.frames_dropped": s.frames_dropped,
                           "sim.outliers_injected": s.outliers_injected,
                           "sim.truth_received": self._truth_effector is not None
                           or self._truth_markers is not None})
            if self._rigid_bodies is not None:
                values.update({f"body.{n}.unsolved_frames": k
                               for n, k in self._rigid_bodies.unsolved.items()})
        return [diag.status(f"{self.get_name()}: mocap", level, message, values)]

    def close(self) -> None:
        """Stop the reader thread (called by the runtime on shutdown)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)


def main(args=None) -> int:
    return main_for(MocapNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
