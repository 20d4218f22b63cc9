"""`soft-inverse-ros launch`: starts the graph as processes, forwards Ctrl-C, shuts down
cleanly (no process left behind), and reports a required node that died."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from soft_inverse_ros.graph import NodeSpec
from soft_inverse_ros.process_launcher import run_graph

pytestmark = pytest.mark.integration

try:
    import rclpy  # noqa: F401
    import soft_inverse_ros_msgs.msg  # noqa: F401
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or soft_inverse_ros_msgs not importable: {err}", allow_module_level=True)

CLI = [sys.executable, "-m", "soft_inverse_ros.cli"]


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True).stdout
    return [int(p) for p in out.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as handle:  # a zombie is not alive
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:  # reaped in between
        return False


def test_ctrl_c_stops_every_node(graph_env, tmp_path):
    log, bag = tmp_path / "launch.log", tmp_path / "bag"
    with log.open("w") as sink:  # a file, not a pipe nobody reads while the graph starts
        proc = subprocess.Popen([*CLI, "launch", "sim", f"record:={bag}"], stdout=sink,
                                stderr=subprocess.STDOUT, text=True, env=graph_env)
    try:
        deadline = time.monotonic() + 30
        children: list[int] = []
        while time.monotonic() < deadline and len(children) < 5:
            time.sleep(0.5)
            children = _children(proc.pid)
        assert len(children) >= 5, f"only {len(children)} node processes started"
        # the recorder must be running (its bag open) for Ctrl-C to close a bag: interrupted
        # while still importing, a node leaves without one (nodes/__init__.py)
        deadline = time.monotonic() + 120
        while not bag.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3.0)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text()
    assert proc.returncode == 0, out[-3000:]
    assert not [p for p in children if _alive(p)], "node processes survived the launcher"
    assert "Traceback" not in out, out[-3000:]
    assert (tmp_path / "bag" / "metadata.yaml").is_file(), "the recorder did not close its bag"


def test_nodes_stop_when_their_launcher_is_killed(graph_env, tmp_path):
    """A launcher killed with SIGKILL cannot forward anything: its nodes (own sessions) get
    SIGTERM from the kernel (supervision.py) and stop cleanly instead of running on."""
    script = tmp_path / "launcher.py"
    script.write_text(
        "import sys, time\n"
        "from soft_inverse_ros.graph import NodeSpec\n"
        "from soft_inverse_ros.process_launcher import GraphProcesses\n"
        "g = GraphProcesses([NodeSpec('target_node', 'target_node'), NodeSpec('mocap_node', 'mocap_node', parameters={'backend': 'sim'})],"
        " output=None).start()\n"
        "print(*(g.pid(n) for n in ('target_node', 'mocap_node')), flush=True)\n"
        "time.sleep(600)\n", encoding="utf-8")
    launcher = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=graph_env)
    nodes: list[int] = []
    try:
        nodes = [int(p) for p in launcher.stdout.readline().split()]
        assert len(nodes) == 2, nodes
        time.sleep(3.0)  # the nodes import and start (or are still importing: both must end)
        assert all(_alive(p) for p in nodes), "a node died on its own"
        launcher.kill()
        launcher.wait(timeout=10)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(p) for p in nodes):
            time.sleep(0.2)
        survivors = [p for p in nodes if _alive(p)]
    finally:
        if launcher.poll() is None:
            launcher.kill()
        for pid in nodes:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert not survivors, f"node processes {survivors} outlived their killed launcher"


def test_required_node_death_is_reported_and_stops_the_graph(graph_env, capfd):
    nodes = [
        NodeSpec("target_node", "target_node"),
        # an out-of-range parameter: the controller refuses to start (exit code 2)
        NodeSpec("inverse_controller_node", "inverse_controller_node",
                 parameters={"rate_hz": -1.0}, required=True),
    ]
    start = time.monotonic()
    status = run_graph(nodes, duration=120.0, output=None)
    assert status == 1
    # the controller refuses its config once its imports are done (seconds on a slow host);
    # a graph that ran its whole duration was not stopped
    assert time.monotonic() - start < 90, "the graph was not stopped when a required node died"
    err = capfd.readouterr().err
    assert "required node inverse_controller_node died (exit code 2)" in err


def test_node_logs_are_written_while_the_graph_runs(graph_env, tmp_path):
    """A node's log file under ``log_dir`` shows its lines as they come (it was block-buffered
    by the launcher and read empty until the graph stopped)."""
    from soft_inverse_ros.process_launcher import GraphProcesses

    graph = GraphProcesses([NodeSpec("target_node", "target_node")], output=None,
                           log_dir=tmp_path).start()
    log = tmp_path / "target_node.log"
    try:
        deadline = time.monotonic() + 120
        while "[target_node]:" not in (log.read_text() if log.exists() else ""):
            assert not graph.poll(), "target_node exited"
            assert time.monotonic() < deadline, "no log line while the node runs"
            time.sleep(0.2)
        assert graph.running() == ["target_node"]  # read while it runs, not after
    finally:
        graph.shutdown()


def test_the_shared_memory_of_stopped_nodes_is_removed(graph_env):
    """A node process ends without closing its DDS participant (node_runtime.end_process):
    its Fast DDS shared-memory files are removed by the launcher once it has stopped."""
    from soft_inverse_ros.dds_shm import SHM_DIR
    from soft_inverse_ros.process_launcher import GraphProcesses

    def fastdds_files() -> set[str]:
        return {p.name for p in SHM_DIR.glob("fastdds_*")} if SHM_DIR.is_dir() else set()

    before = fastdds_files()
    graph = GraphProcesses([NodeSpec("target_node", "target_node")], output=None).start()
    try:
        deadline = time.monotonic() + 120
        while not (fastdds_files() - before):
            assert not graph.poll(), "target_node exited"
            if time.monotonic() > deadline:
                pytest.skip("Fast DDS made no shared-memory files here (SHM transport off)")
            time.sleep(0.2)
        time.sleep(1.0)  # its participant's segment and ports are all open
        made = fastdds_files() - before
    finally:
        graph.shutdown()
    assert graph.running() == []
    assert not made & fastdds_files(), sorted(made & fastdds_files())


def _inherit_sigint(disposition):
    """A ``preexec_fn`` giving the child SIGINT at ``disposition`` (the shell's background
    jobs start with it ignored), whatever this test process has."""
    return lambda: signal.signal(signal.SIGINT, disposition)


@pytest.mark.parametrize("inherited", [signal.SIG_DFL, signal.SIG_IGN], ids=["sigint-default", "sigint-ignored"])
@pytest.mark.parametrize("after_s", [0.3, 1.0])
def test_ctrl_c_while_a_node_is_still_importing_exits_quietly(graph_env, after_s, inherited):
    """A node interrupted during its imports (numba, rclpy: seconds on a loaded machine)
    exits with status 0 and no KeyboardInterrupt traceback (nodes/__init__.py), also when it
    inherited SIGINT ignored (it then used to ignore the signal and run on)."""
    proc = subprocess.Popen([sys.executable, "-m", "soft_inverse_ros.nodes.inverse_controller_node",
                             "--ros-args", "-r", "__node:=interrupted_controller"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=graph_env,
                            preexec_fn=_inherit_sigint(inherited))
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    assert proc.returncode == 0, out[-3000:]
