"""The controller's safe state and its inputs, on an in-process inverse_controller_node whose
clock the test sets (conftest.fake_clock_controller): a QP that keeps failing ends in SAFE
after max_held_time, a SAFE spell resets the per-tick reference (the commands after it ramp
from the safe command instead of jumping back), snapshots and measurements of another frame
are refused, a clock that went back behind the snapshot makes the commands SAFE, a refused
effector point is not excused by another point's targets, and answer_targets is refused
with per-tick limits (the answers would add steps)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

try:
    from geometry_msgs.msg import PointStamped
    from rclpy.serialization import deserialize_message
    from soft_inverse_ros_msgs.msg import ActuatorCommand
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy not importable: {err}", allow_module_level=True)

from hostile_probe import snapshot_message
from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.nodes.conversions import to_time
from soft_inverse_ros.nodes.node_runtime import NodeConfigError

pytestmark = pytest.mark.integration

OK, HELD, SAFE = ActuatorCommand.STATUS_OK, ActuatorCommand.STATUS_HELD, ActuatorCommand.STATUS_SAFE


class _Run:
    """A controller node of ``make(**params)`` whose published commands are recorded."""

    def __init__(self, clock, make, monkeypatch, **params):
        self.clock, self.node = clock, make(**params)
        self.sent: list[ActuatorCommand] = []
        monkeypatch.setattr(self.node._cmd_pub, "publish", self._record)
        self.seq = 0

    def _record(self, payload) -> None:
        if isinstance(payload, (bytes, bytearray, memoryview)):
            payload = deserialize_message(bytes(payload), ActuatorCommand)
        self.sent.append(payload)

    def ticks(self, n: int) -> list[ActuatorCommand]:
        start = len(self.sent)
        for _ in range(n):
            self.clock[0] += 1e-3
            self.node._tick()
        return self.sent[start:]

    def snapshot(self, stroke_shift: float = 0.0, frame: str = "base_link"):
        msg = snapshot_message()
        self.seq += 1
        msg.seq = self.seq
        msg.header.stamp, msg.header.frame_id = to_time(self.clock[0]), frame
        msg.actuator_stroke = (np.asarray(msg.actuator_stroke) + stroke_shift).tolist()
        self.node._on_snapshot(msg)
        for _ in range(200):  # its conversion, checks and set-up run in steps after the ticks
            if self.node._snapshot_pending is None:
                break
            self.ticks(1)
        return msg

    def target(self, z: float, frame: str = "base_link") -> None:
        msg = PointStamped()
        msg.header.frame_id, msg.header.stamp = frame, to_time(self.clock[0])
        msg.point.z = z
        self.node._on_target(msg)


def _statuses(commands) -> list[int]:
    return [c.status for c in commands]


def test_a_qp_that_keeps_failing_goes_safe_and_a_safe_spell_resets_the_held_command(fake_clock_controller,
                                                                                  monkeypatch):
    """HELD was returned for ever (the old efforts held under a snapshot whose stroke bounds
    they broke), and after a SAFE spell a failed QP HELD the command from before it again."""
    clock, make = fake_clock_controller
    run = _Run(clock, make, monkeypatch, max_held_time=0.05, answer_targets=False)
    snap = run.snapshot()
    run.target(float(snap.effector_position[2]) + 0.002)
    assert _statuses(run.ticks(20))[-1] == OK
    # every cable's free stroke 25 mm beyond its 20 mm bound: the QP is infeasible
    run.snapshot(stroke_shift=0.025)
    commands = run.ticks(100)
    statuses = _statuses(commands)
    held = statuses.count(HELD)
    assert 45 <= held <= 56 and statuses[-1] == SAFE, statuses
    assert "> max_held_time 0.05 s" in commands[statuses.index(SAFE)].status_text
    assert set(_statuses(run.ticks(50))) == {SAFE}  # the held command was forgotten: not HELD again
    run.snapshot()
    assert _statuses(run.ticks(10))[-1] == OK
    # a stale snapshot (SAFE) then an infeasible one: SAFE, not the command from before
    run.clock[0] += 1.0
    assert _statuses(run.ticks(3)) == [SAFE] * 3
    run.snapshot(stroke_shift=0.025)
    assert set(_statuses(run.ticks(20))) == {SAFE}


def test_snapshots_and_measurements_of_another_frame_are_refused(fake_clock_controller, monkeypatch):
    clock, make = fake_clock_controller
    run = _Run(clock, make, monkeypatch, answer_targets=False)
    snap = run.snapshot(frame="world")
    assert run.node._stats["rejected_snapshots"] == 1 and run.node._stats["snapshots"] == 0
    run.target(float(snap.effector_position[2]))
    assert set(_statuses(run.ticks(10))) == {SAFE}
    run.snapshot()  # the same in the robot's frame
    assert run.node._stats["snapshots"] == 1, (run.node._stats, run.node._reason)
    assert _statuses(run.ticks(5))[-1] == OK
    measured = PointStamped()
    measured.header.frame_id, measured.header.stamp = "world", to_time(clock[0])
    run.node._on_measured(measured)
    measured.header.frame_id, measured.header.stamp = "base_link", to_time(0.0)
    run.node._on_measured(measured)
    assert run.node._stats["rejected_measurements"] == 2 and run.node._measured is None


def test_a_clock_that_went_back_behind_the_snapshot_makes_the_commands_safe(fake_clock_controller,
                                                                             monkeypatch):
    """The old snapshot looked fresh for as long as the clock had stepped back."""
    clock, make = fake_clock_controller
    run = _Run(clock, make, monkeypatch, answer_targets=False)
    snap = run.snapshot()
    run.target(float(snap.effector_position[2]))
    assert _statuses(run.ticks(10))[-1] == OK
    clock[0] -= 5.0
    assert set(_statuses(run.ticks(5))) == {SAFE}
    assert "the clock went back" in run.node._reason


TWO_POINTS = """effectors:
  - name: tip
    points: [[0, 0, 125]]
    axes: [x, y, z]
  - name: knee_left
    points: [[0, 97, 45]]
    axes: [x, z]
