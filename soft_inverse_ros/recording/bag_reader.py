"""Read rosbag2 bags (MCAP or sqlite3) and decode them to ``rosbags`` message objects.

Works on bags written by :class:`~soft_inverse_ros.recording.bag_writer.BagWriter` and on
bags recorded with ``ros2 bag record`` (any storage rosbags reads). Message types are
taken, per bag, from the definitions embedded in it (MCAP schemas, the sqlite3
``message_definitions`` table), falling back to the standard ROS 2 types plus
soft_inverse_ros_msgs for topics whose definition the bag does not carry (Humble bags).

``path`` may be the bag folder or a single ``.mcap`` / ``.db3`` file; a folder without
``metadata.yaml`` (a recording that was not closed cleanly) is opened through its single
storage file. An MCAP file that was never closed (the recorder killed: no summary, no
footer, a chunk cut short; or cut short later, an interrupted copy) is read through a closed copy of its complete records
(:func:`recover_mcap`, in a temporary folder), with a warning saying how many messages
that kept: only the chunk being written when it stopped is lost.
"""

from __future__ import annotations

import struct
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Iterable, Iterator

from rosbags.interfaces import Connection, MessageDefinitionFormat
from rosbags.rosbag2 import Reader, ReaderError
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from soft_inverse_ros.recording.typestore import build_typestore

_IDL_SEP = "=" * 80 + "\n"


@dataclass(frozen=True)
class TopicInfo:
    """One topic of a bag."""

    topic: str
    msgtype: str
    count: int
    #: ``True`` when the bag embeds the type's definition.
    has_definition: bool


@dataclass(frozen=True)
class BagMessage:
    """One stored message: bag timestamp [ns] (receive time for recorders) and CDR bytes."""

    topic: str
    msgtype: str
    timestamp_ns: int
    data: bytes


def _storage_path(path: Path) -> Path:
    """The path rosbags should open for ``path`` (see module doc)."""
    if not path.exists():
        raise FileNotFoundError(f"bag {path} does not exist")
    if path.is_dir() and not (path / "metadata.yaml").is_file():
        files = sorted([*path.glob("*.mcap"), *path.glob("*.db3")])
        if len(files) != 1:
            raise FileNotFoundError(
                f"bag folder {path} has no metadata.yaml and {len(files)} storage files "
                "(expected exactly one .mcap or .db3)"
            )
        return files[0]
    return path


def _single_mcap(folder: Path) -> Path | None:
    """The only ``.mcap`` file of bag ``folder`` (None: not a folder, none or several)."""
    files = sorted(folder.glob("*.mcap")) if folder.is_dir() else []
    return files[0] if len(files) == 1 else None


def _embedded_types(connection: Connection) -> dict:
    """Type definitions a connection carries (empty when it carries none)."""
    msgdef = connection.msgdef
    if msgdef.format == MessageDefinitionFormat.MSG and msgdef.data.strip():
        return get_types_from_msg(msgdef.data, connection.msgtype)
    if msgdef.format == MessageDefinitionFormat.IDL and msgdef.data.strip():
        types: dict = {}
        if msgdef.data.startswith(f"{_IDL_SEP}IDL: "):
            for part in msgdef.data.split(_IDL_SEP)[1:]:
                types.update(get_types_from_idl(part.split("\n", 1)[1]))
        else:
            types.update(get_types_from_idl(msgdef.data))
        return types
    return {}


#: closed copies of unclosed MCAP files: (path, size, mtime) -> (their folder, the copy,
#: messages); the folders go with the process
_RECOVERED: dict[tuple[str, int, int], tuple[tempfile.TemporaryDirectory, Path, int]] = {}


def recover_mcap(source: Path, target: Path) -> int:
    """Copy the complete records of an MCAP file that was not closed (``source``: its
    schemas, channels and the messages of its complete chunks, in order) into a closed
    MCAP file ``target``; returns the number of messages copied."""
    from mcap import records
    from mcap.exceptions import McapError
    from mcap.stream_reader import StreamReader
    from mcap.writer import Writer

    schemas: dict[int, int] = {}
    channels: dict[int, int] = {}
    copied = 0
    with source.open("rb") as f_in, target.open("wb") as f_out:
        writer = Writer(f_out)
        started = False
        try:
            for record in StreamReader(f_in).records:
                if isinstance(record, records.Header):
                    writer.start(profile=record.profile, library=record.library)
                    started = True
                elif not started:
                    break
                elif isinstance(record, records.Schema) and record.id not in schemas:
                    schemas[record.id] = writer.register_schema(record.name, record.encoding, record.data)
                elif isinstance(record, records.Channel) and record.id not in channels:
                    channels[record.id] = writer.register_channel(
                        record.topic, record.message_encoding, schemas.get(record.schema_id, 0),
                        dict(record.metadata))
                elif isinstance(record, records.Message) and record.channel_id in channels:
                    writer.add_message(channels[record.channel_id], record.log_time, record.data,
                                       record.publish_time, record.sequence)
                    copied += 1
        except (McapError, EOFError, ValueError, struct.error):  # the record being written
            pass
        if not started:
            raise ValueError(f"{source}: no complete MCAP header (not an MCAP file, or cut before it)")
        writer.finish()
    return copied


