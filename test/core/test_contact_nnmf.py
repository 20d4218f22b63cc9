"""NNMF of contact-force snapshots (core/contact/nnmf.py), against scikit-learn's NMF."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.contact.nnmf import nnmf, project_forces


def _snapshots(rng, n_c=60, n_s=200, k=4):
    """Forces spreading over a contact surface as a pull grows: sums of k non-negative
    bumps with non-negative, partly sparse weights, plus a little non-negative noise."""
    x = np.linspace(0.0, 1.0, n_c)
    centres = np.linspace(0.15, 0.85, k)
    psi = np.exp(-((x[:, None] - centres[None, :]) / 0.08) ** 2)
    b = np.maximum(rng.normal(size=(k, n_s)), 0.0) * rng.uniform(0.5, 2.0, size=(k, 1))
    return psi @ b + 1e-3 * rng.random((n_c, n_s))


@pytest.mark.parametrize("method", ["hals", "als"])
def test_factors_are_non_negative_and_fit(method):
    s = _snapshots(np.random.default_rng(0))
    r = nnmf(s, 4, method=method, iterations=800, tolerance=1e-10)
    assert (r.basis >= 0).all() and (r.coefficients >= 0).all()
    np.testing.assert_allclose(np.linalg.norm(r.basis, axis=0), 1.0)
    assert r.relative_error < 0.02
    assert r.relative_error == pytest.approx(np.linalg.norm(s - r.basis @ r.coefficients) / np.linalg.norm(s))


def test_hals_decreases_the_objective_monotonically():
    s = _snapshots(np.random.default_rng(1))
    for seed in range(5):
        h = nnmf(s, 6, iterations=200, tolerance=0.0, seed=seed).history
        assert (np.diff(h) <= 1e-12 * h[:-1]).all()


def test_agrees_with_scikit_learn_nmf():
    sklearn = pytest.importorskip("sklearn.decomposition")
    s = _snapshots(np.random.default_rng(2))
    ours = nnmf(s, 4, iterations=2000, tolerance=1e-12).relative_error
    model = sklearn.NMF(n_components=4, solver="cd", init="nndsvda", max_iter=5000, tol=1e-10, random_state=0)
    w = model.fit_transform(s)
    theirs = np.linalg.norm(s - w @ model.components_) / np.linalg.norm(s)
    assert ours == pytest.approx(theirs, rel=0.05, abs=2e-4)


def test_error_decreases_with_k_and_reduced_forces_stay_pushing():
    s = _snapshots(np.random.default_rng(3), k=5)
    errors = [nnmf(s, k, iterations=400).relative_error for k in (1, 2, 3, 5)]
    assert all(a > b for a, b in zip(errors, errors[1:]))
    basis = nnmf(s, 5, iterations=400).basis
    beta = project_forces(basis, s[:, 7])
    assert (beta >= 0).all() and (basis @ beta >= 0).all()


def test_bad_inputs():
    with pytest.raises(ValueError, match=">= 0"):
        nnmf(-np.ones((3, 3)), 1)
    with pytest.raises(ValueError, match="k must be"):
        nnmf(np.ones((3, 3)), 4)
    with pytest.raises(ValueError, match="method"):
        nnmf(np.ones((3, 3)), 1, method="svd")


def test_the_nested_path_never_grows_the_error_with_k():
    from soft_inverse_ros.core.contact.nnmf import nnmf_path

    s = _snapshots(np.random.default_rng(4), k=6)
    seen = []
    path = nnmf_path(s, 8, iterations=300, on_k=seen.append)
    errors = [r.relative_error for r in path]
    assert seen == list(range(1, 9)) and [r.basis.shape[1] for r in path] == list(range(1, 9))
    assert all(b <= a * (1 + 1e-12) for a, b in zip(errors, errors[1:]))
    assert errors[5] < 0.05 < errors[0]
    for r in path:
        assert (r.basis >= 0).all() and (r.coefficients >= 0).all()
    with pytest.raises(ValueError, match="init must be"):
        nnmf(s, 2, init=(np.ones((s.shape[0], 3)), np.ones((3, s.shape[1]))))
