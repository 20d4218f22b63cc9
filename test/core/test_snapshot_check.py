"""Physical checks of compliance snapshots (absurd but finite snapshots are refused)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from soft_inverse_ros.core.control.actuator_limits import limits_from_description
from soft_inverse_ros.core.control.snapshot_check import SnapshotExpectations, check_snapshot
from soft_inverse_ros.core.model.description import load_robot_description
from soft_inverse_ros.core.model.robot_model import RobotModel
from soft_inverse_ros.core.model.snapshot import ActuatorKind


@pytest.fixture(scope="module")
def robot():
    desc = load_robot_description("builtin_diamond")
    model = RobotModel.from_description(desc)
    model.equilibrate(np.zeros(4), from_rest=True)
    lim = limits_from_description(desc)
    lo, hi = model.mesh.bounding_box()
    expect = SnapshotExpectations(tuple(desc.actuator_names), tuple(desc.actuator_kinds),
                                  desc.effector_row_names, float(np.linalg.norm(hi - lo)),
                                  np.maximum(np.abs(lim.effort_min), np.abs(lim.effort_max)))
    return model.snapshot(seq=1, stamp=1.0), expect


def test_a_real_snapshot_passes(robot):
    snap, expect = robot
    assert check_snapshot(snap, expect) == ""


@pytest.mark.parametrize("change, words", [
    (lambda s: dict(actuator_stroke=s.actuator_stroke - 1e296), "strokes"),
    (lambda s: dict(w_aa=s.w_aa * 1e6), "W_aa"),
    (lambda s: dict(w_aa=s.w_aa + np.triu(s.w_aa, 1)), "not symmetric"),
    (lambda s: dict(w_aa=-s.w_aa), "positive semi-definite"),
    (lambda s: dict(w_aa=s.w_aa - 2 * np.abs(s.w_aa).max() * np.eye(4) * [1, 0, 0, 0]),
     "positive semi-definite"),
    (lambda s: dict(actuator_kinds=(ActuatorKind.PRESSURE,) * 4), "kinds"),
    (lambda s: dict(actuator_names=("a", "b", "c", "d")), "actuators"),
    (lambda s: dict(effector_position=s.effector_position + 1e3), "effector"),
    (lambda s: dict(w_ea=s.w_ea * 1e6), "W_ea"),
    # NaN in W_aa reached eigvalsh: "LinAlgError: Eigenvalues did not converge", not counted
    (lambda s: dict(w_aa=s.w_aa * np.nan), "snapshot contains NaN or inf"),
    # efforts ten times the bound (N for mN): OK commands at full effort, 50 mm predicted error
    (lambda s: dict(lambda0=np.array([50.0, 0.0, 0.0, 0.0])), "lambda0"),
    (lambda s: dict(lambda0=np.array([-1e6, 1e6, 0.0, 0.0])), "lambda0"),
])
def test_absurd_snapshots_are_refused(robot, change, words):
    snap, expect = robot
    bad = dataclasses.replace(snap, **change(snap))
    assert words in check_snapshot(bad, expect)


def test_efforts_at_the_bound_pass(robot):
    snap, expect = robot
    at_bound = dataclasses.replace(snap, lambda0=np.asarray(expect.effort_max, float).copy())
    assert check_snapshot(at_bound, expect) == ""