"""


def test_a_refused_point_is_not_excused_by_another_points_targets(fake_clock_controller, monkeypatch, tmp_path):
    """Point B's accepted targets cleared point A's refusal: OK commands went on towards A's
    last accepted target for good."""
    text = find_config("robots/builtin_diamond.yaml").read_text()
    robot = tmp_path / "two_points.yaml"
    robot.write_text(text[:text.index("\neffectors:")] + "\n" + TWO_POINTS)
    clock, make = fake_clock_controller
    run = _Run(clock, make, monkeypatch, robot=str(robot), answer_targets=False, max_target_age=0.5)
    node = run.node

    def point(index: int, xyz) -> None:
        msg = PointStamped()
        msg.header.frame_id, msg.header.stamp = "base_link", to_time(clock[0])
        msg.point.x, msg.point.y, msg.point.z = (float(v) for v in xyz)
        node._on_point_target(index, msg)

    point(0, (0.0, 0.0, 0.12))
    point(1, (0.0, 0.097, 0.045))
    assert node._superseded_target(clock[0]) == ""
    for _ in range(10):  # A refused (a goal 100 m away), B accepted, for 1 s
        clock[0] += 0.1
        point(0, (100.0, 0.0, 0.12))
        point(1, (0.0, 0.097, 0.045))
    assert "of effector point tip refused" in node._superseded_target(clock[0])


def test_answer_targets_is_refused_with_per_tick_limits(fake_clock_controller, tmp_path):
    """Each answer moved the reference a full per-tick step: with 100 targets/s on a 1 kHz
    loop the actuators could move 10 % faster than their limits."""
    text = find_config("robots/builtin_diamond.yaml").read_text()
    robot = tmp_path / "stepped.yaml"
    robot.write_text(text.replace("    max_force: 5 N\n", "    max_force: 5 N\n    max_force_step: 0.01 N\n"))
    _, make = fake_clock_controller
    with pytest.raises(NodeConfigError, match="answer_targets adds commands between the ticks"):
        make(robot=str(robot), answer_targets=True)
    make(robot=str(robot), answer_targets=False)


def test_after_a_safe_spell_the_commands_ramp_from_the_safe_command(fake_clock_controller, monkeypatch,
                                                                    tmp_path):
    """The per-tick reference stayed on the last OK efforts: the first OK command after SAFE
    jumped back to them (80 times the per-tick limit on a valve robot)."""
    text = find_config("robots/builtin_diamond.yaml").read_text()
    robot = tmp_path / "stepped.yaml"
    robot.write_text(text.replace("    max_force: 5 N\n", "    max_force: 5 N\n    max_force_step: 0.01 N\n"))
    clock, make = fake_clock_controller
    run = _Run(clock, make, monkeypatch, robot=str(Path(robot)), answer_targets=False)
    snap = run.snapshot()
    run.target(float(snap.effector_position[2]) + 0.01)  # 10 mm up: the cables pull
    ramp = [c for c in run.ticks(200) if c.status == OK]
    assert max(np.max(c.efforts) for c in ramp) > 1.0  # ramped well above one step
    clock[0] += 1.0  # stale: SAFE
    assert set(_statuses(run.ticks(3))) == {SAFE}
    run.snapshot()
    first = next(c for c in run.ticks(20) if c.status == OK)
    assert np.max(np.abs(first.efforts)) <= 0.01 + 1e-9, first.efforts


def test_the_closed_loops_integrator_freezes_while_the_qp_fails(fake_clock_controller, monkeypatch):
    """qp_saturated(False, ...) was False: the 'freeze' anti-windup was off exactly while the
    QP was infeasible, and the integral grew under the HELD commands."""
    clock, make = fake_clock_controller
    run = _Run(clock, make, monkeypatch, answer_targets=False, closed_loop=True, max_held_time=1.0)
    snap = run.snapshot()
    run.target(float(snap.effector_position[2]))
    assert _statuses(run.ticks(10))[-1] == OK
    run.snapshot(stroke_shift=0.025)  # infeasible: HELD

    def measure() -> None:  # 2 mm off the target, fresh
        msg = PointStamped()
        msg.header.frame_id, msg.header.stamp = "base_link", to_time(clock[0])
        msg.point.z = float(snap.effector_position[2]) - 0.002
        run.node._on_measured(msg)

    measure()
    run.ticks(1)
    before = run.node.feedback.integrator
    for _ in range(100):
        measure()
        assert run.ticks(1)[0].status == HELD
    assert np.allclose(run.node.feedback.integrator, before)


def test_the_loop_thread_survives_a_tick_whose_safe_command_fails(fake_clock_controller, monkeypatch):
    """loop: thread — a tick whose exception handler raised again (its safe command could not
    be published) ended the tick thread while the executor and the diagnostics went on."""
    import threading

    _, make = fake_clock_controller
    node = make(answer_targets=False, rate_hz=200.0)
    calls = []

    def failing_tick() -> None:
        calls.append(1)
        if len(calls) >= 5:
            node._stop.set()
        raise RuntimeError("publisher gone")

    monkeypatch.setattr(node, "_tick", failing_tick)
    thread = threading.Thread(target=node._run_loop)
    thread.start()
    thread.join(timeout=10.0)
    assert not thread.is_alive() and len(calls) == 5 and node._stats["errors"] == 5
    assert "tick failed twice: RuntimeError: publisher gone" in node._reason


def test_held_commands_are_not_logged_as_ok(fake_clock_controller, monkeypatch):
    """'commands OK again' was logged on every HELD tick after a SAFE one (858 lines a
    second inside the 1 kHz tick, of commands that were HELD: the contact QP's back-off
    holds after a SAFE spell), and a HELD command could count as the first OK one."""
    from soft_inverse_ros.core.control.inverse_qp import CommandStatus

    clock, make = fake_clock_controller
    run = _Run(clock, make, monkeypatch, answer_targets=False, max_held_time=1.0)
    lines: list[str] = []
    monkeypatch.setattr(run.node, "get_logger", lambda: _Recorder(lines))
    solve = run.node.solver.solve

    def held(*args, **kwargs):  # the solver's HELD outcome (as the contact back-off gives it)
        result = solve(*args, **kwargs)
        result.command_status = CommandStatus.HELD
        return result

    snap = run.snapshot()
    run.target(float(snap.effector_position[2]))
    monkeypatch.setattr(run.node.solver, "solve", held)
    assert set(_statuses(run.ticks(20))) == {HELD}
    assert not run.node._commanding and not any("first OK" in line for line in lines)
    monkeypatch.setattr(run.node.solver, "solve", solve)
    assert _statuses(run.ticks(5))[-1] == OK
    clock[0] += 1.0  # stale: SAFE
    assert set(_statuses(run.ticks(3))) == {SAFE}
    run.snapshot()
    monkeypatch.setattr(run.node.solver, "solve", held)
    assert set(_statuses(run.ticks(50))) == {HELD}
    assert not any("commands OK again" in line for line in lines)
    monkeypatch.setattr(run.node.solver, "solve", solve)
    run.ticks(5)
    assert sum("commands OK again" in line for line in lines) == 1


class _Recorder:
    """A logger that records its lines (rclpy's logger refuses one call site of several
    severities, so they are not passed on)."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines

    def __getattr__(self, level):
        def log(text, **kwargs):
            self._lines.append(text)
        return log


