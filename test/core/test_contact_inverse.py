"""The inverse solver's tick with the snapshot's contacts (core/control/contact_inverse.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from soft_inverse_ros.core.control.actuator_limits import ActuatorLimits
from soft_inverse_ros.core.control.contact_inverse import ContactForceLimits, ContactTick
from soft_inverse_ros.core.control.contact_qp import enumerate_contact_qp
from soft_inverse_ros.core.control.inverse_qp import (
    CommandStatus,
    InverseSolver,
    InverseSolverConfig,
    InverseStatus,
)
from soft_inverse_ros.core.model.snapshot import ActuatorKind, ComplianceSnapshot, ContactBlock


def _body(rng, n_a=2, n_e=3, m=5, n=30):
    """Compliances of a random elastic body seen through actuator, effector, contact rows."""
    a = rng.normal(size=(n, n))
    c = np.linalg.inv(a @ a.T / n + 0.5 * np.eye(n)) * 1e-3
    ja, je, h = rng.normal(size=(n_a, n)), rng.normal(size=(n_e, n)), rng.normal(size=(m, n))
    return {"ea": je @ c @ ja.T, "aa": ja @ c @ ja.T, "ee": je @ c @ je.T, "cc": h @ c @ h.T,
            "ca": h @ c @ ja.T, "ec": je @ c @ h.T}


def _snapshot(w, *, lambda0, force, gap, seq=0, source=None):
    n_e, n_a = w["ea"].shape
    m = w["cc"].shape[0]
    block = ContactBlock(ids=np.arange(m), points=np.zeros((m, 3)), normals=np.tile([0.0, 0.0, 1.0], (m, 1)),
                         gap=gap, force=force, w_cc=w["cc"], w_ca=w["ca"], w_ec=w["ec"], source=source)
    return ComplianceSnapshot(
        seq=seq, stamp=0.0, actuator_names=tuple(f"c{i}" for i in range(n_a)),
        actuator_kinds=(ActuatorKind.CABLE,) * n_a, effector_names=("tip.x", "tip.y", "tip.z")[:n_e],
        w_ea=w["ea"], w_aa=w["aa"], w_ee=w["ee"], effector_position=np.zeros(n_e),
        actuator_stroke=np.zeros(n_a), lambda0=lambda0, contacts=block)


def _solver(limits, **config):
    return InverseSolver(InverseSolverConfig(epsilon=1e-4, **config), limits)


def test_tick_matches_the_enumerated_optimum_and_is_complementary():
    rng = np.random.default_rng(0)
    limits = ActuatorLimits(np.zeros(2), np.full(2, 5.0))
    for trial in range(15):
        w = _body(rng, m=int(rng.integers(1, 7)))
        m = w["cc"].shape[0]
        snap = _snapshot(w, lambda0=np.full(2, 1.0), force=np.abs(rng.normal(size=m)) * (rng.random(m) < 0.5),
                         gap=np.abs(rng.normal(size=m)) * 1e-4, seq=trial)
        solver = _solver(limits)
        assert solver.set_snapshot(snap).accepted
        r = solver.solve(rng.normal(size=3) * 3e-3)
        assert r.status is InverseStatus.SOLVED and r.contact is not None
        tick = solver.contact_tick
        ref = enumerate_contact_qp(tick.last_problem)
        assert tick.last_result.objective == pytest.approx(ref.objective, rel=1e-8, abs=1e-18)
        c = r.contact
        assert (c.forces >= -1e-12).all() and (c.gaps >= -1e-10).all()
        assert np.abs(c.forces * c.gaps).max() <= 1e-12
        assert c.force_sum == pytest.approx(c.forces.sum())
        assert (r.efforts >= -1e-12).all() and (r.efforts <= 5 + 1e-12).all()


def test_force_sum_limit_binds_and_costs_accuracy():
    rng = np.random.default_rng(3)
    limits = ActuatorLimits(np.zeros(2), np.full(2, 50.0))
    for _ in range(30):
        w = _body(rng, m=4)
        snap = _snapshot(w, lambda0=np.zeros(2), force=np.zeros(4), gap=np.full(4, 1e-5))
        target = -(w["ea"] @ np.full(2, 20.0))  # pull hard: the contacts load up
        free = _solver(limits)
        free.set_snapshot(snap)
        r0 = free.solve(target)
        if not (r0.ok and r0.contact.force_sum > 1e-3):
            continue
        limit = 0.5 * r0.contact.force_sum
        capped = _solver(limits, contact_force_sum_max=limit)
        capped.set_snapshot(snap)
        r1 = capped.solve(target)
        assert r1.ok
        assert r1.contact.force_sum <= limit * (1 + 1e-9)
        assert r1.effector_error >= r0.effector_error - 1e-12
        return
    pytest.fail("no sample loaded its contacts")


def test_group_limit_applies_to_its_source_only():
    rng = np.random.default_rng(5)
    limits = ActuatorLimits(np.zeros(2), np.full(2, 50.0))
    for _ in range(30):
        w = _body(rng, m=4)
        source = np.array([-1, -1, 0, 0])
        snap = _snapshot(w, lambda0=np.zeros(2), force=np.zeros(4), gap=np.full(4, 1e-5), source=source)
        target = -(w["ea"] @ np.full(2, 20.0))
        free = _solver(limits)
        free.set_snapshot(snap)
        r0 = free.solve(target)
        on_obstacle = r0.contact.forces[2:].sum() if r0.ok else 0.0
        if on_obstacle < 1e-3:
            continue
        capped = _solver(limits, contact_group_sources=(0,), contact_group_sum_max=(0.5 * on_obstacle,))
        capped.set_snapshot(snap)
        r1 = capped.solve(target)
        assert r1.ok
        assert r1.contact.forces[2:].sum() <= 0.5 * on_obstacle * (1 + 1e-9)
        return
    pytest.fail("no sample loaded the obstacle contacts")


def test_per_tick_limit_holds_with_contacts():
    rng = np.random.default_rng(7)
    w = _body(rng, m=3)
    limits = ActuatorLimits(np.zeros(2), np.full(2, 50.0), max_effort_step=np.full(2, 0.1))
    solver = _solver(limits)
    solver.set_snapshot(_snapshot(w, lambda0=np.zeros(2), force=np.zeros(3), gap=np.full(3, 1e-4)))
    target = -(w["ea"] @ np.full(2, 20.0))
    previous = np.zeros(2)
    for _ in range(5):
        r = solver.solve(target)
        assert r.ok and r.contact is not None
        assert np.abs(r.efforts - previous).max() <= 0.1 + 1e-9
        previous = r.efforts


def test_ignore_mode_and_contact_free_snapshots_use_the_plain_qp():
    rng = np.random.default_rng(9)
    w = _body(rng, m=3)
    limits = ActuatorLimits(np.zeros(2), np.full(2, 5.0))
    snap = _snapshot(w, lambda0=np.zeros(2), force=np.zeros(3), gap=np.full(3, 1e-4))
    solver = _solver(limits, contacts="ignore")
    solver.set_snapshot(snap)
    r = solver.solve(np.zeros(3))
    assert r.ok and r.contact is None and solver.contact_tick is None


def test_infeasible_minimum_force_holds_the_last_command():
    """A minimum contact force no state can give (every contact far away): the tick fails
    safe (held or safe command, never more effort than the last one)."""
    rng = np.random.default_rng(11)
    w = _body(rng, m=2)
    limits = ActuatorLimits(np.zeros(2), np.full(2, 1e-6))
    solver = _solver(limits, contact_min_force_sum=1.0)
    solver.set_snapshot(_snapshot(w, lambda0=np.zeros(2), force=np.zeros(2), gap=np.full(2, 0.05)))
    r = solver.solve(np.zeros(3))
    assert r.status is InverseStatus.INFEASIBLE
    assert r.command_status is CommandStatus.SAFE
    np.testing.assert_array_equal(r.efforts, limits.safe_effort)


def test_contact_limits_are_validated():
    with pytest.raises(ValueError, match="force_sum_max"):
        ContactForceLimits(force_sum_max=0.0)
    with pytest.raises(ValueError, match="same length"):
        ContactForceLimits(group_sources=(0,), group_sum_max=())
    with pytest.raises(ValueError, match="contacts"):
        InverseSolverConfig(contacts="sometimes")
    with pytest.raises(ValueError, match="max_states"):
        InverseSolverConfig(contact_max_states=0)
    for bad in (-1e-4, 1.0, float("nan"), True):
        with pytest.raises(ValueError, match="tick_budget"):
            InverseSolverConfig(contact_tick_budget=bad)
    assert ContactForceLimits().force_max == math.inf


def test_effector_residual_is_the_prediction_with_the_contact_forces():
    rng = np.random.default_rng(13)
    w = _body(rng, m=4)
    limits = ActuatorLimits(np.zeros(2), np.full(2, 50.0))
    snap = _snapshot(w, lambda0=np.full(2, 2.0), force=np.array([0.5, 0.0, 0.2, 0.0]), gap=np.full(4, 1e-5))
    solver = _solver(limits)
    solver.set_snapshot(snap)
    target = rng.normal(size=3) * 1e-3
    r = solver.solve(target)
    c = r.contact
    tip = snap.effector_position + w["ea"] @ (r.efforts - snap.lambda0) + w["ec"] @ (c.forces - snap.contacts.force)
    np.testing.assert_allclose(r.effector_residual, tip - target, atol=1e-12)
    gaps = snap.contacts.gap + w["ca"] @ (r.efforts - snap.lambda0) + w["cc"] @ (c.forces - snap.contacts.force)
    np.testing.assert_allclose(c.gaps, gaps, atol=1e-12)


def test_unreachable_force_limit_backs_off_toward_the_safe_command():
    """The robot presses harder than the limit and the per-tick limit cannot undo it in one
    tick: the command steps toward the safe efforts (never holds or adds effort)."""
    rng = np.random.default_rng(17)
    for _ in range(50):
        w = _body(rng, m=3)
        lam0 = np.full(2, 20.0)
        snap = _snapshot(w, lambda0=lam0, force=np.full(3, 2.0), gap=np.zeros(3))
        limits = ActuatorLimits(np.zeros(2), np.full(2, 50.0), max_effort_step=np.full(2, 0.01))
        solver = _solver(limits, contact_force_sum_max=0.1, contact_limit_feedback=False)
        solver.set_snapshot(snap)
        r = solver.solve(snap.effector_position)
        if r.ok:
            continue  # this sample can meet the limit at once
        assert r.status is InverseStatus.INFEASIBLE and "safe command" in r.message
        assert (r.efforts <= limits.safe_effort + 0.01 + 1e-12).all()  # first tick: from the safe command
        return
    pytest.fail("no sample with an unreachable limit")


def test_limit_feedback_lowers_the_limits_by_the_largest_excess_seen():
    """contact_limit_feedback: a new snapshot whose forces came out above what the last
    tick predicted for its command lowers the force-sum limit by that excess (in N); a
    later snapshot under the prediction keeps it (never relaxed)."""
    rng = np.random.default_rng(19)
    w = _body(rng, m=3)
    limits = ActuatorLimits(np.zeros(2), np.full(2, 50.0))
    solver = _solver(limits, contact_force_sum_max=100.0)
    snap = _snapshot(w, lambda0=np.zeros(2), force=np.full(3, 1.0), gap=np.zeros(3), seq=1)
    solver.set_snapshot(snap)
    r = solver.solve(snap.effector_position)
    assert r.ok
    predicted = solver.contact_tick.predicted_force_sum()
    assert predicted == pytest.approx(r.contact.force_sum) and predicted > 0
    # the next snapshot's forces came out 30 % above the prediction: the limit is 100 − 0.3 × predicted
    excess = _snapshot(w, lambda0=r.efforts, force=np.full(3, 1.3 * predicted / 3), gap=np.zeros(3), seq=2)
    solver.set_snapshot(excess)
    assert solver.contact_tick.sum_limits[0] == pytest.approx(100.0 - 0.3 * predicted)
    r = solver.solve(excess.effector_position)
    assert r.ok and r.contact.force_sum <= 100.0 - 0.3 * predicted + 1e-9
    predicted2 = solver.contact_tick.predicted_force_sum()
    under = _snapshot(w, lambda0=r.efforts, force=np.full(3, 0.5 * predicted2 / 3), gap=np.zeros(3), seq=3)
    solver.set_snapshot(under)
    assert solver.contact_tick.sum_limits[0] == pytest.approx(100.0 - 0.3 * predicted)  # kept
    off = _solver(limits, contact_force_sum_max=100.0, contact_limit_feedback=False)
    off.set_snapshot(excess)
    assert off.contact_tick.sum_limits[0] == pytest.approx(100.0)


def test_limit_margins_never_lower_a_limit_below_zero():
    rng = np.random.default_rng(29)
    w = _body(rng, m=3)
    snap = _snapshot(w, lambda0=np.zeros(2), force=np.full(3, 1.0), gap=np.zeros(3))
    limits = ContactForceLimits(force_max=1.0, force_sum_max=2.0, group_sources=(-1,), group_sum_max=(1.5,))
    tick = ContactTick(snap, 1e-3, limits, np.array([5.0, 0.5, 3.0]))
    np.testing.assert_allclose(tick.sum_limits, [0.0, 1.0])
    np.testing.assert_allclose(tick.force_max, 0.0)
    with pytest.raises(ValueError, match="limit_margins"):
        ContactTick(snap, 1e-3, limits, np.zeros(2))


def test_snapshot_arrival_searches_for_the_last_target():
    """A new contact snapshot runs the full state search for the last target (low rate):
    the next tick starts from its state, solves one state QP and is the enumerated optimum."""
    rng = np.random.default_rng(23)
    limits = ActuatorLimits(np.zeros(2), np.full(2, 5.0))
    w = _body(rng, m=6)
    solver = _solver(limits)
    first = _snapshot(w, lambda0=np.full(2, 1.0), force=np.zeros(6), gap=np.full(6, 1e-5), seq=1)
    solver.set_snapshot(first)
    target = rng.normal(size=3) * 2e-3
    assert solver.solve(target).ok
    second = _snapshot(w, lambda0=np.full(2, 1.2), force=np.abs(rng.normal(size=6)) * 0.1,
                       gap=np.zeros(6), seq=2)
    solver.set_snapshot(second)
    searched = solver.contact_tick.last_result
    assert searched is not None and searched.states_solved > 1  # the search ran at the arrival
    r = solver.solve(target)
    assert r.ok and r.contact.states_solved == 1
    ref = enumerate_contact_qp(solver.contact_tick.last_problem)
    assert solver.contact_tick.last_result.objective == pytest.approx(ref.objective, rel=1e-8, abs=1e-18)


def test_the_tick_budget_cuts_the_search_and_the_solver_counts_it():
    """qp.contact_tick_budget: a budget no state QP fits in cuts every tick that would
    search past its first feasible state (its command still meets the limits and the
    complementarity); the solver counts the ticks and the cuts; no budget, no cuts."""
    limits = ActuatorLimits(np.zeros(2), np.full(2, 5.0))
    counts = {}
    for budget in (0.0, 1e-9):
        rng = np.random.default_rng(3)
        solver = _solver(limits, contact_tick_budget=budget)
        for trial in range(10):
            w = _body(rng, m=6)
            snap = _snapshot(w, lambda0=np.full(2, 1.0), force=np.zeros(6), gap=np.abs(rng.normal(size=6)) * 1e-4,
                             seq=trial)
            assert solver.set_snapshot(snap).accepted
            for _ in range(5):
                r = solver.solve(rng.normal(size=3) * 3e-3)
                assert r.status is InverseStatus.SOLVED
                c = r.contact
                assert (c.forces >= -1e-9).all() and (c.gaps >= -1e-10).all()
                assert np.abs(c.forces * c.gaps).max() <= 1e-12
                assert (r.efforts >= -1e-12).all() and (r.efforts <= 5 + 1e-12).all()
                assert c.truncated == ("cut by the tick budget" in r.backend_status)
        counts[budget] = solver.contact_ticks
    assert counts[0.0] == (50, 0)
    ticks, cut = counts[1e-9]
    assert ticks == 50 and cut > 0


def test_the_contact_force_weight_is_scaled_by_the_contacts_own_effector_compliance():
    """qp.contact_force_weight ε_f becomes the tick's w_f = ε_f ‖W_ecᵀW_ec‖∞ (unit-free in the
    actuators' units: joints in N m and cables in N alike); contacts that do not move the
    effector are not priced; with it the tick presses less than without, and its QP still
    matches the enumeration of the contact states."""
    rng = np.random.default_rng(8)
    limits = ActuatorLimits(np.zeros(2), np.full(2, 5.0))
    w = _body(rng, m=4)
    snap = _snapshot(w, lambda0=np.full(2, 2.0), force=np.zeros(4), gap=np.full(4, -2e-4))  # pressed in
    tick = ContactTick(snap, 1e-6, ContactForceLimits(), force_sum_epsilon=1e-2)
    assert tick.force_sum_weight == pytest.approx(1e-2 * np.abs(w["ec"].T @ w["ec"]).sum(axis=1).max())
    unmoved = _snapshot({**w, "ec": np.zeros_like(w["ec"])}, lambda0=np.full(2, 2.0), force=np.zeros(4),
                        gap=np.full(4, -2e-4))
    assert ContactTick(unmoved, 1e-6, ContactForceLimits(), force_sum_epsilon=1e-2).force_sum_weight == 0.0
    with pytest.raises(ValueError, match="force_sum_epsilon"):
        ContactTick(snap, 1e-6, ContactForceLimits(), force_sum_epsilon=-1.0)
    sums = []
    for weight in (0.0, 10.0):
        solver = _solver(limits, contact_force_weight=weight)
        assert solver.set_snapshot(snap).accepted
        r = solver.solve(np.zeros(3))
        assert r.status is InverseStatus.SOLVED
        ref = enumerate_contact_qp(solver.contact_tick.last_problem)
        assert solver.contact_tick.last_result.objective == pytest.approx(ref.objective, rel=1e-8, abs=1e-18)
        sums.append(r.contact.force_sum)
    assert sums[0] > 1e-3 and sums[1] < sums[0]


def test_a_tick_with_the_previous_ticks_inputs_reuses_its_result_bit_for_bit():
    """A held target: once the command stops moving under the per-tick limits, the ticks'
    inputs repeat and the solver reuses the last search's result. Every command, contact
    force and state equals a solver that searches at every tick (its reuse cleared before
    each tick); a new target and a new snapshot search again."""
    rng = np.random.default_rng(7)
    w = _body(rng, m=4)
    limits = ActuatorLimits(np.zeros(2), np.full(2, 50.0), max_effort_step=np.full(2, 0.5))
    snaps = [_snapshot(w, lambda0=np.zeros(2), force=np.zeros(4), gap=np.full(4, 1e-4), seq=k)
             for k in range(2)]
    a, b = -(w["ea"] @ np.full(2, 3.0)), -(w["ea"] @ np.array([2.0, 4.0]))
    plan = [(0, a)] * 40 + [(0, b)] * 40 + [(1, b)] * 20  # (snapshot, target) per tick
    reusing, searching = _solver(limits), _solver(limits)
    searched = []  # per tick: did the reusing solver search?
    installed = None
    for snap, target in plan:
        if snap != installed:
            assert reusing.set_snapshot(snaps[snap]).accepted and searching.set_snapshot(snaps[snap]).accepted
            installed = snap
        searching._contact_reuse = None  # the reference searches every tick
        before = reusing.contact_ticks[0]
        r, ref = reusing.solve(target), searching.solve(target)
        searched.append(reusing.contact_ticks[0] > before)
        assert r.ok and ref.ok
        for got, want in ((r.efforts, ref.efforts), (r.strokes, ref.strokes),
                          (r.contact.forces, ref.contact.forces), (r.contact.active, ref.contact.active),
                          (r.effector_residual, ref.effector_residual)):
            assert np.array_equal(got, want)
    assert reusing.contact_ticks_reused == len(plan) - sum(searched) > 60
    assert searched[0] and searched[40] and searched[80]  # new snapshot, new target, new snapshot
    assert searching.contact_ticks_reused == 0
    assert not all(searched[1:40])  # the held target converged and was reused


def test_a_search_cut_by_the_tick_budget_is_never_reused():
    rng = np.random.default_rng(3)
    w = _body(rng, m=6)
    limits = ActuatorLimits(np.zeros(2), np.full(2, 5.0))
    solver = _solver(limits, contact_tick_budget=1e-9)
    assert solver.set_snapshot(_snapshot(w, lambda0=np.full(2, 1.0), force=np.zeros(6),
                                         gap=np.abs(rng.normal(size=6)) * 1e-4)).accepted
    target = rng.normal(size=3) * 3e-3
    for _ in range(20):
        solver.solve(target)
    ticks, cut = solver.contact_ticks
    assert cut > 0 and ticks + solver.contact_ticks_reused == 20
    assert solver._contact_reuse is None or not solver._contact_reuse.qp_result.truncated
