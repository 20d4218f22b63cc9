"""The hybrid robot description (core/model/hybrid_description.py): the built-in
hybrid_arm loads, its joint limits follow the module's rules, bad input is one clear line."""

import copy
import logging
import math
import re

import numpy as np
import pytest
import yaml

from soft_inverse_ros.core.config_files import find_config
from soft_inverse_ros.core.control.actuator_limits import limits_from_description
from soft_inverse_ros.core.model.description import DescriptionError, load_robot_description
from soft_inverse_ros.core.model.hybrid_description import (
    command_period_mismatch,
    load_any_description,
    load_hybrid_description,
    parse_hybrid_description,
)


@pytest.fixture(scope="module")
def data():
    path = find_config("robots/hybrid_arm.yaml")
    return path, yaml.safe_load(path.read_text())


def test_builtin_loads_with_joint_limits():
    d = load_hybrid_description("hybrid_arm")
    assert d.actuator_names == ("j1", "j2", "j3", "j4", "j5")
    assert d.effector_row_names == ("probe.x", "probe.y", "probe.z")
    assert d.force_sum_max == pytest.approx(1.0) and d.min_force_sum == pytest.approx(0.05) and d.soft_part.size == pytest.approx((0.012, 0.012, 0.05))
    assert d.environment.young_modulus == pytest.approx(30e3) and d.command_period == pytest.approx(1e-3)
    lim = limits_from_description(d)
    k, home = d.joint_stiffness, d.home
    assert lim.effort_min == pytest.approx(k * (np.array([-2.6, -1.8, -2.2, -2.6, -2.0]) - home))
    assert lim.stroke_max == pytest.approx([2.6, 1.8, 2.2, 2.6, 2.0])
    assert lim.max_stroke_step == pytest.approx(np.full(5, 1.0 * 1e-3))  # 1 rad/s x 1 ms
    assert lim.max_effort_step == pytest.approx(k * 1e-3)
    # setpoints [rad] <-> efforts [N m]
    q = home + np.array([0.1, -0.2, 0.05, 0.0, 0.3])
    assert d.joint_positions(d.joint_efforts(q)) == pytest.approx(q)
    assert type(load_any_description("hybrid_arm")) is type(d)
    assert d.size_m() > 0.3


def test_soft_robot_loader_names_the_hybrid_graph():
    with pytest.raises(DescriptionError, match="hybrid robot") as exc:
        load_robot_description("hybrid_arm")
    assert "\n" not in str(exc.value)


def _bad(data, edit):
    path, raw = data
    d = copy.deepcopy(raw)
    edit(d)
    with pytest.raises(DescriptionError) as exc:
        parse_hybrid_description(d, source=path)
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg
    return msg


def test_unknown_key_has_a_hint(data):
    msg = _bad(data, lambda d: d["contact"].update(force_sum_mx=1.0))
    assert "contact.force_sum_mx" in msg and "force_sum_max" in msg


def test_wrong_unit_names_the_key(data):
    msg = _bad(data, lambda d: d["joints"][1].update(stiffness="50 N"))
    assert "joints[1] (j2).stiffness" in msg and "force" in msg
    msg = _bad(data, lambda d: d["joints"][0].update(max_velocity="1 m/s"))
    assert "max_velocity" in msg


def test_limits_beyond_the_urdf_are_refused(data):
    msg = _bad(data, lambda d: d["joints"][2].update(max_position="3 rad"))
    assert "j3" in msg and "URDF" in msg
    msg = _bad(data, lambda d: d["joints"][4].update(max_velocity="10 rad/s"))
    assert "j5" in msg and "URDF" in msg


def test_joint_order_must_match_the_urdf(data):
    def swap(d):
        d["joints"][0], d["joints"][1] = d["joints"][1], d["joints"][0]
    assert "URDF joint" in _bad(data, swap)
    assert "URDF joint" in _bad(data, lambda d: d["joints"].pop())


def test_home_outside_range_and_bad_contact(data):
    assert "home" in _bad(data, lambda d: d["joints"][0].update(home="3 rad"))
    assert "min_force_sum" in _bad(data, lambda d: d["contact"].update(min_force_sum="2 N"))
    assert "divisions" in _bad(data, lambda d: d["soft_part"].update(divisions=[2, 2]))
    assert "arm.urdf" in _bad(data, lambda d: d["arm"].update(urdf="nope.urdf"))
    assert "environment.clearance" in _bad(data, lambda d: d["environment"].update(clearance="0 mm"))


def test_degrees_are_accepted(data):
    path, raw = data
    d = copy.deepcopy(raw)
    d["joints"][0]["max_position"] = "120 deg"
    desc = parse_hybrid_description(d, source=path)
    assert desc.joints[0].max_position == pytest.approx(math.radians(120))


SOFT = {"name": "push", "type": "force", "anchor": "[3, 0, 0] mm", "point": "[6, 0, 50] mm",
        "min_force": "-2 N", "max_force": "2 N", "max_stroke": "5 mm"}