def test_backing_off_is_not_a_held_command_and_a_hybrid_arm_holds_its_joints(fake_clock_controller,
                                                                            monkeypatch):
    """The contact QP's back-off (a new command each tick, toward the safe one) reports HELD:
    max_held_time turned it into SAFE. A hybrid robot's joints are marked as held on SAFE
    (their servos keep their goal), so the reset keeps their reference (test_hybrid_reset)."""
    from soft_inverse_ros.core.control.inverse_qp import BACKING_OFF, CommandStatus

    clock, make = fake_clock_controller
    run = _Run(clock, make, monkeypatch, answer_targets=False, max_held_time=0.05)
    solve = run.node.solver.solve

    def backing_off(*args, **kwargs):
        result = solve(*args, **kwargs)
        result.command_status, result.backend_status = CommandStatus.HELD, BACKING_OFF
        return result

    snap = run.snapshot()
    run.target(float(snap.effector_position[2]))
    assert _statuses(run.ticks(5))[-1] == OK
    monkeypatch.setattr(run.node.solver, "solve", backing_off)
    assert set(_statuses(run.ticks(200))) == {HELD}  # 0.2 s > max_held_time: still stepping
    assert run.node._held_on_safe is None
    hybrid = make(robot="hybrid_arm", answer_targets=False)
    assert hybrid._held_on_safe.tolist() == [True] * 5
