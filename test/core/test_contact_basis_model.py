"""The reduced contact block of the controller's model (RobotModel.update with a basis) on
SOFA's finger with the basis shipped in config/robots/finger_basis.npz (made by
``soft-inverse-ros reduce-contacts``, see EXPERIMENTS.md)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml


@pytest.fixture(scope="module")
def finger(sofa_data):
    """(full description, reduced description, plant states along a coarse pull 45 → 55 mm)."""
    from soft_inverse_ros.core.config_files import resolve_robot
    from soft_inverse_ros.core.contact.basis_builder import sweep_plant
    from soft_inverse_ros.core.model.description import parse_robot_description

    source = resolve_robot("finger")
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))
        full = parse_robot_description(data, source=source)
        data["collision"]["reduced_basis"] = "finger_basis.npz"
        reduced = parse_robot_description(data, source=source)
    plant = sweep_plant(full)
    states = []
    for i, stroke in enumerate(np.linspace(0.0, 0.055, 111)):  # 0.5 mm per step
        state = plant.step(cable_strokes=[stroke])
        if i >= 90 and i % 4 == 2:  # 45, 47, ..., 55 mm
            states.append((state.positions.copy(), state.efforts.copy()))
    return full, reduced, states


def _models(finger, enrich: bool = False):
    """(full, reduced, contact-free) models; the reduced one with Goury's reduced law alone
    unless ``enrich`` (the per-point gap check, whose block has k + v variables)."""
    import dataclasses

    from soft_inverse_ros.core.model.robot_model import RobotModel

    full, reduced, _ = finger  # direct solves: the blocks compare to round-off, not to PCG's tolerance
    red = RobotModel.from_description(reduced, factor_reuse=False)
    if not enrich:
        red.set_contact(dataclasses.replace(red.contact, enrich_tolerance=None))
    return (RobotModel.from_description(full, factor_reuse=False), red,
            RobotModel.from_description(full, contact=False, factor_reuse=False))


def test_the_reduced_block_is_the_projected_full_block(finger):
    full, reduced, _ = _models(finger)
    k = reduced.basis.size
    loaded_seen = 0
    for x, lam in finger[2]:  # 45 … 55 mm
        full.set_state(x, lam)
        reduced.set_state(x, lam)
        _, fs = full.update(lam, seq=0, stamp=0.0)
        _, rs = reduced.update(lam, seq=0, stamp=0.0)
        f, r = fs.contacts, rs.contacts
        assert r.reduced and r.size == k and rs.is_finite()
        np.testing.assert_array_equal(r.ids, np.arange(k))
        if f is None:
            continue
        assert not f.reduced
        psi = reduced.basis.rows_for(f.ids)  # Ψ_m of the same detected contacts
        np.testing.assert_allclose(r.w_cc, psi.T @ f.w_cc @ psi, rtol=0, atol=1e-12 * np.abs(f.w_cc).max())
        np.testing.assert_allclose(r.w_ca, psi.T @ f.w_ca, rtol=0, atol=1e-12 * np.abs(f.w_ca).max())
        np.testing.assert_allclose(r.w_ec, f.w_ec @ psi, rtol=0, atol=1e-12 * np.abs(f.w_ec).max())
        assert (r.force >= 0).all()
        loaded_seen += bool(r.force.any())
        _check_geometry(r, psi, f)
    assert loaded_seen


def _check_geometry(r, psi, f) -> int:
    """A basis vector none of the detected contacts carries has zero rows, point, normal and
    force; the others the ψ-weighted centroid and unit normal. Returns the idle count."""
    idle = psi.sum(axis=0) == 0
    assert not r.w_cc[idle].any() and not r.w_ca[idle].any() and not r.w_ec[:, idle].any()
    assert not r.points[idle].any() and not r.normals[idle].any() and not r.force[idle].any()
    assert not r.gap[idle].any()
    np.testing.assert_allclose(r.force_weight, psi.sum(axis=0))  # normal force per unit β_j [N/N]
    assert (r.source == -1).all()  # self-collision only on the finger
    used = ~idle
    np.testing.assert_allclose(np.linalg.norm(r.normals[used], axis=1), 1.0)
    centroid = (psi[:, used].T @ f.points) / psi[:, used].sum(axis=0)[:, None]
    np.testing.assert_allclose(r.points[used], centroid)
    return int(idle.sum())


def test_a_basis_vector_away_from_the_contacts_has_zero_rows(finger):
    """The shipped basis plus a vector on one surface node far from the notches: the block
    grows to 6 x 6 and that vector's rows stay zero."""
    import dataclasses

    from soft_inverse_ros.core.contact.correction import ReducedContactBasis

    full, reduced, _ = _models(finger)
    x, lam = finger[2][-1]
    full.set_state(x, lam)
    _, fs = full.update(lam, seq=0, stamp=0.0)
    f = fs.contacts
    base = reduced.basis
    far = base.nodes[np.argmax(np.linalg.norm(x[base.nodes][:, None] - f.points[None], axis=2).min(axis=1))]
    extra = (base.nodes == far).astype(float)
    reduced.set_contact(dataclasses.replace(
        reduced.contact, basis=ReducedContactBasis(base.nodes, np.column_stack((base.psi, extra)))))
    reduced.set_state(x, lam)
    _, rs = reduced.update(lam, seq=0, stamp=0.0)
    r = rs.contacts
    assert r.size == base.size + 1 and r.reduced
    psi = reduced.basis.rows_for(f.ids)
    assert not psi[:, -1].any() and _check_geometry(r, psi, f) >= 1 and r.force[:-1].any()
    np.testing.assert_allclose(r.w_cc, psi.T @ f.w_cc @ psi, rtol=0, atol=1e-12 * np.abs(f.w_cc).max())


