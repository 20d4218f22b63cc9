"""Behaviour of the inverse QP: workspace boundary, redundancy, per-tick limits, indicator."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from inverse_qp_reference import assert_within_limits
from soft_inverse_ros.core.control.actuator_limits import ActuatorLimits
from soft_inverse_ros.core.control.inverse_qp import (
    InverseSolver,
    InverseSolverConfig,
    InverseStatus,
)
from soft_inverse_ros.core.model.snapshot import ActuatorKind, ComplianceSnapshot
from soft_inverse_ros.testing.synthetic_compliance import make_synthetic_robot


def _snapshot(w_ea, w_aa, x_free, seq=0, stamp=0.0, names=None):
    n_e, n_a = w_ea.shape
    return ComplianceSnapshot(
        seq=seq,
        stamp=stamp,
        actuator_names=tuple(names or (f"c{i}" for i in range(n_a))),
        actuator_kinds=(ActuatorKind.CABLE,) * n_a,
        effector_names=tuple(f"e{i}" for i in range(n_e)),
        w_ea=w_ea,
        w_aa=w_aa,
        w_ee=np.eye(n_e) * 1e-3,
        effector_position=x_free,
        actuator_stroke=np.zeros(n_a),
        lambda0=np.zeros(n_a),
    )


def _point_segment_distance(p, a, b):
    t = np.clip((p - a) @ (b - a) / ((b - a) @ (b - a)), 0.0, 1.0)
    return float(np.linalg.norm(p - (a + t * (b - a))))


@pytest.mark.parametrize("backend", ("daqp", "osqp", "quadprog"))
def test_target_outside_3d_workspace_gives_closest_face_point(backend):
    """3 cables, 3 effector rows: the workspace is a parallelepiped; a target at distance d
    along a face's outward normal from the face centre has that centre as closest point."""
    rng = np.random.default_rng(2)
    robot = make_synthetic_robot(3, 3, rng=rng)
    snapshot = robot.snapshot()
    limits = ActuatorLimits(np.zeros(3), np.array([10.0, 15.0, 20.0]))
    w = snapshot.w_ea
    solver = InverseSolver(InverseSolverConfig(backend=backend, epsilon=0.0), limits)
    assert solver.set_snapshot(snapshot).accepted
    for k in range(3):
        i, j = [m for m in range(3) if m != k]
        normal = np.cross(w[:, i], w[:, j])
        normal /= np.linalg.norm(normal)
        if normal @ w[:, k] < 0:
            normal = -normal
        lam_face = 0.5 * limits.effort_max
        lam_face[k] = limits.effort_max[k]
        centre = snapshot.effector_position + w @ lam_face
        distance = 2e-3
        result = solver.solve(centre + distance * normal)
        assert result.status is InverseStatus.SOLVED
        np.testing.assert_allclose(result.efforts, lam_face, rtol=1e-7)
        assert result.effector_error == pytest.approx(distance, rel=1e-7)
        assert result.active.effort_upper[k]
        assert not result.active.effort_upper[[i, j]].any()
        assert not result.active.effort_lower.any()


@pytest.mark.parametrize("backend", ("daqp", "quadprog"))
def test_target_outside_2d_workspace_error_equals_polygon_distance(backend):
    """2 actuators, 2 effector rows: the reachable set is a parallelogram; the effector
    error must equal the point-to-polygon distance computed from its edges."""
    rng = np.random.default_rng(4)
    w = np.array([[2.0e-3, -0.5e-3], [0.7e-3, 1.5e-3]])
    w_aa = np.array([[2e-3, 1e-4], [1e-4, 1.5e-3]])
    x_free = np.array([0.01, -0.02])
    a_max = np.array([8.0, 12.0])
    snapshot = _snapshot(w, w_aa, x_free)
    limits = ActuatorLimits(np.zeros(2), a_max)
    corners = x_free + np.array([w @ c for c in ([0, 0], [a_max[0], 0], a_max, [0, a_max[1]])])
    solver = InverseSolver(InverseSolverConfig(backend=backend, epsilon=0.0), limits)
    solver.set_snapshot(snapshot)
    centre = corners.mean(axis=0)
    radius = np.linalg.norm(corners - centre, axis=1).max()
    checked = 0
    for angle in rng.uniform(0, 2 * np.pi, 24):
        target = centre + 1.6 * radius * np.array([np.cos(angle), np.sin(angle)])
        expected = min(_point_segment_distance(target, corners[e], corners[(e + 1) % 4]) for e in range(4))
        result = solver.solve(target)
        assert result.status is InverseStatus.SOLVED
        assert result.effector_error == pytest.approx(expected, rel=1e-8)
        assert result.active.effort_lower.any() or result.active.effort_upper.any()  # on the boundary
        checked += 1
    assert checked == 24


