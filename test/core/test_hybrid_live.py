"""The hybrid robot in the live graph (core/rigid/hybrid_live.py, core/sim/hybrid_plant.py):
the snapshot's joint columns predict the settled model, its alignment rows measure the
distance of the target to the probe axis, the dynamic plant presses the block with
non-negative forces and no deep penetration, and the drawing has the arm, rod and contacts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from soft_inverse_ros.core.model.hybrid_description import load_hybrid_description
from soft_inverse_ros.core.rigid.hybrid_live import (
    HybridSnapshotModel,
    alignment_distance,
    arm_frame_origins,
    hybrid_visual_scene,
)
from soft_inverse_ros.core.sim.hybrid_plant import HybridContactPlant, HybridPlantConfig


@pytest.fixture(scope="module")
def desc():
    return load_hybrid_description("hybrid_arm")


def _target(scene):
    tip, _ = scene.probe_points()
    return np.array([tip[0] + 0.01, tip[1] + 0.01, scene.block_top_z - 0.012])


def test_snapshot_predicts_the_settled_model(desc):
    model = HybridSnapshotModel(desc)
    target = _target(model.scene)
    q0 = desc.home.copy()
    q0[1] += 0.03  # pressing the block: contacts active
    snap = model.snapshot(q0, target, 1, 1.0)
    assert snap.contacts is not None and snap.contacts.force.sum() > 0.0
    a, b = model.scene.probe_points()
    assert np.linalg.norm(snap.effector_position - target) == pytest.approx(alignment_distance(a, b, target), rel=1e-9)
    assert snap.lambda0 == pytest.approx(desc.joint_efforts(q0))
    # a small joint move (no contact change: j1 about the vertical) against re-settling the model
    dq = np.array([0.004, 0.0, 0.0, 0.0, 0.0])
    dl = desc.joint_efforts(q0 + dq) - desc.joint_efforts(q0)
    predicted = snap.effector_position + snap.w_ea @ dl + snap.contacts.w_ec @ np.zeros(snap.contacts.size)
    model2 = HybridSnapshotModel(desc)
    model2.snapshot(q0, target, 1, 1.0)
    snap2 = model2.snapshot(q0 + dq, target, 2, 2.0)
    moved = np.linalg.norm(snap2.effector_position - snap.effector_position)
    assert moved > 1e-4
    # contact forces change too: compare with the contact-aware prediction from the LCP
    from soft_inverse_ros.core.contact.signorini import solve_signorini_exact

    c = snap.contacts
    gaps_free = c.gap + c.w_ca @ dl - c.w_cc @ c.force
    lam = solve_signorini_exact(c.w_cc, gaps_free).forces
    predicted = snap.effector_position + snap.w_ea @ dl + c.w_ec @ (lam - c.force)
    assert np.linalg.norm(predicted - snap2.effector_position) < 0.1 * moved
    assert snap2.actuator_stroke == pytest.approx(snap.actuator_stroke + snap.w_aa @ dl + c.w_ca.T @ (lam - c.force), abs=2e-4)


def test_plant_presses_the_block(desc):
    plant = HybridContactPlant(desc, HybridPlantConfig(dt=0.005))
    q = desc.home.copy()
    q[1] += 0.04
    plant.set_joint_setpoints(q)
    for _ in range(150):
        f = plant.step()
        assert np.all(f >= 0.0)
    assert plant.forces.sum() > 0.2
    tip = plant.rod_positions[plant.scene.tip]
    block_top = plant.contact_points()
    assert np.all(tip[:, 2] - block_top[:, 2] > -2e-4)  # no penetration beyond 0.2 mm
    assert plant.time == pytest.approx(0.75)
    with pytest.raises(ValueError):
        plant.set_joint_setpoints(np.zeros(3))


def test_dense_and_sparse_steps_agree_in_contact(desc):
    """The plant's dense step (the built-in rod's 140 coordinates, HybridPlant.dense) and the
    sparse one integrate the same equations: the same trajectory to round-off while pressing."""
    plants = [HybridContactPlant(desc, HybridPlantConfig(dt=0.01)) for _ in range(2)]
    assert plants[0].dynamics.dense
    plants[1].dynamics.dense = False
    q = desc.home.copy()
    q[1] += 0.05
    q[2] -= 0.03
    for plant in plants:
        plant.set_joint_setpoints(q)
        for _ in range(80):
            plant.step()
    dense, sparse = plants
    assert sparse.forces.sum() > 0.5  # in contact
    np.testing.assert_allclose(dense.rod_positions, sparse.rod_positions, rtol=0, atol=1e-12)
    np.testing.assert_allclose(dense.forces, sparse.forces, rtol=1e-9, atol=1e-12)


def test_drawing(desc):
    plant = HybridContactPlant(desc)
    arm = arm_frame_origins(plant.scene.chain, plant.q)
    assert arm.shape == (7, 3) and arm[-1] == pytest.approx(
        plant.scene.chain.frame_pose(plant.q, plant.scene.chain.frame_id("flange"))[0])
    scene = hybrid_visual_scene(plant.scene, plant.rod_positions, plant.block_positions, plant.q,
                                np.array([0.1] + [0.0] * 8), plant.contact_points(), np.zeros(3))
    names = {s.name for s in scene.segments} | {p.name for p in scene.point_sets} | {s.name for s in scene.spheres}
    assert {"arm_links", "arm_joints", "contacts", "contact_forces", "effector", "target"} <= names
    assert len(scene.point_sets[1].points) == 1


def test_inverse_solver_aligns_the_probe_and_keeps_the_contact_limits(desc):
    """The 1 kHz InverseSolver (core/control/inverse_qp.py) on the hybrid snapshots, the
    controller's own model as the robot: aligned within 0.5 mm (issue 15), the contact force
    sum between the description's minimum and limit, joint setpoints within the ranges."""
    from soft_inverse_ros.core.control.actuator_limits import limits_from_description
    from soft_inverse_ros.core.control.inverse_qp import CommandStatus, InverseSolver, InverseSolverConfig

    model = HybridSnapshotModel(desc)
    target = _target(model.scene)
    solver = InverseSolver(InverseSolverConfig(epsilon=1e-3, contact_force_sum_max=desc.force_sum_max,
                                               contact_min_force_sum=desc.min_force_sum),
                           limits_from_description(desc))
    lim = limits_from_description(desc)
    q = desc.home.copy()
    a, b = model.scene.probe_points()
    start = alignment_distance(a, b, target)
    status = []
    for frame in range(12):
        snap = model.snapshot(q, target, frame + 1, float(frame + 1))
        assert solver.set_snapshot(snap).accepted
        for k in range(50):
            result = solver.solve(target, stamp=frame + 1 + 1e-3 * k)
            status.append(result.command_status)
            assert result.command_status is not CommandStatus.SAFE, result.message
        q = desc.joint_positions(result.efforts)
        assert np.all(q >= lim.stroke_min - 1e-9) and np.all(q <= lim.stroke_max + 1e-9)
        if result.command_status is CommandStatus.OK:
            assert result.contact is not None and result.contact.force_sum <= desc.force_sum_max + 1e-6
    # a tick whose contact solution misses the bounds by round-off holds the last command
    assert status.count(CommandStatus.OK) >= 0.95 * len(status)
    model.snapshot(q, target, 99, 99.0)  # settle the model at the last setpoints
    a, b = model.scene.probe_points()
    assert start > 0.01 and alignment_distance(a, b, target) < 0.5e-3
    assert desc.min_force_sum - 1e-3 <= model.scene.forces.sum() <= desc.force_sum_max + 1e-6


