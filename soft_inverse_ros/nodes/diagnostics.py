"""diagnostic_msgs helpers: one DiagnosticStatus per node, published on /diagnostics."""

from __future__ import annotations

from typing import Mapping

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from soft_inverse_ros.nodes.periodic import create_timer

OK = DiagnosticStatus.OK
WARN = DiagnosticStatus.WARN
ERROR = DiagnosticStatus.ERROR
STALE = DiagnosticStatus.STALE


def _text(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def status(
    name: str, level: bytes, message: str, values: Mapping[str, object], hardware_id: str = ""
) -> DiagnosticStatus:
    return DiagnosticStatus(
        level=level,
        name=name,
        message=message,
        hardware_id=hardware_id,
        values=[KeyValue(key=k, value=_text(v)) for k, v in values.items()],
    )


class DiagnosticsPublisher:
    """Publishes the statuses returned by ``collect()`` every ``period`` seconds."""

    def __init__(self, node, collect, period: float = 1.0) -> None:
        from soft_inverse_ros import topics
        from soft_inverse_ros.nodes import qos

        self._node = node
        self._collect = collect
        self._pub = node.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, qos.DIAGNOSTICS)
        self._timer = create_timer(node, period, self.publish)

    def publish(self) -> None:
        msg = DiagnosticArray()
        msg.header.stamp = self._node.get_clock().now().to_msg()
        msg.status = list(self._collect())
        # /diagnostics is global: a node in a namespace says whose robot it speaks for
        # (``r1/inverse_controller_node: inverse QP``; ``analyze --namespace r1`` reads them)
        namespace = self._node.get_namespace().strip("/")
        if namespace:
            for status in msg.status:
                if not status.name.startswith(f"{namespace}/"):  # a status kept between calls
                    status.name = f"{namespace}/{status.name}"
        self._pub.publish(msg)