def _permuted(snapshot, order):
    o = np.asarray(order)
    return ComplianceSnapshot(
        seq=snapshot.seq,
        stamp=snapshot.stamp,
        actuator_names=tuple(snapshot.actuator_names[i] for i in o),
        actuator_kinds=tuple(snapshot.actuator_kinds[i] for i in o),
        effector_names=snapshot.effector_names,
        w_ea=snapshot.w_ea[:, o],
        w_aa=snapshot.w_aa[np.ix_(o, o)],
        w_ee=snapshot.w_ee,
        effector_position=snapshot.effector_position,
        actuator_stroke=snapshot.actuator_stroke[o],
        lambda0=snapshot.lambda0[o],
    )


@pytest.mark.parametrize("backend", ("daqp", "quadprog", "osqp"))
def test_redundant_actuation_with_epsilon_is_unique_and_permutation_stable(backend):
    rng = np.random.default_rng(9)
    robot = make_synthetic_robot(6, 3, rng=rng)
    limits = robot.limits()
    snapshot = robot.snapshot(0.2 * limits.effort_max)
    cfg = InverseSolverConfig(backend=backend, epsilon=1e-3)
    reach = float(np.abs(snapshot.w_ea @ limits.effort_max).max())
    targets = snapshot.effector_position + rng.normal(0.0, 0.2 * reach, (5, 3))

    base = InverseSolver(cfg, limits)
    update = base.set_snapshot(snapshot)
    assert update.accepted and not update.regularized
    reference = [base.solve(t).efforts for t in targets]
    for order in (rng.permutation(6) for _ in range(4)):
        solver = InverseSolver(cfg, limits.permuted(order))
        assert solver.set_snapshot(_permuted(snapshot, order)).accepted
        for t, ref in zip(targets[::-1], reference[::-1]):  # other order: other warm starts
            result = solver.solve(t)
            assert result.status is InverseStatus.SOLVED
            np.testing.assert_allclose(result.efforts, ref[order], rtol=1e-6, atol=1e-9 * limits.effort_max.max())


def test_redundant_epsilon_solution_has_lowest_energy_along_the_null_space():
    """Moving along the null space of W_ea keeps the effector where it is; with ε the
    solution must be the admissible point of least energy λᵀW_aaλ on that line."""
    rng = np.random.default_rng(12)
    robot = make_synthetic_robot(5, 3, rng=rng)
    limits = robot.limits()
    snapshot = robot.snapshot()
    target = snapshot.effector_position + snapshot.w_ea @ (0.4 * limits.effort_max)  # reachable
    solver = InverseSolver(InverseSolverConfig(epsilon=1e-3), limits)
    solver.set_snapshot(snapshot)
    result = solver.solve(target)
    assert result.ok
    # ε biases a reachable target only slightly
    assert result.effector_error < 1e-2 * float(np.linalg.norm(snapshot.w_ea @ (0.4 * limits.effort_max)))
    lam = result.efforts
    energy = lam @ snapshot.w_aa @ lam
    null = np.linalg.svd(snapshot.w_ea)[2][3:]  # 2 null-space directions
    compared = 0
    for z in null:
        for t in (-1e-2, -1e-3, 1e-3, 1e-2):
            other = lam + t * float(np.abs(lam).max()) * z
            np.testing.assert_allclose(snapshot.w_ea @ other, snapshot.w_ea @ lam, atol=1e-12)
            if np.all(other >= limits.effort_min) and np.all(other <= limits.effort_max):
                strokes = snapshot.w_aa @ other + snapshot.delta_a_free
                if np.all(strokes <= limits.stroke_max):
                    assert other @ snapshot.w_aa @ other >= energy
                    compared += 1
    assert compared >= 2


def test_redundant_without_epsilon_is_regularized_and_reported():
    robot = make_synthetic_robot(5, 3, rng=1)
    solver = InverseSolver(InverseSolverConfig(epsilon=0.0), robot.limits())
    update = solver.set_snapshot(robot.snapshot())
    assert update.accepted and update.regularized and "epsilon" in update.reason
    assert solver.regularized
    result = solver.solve(robot.snapshot().effector_position)
    assert result.ok


