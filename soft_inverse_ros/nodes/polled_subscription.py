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

The helper node (one per owner, shared by its polled subscriptions) is named
``<owner>_reader`` in the owner's namespace; the topic is resolved by the owner first, so
the owner's remappings apply. It is an ordinary participant of the graph (``ros2 node
list`` shows it); it has no parameters and no rosout publisher.
"""

from __future__ import annotations

from typing import Any


def _never_called(_msg: Any) -> None:  # pragma: no cover - no executor spins the reader
    raise AssertionError("a polled subscription's callback ran: its reader node was spun")


class PolledSubscription:
    """Subscription to ``topic`` (resolved by ``owner``) read by :meth:`take_newest`."""

    def __init__(self, owner, msg_type: type, topic: str, qos_profile) -> None:
        from rclpy.node import Node

        self.topic = owner.resolve_topic_name(topic)
        self._reader = getattr(owner, "_polled_reader_node", None)
        if self._reader is None:  # one helper node per owner, however many subscriptions
            self._reader = Node(f"{owner.get_name()}_reader", namespace=owner.get_namespace(),
                                context=owner.context, use_global_arguments=False,
                                enable_rosout=False, start_parameter_services=False)
            owner._polled_reader_node = self._reader
        self._sub = self._reader.create_subscription(msg_type, self.topic, _never_called,
                                                     qos_profile)
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

    def destroy(self) -> None:
        """Remove the subscription (the helper node stays for the owner's others)."""
        if self._sub is not None:
            self._reader.destroy_subscription(self._sub)
            self._sub = None
