"""recorder_node: record topics of the soft_inverse_ros graph to a rosbag2 MCAP bag.

Subscribes with ``raw=True`` (no deserialization) to a topic list and writes every CDR
message unchanged — the publisher's ``header.stamp`` stays in the data — with its receive
time [ns] as the bag timestamp. Topics are subscribed when a publisher for them is
discovered (every ``discovery_period``), with a QoS adapted to the publishers' (reliable
only if all publishers are, transient-local only if all are), and the publishers' QoS
profiles are stored in the bag metadata, as ``ros2 bag record`` does.

On SIGINT/SIGTERM the node stops taking new topics, drains the messages already
delivered to it, then closes the bag (MCAP summary + ``metadata.yaml``): nothing received
is lost. A bag is only complete once closed; after a SIGKILL (or a power cut) its MCAP
file has no summary: ``BagReader`` (``analyze``) then reads the messages of its complete
chunks (1 MB each) and says so; the chunk being written is lost.

Parameters:
    output (str): bag folder to create; "" -> ``soft_inverse_ros_<YYYYmmdd_HHMMSS>``.
    topics (str[]): names or fnmatch patterns, relative ones resolved in the node namespace.
        Default: every topic of :mod:`soft_inverse_ros.topics` (and ``mocap/*/pose``).
    all_topics (bool): record every discovered topic instead (hidden topics excepted).
    discovery_period (float, s): how often the graph is scanned for new topics.
    qos_depth (int): history depth of the recording subscriptions.
    storage (str): "mcap" (default) or "sqlite3".
    compress (bool): zstd chunk compression.
    executor (str): how the messages are taken. "poll" (default): the subscriptions sit on
        a helper node that no executor spins (nodes/polled_subscription.py); every
        ``poll_period`` the node takes every message each of them holds, writes the batch
        in receive-time order, bag time = DDS receive timestamp. No callback runs per
        message: at 2720 messages/s (``bench recorder``) it took 19 % of a core against
        53 % ("events") and 108 % ("single"), and in 30 s main-job runs it kept 64-100 % of
        the 1 kHz commands where "single" kept 4-14 % (BENCHMARKS.md, twenty-third
        session). What it still loses, it loses while the whole process is starved (no
        message received for seconds), or when starved longer than ``qos_depth`` messages
        of a topic. The executor then runs only the node's timers and services (rclpy's
        EventsExecutor). "single": SingleThreadedExecutor, a callback per message, bag time
        = DDS receive timestamp. "events": rclpy's experimental EventsExecutor, a callback
        per message, bag time = node clock in the callback; it takes more messages per
        second than "single", but on this project's 2-core machine it delivered nothing
        from some subscriptions for a whole run: the simulated robot's topics in 3 of 7
        main-job runs: their last ``qos_depth`` messages, which had waited in the
        subscriptions' queues, arrived only at the drain, so the judged tracking window
        shrank to 12 s of 45. With "single", 0 of 4 runs (BENCHMARKS.md, nineteenth
        session).
    poll_period (float, s): "poll": the period of the takes.
    report_period (float, s): period of the count log lines; 0 disables them.
    drain_timeout (float, s): longest time spent draining after a stop request.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import math
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from soft_inverse_ros import topics as T
from soft_inverse_ros.nodes.periodic import create_timer

#: Topics recorded by default (relative names resolve in the node namespace).
DEFAULT_TOPICS: tuple[str, ...] = (
    T.TARGET,
    T.TARGET_GOAL,
    T.ACTUATOR_COMMAND,
    T.INVERSE_STATUS,
    T.FEM_STATE,
    T.COMPLIANCE,
    T.SERVO_STATES,
    T.CHAMBER_PRESSURES,
    T.PLANT_EFFECTOR_TRUE,
    T.PLANT_MARKERS_TRUE,
    T.PLANT_PLATE_POSES,
    T.PLANT_COM_TRUE,
    T.MOCAP_EFFECTOR,
    T.MOCAP_MARKERS,
    f"{T.MOCAP_BODY_PREFIX}/*/pose",
    T.DIAGNOSTICS,
    T.ROBOT_MARKERS,
)
EXECUTORS = ("poll", "events", "single")
STORAGES = ("mcap", "sqlite3")


@dataclass(frozen=True)
class RecorderConfig:
    """Validated recorder parameters (see the module doc for their meaning)."""

    output: str = ""
    topics: tuple[str, ...] = DEFAULT_TOPICS
    all_topics: bool = False
    discovery_period: float = 0.25
    qos_depth: int = 1000
    storage: str = "mcap"
    compress: bool = False
    executor: str = "poll"
    poll_period: float = 0.02
    report_period: float = 10.0
    drain_timeout: float = 2.0

    def __post_init__(self) -> None:
        if not self.all_topics and not self.topics:
            raise ValueError("parameter 'topics' is empty and 'all_topics' is false")
        if any(not isinstance(t, str) or not t.strip() for t in self.topics):
            raise ValueError(f"parameter 'topics' has an empty or non-string entry: {self.topics}")
        for name in ("discovery_period", "poll_period", "report_period", "drain_timeout"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"parameter {name!r} must be a finite time [s], got {getattr(self, name)}")
        if not self.discovery_period > 0:
            raise ValueError(f"parameter 'discovery_period' must be > 0 s, got {self.discovery_period}")
        if self.qos_depth < 1:
            raise ValueError(f"parameter 'qos_depth' must be >= 1, got {self.qos_depth}")
        if self.storage not in STORAGES:
            raise ValueError(f"parameter 'storage' must be one of {STORAGES}, got {self.storage!r}")
        if self.executor not in EXECUTORS:
            raise ValueError(f"parameter 'executor' must be one of {EXECUTORS}, got {self.executor!r}")
        if not self.poll_period > 0:
            raise ValueError(f"parameter 'poll_period' must be > 0 s, got {self.poll_period}")
        if self.report_period < 0:
            raise ValueError(f"parameter 'report_period' must be >= 0 s, got {self.report_period}")
        if self.drain_timeout < 0:
            raise ValueError(f"parameter 'drain_timeout' must be >= 0 s, got {self.drain_timeout}")

    def bag_path(self) -> Path:
        if self.output:
            return Path(self.output)
        return Path(time.strftime("soft_inverse_ros_%Y%m%d_%H%M%S"))


def expand_name(name: str, namespace: str) -> str:
    """Absolute form of a topic name or pattern in ``namespace`` (no remapping)."""
    if name.startswith("/"):
        return name
    if name.startswith("~"):
        raise ValueError(f"private topic names are not supported in 'topics': {name!r}")
    return f"{namespace.rstrip('/')}/{name}"


def wanted(topic: str, patterns: Sequence[str]) -> bool:
    """True when the absolute ``topic`` equals or matches one of the absolute patterns."""
    return any(topic == p or fnmatch.fnmatchcase(topic, p) for p in patterns)


def message_class(msgtype: str) -> Any:
    """Python class of ``pkg/msg/Type`` (ImportError with the type name when absent)."""
    pkg, kind, name = msgtype.split("/")
    try:
        return getattr(importlib.import_module(f"{pkg}.{kind}"), name)
    except (ImportError, AttributeError) as err:
        raise ImportError(f"cannot import message type {msgtype}: {err}") from None


def bag_qos(profile: Any) -> Any:
    """rclpy QoSProfile (from the graph) -> rosbags Qos for the bag metadata."""
    from rosbags.interfaces import (
        Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime,
    )

    def duration(d: Any) -> QosTime:
        ns = int(d.nanoseconds)
        return QosTime(ns // 10**9, ns % 10**9)

    return Qos(
        history=QosHistory(int(profile.history)),
        depth=int(profile.depth),
        reliability=QosReliability(int(profile.reliability)),
        durability=QosDurability(int(profile.durability)),
        deadline=duration(profile.deadline),
        lifespan=duration(profile.lifespan),
        liveliness=QosLiveliness(int(profile.liveliness)),
        liveliness_lease_duration=duration(profile.liveliness_lease_duration),
        avoid_ros_namespace_conventions=bool(profile.avoid_ros_namespace_conventions),
    )


def subscription_qos(publisher_profiles: Sequence[Any], depth: int) -> Any:
    """QoS that connects to all the given publishers (rosbag2's adaptation rule)."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    reliable = bool(publisher_profiles) and all(
        p.reliability == ReliabilityPolicy.RELIABLE for p in publisher_profiles
    )
    latched = bool(publisher_profiles) and all(
        p.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in publisher_profiles
    )
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
    )