def test_effort_and_stroke_variation_limits_per_tick():
    rng = np.random.default_rng(6)
    robot = make_synthetic_robot(4, 3, rng=rng)
    base = robot.limits()
    snapshot = robot.snapshot()
    effort_step = 0.02 * base.effort_max
    for kind in ("effort", "stroke"):
        if kind == "effort":
            limits = robot.limits(max_effort_step=effort_step)
        else:
            stroke_step = 0.02 * np.diag(snapshot.w_aa) * base.effort_max
            limits = robot.limits(max_stroke_step=stroke_step)
        free = InverseSolver(InverseSolverConfig(), base)
        free.set_snapshot(snapshot)
        solver = InverseSolver(InverseSolverConfig(), limits)
        solver.set_snapshot(snapshot)
        target = snapshot.effector_position + snapshot.w_ea @ (0.5 * base.effort_max)
        goal = free.solve(target).efforts
        previous = solver.safe_command()
        limited_ticks = 0
        for _ in range(200):
            result = solver.solve(target)
            assert result.ok, result.message
            assert_within_limits(result, snapshot, base)
            if kind == "effort":
                assert np.all(np.abs(result.efforts - previous.efforts) <= effort_step * (1 + 1e-12))
                limited = result.active.effort_step.any()
            else:
                moved = snapshot.w_aa @ (result.efforts - previous.efforts)
                assert np.all(np.abs(moved) <= stroke_step * (1 + 1e-7))
                limited = result.active.stroke_step.any()
            limited_ticks += bool(limited)
            previous = result.command
        assert limited_ticks >= 10  # the limit did act on the way
        np.testing.assert_allclose(result.efforts, goal, rtol=1e-6, atol=1e-9 * base.effort_max.max())
        assert not result.active.effort_step.any() and not result.active.stroke_step.any()


def test_only_the_target_changes_per_tick_no_refactorization(monkeypatch):
    robot = make_synthetic_robot(4, 3, rng=3)
    snapshot = robot.snapshot()
    solver = InverseSolver(InverseSolverConfig(), robot.limits())
    backend = solver._backend
    calls = []
    original = backend.setup
    monkeypatch.setattr(backend, "setup", lambda h, a: calls.append(1) or original(h, a))
    solver.set_snapshot(snapshot)
    fresh_results = []
    rng = np.random.default_rng(0)
    targets = snapshot.effector_position + rng.normal(0, 2e-3, (30, 3))
    results = [solver.solve(t) for t in targets]
    assert len(calls) == 1
    for t, r in zip(targets, results):
        fresh = InverseSolver(InverseSolverConfig(), robot.limits())
        fresh.set_snapshot(snapshot)
        fresh_results.append(fresh.solve(t))
        np.testing.assert_allclose(r.efforts, fresh_results[-1].efforts, rtol=1e-9, atol=1e-12)


def test_snapshot_linearization_point_does_not_change_the_answer():
    """The robot is linear, so snapshots at different λ0 describe the same map."""
    robot = make_synthetic_robot(4, 3, kinds=[0, 2, 0, 2], rng=7)
    limits = robot.limits()
    target = robot.snapshot().effector_position + np.array([1e-3, -2e-3, 5e-4])
    answers = []
    for lam0 in (np.zeros(4), 0.5 * limits.effort_max, limits.effort_max):
        solver = InverseSolver(InverseSolverConfig(), limits)
        solver.set_snapshot(robot.snapshot(lam0))
        answers.append(solver.solve(target).efforts)
    np.testing.assert_allclose(answers[1], answers[0], rtol=1e-7, atol=1e-9 * limits.effort_max.max())
    np.testing.assert_allclose(answers[2], answers[0], rtol=1e-7, atol=1e-9 * limits.effort_max.max())