class BagReader:
    """Open a rosbag2 bag for reading (a context manager; see module doc).

    Attributes:
        typestore: Types used to decode this bag.
        type_warnings: Human-readable notes on types whose embedded definition does not
            hash to the digest stored in the bag (decoding still uses the embedded one).
    """

    def __init__(self, path: str | Path, default_typestore: Typestore | None = None) -> None:
        self.path = Path(path)
        #: messages read from an MCAP file that was not closed (None: the bag was closed)
        self.recovered_messages: int | None = None
        storage = _storage_path(self.path)
        self._reader = Reader(storage)
        try:
            self._reader.open()
        except ReaderError as exc:
            unclosed = "magic" in str(exc) or "footer" in str(exc).lower()
            mcap = storage if storage.suffix == ".mcap" else _single_mcap(storage)
            if not unclosed or mcap is None:
                raise ReaderError(f"bag {self.path}: {exc}") from None
            # a folder's metadata.yaml says the bag was closed; its file says otherwise (an
            # interrupted copy, a disk that filled up): read what the file holds
            self._reader = self._open_recovered(mcap)
        try:
            self.connections: list[Connection] = list(self._reader.connections)
            self.type_warnings: list[str] = []
            self.typestore = self._build_typestore(default_typestore)
        except BaseException:
            self._reader.close()
            raise

    def _open_recovered(self, storage: Path) -> Reader:
        """A reader of a closed copy of the unclosed MCAP ``storage`` (:func:`recover_mcap`),
        made once per process and file version (an analysis opens a bag several times)."""
        stat = storage.stat()
        key = (str(storage.resolve()), stat.st_size, stat.st_mtime_ns)
        if key not in _RECOVERED:
            folder = tempfile.TemporaryDirectory(prefix="soft_inverse_ros_recovered_")
            copy = Path(folder.name) / storage.name
            try:
                count = recover_mcap(storage, copy)
            except BaseException:
                folder.cleanup()
                raise
            _RECOVERED[key] = (folder, copy, count)
            warnings.warn(f"bag {self.path} was not closed (its recorder killed, or the file cut "
                          f"short?): read the {count} "
                          "messages of its complete chunks; the chunk being written when it stopped "
                          "is lost", stacklevel=3)
        _, copy, self.recovered_messages = _RECOVERED[key]
        reader = Reader(copy)
        reader.open()
        return reader

    def _build_typestore(self, default: Typestore | None) -> Typestore:
        base = default if default is not None else build_typestore()
        types = dict(base.fielddefs)
        embedded: dict = {}
        for connection in self.connections:
            embedded.update(_embedded_types(connection))
        types.update(embedded)
        store = get_typestore(Stores.EMPTY)
        store.register(types)
        for connection in self.connections:
            if connection.msgtype not in store.fielddefs:
                self.type_warnings.append(
                    f"{connection.topic}: type {connection.msgtype} is unknown (no definition "
                    "in the bag nor in the default typestore); its messages cannot be decoded"
                )
            elif connection.digest.startswith("RIHS01_"):
                have = store.hash_rihs01(connection.msgtype)
                if have != connection.digest:
                    self.type_warnings.append(
                        f"{connection.topic}: type {connection.msgtype} hashes to {have}, "
                        f"the bag says {connection.digest}"
                    )
        for note in self.type_warnings:
            warnings.warn(f"bag {self.path}: {note}", stacklevel=3)
        return store

    # --- summary -----------------------------------------------------------------------
    @property
    def topics(self) -> dict[str, TopicInfo]:
        """Topics of the bag, by name (message counts summed over connections)."""
        out: dict[str, TopicInfo] = {}
        for c in self.connections:
            prev = out.get(c.topic)
            has_def = c.msgdef.format != MessageDefinitionFormat.NONE and bool(c.msgdef.data)
            out[c.topic] = TopicInfo(
                c.topic, c.msgtype, c.msgcount + (prev.count if prev else 0),
                has_def or (prev.has_definition if prev else False),
            )
        return out

    @property
    def start_ns(self) -> int:
        return int(self._reader.start_time)

    @property
    def end_ns(self) -> int:
        return int(self._reader.end_time)

    @property
    def message_count(self) -> int:
        return int(self._reader.message_count)

    # --- messages ----------------------------------------------------------------------
    def _connections_for(self, topics: Iterable[str] | None) -> list[Connection]:
        if topics is None:
            return list(self.connections)
        wanted = set(topics)
        return [c for c in self.connections if c.topic in wanted]

    def messages(self, topics: Iterable[str] | None = None) -> Iterator[BagMessage]:
        """Raw messages of ``topics`` (all when None) in bag-timestamp order."""
        connections = self._connections_for(topics)
        if not connections:
            return
        for connection, timestamp, data in self._reader.messages(connections=connections):
            yield BagMessage(connection.topic, connection.msgtype, int(timestamp), bytes(data))

    def deserialize(self, data: bytes, msgtype: str) -> Any:
        """Decode CDR bytes of ``msgtype`` to a rosbags message object."""
        return self.typestore.deserialize_cdr(data, msgtype)

    def decoded(self, topics: Iterable[str] | None = None) -> Iterator[tuple[BagMessage, Any]]:
        """``(raw message, decoded message)`` pairs of ``topics`` in bag-timestamp order."""
        for message in self.messages(topics):
            yield message, self.deserialize(message.data, message.msgtype)

    def read_topic(self, topic: str) -> list[tuple[int, Any]]:
        """All ``(timestamp_ns, decoded message)`` of one topic (empty if absent)."""
        return [(m.timestamp_ns, msg) for m, msg in self.decoded([topic])]

    # --- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        if self._reader.is_open:
            self._reader.close()


    def __enter__(self) -> "BagReader":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