class _RecorderMixin:
    """The recorder node's behaviour, combined with ``rclpy.node.Node`` by
    :func:`_make_node_class` (kept apart so this module imports without ROS 2).

    Records the configured topics; call :meth:`close` to finish the bag.
    """

    def __init__(self, argv: Sequence[str] = (), **kwargs: Any) -> None:
        """``argv``: the process's arguments, whose ``--params-file`` must have a section for
        this node (checked before the bag is created)."""
        from rclpy.clock import Clock, ClockType

        from soft_inverse_ros.nodes.node_runtime import unused_params_file
        from soft_inverse_ros.recording.bag_writer import BagWriter
        from soft_inverse_ros.recording.typestore import build_typestore

        super().__init__("recorder", **kwargs)
        unused = unused_params_file(argv, [self])
        if unused is not None:
            raise ValueError(unused)
        self.config = self._read_config()
        namespace = self.get_namespace()
        self._patterns = [expand_name(t, namespace) for t in self.config.topics]
        self._typestore = build_typestore()
        self.bag_path = self.config.bag_path()
        self._bag = BagWriter(
            self.bag_path, self._typestore,
            storage=self.config.storage, compress=self.config.compress,
        )
        self._recorded: dict[str, Any] = {}
        self._skipped: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self._accepting = True
        self._use_info = self.config.executor == "single"
        self._polled: dict[str, Any] = {}  # topic -> PolledSubscription ("poll")
        # the timers run in wall time, also under use_sim_time: graph discovery and the
        # takes are about the machine, not the simulation (and a steady-clock timer is
        # immune to the EventsExecutor's sim-time defect, nodes/periodic.py)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        if self.config.executor == "poll":
            create_timer(self, self.config.poll_period, self.poll, clock=steady)
        self._discovery_timer = create_timer(self, self.config.discovery_period, self.discover,
                                             clock=steady)
        if self.config.report_period > 0:
            create_timer(self, self.config.report_period, self._report, clock=steady)
        self.get_logger().info(
            f"recording to {self.bag_path} "
            + ("all topics" if self.config.all_topics else f"topics {self._patterns}")
        )
        self.discover()

    def _read_config(self) -> RecorderConfig:
        """Declare the node parameters and validate them (ValueError when invalid)."""
        from soft_inverse_ros.nodes.node_runtime import check_known_parameters, declare_config

        config = declare_config(self, RecorderConfig)  # wrong types: one line naming the key
        check_known_parameters(self, [f.name for f in dataclasses.fields(RecorderConfig)])
        return config

    # --- discovery -----------------------------------------------------------------
    def discover(self) -> None:
        """Subscribe to every wanted topic that has a publisher and is not recorded yet."""
        if not self._accepting:
            return
        for topic, types in self.get_topic_names_and_types():
            if topic in self._recorded or topic in self._skipped:
                continue
            if self.config.all_topics:
                if any(part.startswith("_") for part in topic.split("/")):
                    continue
            elif not wanted(topic, self._patterns):
                continue
            publishers = self.get_publishers_info_by_topic(topic)
            if not publishers:
                continue  # only subscribers so far: the publisher QoS is unknown
            if len(types) != 1:
                self._skip(topic, f"several types {types}")
                continue
            self._add_topic(topic, types[0], publishers)

    def _skip(self, topic: str, reason: str) -> None:
        """Never record ``topic`` (logged once with ``reason``)."""
        self._skipped[topic] = reason
        self.get_logger().warning(f"not recording {topic}: {reason}")

    def _add_topic(self, topic: str, msgtype: str, publishers: Sequence[Any]) -> None:
        """Add ``topic`` to the bag and subscribe to it raw (or skip it if its type is unknown)."""
        from soft_inverse_ros.recording.typestore import register_from_share

        try:
            cls = message_class(msgtype)
        except ImportError as err:
            self._skip(topic, str(err))
            return
        if not register_from_share(self._typestore, msgtype):
            self._skip(topic, f"no definition of {msgtype} in the typestore or share/")
            return
        ours = self._typestore.hash_rihs01(msgtype)
        theirs = {str(p.topic_type_hash) for p in publishers} - {"INVALID"}
        if theirs and theirs != {ours}:
            self.get_logger().warning(
                f"{topic}: publishers announce type hash {sorted(theirs)}, the stored "
                f"definition of {msgtype} hashes to {ours}; recording anyway"
            )
        profiles = [p.qos_profile for p in publishers]
        self._bag.add_topic(topic, msgtype, [bag_qos(p) for p in profiles])
        self._counts[topic] = 0
        qos = subscription_qos(profiles, self.config.qos_depth)
        if self.config.executor == "poll":
            from soft_inverse_ros.nodes.polled_subscription import PolledSubscription

            self._recorded[topic] = self._polled[topic] = PolledSubscription(
                self, cls, topic, qos, raw=True)
        else:
            self._recorded[topic] = self.create_subscription(
                cls, topic, self._make_callback(topic), qos, raw=True)
        self.get_logger().info(f"recording {topic} [{msgtype}]")

    def _make_callback(self, topic: str) -> Callable[..., None]:
        """Raw-message callback writing to ``topic``, stamped [ns] with the DDS receive time
        (``single`` executor, message info) or the node clock in the callback (``events``)."""
        if self._use_info:
            def callback(data: bytes, info: Any) -> None:
                self._write(topic, int(info["received_timestamp"]), data)
        else:
            clock = self.get_clock()

            def callback(data: bytes) -> None:  # type: ignore[misc]
                self._write(topic, clock.now().nanoseconds, data)
        return callback

    # --- messages ------------------------------------------------------------------
    def poll(self) -> int:
        """"poll": take every message the subscriptions hold and write them in receive-time
        order; the number written (0 in the other modes: their executor delivers)."""
        batch = [(int(info["received_timestamp"]), topic, data)
                 for topic, subscription in self._polled.items()
                 for data, info in subscription.take_all()]
        batch.sort(key=lambda item: item[0])
        for stamp_ns, topic, data in batch:
            self._write(topic, stamp_ns, data)
        return len(batch)

    def _write(self, topic: str, stamp_ns: int, data: bytes) -> None:
        """Write one CDR message at ``stamp_ns`` [ns] (node clock when ≤ 0); dropped once closed."""
        if self._bag.closed:
            return
        if stamp_ns <= 0:  # receive stamp unavailable on this RMW
            stamp_ns = self.get_clock().now().nanoseconds
        self._bag.write(topic, stamp_ns, data)
        self._counts[topic] += 1

    @property
    def message_count(self) -> int:
        return sum(self._counts.values())

    def counts(self) -> dict[str, int]:
        """Messages written so far, per topic."""
        return dict(self._counts)

    def _report(self) -> None:
        """Log the message counts (total and per topic)."""
        parts = ", ".join(f"{t}: {n}" for t, n in self._counts.items())
        self.get_logger().info(f"{self.message_count} messages ({parts})")

    # --- shutdown ------------------------------------------------------------------
    def stop_accepting(self) -> None:
        """No new topics from now on (the existing subscriptions keep delivering)."""
        self._accepting = False
        self._discovery_timer.cancel()

    def close(self) -> None:
        """Close the bag (idempotent); logs the final counts."""
        if self._bag.closed:
            return
        self._bag.close()
        parts = ", ".join(f"{t}: {n}" for t, n in self._counts.items())
        self.get_logger().info(
            f"closed {self.bag_path}: {self.message_count} messages on "
            f"{len(self._counts)} topics ({parts})"
        )
        from soft_inverse_ros.nodes.node_runtime import given_parameters

        # the topics a user listed (the default list covers every graph: some are not in each)
        listed = not self.config.all_topics and "topics" in given_parameters(self)
        unmatched = [p for p in self._patterns
                     if not any(wanted(t, [p]) for t in (*self._recorded, *self._skipped))] if listed else []
        if unmatched:  # a typo (/targt) gave an empty bag without a word
            seen = sorted(t for t, _ in self.get_topic_names_and_types())
            self.get_logger().warning(
                f"no topic matched {unmatched} while recording (topics seen: {seen})")


