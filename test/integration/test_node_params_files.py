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


@pytest.mark.parametrize(("module", "args", "needle"), [
    # gait_node: the valve driver would refuse every command, or vent between setpoints, or
    # the gait would run mirrored (each link's chambers swapped against the valves' pairs)
    ("gait_node", ["chambers:=[link0_left,link0_left,link1_left,link1_right]"],
     "chambers ['link0_left'] named more than once"),
    ("gait_node", ["chambers:=[link0_right,link0_left,link1_right,link1_left]"],
     "link 0's chambers (link0_right, link0_left) are a pair of"),
    ("gait_node", ["publish_rate_hz:=2.0"], "publish_rate_hz 2 Hz is too slow for the valve driver's watchdog"),
    ("gait_node", ["valve_config:=/proc/self/mem"], "cannot read: Input/output error"),  # was a traceback
    ("snake_plant_node", ["n_links:=2", "chambers:=[link0_left,link0_left,link1_left,link1_right]"],
     "chambers ['link0_left'] named more than once"),
])
def test_snake_nodes_refuse_configurations_that_would_misdrive_the_valves(graph_env, tmp_path, module, args,
                                                                         needle):
    from soft_inverse_ros.core.config_files import find_config

    command = [sys.executable, "-m", f"soft_inverse_ros.nodes.{module}", "--ros-args",
               "--params-file", str(find_config("sim_snake.yaml"))]
    for arg in args:
        command += ["-p", arg]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120, env=graph_env, cwd=tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 2, out
    assert needle in out and "Traceback" not in out, out


@pytest.mark.parametrize(("params_file", "args", "needle"), [
    # contact limits on a robot without contact, and a hybrid's limits the description replaces
    ("sim.yaml", ["qp.contact_force_sum_max:=2.0"],
     "robot 'builtin_diamond' has no collision section: qp.contact_force_sum_max would do nothing"),
    ("sim_hybrid.yaml", ["robot:=hybrid_arm", "qp.contact_min_force_sum:=0.2"],
     "a hybrid robot takes them from its description's contact section"),
    # the description's per-tick joint limits hold for ticks of its command_period only
    ("sim_hybrid.yaml", ["robot:=hybrid_arm", "rate_hz:=500.0"],
     "rate_hz 500 (a 2 ms tick) differs from the command_period 1 ms of robot 'hybrid_arm'"),
])
def test_the_controller_refuses_contact_limits_that_would_do_nothing(graph_env, tmp_path, params_file, args,
                                                                     needle):
    from soft_inverse_ros.core.config_files import find_config

    command = [sys.executable, "-m", "soft_inverse_ros.nodes.inverse_controller_node", "--ros-args",
               "--params-file", str(find_config(params_file)), "-p", "realtime_priority:=0"]
    for arg in args:
        command += ["-p", arg]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120, env=graph_env, cwd=tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 2 and needle in out and "Traceback" not in out, out


def _output_within(command: list[str], seconds: float, env: dict, cwd) -> str:
    """What a node process printed (stdout and stderr) in its first ``seconds``, then SIGTERM."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=cwd)
    try:
        out, _ = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    return out


def test_mocap_node_says_which_effector_it_does_not_find(graph_env, tmp_path):
    """A label spelled otherwise (Tip for tip) only ever gave "no effector yet"."""
    import numpy as np

    from soft_inverse_ros.core.mocap.frame import BodyPose, MocapFrame
    from soft_inverse_ros.core.mocap.replay_source import write_frames_csv

    frames = [MocapFrame(0.01 * k, {"tip": BodyPose(np.array([0.0, 0.0, 0.1]), np.array([0.0, 0.0, 0.0, 1.0]))})
              for k in range(120)]
    write_frames_csv(tmp_path / "run.csv", frames)
    (tmp_path / "mocap.yaml").write_text(
        "mocap:\n  backend: replay_csv\n  robot_frame: base_link\n  replay: {path: run.csv, rate: 1.0}\n"
        "  effector: {mode: rigid_body, name: Tip}\n")
    from soft_inverse_ros.core.config_files import find_config

    out = _output_within(
        [sys.executable, "-m", "soft_inverse_ros.nodes.mocap_node", "--ros-args", "--params-file",
         str(find_config("sim.yaml")), "-p", "backend:=replay", "-p", f"source_config:={tmp_path / 'mocap.yaml'}"],
        8.0, graph_env, tmp_path)
    assert "50 frames and no effector: it is the rigid_body of ['Tip']; the frames hold bodies ['tip']" in out, out


@pytest.mark.parametrize(("args", "warned"), [
    (["linear_solver:=direct", "krylov_iterations:=50"], True),
    (["linear_solver:=direct"], False),
    (["linear_solver:=minres", "krylov_iterations:=50"], False),
])
def test_snake_plant_says_krylov_iterations_do_nothing_with_the_direct_solver(graph_env, tmp_path, args, warned):
    """``krylov_iterations`` sets MINRES's iterations: given with the direct solver it was ignored."""
    command = [sys.executable, "-m", "soft_inverse_ros.nodes.snake_plant_node", "--ros-args",
               "-p", "n_links:=1", "-p", "settle_time:=0.0"]
    for arg in args:
        command += ["-p", arg]
    out = _output_within(command, 6.0, graph_env, tmp_path)
    assert "snake: 1 links" in out, out
    assert ("krylov_iterations (50) is not used: linear_solver is direct" in out) == warned, out


def test_use_sim_time_cannot_be_switched_at_runtime(graph_env, tmp_path):
    """rclpy let any node switch clocks: the servo driver switched to simulated time stopped
    ticking (its watchdog too) while its diagnostics said OK; the controller stopped
    commanding without a word."""
    import time

    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    from soft_inverse_ros.nodes.node_runtime import CLOCK_SWITCH_REFUSED

    proc = subprocess.Popen([sys.executable, "-m", "soft_inverse_ros.nodes.target_node"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=graph_env, cwd=tmp_path)
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        from rclpy.executors import SingleThreadedExecutor

        node = rclpy.create_node("clock_switch_probe", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        client = node.create_client(SetParameters, "/target_node/set_parameters")
        deadline = time.monotonic() + 60.0
        while not client.wait_for_service(timeout_sec=0.2):
            assert time.monotonic() < deadline and proc.poll() is None, "target_node did not come up"

        def set_sim_time(value: bool):
            request = SetParameters.Request(parameters=[ParameterMsg(
                name="use_sim_time", value=ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=value))])
            future = client.call_async(request)
            end = time.monotonic() + 10.0
            while not future.done() and time.monotonic() < end:
                executor.spin_once(timeout_sec=0.1)
            return future.result().results[0]

        refused = set_sim_time(True)
        assert not refused.successful and refused.reason == CLOCK_SWITCH_REFUSED
        assert set_sim_time(False).successful  # the value it has: nothing to refuse
        node.destroy_node()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
        rclpy.shutdown(context=context)
