"""Driver nodes as separate processes: under ``use_sim_time`` a hardware backend is refused
at start with one line (the driver's period and command watchdog would run on /clock and
stop with the simulation, leaving Dynamixel servos torqued or valves inflated)."""

from __future__ import annotations

import pytest

try:
    import rclpy  # noqa: F401 - the driver nodes need it

    from driver_probe import node_process, wait_exit
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy not importable: {err}", allow_module_level=True)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.mark.parametrize("node, backend, config", [
    ("servo_driver_node", "dynamixel", "drivers/servo_dynamixel.yaml"),
    ("valve_driver_node", "serial", "drivers/valve_serial.yaml"),
])
def test_a_hardware_backend_is_refused_under_use_sim_time(graph_env, node, backend, config):
    graph, log = node_process(node, {"use_sim_time": True, "backend": backend,
                                     "device_config": config})
    try:
        code = wait_exit(graph, 90.0)
        text = log.getvalue()
        assert code == 2, text  # NodeConfigError: before any port is opened
        lines = [line for line in text.splitlines() if "refused under use_sim_time" in line]
        assert len(lines) == 1, text
        assert f"backend {backend} drives hardware" in lines[0] and "[FATAL]" in lines[0]
        assert "Traceback" not in text
        assert "no /clock arrived" not in text  # refused at once, not after waiting for /clock
    finally:
        graph.shutdown()


def test_the_sim_backend_still_runs_under_use_sim_time(graph_env):
    """The refusal is for hardware only: the simulated servos wait for /clock as before."""
    graph, log = node_process("servo_driver_node", {"use_sim_time": True, "backend": "sim"})
    try:
        assert wait_exit(graph, 8.0) is None, log.getvalue()  # waiting for /clock, not refused
        assert "refused" not in log.getvalue()
    finally:
        graph.shutdown()