def _make_node_class() -> type:
    """The recorder's rclpy node class (rclpy is imported here, not at module import)."""
    from rclpy.node import Node

    class RecorderNode(_RecorderMixin, Node):
        """Records the configured topics; call :meth:`close` to finish the bag."""

    return RecorderNode


def drain(executor: Any, node: Any, timeout: float, quiet: float = 0.2) -> None:
    """Spin until no message arrived for ``quiet`` s, at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last_count, last_change = node.message_count, time.monotonic()
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.02)
        node.poll()  # "poll": what the subscriptions hold now (no-op otherwise)
        now = time.monotonic()
        if node.message_count != last_count:
            last_count, last_change = node.message_count, now
        elif now - last_change >= quiet:
            return


def main(args: Sequence[str] | None = None) -> int:
    """Run the recorder until SIGINT/SIGTERM, then drain and close the bag, and end the
    process with its status (0, or 2 for a configuration error; does not return)."""
    from soft_inverse_ros.nodes.node_runtime import end_process

    try:
        status = _record(args)
    except Exception:  # noqa: BLE001 -- an unexpected error: its traceback, status 1
        import traceback

        traceback.print_exc()
        status = 1
    # without destroying the DDS entities one by one (see node_runtime.end_process)
    end_process(status)
    return status  # not reached


def _record(args: Sequence[str] | None) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from soft_inverse_ros.nodes.node_runtime import ignore_termination_signals, init_ros

    argv = list(args) if args is not None else list(sys.argv)
    problem = init_ros(argv)
    if problem is not None:
        print(f"recorder_node: {problem}", file=sys.stderr)
        return 2
    stop = {"requested": False}

    def request_stop(signum: int, _frame: Any) -> None:
        stop["requested"] = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, request_stop)
    node = executor = None
    try:
        try:
            node = _make_node_class()(argv=argv)
        except (ValueError, OSError) as err:  # FileExistsError, a folder it may not create
            from soft_inverse_ros.nodes.node_runtime import NodeConfigError

            # a NodeConfigError names the node itself
            print(str(err) if isinstance(err, NodeConfigError) else f"recorder_node: {err}", file=sys.stderr)
            return 2
        if node.config.executor in ("events", "poll"):  # "poll": only timers and services
            from rclpy.experimental import EventsExecutor

            executor = EventsExecutor()
        else:
            executor = SingleThreadedExecutor()
        executor.add_node(node)
        # spin_once loop (not spin()): returns regularly so the stop flag is seen
        while not stop["requested"] and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
        node.stop_accepting()
        if rclpy.ok():
            drain(executor, node, node.config.drain_timeout)
        return 0
    finally:
        if node is not None:
            node.close()  # the bag is complete from here on
        # the executor, the node and the context are left to the process exit
        # (node_runtime.end_process: tearing them down raced with DDS event callbacks)
        ignore_termination_signals()


if __name__ == "__main__":
    sys.exit(main())