def test_qp_matrix_variation_indicator():
    robot = make_synthetic_robot(4, 3, rng=2)
    solver = InverseSolver(InverseSolverConfig(), robot.limits())
    first = solver.set_snapshot(robot.snapshot(seq=1, stamp=10.0))
    assert first.variation.seq == 1 and np.isnan(first.variation.percent)
    w = robot.snapshot().w_ea
    assert first.variation.norm == pytest.approx(np.abs(w.T @ w).sum(axis=1).max(), rel=1e-12)
    second = solver.set_snapshot(robot.stiffened(1.02).snapshot(seq=2, stamp=10.04))
    expected = 100.0 * (1.0 / 1.02**2 - 1.0)  # W ∝ 1/k, so W_eaᵀW_ea ∝ 1/k²
    assert second.variation.percent == pytest.approx(expected, rel=1e-9)
    assert second.variation.percent_per_second == pytest.approx(expected / 0.04, rel=1e-6)
    assert solver.variation is second.variation
    # a rejected snapshot does not count
    good = robot.snapshot(seq=3, stamp=10.08)
    bad = dataclasses.replace(good, w_ea=np.full_like(good.w_ea, np.nan))
    assert not solver.set_snapshot(bad).accepted
    third = solver.set_snapshot(robot.stiffened(1.02).snapshot(seq=4, stamp=10.08))
    assert third.variation.percent == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("backend", ("daqp", "osqp", "quadprog"))
def test_answer_does_not_depend_on_the_units_of_an_actuator(backend):
    """Expressing the cavity pressure in kPa instead of Pa (W columns × 1e3, bounds / 1e3)
    changes nothing physical: the internal scaling must make the backends see the same
    problem (ε = 0, so no unit-dependent energy weight is involved)."""
    robot = make_synthetic_robot(3, 3, kinds=[0, 2, 0], rng=14)
    limits = robot.limits()
    snapshot = robot.snapshot()
    unit = np.array([1.0, 1e3, 1.0])  # effort [kPa] = effort [Pa] / 1e3
    kpa = dataclasses.replace(
        snapshot,
        w_ea=snapshot.w_ea * unit[None, :],
        w_aa=snapshot.w_aa * unit[None, :],
        lambda0=snapshot.lambda0 / unit,
    )
    kpa_limits = ActuatorLimits(limits.effort_min / unit, limits.effort_max / unit, limits.stroke_min, limits.stroke_max)
    answers = []
    for snap, lim in ((snapshot, limits), (kpa, kpa_limits)):
        solver = InverseSolver(InverseSolverConfig(backend=backend, epsilon=0.0), lim)
        assert solver.set_snapshot(snap).accepted
        reach = float(np.abs(snap.w_ea @ lim.effort_max).max())
        answers.append(np.array([solver.solve(snap.effector_position + reach * v).efforts for v in np.eye(3)]))
    assert answers[0][:, 1].max() > 1e3  # the cavity does work in these cases
    np.testing.assert_allclose(answers[1] * unit, answers[0], rtol=1e-7, atol=1e-9 * limits.effort_max.max())


def test_a_snapshot_set_in_steps_is_installed_at_the_last_step_only():
    """set_snapshot_steps: ticks between the steps solve on the previous snapshot; the end
    result is set_snapshot's, and a rejection comes back as the generator's value."""
    robot = make_synthetic_robot(4, 3, rng=5)
    target = robot.snapshot().effector_position + np.array([1e-3, -1e-3, 5e-4])
    old, new = robot.snapshot(seq=1, stamp=1.0), robot.stiffened(1.5).snapshot(seq=2, stamp=1.04)
    whole = InverseSolver(InverseSolverConfig(), robot.limits())
    whole.set_snapshot(old)
    before = whole.solve(target).efforts
    whole.set_snapshot(new)
    after = whole.solve(target).efforts
    assert not np.allclose(before, after)

    solver = InverseSolver(InverseSolverConfig(), robot.limits())
    solver.set_snapshot(old)
    solver.solve(target)
    steps = solver.set_snapshot_steps(new)
    pauses = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            update = done.value
            break
        pauses += 1
        np.testing.assert_allclose(solver.solve(target).efforts, before, rtol=1e-9)  # the old one
    assert pauses >= 3 and update.accepted and update.seq == 2
    np.testing.assert_allclose(solver.solve(target).efforts, after, rtol=1e-9)
    bad = dataclasses.replace(new, seq=3, w_ea=np.full_like(new.w_ea, np.nan))
    steps = solver.set_snapshot_steps(bad)
    with pytest.raises(StopIteration) as rejected:
        next(steps)
    assert not rejected.value.value.accepted
    np.testing.assert_allclose(solver.solve(target).efforts, after, rtol=1e-9)
