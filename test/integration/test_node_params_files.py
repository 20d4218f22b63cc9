"""A node started with a parameters file rcl cannot read, or whose section misses the
node's name: one ``[FATAL]`` line and exit 2, before any value is silently ignored."""

from __future__ import annotations

import subprocess
import sys

import pytest

try:
    import rclpy  # noqa: F401 - the nodes need it
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy not importable: {err}", allow_module_level=True)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("module", "name", "text", "needle"), [
    ("target_node", "target_node", "a: [1, 2\n", "is not YAML"),
    ("target_node", "target_node", "", "is empty"),
    ("target_node", "target_node", "target_node:\n  ros_parameters:\n    speed: 0.01\n",
     "ros__parameters misspelled or missing?"),
    ("target_node", "target_node", "target_nod:\n  ros__parameters:\n    speed: 0.01\n",
     "section 'target_nod' does not name node 'target_node'"),
    ("recorder_node", "recorder_node", "recorder_nod:\n  ros__parameters:\n    qos_depth: 10\n",
     "section 'recorder_nod' does not name node 'recorder_node'"),
    ("recorder_node", "recorder_node", "recorder_node:\n  ros__parameters:\n    poll_period: .inf\n",
     "recorder_node: parameter 'poll_period' must be finite"),
    ("recorder_node", "recorder_node", "recorder_node:\n  ros__parameters:\n    poll_period: 20 ms\n",
     "poll_period"),
])
def test_a_bad_parameters_file_is_one_line_and_exit_2(graph_env, tmp_path, module, name, text, needle):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    run = subprocess.run(
        [sys.executable, "-m", f"soft_inverse_ros.nodes.{module}", "--ros-args", "-r", f"__node:={name}",
         "--params-file", str(path), "-p", f"output:={tmp_path / 'bag'}" if module == "recorder_node" else
         "publish_rate_hz:=100.0"],
        capture_output=True, text=True, timeout=120, env=graph_env, cwd=tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 2, out
    assert needle in out and "Traceback" not in out, out
    assert not (tmp_path / "bag").exists()
