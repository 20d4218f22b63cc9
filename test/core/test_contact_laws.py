"""Signorini and Coulomb contact laws in compliance space (core/contact/signorini.py)."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.contact.signorini import (
    complementarity_residual,
    solve_coulomb_gs,
    solve_signorini_exact,
    solve_signorini_gs,
)


def _random_lcp(rng, m, rank_deficit=0):
    a = rng.normal(size=(m, m + 3 - rank_deficit))
    w = (a @ a.T) / m * 1e-3 + (1e-6 if rank_deficit else 1e-4) * np.eye(m)
    return w, rng.normal(size=m) * 1e-3


@pytest.mark.parametrize("m", [1, 2, 5, 30, 100])
def test_gauss_seidel_meets_complementarity_and_agrees_with_the_exact_solve(m):
    rng = np.random.default_rng(m)
    w, d = _random_lcp(rng, m)
    gs = solve_signorini_gs(w, d, tolerance=1e-12, max_sweeps=50000)
    exact = solve_signorini_exact(w, d)
    assert gs.converged and gs.residual <= 1e-12
    assert exact.residual <= 1e-14
    assert (gs.forces >= 0).all() and (exact.forces >= 0).all()
    assert (gs.gaps >= -1e-12).all() and (exact.gaps >= -1e-14).all()
    scale = max(np.abs(exact.forces).max(), 1e-30)
    assert np.abs(gs.forces - exact.forces).max() / scale < 1e-6
    assert complementarity_residual(w, d, exact.forces) == pytest.approx(exact.residual, abs=1e-18)


def test_single_contact_force_is_gap_over_compliance():
    w = np.array([[2.5e-3]])  # m/N
    for gap in (-1e-3, -1e-5):
        for solve in (solve_signorini_gs, solve_signorini_exact):
            sol = solve(w, np.array([gap]))
            assert sol.forces[0] == pytest.approx(-gap / 2.5e-3, rel=1e-12)
            assert abs(sol.gaps[0]) < 1e-15
    open_contact = solve_signorini_gs(w, np.array([1e-3]))
    assert open_contact.forces[0] == 0.0 and open_contact.gaps[0] == pytest.approx(1e-3)


def test_bad_inputs_are_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="do not match"):
        solve_signorini_gs(np.eye(2), np.zeros(3))
    with pytest.raises(ValueError, match="not finite"):
        solve_signorini_exact(np.eye(1), np.array([np.nan]))
    with pytest.raises(ValueError, match="non-positive diagonal"):
        solve_signorini_gs(np.zeros((1, 1)), np.array([-1.0]))
    with pytest.raises(ValueError, match="friction coefficients"):
        solve_coulomb_gs(np.eye(3), np.zeros(3), np.array([-0.5]))


def test_coulomb_sticks_inside_the_cone_and_slides_on_it():
    w = np.diag([1e-3, 2e-3, 2e-3])
    stick = solve_coulomb_gs(w, np.array([-1e-3, 1e-4, 0.0]), np.array([0.5]))
    # sticking: zero gap, zero slip; the tangential force (0.05 N) is inside μ λ_n = 0.5 N
    assert stick.converged
    np.testing.assert_allclose(stick.forces[0], [1.0, -0.05, 0.0], atol=1e-12)
    np.testing.assert_allclose(stick.gaps[0], 0.0, atol=1e-15)
    slide = solve_coulomb_gs(w, np.array([-1e-3, 5e-3, 0.0]), np.array([0.5]))
    # sliding: |λ_t| = μ λ_n, opposite to the slip, the slip is not cancelled
    np.testing.assert_allclose(slide.forces[0], [1.0, -0.5, 0.0], atol=1e-12)
    assert slide.gaps[0, 1] > 0


def test_anisotropic_friction_depends_on_the_sliding_direction():
    w = np.diag([1e-3, 2e-3, 2e-3])
    mu = np.array([[0.6, 0.1]])
    along_t1 = solve_coulomb_gs(w, np.array([-1e-3, 5e-3, 0.0]), mu).forces[0]
    along_t2 = solve_coulomb_gs(w, np.array([-1e-3, 0.0, 5e-3]), mu).forces[0]
    assert along_t1[1] == pytest.approx(-0.6) and along_t2[2] == pytest.approx(-0.1)
    oblique = solve_coulomb_gs(w, np.array([-1e-3, 5e-3, 5e-3]), mu).forces[0]
    assert (oblique[1] / 0.6) ** 2 + (oblique[2] / 0.1) ** 2 == pytest.approx(1.0)  # on the ellipse


def test_coulomb_with_coupled_contacts_converges_to_a_cone_consistent_solution():
    rng = np.random.default_rng(3)
    m = 8
    # a compliance with the structure of H K⁻¹ Hᵀ for separated contacts: each contact's
    # own 3×3 block dominates its coupling to the others
    a = 0.15 * rng.normal(size=(3 * m, 3 * m))
    w = (a @ a.T / (3 * m) + np.eye(3 * m)) * 1e-3
    d = rng.normal(size=3 * m) * 1e-3
    d[0::3] = -np.abs(d[0::3])  # every contact pressed
    sol = solve_coulomb_gs(w, d, np.full(m, 0.4), tolerance=1e-12, max_sweeps=20000)
    assert sol.converged and sol.residual <= 1e-12
    lam = sol.forces
    assert (lam[:, 0] >= 0).all()
    tangential = np.linalg.norm(lam[:, 1:], axis=1)
    assert (tangential <= 0.4 * lam[:, 0] + 1e-12).all()
    sticking = tangential < 0.4 * lam[:, 0] - 1e-9
    np.testing.assert_allclose(sol.gaps[sticking, 1:], 0.0, atol=1e-10)  # sticking: no slip


def test_exact_solve_falls_back_to_gauss_seidel_when_daqp_stops(monkeypatch):
    """daqp can stop on a nearly singular W (the finger's closed notches, live): the exact
    solve then returns projected Gauss–Seidel's answer when it converges."""
    import daqp

    from soft_inverse_ros.core.contact import signorini

    rng = np.random.default_rng(3)
    a = rng.normal(size=(4, 6))
    w = a @ a.T + 1e-3 * np.eye(4)
    d = rng.normal(size=4)
    reference = signorini.solve_signorini_exact(w, d)
    monkeypatch.setattr(daqp, "solve", lambda *args, **kw: (np.zeros(4), 0.0, -1, {}))
    fallback = signorini.solve_signorini_exact(w, d)
    assert fallback.iterations > 0 and fallback.converged
    np.testing.assert_allclose(fallback.forces, reference.forces, rtol=1e-6, atol=1e-9)
