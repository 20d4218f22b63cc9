"""Two deformable bodies in contact (Coevoet eq. 12): W is the sum of both compliances."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from soft_inverse_ros.bench.fem import box_robot
from soft_inverse_ros.core.contact.signorini import solve_signorini_exact, solve_signorini_gs
from soft_inverse_ros.core.contact.two_body import TwoBodyContact
from soft_inverse_ros.core.model.description import load_robot_description
from soft_inverse_ros.core.model.robot_model import RobotModel

DOWN = np.array([0.0, 0.0, -1.0])  # contact normal, from the block (above) towards the robot


def _bodies():
    """The built-in robot (A) and a soft cantilever block (B) above it, no gravity (linear
    regime); each in its own frame, B's placement folded into the contact offsets."""
    robot = RobotModel.from_description(
        dataclasses.replace(load_robot_description("builtin_diamond"), gravity=np.zeros(3)), factor_reuse=False)
    desc_b, mesh_b = box_robot(300, young_modulus=60e3)
    block = RobotModel.from_description(dataclasses.replace(desc_b, gravity=np.zeros(3)), mesh=mesh_b,
                                        factor_reuse=False)
    return robot, block


def _pair(robot, block, depth: float, n_pairs: int = 1):
    xa, xb = robot.positions, block.positions
    free_a = robot.fem.free_nodes
    tops = free_a[np.argsort(-xa[free_a, 2])][:n_pairs]
    end = np.flatnonzero(np.isclose(xb[:, 0], xb[:, 0].max()) & np.isclose(xb[:, 2], xb[:, 2].min()))
    ends = end[np.argsort(np.abs(xb[end, 1] - np.median(xb[end, 1])))][:n_pairs]
    # B translated so its first end node sits `depth` into A's top node: gap = −depth there
    t_z = xa[tops[0], 2] - xb[ends[0], 2] - depth
    offsets = np.full(n_pairs, -t_z)  # gap = n·(x_a − x_b − t) = n·(x_a − x_b) − n·t, n·t = −t_z
    return tops, ends, offsets


def test_a_single_contact_force_is_the_penetration_over_the_summed_compliance():
    robot, block = _bodies()
    depth = 1e-4
    tops, ends, offsets = _pair(robot, block, depth)
    pair = TwoBodyContact(robot, block, tops, ends, [DOWN], offsets)
    lam_a, lam_b = np.zeros(robot.n_actuators), np.zeros(block.n_actuators)
    assert pair.gaps()[0] == pytest.approx(-depth)
    first = pair.step(lam_a, lam_b)
    w_a, w_b = float(first.w_a[0, 0]), float(first.w_b[0, 0])
    assert w_a > 0 and w_b > 0
    for _ in range(15):
        last = pair.step(lam_a, lam_b)
    force = float(last.solution.forces[0])
    assert force == pytest.approx(depth / (w_a + w_b), rel=0.01)  # Coevoet eq. 12, both bodies
    assert force < depth / w_a and force < depth / w_b  # softer than either body alone
    assert abs(pair.gaps()[0]) < 1e-9
    assert last.residual_a < 1e-6 * force + 1e-9 and last.residual_b < 1e-6 * force + 1e-9


def test_gauss_seidel_agrees_with_the_exact_solve_on_the_summed_compliance():
    robot, block = _bodies()
    tops, ends, offsets = _pair(robot, block, 2e-4, n_pairs=4)
    pair = TwoBodyContact(robot, block, tops, ends, [DOWN] * 4, offsets)
    step = pair.step(np.zeros(robot.n_actuators), np.zeros(block.n_actuators))
    free = step.solution.gaps - step.w @ step.solution.forces
    gs = solve_signorini_gs(step.w, free, tolerance=1e-15, max_sweeps=200000)
    exact = solve_signorini_exact(step.w, free)
    assert np.abs(gs.forces - exact.forces).max() <= 1e-6 * np.abs(exact.forces).max()
    assert exact.residual <= 1e-8 and gs.residual <= 1e-6
