"""Timer callbacks of the package's nodes under rclpy's real executor: the executor looks at
a timer callback's signature at every call (for an optional TimerInfo parameter); a
callback made by nodes/periodic.create_timer answers without inspecting the function."""

from __future__ import annotations

import inspect
import time

import pytest

try:
    import rclpy
    from rclpy.node import Node

    from soft_inverse_ros.nodes.node_runtime import make_executor
    from soft_inverse_ros.nodes.periodic import create_timer, timer_callback
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy not importable: {err}", allow_module_level=True)

pytestmark = pytest.mark.integration

CALLS = 40


class _Counter:
    def __init__(self) -> None:
        self.calls = 0

    def tick(self) -> None:
        self.calls += 1


def _signature_work(monkeypatch, make_timer) -> tuple[int, int]:
    """(timer calls, signatures the executor computed from a function's code) over
    ``CALLS`` calls of a 2 ms timer made by ``make_timer(node, counter)``."""
    computed = [0]
    original = inspect._signature_from_function

    def counting(*args, **kwargs):
        computed[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(inspect, "_signature_from_function", counting)
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = Node("timer_callbacks_probe", context=context)
        executor = make_executor(context)
        executor.add_node(node)
        counter = _Counter()
        make_timer(node, counter)
        deadline = time.monotonic() + 10.0
        while counter.calls < CALLS and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        calls = counter.calls
        executor.shutdown()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    return calls, computed[0]


def test_create_timer_callbacks_skip_the_signature_inspection(graph_env, monkeypatch):
    calls, computed = _signature_work(
        monkeypatch, lambda node, counter: create_timer(node, 0.002, counter.tick))
    assert calls >= CALLS
    assert computed == 0


def test_a_bound_method_timer_is_inspected_at_every_call(graph_env, monkeypatch):
    """The control: what create_timer avoids (if rclpy stops inspecting, this fails and
    the wrapper can go)."""
    calls, computed = _signature_work(
        monkeypatch, lambda node, counter: node.create_timer(0.002, counter.tick))
    assert calls >= CALLS
    assert computed >= calls


def test_timer_callback_calls_through_and_keeps_the_name():
    counter = _Counter()
    wrapped = timer_callback(counter.tick)
    wrapped()
    wrapped()
    assert counter.calls == 2
    assert inspect.signature(wrapped).parameters == {}
    assert wrapped.__qualname__ == "_Counter.tick"