@pytest.mark.parametrize("weight", [0.0, 1e-3])
def test_pricing_the_force_sum_releases_a_press_at_the_limit(desc, weight):
    """The live run's third target (sim_hybrid.yaml's sequence) from the joint angles the live
    controller held there: a press at the 1 N limit that serves the alignment as well as the
    0.05 N minimum does (their actuator energies differ by 0.1 %). Without the force-sum
    term (Coevoet eq. 13 as written) the QP keeps it; with sim_hybrid.yaml's
    ``qp.contact_force_weight`` it lets go to the minimum, as aligned."""
    from soft_inverse_ros.core.control.actuator_limits import limits_from_description
    from soft_inverse_ros.core.control.inverse_qp import InverseSolver
    from soft_inverse_ros.core.control.shipped_settings import shipped_solver_config

    config = shipped_solver_config("sim_hybrid.yaml", contact_force_sum_max=desc.force_sum_max,
                                   contact_min_force_sum=desc.min_force_sum)
    assert config.contact_force_weight == 1e-3  # what the live graph runs
    config = dataclasses.replace(config, contact_force_weight=weight)
    model = HybridSnapshotModel(desc, newton_iterations=2)
    solver = InverseSolver(config, limits_from_description(desc))
    target = np.array([0.2422, -0.01, 0.037])
    q = np.array([-0.038, 0.684, 1.644, -0.010, 0.870])
    for frame in range(6):
        solver.set_snapshot(model.snapshot(q, target, frame + 1, 0.1 * frame))
        for k in range(100):  # a 10 Hz snapshot's ticks at 1 kHz
            result = solver.solve(target, stamp=0.1 * frame + 1e-3 * k)
        q = desc.joint_positions(result.efforts)
    model.snapshot(q, target, 99, 9.9)
    a, b = model.scene.probe_points()
    assert alignment_distance(a, b, target) < 0.05e-3
    force = model.scene.forces.sum()
    if weight == 0.0:
        assert force == pytest.approx(desc.force_sum_max, abs=0.02)  # pressed at the limit
    else:
        assert force == pytest.approx(desc.min_force_sum, abs=0.01)  # at the stay-in-contact minimum