def test_the_reduced_update_follows_the_full_one_on_a_short_pull(finger):
    """From the plant's states at 45 … 55 mm, three updates of each model: the reduced
    model's tip stays within 0.5 mm of the full one, where contact itself moves it by
    1.5 … 7 mm (measured: ≤ 0.27 mm)."""
    full, reduced, free = _models(finger)
    effects = []
    for x, lam in finger[2]:
        tips = []
        for model in (full, reduced, free):
            model.set_state(x, lam)
            for i in range(3):
                _, snap = model.update(lam, seq=i, stamp=0.0)
            tips.append(snap.effector_position)
        gap = np.linalg.norm(tips[1] - tips[0])
        effect = np.linalg.norm(tips[2] - tips[0])
        assert gap <= 5e-4 and gap <= 0.1 * effect
        effects.append(effect)
    assert max(effects) > 5e-3  # the pull does close the notches


def test_the_controllers_contact_tick_takes_the_reduced_block(finger):
    """core/control/contact_inverse.py solves the inverse problem on the k generalized
    contacts (idle vectors left out), its force sum read through force_weight."""
    from soft_inverse_ros.core.control.contact_inverse import ContactForceLimits, ContactTick

    _, reduced, _ = _models(finger)
    x, lam = finger[2][-1]
    reduced.set_state(x, lam)
    _, snap = reduced.update(lam, seq=0, stamp=0.0)
    tick = ContactTick(snap, 1e-3, ContactForceLimits(force_sum_max=5.0))
    assert tick.size == int((np.diag(snap.contacts.w_cc) > 0).sum()) >= 1
    target = snap.effector_position + np.array([0.0, 0.002, 0.0])
    result = tick.solve(target, np.zeros(1), np.array([10.0]), np.array([-1.0]), np.array([1.0]), lam)
    assert result.feasible and np.isfinite(result.efforts).all() and (result.forces >= 0).all()
    assert tick.predicted_force_sum() <= 5.0 + 1e-9


def test_the_per_point_gap_check_stops_single_points_sinking_in(finger):
    """Goury's reduced law bounds only Ψ_mᵀδ ≥ 0: after its solve some detected contact's
    linearized gap can be negative. The per-point gap check gives each such contact its
    own unit force direction, after which no linearized gap is below the tolerance and
    the forces stay ≥ 0. The model's block has k + 1 generalized contacts: the basis's k
    and the enrichment's force pattern (unit force weight; zero when nothing sank)."""
    from soft_inverse_ros.core.contact.correction import solve_reduced_checked

    _, goury, _ = _models(finger)
    _, enriched, _ = _models(finger, enrich=True)
    tol = enriched.contact.enrich_tolerance
    k = goury.basis.size
    assert enriched.reduced_size == k + 1 and goury.reduced_size == k
    enriched_seen = 0
    for x, lam in finger[2]:
        for model in (goury, enriched):
            model.set_state(x, lam)
        for i in range(4):
            _, gs = goury.update(lam, seq=i, stamp=0.0)
            _, es = enriched.update(lam, seq=i, stamp=0.0)
            g, e = gs.contacts, es.contacts
            assert g.size == k and es.is_finite() and e.size == k + 1 and (e.force >= 0).all()
            assert e.force_weight[k] == pytest.approx(1.0 if e.force[k] > 0 else 0.0)
            enriched_seen += e.force[k] > 0
    # the same check on one linear problem, against the full LCP's gaps
    x, lam = finger[2][-1]
    enriched.set_state(x, lam)
    contacts, hc = enriched._active_contacts(enriched.positions)
    psi = enriched._basis_rows(contacts)
    k_mat = enriched.fem.stiffness(enriched._ev.state)
    solve = lambda b: enriched._solve(k_mat, b, None)[0]  # noqa: E731
    sank = 0
    for i in range(contacts.size):  # one contact pressed 0.3 mm in, its neighbours as they are
        gaps = contacts.gaps.copy()
        gaps[i] -= 3e-4
        alone = solve_reduced_checked(enriched.contact, psi, hc, solve(hc.T @ psi), gaps, solve, None)
        checked = solve_reduced_checked(enriched.contact, psi, hc, solve(hc.T @ psi), gaps, solve, tol)
        sank += alone.gaps.min() < -tol  # the reduced law alone lets it (or another) sink in
        assert checked.gaps.min() >= -tol and (checked.forces >= 0).all()
        assert checked.basis.shape[1] == k + checked.enriched.size
        assert (checked.enriched.size >= 1) == (alone.gaps.min() < -tol)
    assert sank and enriched_seen
