"""The inverse QP with complementarity constraints (core/control/contact_qp.py)."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.control.contact_qp import ContactProblem, enumerate_contact_qp, solve_contact_qp


def problem(rng, *, n_a=3, n_e=3, m=6, n=40, h=None, **extra) -> ContactProblem:
    """W blocks of a random elastic body C = K⁻¹ seen through actuator, effector and contact rows."""
    a = rng.normal(size=(n, n))
    c = np.linalg.inv(a @ a.T / n + 0.5 * np.eye(n)) * 1e-3
    ja, je = rng.normal(size=(n_a, n)), rng.normal(size=(n_e, n))
    h = rng.normal(size=(m, n)) if h is None else h
    w = lambda x, y: x @ c @ y.T  # noqa: E731
    return ContactProblem(
        w_ea=w(je, ja), w_ec=w(je, h), w_aa=w(ja, ja), w_ca=w(h, ja), w_cc=w(h, h),
        e_free=rng.normal(size=n_e) * 2e-3, a_free=np.zeros(n_a), c_free=rng.normal(size=m) * 1e-3,
        effort_min=np.zeros(n_a), effort_max=np.full(n_a, 5.0), stroke_min=np.full(n_a, -1.0),
        stroke_max=np.full(n_a, 1.0), energy_weight=1e-6, **extra)


def _complementary(r, tol=1e-9):
    assert (r.forces >= -tol).all() and (r.gaps >= -tol).all()
    assert np.abs(np.minimum(r.forces * 1e-3, r.gaps)).max() <= tol


def test_pivoting_finds_the_enumerated_optimum():
    rng = np.random.default_rng(0)
    for _ in range(60):
        p = problem(rng, m=int(rng.integers(1, 9)))
        r, ref = solve_contact_qp(p), enumerate_contact_qp(p)
        assert r.feasible
        assert r.objective == pytest.approx(ref.objective, rel=1e-8, abs=1e-16)
        _complementary(r)
        assert (r.efforts >= -1e-9).all() and (r.efforts <= 5.0 + 1e-9).all()


def test_warm_start_from_the_previous_state_solves_fewer_states():
    rng = np.random.default_rng(1)
    p = problem(rng, m=8)
    cold = solve_contact_qp(p)
    warm = solve_contact_qp(p, initial_active=cold.active)
    assert warm.objective == pytest.approx(cold.objective, rel=1e-12)
    assert warm.states_solved <= cold.states_solved and warm.pivots == 0


def test_force_sum_limit_is_never_exceeded_and_costs_accuracy():
    rng = np.random.default_rng(5)
    for _ in range(20):
        free = problem(np.random.default_rng(rng.integers(1 << 30)), m=5)
        r0 = solve_contact_qp(free)
        total = float(r0.forces.sum())
        if total < 1e-3:
            continue
        limit = 0.5 * total
        limited = ContactProblem(**{**free.__dict__, "sum_rows": np.ones((1, 5)),
                                    "sum_limits": np.array([limit])})
        r1 = solve_contact_qp(limited)
        ref = enumerate_contact_qp(limited)
        assert r1.forces.sum() <= limit * (1 + 1e-9)
        assert r1.objective >= r0.objective - 1e-15
        assert r1.objective == pytest.approx(ref.objective, rel=1e-8, abs=1e-16)
        _complementary(r1)
        return
    pytest.fail("no sample pressed hard enough")


def test_the_force_sum_term_is_in_the_objective_and_matches_enumeration():
    """½ w_f (sᵀλ_c)²: the Hessian and the objective the states are compared by carry the
    same term, so the pivoting still finds the enumerated optimum."""
    rng = np.random.default_rng(11)
    tested = 0
    for _ in range(40):
        p0 = problem(rng, m=int(rng.integers(1, 8)))
        w_f = 10.0 * float(np.abs(p0.w_ea.T @ p0.w_ea).sum(1).max())
        row = rng.uniform(0.5, 1.5, size=p0.m)  # a basis vector's force per unit, not only ones
        p = ContactProblem(**{**p0.__dict__, "force_sum_weight": w_f, "force_sum_row": row})
        r, ref = solve_contact_qp(p), enumerate_contact_qp(p)
        assert r.objective == pytest.approx(ref.objective, rel=1e-8, abs=1e-16)
        _complementary(r)
        manual = 0.5 * float(r.effector_residual @ r.effector_residual) \
            + 0.5 * p.energy_weight * float(r.efforts @ (p.w_aa @ r.efforts)) + 0.5 * w_f * float(row @ r.forces) ** 2
        assert r.objective == pytest.approx(manual, rel=1e-12)
        tested += float(row @ enumerate_contact_qp(p0).forces) > 1e-6
    assert tested >= 10  # most samples press: the term was in play


def test_pricing_the_force_sum_presses_less_when_the_effector_does_not_care():
    """One actuator lifts the body off a contact it rests on and does not move the effector:
    without the force-sum term the energy keeps it idle (the contact carries the load);
    with it the QP lifts until the price of the force meets that of the energy, and the
    effector is served exactly as before."""
    w_ea = np.array([[1e-3, 0.0]])  # actuator 0 moves the effector, actuator 1 does not
    w_aa = np.diag([1e-3, 1e-3])
    w_ca = np.array([[0.0, 1e-3]])  # actuator 1 opens the gap
    base = dict(w_ea=w_ea, w_ec=np.zeros((1, 1)), w_aa=w_aa, w_ca=w_ca, w_cc=np.array([[1e-3]]),
                e_free=np.array([-1e-3]), a_free=np.zeros(2), c_free=np.array([-0.8e-3]),  # rests on it: 0.8 N
                effort_min=np.zeros(2), effort_max=np.full(2, 5.0), stroke_min=np.full(2, -1.0),
                stroke_max=np.full(2, 1.0), energy_weight=1e-3)
    idle = solve_contact_qp(ContactProblem(**base))
    priced = solve_contact_qp(ContactProblem(**base, force_sum_weight=1e-6))
    assert idle.forces[0] == pytest.approx(0.8, rel=1e-6) and idle.efforts[1] == pytest.approx(0.0, abs=1e-8)
    assert priced.forces[0] < 0.6 * idle.forces[0] and priced.efforts[1] > 0.0
    assert priced.forces[0] == pytest.approx(0.8 - priced.efforts[1], rel=1e-6)  # on the contact still
    np.testing.assert_allclose(priced.effector_residual, idle.effector_residual, atol=1e-12)
    # the optimum balances the two prices: d/dλ1 [½ ε w_aa λ1² + ½ w_f (0.8 − λ1)²] = 0
    assert priced.efforts[1] == pytest.approx(1e-6 * 0.8 / (1e-3 * 1e-3 + 1e-6), rel=1e-6)


def test_per_contact_force_bounds():
    rng = np.random.default_rng(2)
    p = problem(rng, m=6)
    r0 = solve_contact_qp(p)
    cap = 0.5 * r0.forces.max()
    capped = ContactProblem(**{**p.__dict__, "force_max": np.full(6, cap)})
    r1 = solve_contact_qp(capped)
    if r1.feasible:
        assert r1.forces.max() <= cap * (1 + 1e-9)


def test_degenerate_duplicate_contacts_terminate():
    rng = np.random.default_rng(3)
    row = rng.normal(size=(1, 40))
    h = np.vstack([row, row, row, rng.normal(size=(2, 40))])  # three identical contact rows
    p = problem(rng, m=5, h=h)
    p = ContactProblem(**{**p.__dict__, "c_free": np.array([-1e-3, -1e-3, -1e-3, 2e-3, -5e-4])})
    r = solve_contact_qp(p, max_states=40)
    assert r.states_solved <= 40
    assert r.feasible
    _complementary(r, tol=1e-8)


def test_no_contacts_is_the_plain_inverse_qp():
    rng = np.random.default_rng(4)
    p = problem(rng, m=0, h=np.zeros((0, 40)))
    r = solve_contact_qp(p)
    assert r.feasible and r.forces.shape == (0,) and r.states_solved == 1


def test_pivoting_is_a_heuristic_measured_against_enumeration():
    """The QPCC is not convex: the search (pivots from the warm start and the two extreme
    states, then single flips) is checked against enumeration on 200 random problems with
    m ≤ 8 contacts; on this seed it misses the global optimum on 1 % of them (stated in
    the module docstring and EXPERIMENTS.md) — a regression would miss more."""
    rng = np.random.default_rng(123)
    misses = 0
    for _ in range(200):
        p = problem(rng, n_a=int(rng.integers(1, 4)), m=int(rng.integers(1, 9)))
        r, ref = solve_contact_qp(p, max_states=16), enumerate_contact_qp(p)
        assert r.feasible and r.objective >= ref.objective * (1 - 1e-9) - 1e-18
        misses += r.objective > ref.objective * (1 + 1e-8) + 1e-18
    assert misses <= 4


def test_a_passed_deadline_stops_the_search_at_the_first_feasible_state():
    """The tick's time bound: with the deadline already passed the search solves states
    only until one is feasible, says it was cut, and its answer is still complementary
    and within the bounds; without a deadline the same call searches on."""
    rng = np.random.default_rng(7)
    cut_seen = 0
    for _ in range(30):
        p = problem(rng, m=int(rng.integers(3, 9)))
        whole = solve_contact_qp(p, local_search=True, max_states=64)  # from the loaded contacts: feasible
        cut = solve_contact_qp(p, local_search=True, max_states=64, deadline=0.0)
        assert whole.feasible and cut.feasible
        _complementary(cut)
        # within the bounds to the solver's precision (the contacts' tolerance above): one
        # effort came out at -1.6e-12 N on an AMD EPYC host, where OpenBLAS picks other kernels
        assert (cut.efforts >= -1e-9).all() and (cut.efforts <= 5.0 + 1e-9).all()
        assert cut.objective >= whole.objective - 1e-15  # never better than the whole search
        if cut.truncated:
            cut_seen += 1
            assert cut.states_solved < whole.states_solved
        else:  # nothing was left to try
            assert cut.states_solved == whole.states_solved
        assert not whole.truncated
    assert cut_seen >= 20


def test_the_compiled_state_qp_is_daqp_solve_on_the_same_problem():
    """contact_qp.state_solve_direct (the state's assembly and DAQP's C solve in one numba
    call) against daqp's Python solve of the same assembled QP, feasible and infeasible
    states alike: the same exit flag, solution and multipliers."""
    import daqp

    from soft_inverse_ros.core.control import contact_qp

    if contact_qp._state_structs() is None:  # noqa: SLF001
        pytest.skip("no compiled state QPs here (numba, DAQP's C structs, or SOFT_INVERSE_ROS_DAQP_DIRECT=off)")
    rng = np.random.default_rng(21)
    flags = set()
    for trial in range(40):
        m = int(rng.integers(1, 8))
        p = problem(rng, m=m, sum_rows=np.ones((1, m)), sum_limits=np.array([rng.uniform(0.0, 2.0)]))
        st = contact_qp.Stacked(p)
        assert st.direct is not None
        f_all = st.g.T @ p.e_free
        active = rng.random(m) < 0.5
        h, f, a_mat, upper, lower, sense, a_idx = contact_qp.state_qp(
            st.h, st.rows, f_all, active, p.n_a, st.effort_min, st.effort_max, st.force_max, st.stroke_lo,
            st.stroke_up, st.c_free, st.sum_limits, contact_qp.RIDGE, 1e30)
        x_ref, _, flag_ref, info = daqp.solve(h, f, a_mat, upper, lower, sense)
        d = st.direct
        x, lam, flag, idx = contact_qp.state_solve_direct(
            st.h, st.rows, f_all, active, p.n_a, st.effort_min, st.effort_max, st.force_max, st.stroke_lo,
            st.stroke_up, st.c_free, st.sum_limits, contact_qp.RIDGE, 1e30, d.ints, d.layout, d.settings_address)
        assert flag == flag_ref and np.array_equal(idx, a_idx)
        flags.add(int(flag))
        if flag >= 1:
            np.testing.assert_allclose(x, x_ref, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(lam, info["lam"], rtol=1e-9, atol=1e-12)
    assert 1 in flags and any(fl < 1 for fl in flags)  # solved and infeasible states both seen