def test_soft_actuators_follow_the_joints(data):
    path, raw = data
    d = copy.deepcopy(raw)
    d["soft_actuators"] = [dict(SOFT)]
    desc = parse_hybrid_description(d, source=path)
    assert desc.actuator_names[-1] == "push" and desc.n_joints == 5 and len(desc.actuators) == 6
    lim = limits_from_description(desc)
    assert lim.effort_max[-1] == pytest.approx(2.0) and lim.stroke_min[-1] == pytest.approx(-0.005)
    assert desc.joint_positions(np.arange(6.0)) == pytest.approx(desc.home + np.arange(5.0) / desc.joint_stiffness)


def test_bad_soft_actuators_are_one_line(data):
    def soft(**changes):
        return lambda d: d.update(soft_actuators=[{**SOFT, **changes}])
    assert "expected 'force'" in _bad(data, soft(type="cable"))
    assert "outside the soft part" in _bad(data, soft(point="[6, 0, 80] mm"))
    assert "max_force" in _bad(data, soft(max_force="2 Pa"))
    assert "unique" in _bad(data, soft(name="j1"))
    assert "apart" in _bad(data, soft(point="[3, 0, 0] mm"))
    assert "min_force" in _bad(data, soft(min_force="3 N"))


_URDF_EDITS = {  # the shipped arm's URDF edited one way, and what the refusal says
    "continuous": (('<joint name="j4" type="revolute">', '<joint name="j4" type="continuous">'),
                   "joint 'j4' is a RUBZ joint; only 1-DOF revolute and prismatic joints"),
    "zero axis": (('<axis xyz="0 1 0"/><limit lower="-1.8"', '<axis xyz="0 0 0"/><limit lower="-1.8"'),
                  "joint 'j2' has a zero axis: it moves nothing"),
    "negative mass": (('<mass value="0.3"/>', '<mass value="-30"/>'), "the body of joint 'j2' has mass -30 kg"),
    "prismatic": (('<joint name="j5" type="revolute">', '<joint name="j5" type="prismatic">'),
                  "joints ['j5'] are prismatic: a hybrid description's joints are revolute"),
    "truncated": (("</robot>", ""), "does not contain a valid URDF model. (URDF parser: Error:"),
    "no torque": (('effort="5" velocity="2.0"/></joint>\n  <joint name="j2"', 'effort="0" velocity="2.0"/></joint>\n  <joint name="j2"'),
                  "joint 'j1' has effort limit 0: its motor must give a torque > 0"),
    # a sixth joint following j5 was a sixth independent servo
    "mimic": (('  <joint name="flange_fixed"',
               '  <link name="link6"/>\n  <joint name="j6" type="revolute"><parent link="link5"/><child link="link6"/>'
               '<axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/>'
               '<mimic joint="j5" multiplier="0.5"/></joint>\n  <joint name="flange_fixed"'),
              "joint 'j6' mimics joint 'j5' (<mimic>): a hybrid description's joints are independent position "
              "servos"),
    # blamed the description: "position range [-1.8, 1.8] rad exceeds the URDF's [1.8, -1.8] rad"
    "reversed limits": (('lower="-1.8" upper="1.8"', 'lower="1.8" upper="-1.8"'),
                        "joint 'j2' has its limits reversed: lower 1.8 rad > upper -1.8 rad"),
}


@pytest.mark.parametrize("case", sorted(_URDF_EDITS))
def test_urdfs_the_hybrid_models_do_not_handle_are_refused(data, tmp_path, case, capfd):
    """A continuous joint, a zero axis, a negative mass ran (or failed deep in Pinocchio);
    the URDF parser's own errors were lines of C++ output before ours."""
    (old, new), needle = _URDF_EDITS[case]
    text = find_config("robots/hybrid_arm.urdf").read_text()
    assert old in text
    (tmp_path / "arm.urdf").write_text(text.replace(old, new, 1))
    msg = _bad(data, lambda d: d["arm"].update(urdf=str(tmp_path / "arm.urdf")))
    assert needle in msg, msg
    assert capfd.readouterr().err == ""  # nothing besides the one line


def test_a_urdf_path_that_does_not_exist_is_not_replaced_by_the_shipped_arm(data, tmp_path, monkeypatch):
    """A mistyped folder silently ran the shipped URDF; a bare name still finds it (an
    installed description), and a file of that name in the working folder does not shadow it."""
    msg = _bad(data, lambda d: d["arm"].update(urdf=str(tmp_path / "typo" / "hybrid_arm.urdf")))
    assert "URDF file" in msg and "typo/hybrid_arm.urdf not found" in msg
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hybrid_arm").write_text("junk")
    from soft_inverse_ros.core.rigid.chain import RigidChain

    assert RigidChain.from_urdf("hybrid_arm").joint_names == ["j1", "j2", "j3", "j4", "j5"]
    path, raw = data
    d = copy.deepcopy(raw)
    d["arm"]["urdf"] = "hybrid_arm.urdf"  # bare: next to the description, else config/robots
    assert parse_hybrid_description(d, source=tmp_path / "x.yaml").urdf == find_config("robots/hybrid_arm.urdf")


