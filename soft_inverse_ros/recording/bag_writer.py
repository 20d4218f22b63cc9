"""rosbag2 writer (MCAP by default) on top of ``rosbags``; usable without rclpy.

Each topic is stored with its type, the concatenated ``ros2msg`` definition of the type and
its dependencies (MCAP schema encoding ``ros2msg``, as ``ros2 bag record`` writes it), the
RIHS01 type hash and the publishers' QoS profiles, so ``ros2 bag info/play`` and Foxglove
open the bag on a normal ROS 2 install. Messages are CDR bytes (as received from DDS with
``raw=True``) or ``rosbags`` message objects.

Timestamps are integer nanoseconds (ROS time; the recorder uses the receive time).
:meth:`BagWriter.close` writes the MCAP summary and ``metadata.yaml``; a bag that was not
closed has neither, so always close (or use the writer as a context manager).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal, Sequence

from rosbags.interfaces import (
    Connection,
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode
from rosbags.typesys.store import Typestore

from soft_inverse_ros.recording.typestore import build_typestore, message_definition

_STORAGES = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}


def qos_profile(
    *,
    reliable: bool = True,
    transient_local: bool = False,
    depth: int = 10,
    keep_all: bool = False,
) -> Qos:
    """A rosbag2 QoS profile (metadata only: it tells ``ros2 bag play`` how to republish)."""
    zero = QosTime(0, 0)
    return Qos(
        history=QosHistory.KEEP_ALL if keep_all else QosHistory.KEEP_LAST,
        depth=int(depth),
        reliability=QosReliability.RELIABLE if reliable else QosReliability.BEST_EFFORT,
        durability=QosDurability.TRANSIENT_LOCAL if transient_local else QosDurability.VOLATILE,
        deadline=zero,
        lifespan=zero,
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=zero,
        avoid_ros_namespace_conventions=False,
    )


@dataclass(frozen=True)
class TopicStats:
    """What was written to one topic."""

    topic: str
    msgtype: str
    count: int


class BagWriter:
    """Write a rosbag2 bag folder ``path`` (which must not exist yet).

    Args:
        path: Bag folder to create (``<path>/<name>.mcap`` + ``metadata.yaml``).
        typestore: Types to take definitions from (default :func:`build_typestore`).
        storage: ``"mcap"`` (default) or ``"sqlite3"``.
        compress: zstd chunk compression (MCAP) / file compression (sqlite3).
        version: rosbag2 metadata version (9: Jazzy and later; 8 for older readers).

    Raises:
        FileExistsError: ``path`` exists.
        ValueError: unknown storage.
    """

    def __init__(
        self,
        path: str | Path,
        typestore: Typestore | None = None,
        *,
        storage: Literal["mcap", "sqlite3"] = "mcap",
        compress: bool = False,
        version: Literal[8, 9] = 9,
    ) -> None:
        self.path = Path(path)
        if storage not in _STORAGES:
            raise ValueError(f"storage must be one of {sorted(_STORAGES)}, got {storage!r}")
        if self.path.exists():
            raise FileExistsError(f"bag folder {self.path} exists already, not overwriting")
        self.typestore = typestore if typestore is not None else build_typestore()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # "[Errno 17] File exists: '/etc/passwd'" said nothing of a bag
            raise OSError(f"cannot create the bag's folder {self.path.parent}: {exc.strerror or exc}"
                          + (f" ({exc.filename})" if exc.filename and str(exc.filename) != str(self.path.parent)
                             else "")) from None
        self._writer = Writer(self.path, version=version, storage_plugin=_STORAGES[storage])
        if compress:
            mode = CompressionMode.STORAGE if storage == "mcap" else CompressionMode.FILE
            self._writer.set_compression(mode, CompressionFormat.ZSTD)
        self._writer.open()
        self._connections: dict[str, Connection] = {}
        self._closed = False

    # --- topics ------------------------------------------------------------------------
    def add_topic(
        self,
        topic: str,
        msgtype: str,
        qos: Sequence[Qos] = (),
        *,
        msgdef: str | None = None,
        type_hash: str | None = None,
    ) -> None:
        """Declare ``topic`` of type ``msgtype`` (``pkg/msg/Type``) before writing to it.

        The definition and hash come from the typestore unless both ``msgdef`` (ros2msg
        text with dependencies) and ``type_hash`` are given. Re-adding a topic with the same
        type is a no-op.

        Raises:
            ValueError: topic already added with another type, or type unknown.
            RuntimeError: writer closed.
        """
        self._check_open()
        if topic in self._connections:
            known = self._connections[topic].msgtype
            if known != msgtype:
                raise ValueError(f"topic {topic!r} already recorded as {known}, not {msgtype}")
            return
        if msgdef is None or type_hash is None:
            if msgtype not in self.typestore.fielddefs:
                raise ValueError(f"message type {msgtype!r} of topic {topic!r} is unknown")
            msgdef, type_hash = message_definition(self.typestore, msgtype)
        self._connections[topic] = self._writer.add_connection(
            topic, msgtype, msgdef=msgdef, rihs01=type_hash, offered_qos_profiles=list(qos)
        )

    def has_topic(self, topic: str) -> bool:
        return topic in self._connections

    # --- messages ----------------------------------------------------------------------
    def write(self, topic: str, timestamp_ns: int, data: bytes | bytearray | memoryview) -> None:
        """Append one CDR-serialized message received at ``timestamp_ns``.

        Raises:
            KeyError: topic not added.
            RuntimeError: writer closed.
        """
        self._check_open()
        try:
            connection = self._connections[topic]
        except KeyError:
            raise KeyError(f"topic {topic!r} was not added to bag {self.path}") from None
        if timestamp_ns < 0:
            raise ValueError(f"negative timestamp {timestamp_ns} on {topic!r}")
        self._writer.write(connection, int(timestamp_ns), bytes(data))

    def write_message(self, topic: str, timestamp_ns: int, message: object) -> None:
        """Serialize ``message`` to CDR and append it.

        ``message`` is a ``rosbags`` message object of the topic's type or, when rclpy is
        installed, an rclpy message (serialized with ``rclpy.serialization``).
        """
        self._check_open()
        if topic not in self._connections:
            raise KeyError(f"topic {topic!r} was not added to bag {self.path}")
        msgtype = self._connections[topic].msgtype
        rosbags_type = getattr(message, "__msgtype__", None)
        if rosbags_type is not None:
            if rosbags_type != msgtype:
                raise TypeError(f"{rosbags_type} message written to {topic!r} of type {msgtype}")
            data = self.typestore.serialize_cdr(message, msgtype)
        elif hasattr(type(message), "_TYPE_SUPPORT"):
            from rclpy.serialization import serialize_message

            pkg = type(message).__module__.split(".")[0]
            actual = f"{pkg}/msg/{type(message).__name__}"
            if actual != msgtype:
                raise TypeError(f"{actual} message written to {topic!r} of type {msgtype}")
            data = serialize_message(message)
        else:
            raise TypeError(f"cannot serialize {type(message).__name__} (not a rosbags or rclpy message)")
        self.write(topic, timestamp_ns, data)

    # --- lifecycle ---------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def stats(self) -> list[TopicStats]:
        """Messages written so far, per topic (in the order topics were added)."""
        counts = self._writer.counts
        return [TopicStats(t, c.msgtype, counts[c.id]) for t, c in self._connections.items()]

    @property
    def message_count(self) -> int:
        return sum(self._writer.counts.values())

    def close(self) -> None:
        """Write the summary and ``metadata.yaml``. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._writer.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"bag {self.path} is closed")

    def __enter__(self) -> "BagWriter":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