# ------------------------------------------------------------------ soft actuators mixed with the joints
def _with_soft_actuator():
    import yaml

    from soft_inverse_ros.core.config_files import find_config
    from soft_inverse_ros.core.model.hybrid_description import parse_hybrid_description

    path = find_config("robots/hybrid_arm.yaml")
    data = yaml.safe_load(path.read_text())
    data["soft_actuators"] = [{"name": "push", "type": "force", "anchor": "[3, 0, 0] mm",
                               "point": "[6, 0, 50] mm", "min_force": "-2 N", "max_force": "2 N",
                               "max_stroke": "5 mm", "max_force_step": "0.01 N"}]
    return parse_hybrid_description(data, source=path)


def test_soft_actuator_column_predicts_the_settled_model():
    desc = _with_soft_actuator()
    assert desc.actuator_names == ("j1", "j2", "j3", "j4", "j5", "push") and desc.n_joints == 5
    model = HybridSnapshotModel(desc)
    target = _target(model.scene)
    q = desc.home.copy()
    q[1] -= 0.02  # away from the block: no contact, the linearisation alone
    snap = model.snapshot(q, target, 1, 1.0, np.array([0.0]))
    assert snap.w_aa.shape == (6, 6) and np.linalg.eigvalsh(snap.w_aa).min() > 0
    assert snap.lambda0[-1] == 0.0 and snap.actuator_stroke[-1] == pytest.approx(0.0, abs=1e-9)
    df = 0.05
    other = HybridSnapshotModel(desc)
    other.snapshot(q, target, 1, 1.0, np.array([0.0]))
    moved = other.snapshot(q, target, 2, 2.0, np.array([df]))
    assert moved.contacts.force.sum() < 1e-12
    d_eff = moved.effector_position - snap.effector_position
    d_stroke = moved.actuator_stroke[-1] - snap.actuator_stroke[-1]
    assert np.linalg.norm(d_eff) > 1e-5 and d_stroke > 1e-5  # pushing extends it
    assert np.linalg.norm(snap.w_ea[:, -1] * df - d_eff) < 0.02 * np.linalg.norm(d_eff)
    assert snap.w_aa[-1, -1] * df == pytest.approx(d_stroke, rel=0.02)
    with pytest.raises(ValueError, match="soft actuator efforts"):
        model.snapshot(q, target, 3, 3.0, np.array([0.0, 1.0]))


def test_modified_newton_settle_keeps_the_soft_actuator_force(monkeypatch):
    """The modified-Newton steps of a settle to a tolerance carry the soft actuator's force
    in their residual: the same equilibrium as Newton steps only."""
    from soft_inverse_ros.core.rigid import hybrid_scene
    from soft_inverse_ros.core.rigid.hybrid_live import DescribedScene

    desc = _with_soft_actuator()
    states = []
    for contraction in (0.0, 0.5):
        monkeypatch.setattr(hybrid_scene, "CHORD_CONTRACTION", contraction)
        scene = DescribedScene(desc)
        scene.soft_efforts = np.array([1.5])
        scene.q_cmd = desc.home + np.array([0.0, 0.03, 0.0, 0.0, 0.0])
        scene.settle(30, tolerance=1e-7)
        states.append((scene.rod_positions(), scene.soft_strokes()[0]))
    np.testing.assert_allclose(states[1][0], states[0][0], atol=5e-7)
    assert abs(states[0][1]) > 1e-5 and states[1][1] == pytest.approx(states[0][1], abs=5e-7)


def test_plant_applies_the_soft_actuator_and_the_qp_mixes_it():
    from soft_inverse_ros.core.control.actuator_limits import limits_from_description
    from soft_inverse_ros.core.control.inverse_qp import CommandStatus, InverseSolver, InverseSolverConfig

    desc = _with_soft_actuator()
    plant = HybridContactPlant(desc)
    q = desc.home.copy()
    q[1] -= 0.02
    plant.set_joint_setpoints(q)
    for _ in range(50):
        plant.step()
    s0 = plant.soft_strokes()[0]
    plant.set_soft_efforts(np.array([0.5]))
    for _ in range(50):
        plant.step()
    assert plant.soft_strokes()[0] > s0 + 1e-5
    # the QP: 5 joint columns + the soft force column, per-command variation of 0.01 N
    model = HybridSnapshotModel(desc)
    target = _target(model.scene)
    lim = limits_from_description(desc)
    assert lim.max_effort_step[-1] == pytest.approx(0.01) and lim.effort_min[-1] == pytest.approx(-2.0)
    solver = InverseSolver(InverseSolverConfig(epsilon=1e-3, contact_force_sum_max=desc.force_sum_max,
                                               contact_min_force_sum=desc.min_force_sum), lim)
    assert solver.set_snapshot(model.snapshot(desc.home, target, 1, 1.0)).accepted
    prev = None
    for k in range(30):
        r = solver.solve(target, stamp=1.0 + 1e-3 * k)
        assert r.command_status is not CommandStatus.SAFE
        if r.command_status is CommandStatus.OK and prev is not None:
            assert abs(r.efforts[-1] - prev[-1]) <= 0.01 + 1e-9
        prev = r.efforts
    assert np.asarray(prev).shape == (6,)
