"""ECSW hyper-reduction (core/sim/hyper_reduction.py): the non-negative sampling of the
elements, the weighted FEM that evaluates the sample, and the sample's accuracy."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.model.fem import CorotationalFEM
from soft_inverse_ros.core.sim.hyper_reduction import build_ecsw, ecsw_weights


def _box_fem(kernels: str = "numpy", weights=None) -> CorotationalFEM:
    """A 2×2×3-cell tetrahedral beam fixed at z = 0 (Freudenthal split of each cube)."""
    nx, ny, nz = 3, 3, 4
    grid = np.stack(np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"), -1)
    points = grid.reshape(-1, 3) * 0.01
    index = np.arange(nx * ny * nz).reshape(nx, ny, nz)
    tets = []
    paths = ((1, 2), (2, 1), (0, 2), (2, 0), (0, 1), (1, 0))
    for i in range(nx - 1):
        for j in range(ny - 1):
            for k in range(nz - 1):
                for first, second in paths:
                    corner = np.array([i, j, k])
                    steps = [first, second, 3 - first - second]
                    verts = [corner.copy()]
                    for axis in steps:
                        nxt = verts[-1].copy()
                        nxt[axis] += 1
                        verts.append(nxt)
                    tet = [index[tuple(v)] for v in verts]
                    p = points[tet]
                    if np.linalg.det(np.stack((p[1] - p[0], p[2] - p[0], p[3] - p[0]))) < 0:
                        tet[2], tet[3] = tet[3], tet[2]
                    tets.append(tet)
    tets = np.array(tets)
    fixed = np.flatnonzero(points[:, 2] == 0.0)
    return CorotationalFEM(points, tets, 2e5, 0.45, fixed_nodes=fixed, density=1000.0,
                           kernels=kernels, element_weights=weights)


def _bent(fem: CorotationalFEM, amount: float) -> np.ndarray:
    """Rest points bent about y and twisted about z, growing with height."""
    x = fem.rest_points.copy()
    h = x[:, 2] / x[:, 2].max()
    angle = amount * h
    x[:, 0] += amount * 0.02 * h**2
    c, s = np.cos(angle), np.sin(angle)
    x[:, 0], x[:, 1] = c * x[:, 0] - s * x[:, 1], s * x[:, 0] + c * x[:, 1]
    return x


@pytest.mark.parametrize("kernels", ["numpy", "auto"])
def test_weighted_fem_is_the_weighted_sum_of_its_elements(kernels):
    full = _box_fem(kernels)
    rng = np.random.default_rng(3)
    weights = rng.uniform(0.0, 3.0, full.n_elements)
    weighted = _box_fem(kernels, weights)
    x = _bent(full, 0.4)
    per_element = full.element_forces(x)  # (M, 4, 3)
    expected = np.zeros((full.n_nodes, 3))
    np.add.at(expected, full.tets, weights[:, None, None] * per_element)
    assert np.allclose(weighted.internal_forces(x), expected, rtol=1e-10, atol=1e-12)
    forces = np.zeros((full.n_nodes, 3))
    np.add.at(forces, full.tets, per_element)
    assert np.allclose(forces, full.internal_forces(x), rtol=1e-10, atol=1e-12)
    # the tangent: Σ w_e R K0 Rᵀ, here checked through its action on a displacement
    blocks = full.element_blocks(full.element_state(x))  # (M, 4, 4, 3, 3)
    u = rng.normal(size=(full.n_nodes, 3))
    u[full.fixed_mask] = 0.0
    ku = np.zeros((full.n_nodes, 3))
    np.add.at(ku, full.tets, np.einsum("m,mijab,mjb->mia", weights, blocks, u[full.tets]))
    k_weighted = weighted.stiffness(weighted.element_state(x))
    assert np.allclose(k_weighted @ full.reduce(u), full.reduce(ku), rtol=1e-9, atol=1e-9)
    # mass keeps the geometric volumes
    assert np.allclose(weighted.lumped_mass(), full.lumped_mass())


def test_element_weights_are_validated():
    with pytest.raises(ValueError, match="element_weights"):
        _box_fem(weights=np.full(3, 1.0))
    with pytest.raises(ValueError, match="element_weights"):
        _box_fem(weights=-np.ones(_box_fem().n_elements))


def test_nnls_recovers_a_sparse_nonnegative_combination():
    rng = np.random.default_rng(7)
    g = rng.normal(size=(60, 200))
    truth = np.zeros(200)
    truth[[3, 50, 77, 120, 199]] = [0.5, 2.0, 1.0, 3.0, 0.25]
    w = ecsw_weights(g, g @ truth, 1e-10)
    assert np.all(w >= 0)
    assert set(np.flatnonzero(w)) == {3, 50, 77, 120, 199}
    assert np.allclose(w, truth, atol=1e-8)


def test_nnls_stops_at_the_tolerance_with_few_columns():
    rng = np.random.default_rng(11)
    g = np.abs(rng.normal(size=(80, 400))) + 0.1 * rng.normal(size=(80, 400))
    b = g.sum(axis=1)
    for tolerance in (0.1, 0.01):
        w = ecsw_weights(g, b, tolerance)
        assert np.all(w >= 0)
        assert np.linalg.norm(g @ w - b) <= tolerance * np.linalg.norm(b) * (1 + 1e-9)
        assert np.count_nonzero(w) < 80  # far fewer than the 400 columns
    assert np.count_nonzero(ecsw_weights(g, b, 0.1)) < np.count_nonzero(ecsw_weights(g, b, 0.01))


def test_nnls_terminates_on_duplicated_and_opposed_columns():
    """Degenerate columns (exact duplicates, a column and its negative, zero columns):
    the active set neither cycles nor crashes, and the result is feasible."""
    rng = np.random.default_rng(5)
    base = rng.normal(size=(30, 10))
    g = np.hstack((base, base, -base, np.zeros((30, 5))))
    b = base @ rng.uniform(0.5, 1.5, 10)
    w = ecsw_weights(g, b, 1e-9)
    assert np.all(w >= 0)
    assert np.linalg.norm(g @ w - b) <= 1e-9 * np.linalg.norm(b) * 10
    # an unreachable target (outside the cone): stops at the non-negative optimum
    w = ecsw_weights(base, -b, 1e-6)
    assert np.all(w >= 0)
    assert np.linalg.norm(base @ w + b) <= np.linalg.norm(b) + 1e-12
    # the element budget is kept
    assert np.count_nonzero(ecsw_weights(g, b, 1e-12, max_elements=3)) <= 3


def test_build_ecsw_reproduces_the_projected_forces_it_was_trained_on_and_nearby():
    fem = _box_fem("auto")
    rng = np.random.default_rng(2)
    basis = np.linalg.qr(rng.normal(size=(fem.n_free, 6)))[0]
    x_eq = fem.rest_points.copy()
    train = [_bent(fem, a) for a in np.linspace(0.05, 0.5, 10)]
    hr = build_ecsw(fem, basis, x_eq, train, 1e-3)
    assert 0 < len(hr.elements) < fem.n_elements and np.all(hr.weights > 0)
    assert hr.training_error <= 1e-3 * (1 + 1e-9)

    def projected(model, x):
        return basis.T @ model.reduce(model.internal_forces(x))

    exact_eq = projected(fem, x_eq)
    assert np.allclose(projected(hr.fem, x_eq) + hr.offset, exact_eq, atol=1e-12)
    x = _bent(fem, 0.33)  # between training configurations
    change = projected(fem, x) - exact_eq
    error = projected(hr.fem, x) + hr.offset - projected(fem, x)
    assert np.linalg.norm(error) < 0.01 * np.linalg.norm(change)


def test_build_ecsw_refuses_configurations_that_do_not_move():
    fem = _box_fem()
    basis = np.eye(fem.n_free)[:, :4]
    with pytest.raises(ValueError, match="moves away"):
        build_ecsw(fem, basis, fem.rest_points, [fem.rest_points.copy()], 0.01)
