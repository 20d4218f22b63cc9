"""The inverse QP on real FEM snapshots (built-in Diamond, 4 cables, tip x/y/z)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from inverse_qp_reference import assert_within_limits, enumerate_qp, inverse_problem, relative_error
from soft_inverse_ros.core.model.description import load_robot_description
from soft_inverse_ros.core.control.inverse_qp import InverseSolver, InverseSolverConfig
from soft_inverse_ros.core.model.robot_model import RobotModel


@pytest.fixture(scope="module")
def diamond():
    desc = dataclasses.replace(load_robot_description("builtin_diamond"), gravity=np.zeros(3))
    model = RobotModel.from_description(desc, solver="scipy")
    limits = model.actuator_limits()
    return model, limits


def test_fem_snapshot_agrees_with_enumeration(diamond):
    model, limits = diamond
    model.reset()
    lam0 = np.array([0.5, 0.2, 0.0, 0.1])
    for k in range(3):
        _, snapshot = model.update(lam0, seq=k, stamp=0.05 * k)
    rng = np.random.default_rng(0)
    for backend in ("daqp", "quadprog", "osqp"):
        solver = InverseSolver(InverseSolverConfig(backend=backend, epsilon=1e-3), limits)
        update = solver.set_snapshot(snapshot)
        assert update.accepted, update.reason
        for offset in rng.normal(0.0, 0.01, (4, 3)):  # ±1 cm around the tip, some unreachable
            target = snapshot.effector_position + offset
            ref = enumerate_qp(*inverse_problem(snapshot, limits, target, 1e-3))
            result = solver.solve(target)
            assert result.ok, result.message
            assert relative_error(result.efforts, ref, 1e-9 * 5.0) <= 1e-6, backend
            assert_within_limits(result, snapshot, limits)


def test_commanded_efforts_move_the_fem_tip_to_a_reachable_target(diamond):
    """Sign conventions end to end: efforts for a target reached by known efforts bring the
    FEM robot's tip (after equilibrium) close to that target."""
    model, limits = diamond
    model.reset()
    reference = np.array([1.0, 0.0, 0.3, 0.0])
    model.equilibrate(reference, from_rest=True)
    target = model.effector_position.copy()
    model.reset()
    _, snapshot = model.update(np.zeros(4), seq=0, stamp=0.0)
    solver = InverseSolver(InverseSolverConfig(epsilon=1e-4), limits)
    assert solver.set_snapshot(snapshot).accepted
    start_error = float(np.linalg.norm(snapshot.effector_position - target))
    for k in range(1, 6):  # a few low-rate updates, as the two-rate loop does
        result = solver.solve(target)
        assert result.ok
        model.equilibrate(result.efforts)
        _, snapshot = model.update(result.efforts, seq=k, stamp=0.05 * k)
        solver.set_snapshot(snapshot)
    final_error = float(np.linalg.norm(model.effector_position - target))
    assert start_error > 2e-3, start_error
    assert final_error < 0.01 * start_error, (start_error, final_error)
