"""Reduced (NNMF) contact basis in the contact correction, and the reduced-contact experiment."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from soft_inverse_ros.core.contact.correction import ContactModel, ReducedContactBasis
from soft_inverse_ros.core.contact.geometry import Plane


def test_basis_validation():
    with pytest.raises(ValueError, match=">= 0"):
        ReducedContactBasis(np.arange(3), -np.ones((3, 2)))
    with pytest.raises(ValueError, match="psi must be"):
        ReducedContactBasis(np.arange(3), np.ones((2, 2)))
    with pytest.raises(ValueError, match="frictionless"):
        ContactModel(obstacles=[Plane((0, 0, 0), (0, 0, 1))], friction=0.3,
                     basis=ReducedContactBasis(np.arange(3), np.ones((3, 1))))


def test_a_reduced_correction_with_a_full_basis_equals_the_full_one():
    """With Ψ = I over the contact vertices the reduced LCP is the full one."""
    rng = np.random.default_rng(0)
    n = 12  # 4 point masses
    x_start = np.column_stack((np.arange(4) * 0.01, np.zeros(4), np.full(4, 1e-4)))
    x_free = x_start + np.array([0.0, 0.0, -5e-4]) + rng.normal(size=(4, 3)) * 1e-5
    a = rng.normal(size=(n, n))
    a_mat = a @ a.T / n + np.eye(n) * 10.0
    solve = lambda b: np.linalg.solve(a_mat, b)  # noqa: E731
    floor = Plane((0.0, 0.0, 0.0), (0.0, 0.0, 1.0))
    full = ContactModel(obstacles=[floor], alarm_distance=1e-3, tolerance=1e-14, nodes=np.arange(4))
    reduced = ContactModel(obstacles=[floor], alarm_distance=1e-3, tolerance=1e-14, nodes=np.arange(4),
                           basis=ReducedContactBasis(np.arange(4), np.eye(4)))
    dx_full, s_full = full.correct(x_free, x_start, np.arange(n), solve)
    dx_red, s_red = reduced.correct(x_free, x_start, np.arange(n), solve)
    np.testing.assert_allclose(dx_red, dx_full, rtol=1e-8, atol=1e-14)
    np.testing.assert_allclose(s_red.forces, s_full.forces, rtol=1e-8, atol=1e-12)
    assert (s_red.gaps_after >= -1e-12).all()


def test_reduced_contact_experiment_quick(sofa_data, monkeypatch):
    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))
    from soft_inverse_ros.experiments.reduced_contact import measure

    args = argparse.Namespace(pull_mm=55.0, step_mm=0.25, dt=0.01, alarm_mm=0.5, cable_stiffness=1e5, k=5,
                              nnmf="hals", nnmf_iterations=300, out=None, model_updates=(3,), basis=None,
                              collision_surface=None, refine=0)
    r = measure(args)
    assert r["basis_size"] == 5 and r["snapshots"] == 221 and r["snapshots_with_contact"] > 5
    assert r["tip_error_vs_full_mm"] <= 1.0 < r["tip_error_vs_no_contact_mm"]
    assert r["max_penetration_mm"] <= 0.05
    errors = [r["error_vs_k"][str(k)] for k in range(1, 8)]
    assert errors[-1] < errors[0]
    assert r["reduced_contact_steps_per_s"] > 0 and r["full_contact_steps_per_s"] > 0
    # the controller's model with the basis follows the full one over a few updates
    assert r["model_states_mm"] == [47.0, 51.0, 55.0]
    assert r["model_tip_error_vs_full_mm"]["3"] <= 0.1 * r["model_contact_effect_mm"]


def test_reduced_contact_experiment_with_a_basis_file(sofa_data, monkeypatch, tmp_path):
    """--basis: the shipped finger basis (reduce-contacts) in the reduced pull; a basis of
    another mesh is refused in one line."""
    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))
    from soft_inverse_ros.core.contact.basis_file import BasisFileError, load_basis, save_basis
    from soft_inverse_ros.experiments.reduced_contact import measure

    args = argparse.Namespace(pull_mm=55.0, step_mm=0.25, dt=0.01, alarm_mm=0.5, cable_stiffness=1e5, k=5,
                              nnmf="hals", nnmf_iterations=100, out=None, model_updates=(),
                              basis=Path(__file__).resolve().parents[2] / "config/robots/finger_basis.npz",
                              collision_surface=None, refine=0)
    r = measure(args)
    assert r["basis_file"]["simulator"] == "plant" and r["basis_file"]["k"] == 5
    assert r["tip_error_vs_full_mm"] <= 1.0 < r["tip_error_vs_no_contact_mm"] and "model_states_mm" not in r
    import dataclasses

    shipped = load_basis(args.basis)
    other = dataclasses.replace(shipped, rest_checksum="0" * 64)
    args.basis = save_basis(tmp_path / "other.npz", other)
    with pytest.raises(BasisFileError, match="--basis .*other.npz: the basis was built for robot 'finger' on a mesh "
                                             "of 158 nodes, this mesh has other rest positions"):
        measure(args)
    # a basis of the finger against an obstacle: refused before the sweeps
    plane = dataclasses.replace(shipped, collision_model="self_collision=False, obstacles: a plane")
    args.basis = save_basis(tmp_path / "plane.npz", plane)
    with pytest.raises(BasisFileError, match="--basis .*plane.npz: the basis was built with another collision model "
                                             r"\(self_collision=False, obstacles: a plane\) than this description's "
                                             r"\(self_collision=True, obstacles: none\)"):
        measure(args)


def test_reduced_contact_experiment_on_a_refined_collision_surface(sofa_data, monkeypatch):
    """--refine 1: the paper's finer collision model (the boundary's triangles in four, 614
    points): many more contacts than the boundary's, a basis over the surface's vertices
    that still follows the full run, the in-contact (Table II) rates, and a basis file
    refused in one line (its rows are mesh nodes)."""
    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))
    from soft_inverse_ros.experiments.reduced_contact import measure

    args = argparse.Namespace(pull_mm=55.0, step_mm=0.25, dt=0.01, alarm_mm=0.5, cable_stiffness=1e5, k=5,
                              nnmf="hals", nnmf_iterations=200, out=None, model_updates=(3,), basis=None,
                              collision_surface=None, refine=1)
    r = measure(args)
    assert r["collision_points"] == 614 and r["collision_triangles"] == 1224 and r["collision_refine"] == 1
    assert r["contacts_max"] > 20  # the boundary's 155 nodes give at most ~8
    assert r["tip_error_vs_full_mm"] <= 1.0 < r["tip_error_vs_no_contact_mm"]
    assert r["max_penetration_mm"] <= 0.05
    assert 0 < r["steps_in_contact"] < r["snapshots"]
    for run in ("no_contact", "full_contact", "reduced_contact"):
        assert r[f"{run}_steps_per_s_in_contact"] > 0
    assert r["speedup_vs_full_in_contact"] == pytest.approx(
        r["reduced_contact_steps_per_s_in_contact"] / r["full_contact_steps_per_s_in_contact"])
    assert "model_states_mm" not in r and r["model_comparison"].startswith("skipped")
    args.basis = Path(__file__).resolve().parents[2] / "config/robots/finger_basis.npz"
    with pytest.raises(SystemExit, match="--basis: basis files hold mesh-node rows"):
        measure(args)