def test_a_minimum_force_sum_equal_to_the_limit_is_refused(data):
    """Every command was held (no force sum strictly inside the band)."""
    msg = _bad(data, lambda d: d["contact"].update(min_force_sum="1 N", force_sum_max="1 N"))
    assert "need 0 <= min_force_sum (1.0) < force_sum_max (1.0)" in msg


def test_a_key_given_twice_is_refused(tmp_path):
    """PyYAML kept the last of two equal keys: command_period 1 ms, then 1 s, ran with 1 s."""
    text = find_config("robots/hybrid_arm.yaml").read_text().replace(
        "command_period:", "command_period: 1 s\ncommand_period:", 1)
    (tmp_path / "arm.yaml").write_text(text)
    with pytest.raises(DescriptionError, match=r"found duplicate key 'command_period' at line \d+"):
        load_hybrid_description(str(tmp_path / "arm.yaml"))


def test_lengths_absurd_against_the_arm_are_refused(data):
    """A bare number is metres: size [12, 12, 50] was a 50 m rod on a 0.27 m arm, and ran."""
    msg = _bad(data, lambda d: d["soft_part"].update(size=[12, 12, 50]))
    assert "soft_part.size: [12.0, 12.0, 50.0] m is more than 10 times the arm's reach" in msg
    msg = _bad(data, lambda d: d["environment"].update(clearance="500 mm"))
    assert "environment.clearance: 0.5 m is more than the arm's reach" in msg


def test_a_urdf_in_millimetres_is_refused(data, tmp_path):
    """Every origin x1000 gave an arm reaching 271 m, and later failures blamed the limits."""
    text = find_config("robots/hybrid_arm.urdf").read_text()
    mm = re.sub(r'<origin xyz="([^"]*)"',
                lambda m: '<origin xyz="' + " ".join(f"{1e3 * float(v):g}" for v in m.group(1).split()) + '"', text)
    (tmp_path / "arm_mm.urdf").write_text(mm)
    msg = _bad(data, lambda d: d["arm"].update(urdf=str(tmp_path / "arm_mm.urdf")))
    assert ("arm.urdf: the arm's flange is 271 m from its base at home, more than 10 m: URDF lengths in "
            "millimetres? (URDF lengths are metres)") in msg, msg


def test_implausible_young_moduli_are_warned_about(data, caplog):
    """A bare young_modulus: 0.8 is 0.8 Pa and loaded silently; the soft robots' plausibility
    range (description.PLAUSIBLE_YOUNG_PA) now applies to the soft part and the block."""
    path, raw = data
    with caplog.at_level(logging.WARNING, logger="soft_inverse_ros.core.model.hybrid_description"):
        parse_hybrid_description(copy.deepcopy(raw), source=path)
    assert caplog.records == []  # the shipped robot is plausible
    d = copy.deepcopy(raw)
    d["soft_part"]["material"]["young_modulus"] = 0.8
    d["environment"]["material"]["young_modulus"] = 30
    with caplog.at_level(logging.WARNING, logger="soft_inverse_ros.core.model.hybrid_description"):
        desc = parse_hybrid_description(d, source=path)
    lines = [r.getMessage() for r in caplog.records]
    assert desc.plausibility_warnings() == [line.removeprefix("robot hybrid_arm: ") for line in lines]
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    assert "soft_part: implausible Young's modulus for a soft robot: 0.8 Pa" in lines[0]
    assert "environment: implausible Young's modulus for a soft body: 30 Pa" in lines[1]


def test_a_command_period_in_seconds_that_meant_milliseconds_is_refused(data):
    """command_period: 1 is 1 s, and made the per-tick joint limit velocity x 1 s."""
    msg = _bad(data, lambda d: d.update(command_period=1))
    assert "command_period: 1 s is more than 0.1 s (the controller's tick): ms written as s?" in msg
    path, raw = data
    desc = parse_hybrid_description({**raw, "command_period": "100 ms"}, source=path)
    assert desc.command_period == pytest.approx(0.1)


def test_the_controller_rate_must_match_the_command_period():
    """The per-tick joint limits hold for ticks of command_period only: the shipped graph's
    controller rate matches the shipped robot, another rate is one line."""
    desc = load_hybrid_description("hybrid_arm")
    sim = yaml.safe_load(find_config("sim_hybrid.yaml").read_text())
    assert command_period_mismatch(desc, sim["inverse_controller_node"]["ros__parameters"]["rate_hz"]) is None
    msg = command_period_mismatch(desc, 500.0)
    assert msg == ("rate_hz 500 (a 2 ms tick) differs from the command_period 1 ms of robot 'hybrid_arm', "
                   "which sets its per-tick joint limits: make them match")
