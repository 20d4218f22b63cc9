"""A subscription whose newest message is taken when its owner needs it, without waking the
executor for every message.

The controller publishes ~1.2 k commands/s. A servo driver writes at 100 Hz and fem_node
updates at 30 Hz: each needs only the newest command at the start of its own period. A
normal subscription still wakes the node's executor and runs a Python callback for every
message (a context switch, the GIL, the message's conversion to Python) only for the
node to keep the last one. :class:`PolledSubscription` puts the subscription on a helper
node that no executor spins: DDS receives the messages in its own thread into the reader's
history (KEEP_LAST), and the owner takes what is there once per period
(:meth:`PolledSubscription.take_newest`).

The recorder takes every message instead (:meth:`PolledSubscription.take_all`, raw CDR
bytes with their DDS message info), a batch per poll: 70 µs of CPU per message recorded
(DDS reception and the bag write included) against 195 µs with a callback per message on
rclpy's EventsExecutor and 397 µs on its SingleThreadedExecutor (``bench recorder``,
BENCHMARKS.md, "Twenty-third session").

The helper node (one per owner, shared by its polled subscriptions) is named
``<owner>_reader`` in the owner's namespace; the topic is resolved by the owner first, so
the owner's remappings apply. It is an ordinary participant of the graph (``ros2 node
list`` shows it); it has no parameters and no rosout publisher.
"""

from __future__ import annotations

from typing import Any, Callable


def _never_called(_msg: Any) -> None:  # pragma: no cover - no executor spins the reader
    raise AssertionError("a polled subscription's callback ran: its reader node was spun")


class PolledSubscription:
    """Subscription to ``topic`` (resolved by ``owner``) read by :meth:`take_newest` or
    :meth:`take_all`; ``raw``: the messages as their serialized CDR bytes."""

    def __init__(self, owner, msg_type: type, topic: str, qos_profile, *, raw: bool = False) -> None:
        from rclpy.node import Node

        self.topic = owner.resolve_topic_name(topic)
        self._reader = getattr(owner, "_polled_reader_node", None)
        if self._reader is None:  # one helper node per owner, however many subscriptions
            self._reader = Node(f"{owner.get_name()}_reader", namespace=owner.get_namespace(),
                                context=owner.context, use_global_arguments=False,
                                enable_rosout=False, start_parameter_services=False)
            owner._polled_reader_node = self._reader
        self._sub = self._reader.create_subscription(msg_type, self.topic, _never_called,
                                                     qos_profile, raw=raw)
        self.taken = 0  #: messages taken so far (older ones the history dropped not counted)

    def take_newest(self) -> Any | None:
        """The newest message received since the last call (the older ones are discarded),
        or None when none arrived."""
        newest = None
        if self._sub is None:  # destroyed
            return None
        handle = self._sub.handle
        with handle:
            while (taken := handle.take_message(self._sub.msg_type, False)) is not None:
                newest = taken[0]
                self.taken += 1
        return newest

    def take_all(self) -> list[tuple[Any, dict]]:
        """Every message the history holds (up to the QoS depth: older ones were dropped),
        oldest first, each with its message info (``received_timestamp`` [ns of the
        system clock, at the DDS reception], ``source_timestamp``, ...)."""
        out: list[tuple[Any, dict]] = []
        if self._sub is None:  # destroyed
            return out
        handle = self._sub.handle
        msg_type, raw = self._sub.msg_type, self._sub.raw
        with handle:
            while (taken := handle.take_message(msg_type, raw)) is not None:
                out.append(taken)
        self.taken += len(out)
        return out

    def deliver_newest(self, callback: Callable[[Any], Any]) -> bool:
        """Pass the newest message since the last call to ``callback``; False when none
        arrived (the callback is not called)."""
        msg = self.take_newest()
        if msg is None:
            return False
        callback(msg)
        return True

    def destroy(self) -> None:
        """Remove the subscription (the helper node stays for the owner's others)."""
        if self._sub is not None:
            self._reader.destroy_subscription(self._sub)
            self._sub = None
