"""Co-rotational tetrahedral FEM: patch test, rigid-motion invariance, stiffness, mass."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.model.fem import CorotationalFEM, lame_parameters, polar_rotation
from soft_inverse_ros.core.model.mesh_generation import box_mesh


def _rotation(axis, angle) -> np.ndarray:
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


@pytest.fixture(scope="module")
def cube():
    mesh = box_mesh((0.03, 0.02, 0.025), (3, 2, 3))
    return np.array(mesh.points), np.array(mesh.tets)


def _interior(points: np.ndarray) -> np.ndarray:
    lo, hi = points.min(0), points.max(0)
    return np.flatnonzero(np.all((points > lo + 1e-9) & (points < hi - 1e-9), axis=1))


def test_lame_parameters_and_validation():
    lam, mu = lame_parameters(1e5, 0.25)
    assert mu == pytest.approx(4e4)
    assert lam == pytest.approx(4e4)
    with pytest.raises(ValueError, match="poisson"):
        lame_parameters(1e5, 0.5)
    with pytest.raises(ValueError, match="young"):
        lame_parameters(-1.0, 0.3)


def test_patch_affine_field_constant_strain_and_interior_equilibrium(cube):
    points, tets = cube
    fem = CorotationalFEM(points, tets, 2e5, 0.4)
    interior = _interior(points)
    assert len(interior) > 0
    a = np.array([[0.02, -0.01, 0.005], [0.015, -0.03, 0.01], [0.0, 0.02, 0.025]])
    u = points @ a.T + np.array([1e-3, -2e-3, 5e-4])
    # constant strain: every element sees F = I + A
    f = fem.deformation_gradients(points + u)
    assert np.allclose(f, np.eye(3) + a, atol=1e-13)
    # linear stiffness: K0 u has zero force at interior nodes (no fixed nodes here)
    k0 = fem.rest_stiffness()
    f_lin = -(k0 @ u.ravel()).reshape(-1, 3)
    assert np.abs(f_lin[interior]).max() <= 1e-10 * np.abs(f_lin).max()
    # small affine field: co-rotational forces equal the linear ones (to second order)
    eps = 1e-6
    f_int = fem.internal_forces(points + eps * u)
    assert np.allclose(f_int, eps * f_lin, rtol=0, atol=1e-5 * eps * np.abs(f_lin).max())
    # any (large) affine field: the co-rotational interior nodes are in equilibrium too
    big = points @ (np.eye(3) + 10 * a).T @ _rotation([1, 2, 3], 0.7).T
    f_big = fem.internal_forces(big)
    assert np.abs(f_big[interior]).max() <= 1e-10 * np.abs(f_big).max()


def test_rigid_motion_invariance(cube):
    points, tets = cube
    fem = CorotationalFEM(points, tets, 1e5, 0.45)
    rng = np.random.default_rng(3)
    q = _rotation([0.3, -1.0, 0.5], 1.1)
    t = np.array([0.1, -0.2, 0.05])
    # rigid motion of the rest shape: no force, no energy
    st = fem.element_state(points @ q.T + t)
    assert np.abs(st.forces).max() < 1e-12 * 1e5 * 0.01**2
    assert abs(st.energy) < 1e-18
    # deformed state: forces rotate with the body, energy is unchanged
    x = points + rng.normal(scale=1e-3, size=points.shape)
    s1 = fem.element_state(x)
    s2 = fem.element_state(x @ q.T + t)
    assert s2.energy == pytest.approx(s1.energy, rel=1e-10)
    assert np.allclose(s2.forces, s1.forces @ q.T, atol=1e-10 * np.abs(s1.forces).max())
    # the tangent rotates too: K(Qx+t) = Q K(x) Qᵀ blockwise
    b1 = fem.element_blocks(s1)
    b2 = fem.element_blocks(s2)
    assert np.allclose(b2, q @ b1 @ q.T, atol=1e-10 * np.abs(b1).max())


def test_forces_are_energy_gradient_and_tangent_at_rest(cube):
    points, tets = cube
    fem = CorotationalFEM(points, tets, 1e5, 0.3)
    rng = np.random.default_rng(1)
    x = points + rng.normal(scale=5e-4, size=points.shape)
    v = rng.normal(size=points.shape)
    h = 1e-7
    de = (fem.energy(x + h * v) - fem.energy(x - h * v)) / (2 * h)
    assert de == pytest.approx(-np.sum(fem.internal_forces(x) * v), rel=1e-6)
    # at rest the tangent K0 is the exact derivative of -f_int
    df = (fem.internal_forces(points + h * v) - fem.internal_forces(points - h * v)) / (2 * h)
    k0 = fem.rest_stiffness()
    assert np.allclose(-(k0 @ v.ravel()), df.ravel(), atol=1e-6 * np.abs(df).max())


def test_assembly_matches_dense_element_sum(cube):
    points, tets = cube
    fixed = np.flatnonzero(points[:, 0] < 1e-9)
    fem = CorotationalFEM(points, tets, 1e5, 0.45, fixed)
    rng = np.random.default_rng(2)
    st = fem.element_state(points + rng.normal(scale=1e-3, size=points.shape))
    blocks = fem.element_blocks(st)
    n = len(points)
    dense = np.zeros((3 * n, 3 * n))
    for e, nodes in enumerate(tets):
        for i in range(4):
            for j in range(4):
                dense[3 * nodes[i]:3 * nodes[i] + 3, 3 * nodes[j]:3 * nodes[j] + 3] += blocks[e, i, j]
    dense = dense[np.ix_(fem.free_dofs, fem.free_dofs)]
    k = fem.stiffness(st).toarray()
    assert np.allclose(k, dense, atol=1e-12 * np.abs(dense).max())


def test_stiffness_symmetric_positive_definite_after_fixing(cube):
    points, tets = cube
    fixed = np.flatnonzero(points[:, 2] < 1e-9)
    fem = CorotationalFEM(points, tets, 1e5, 0.45, fixed)
    rng = np.random.default_rng(4)
    st = fem.element_state(points + rng.normal(scale=1e-3, size=points.shape))
    k = fem.stiffness(st).toarray()
    assert k.shape == (3 * (len(points) - len(fixed)),) * 2
    assert np.abs(k - k.T).max() <= 1e-12 * np.abs(k).max()
    assert np.linalg.eigvalsh(k).min() > 0
    # without fixed nodes the six rigid modes make it singular
    free = CorotationalFEM(points, tets, 1e5, 0.45).rest_stiffness().toarray()
    eig = np.linalg.eigvalsh(free)
    assert np.sum(np.abs(eig) < 1e-9 * eig.max()) == 6


def test_polar_rotation_handles_inversion():
    rng = np.random.default_rng(5)
    f = np.eye(3) + 0.3 * rng.normal(size=(200, 3, 3))
    f[:20, :, 0] *= -1.0  # inverted elements (det < 0)
    f[20] = 0.0  # degenerate
    r, n_fallback = polar_rotation(f)
    assert n_fallback >= 21
    assert np.allclose(r @ np.swapaxes(r, 1, 2), np.eye(3), atol=1e-12)
    assert np.allclose(np.linalg.det(r), 1.0)
    ok = np.linalg.det(f) > 0
    s = np.swapaxes(r[ok], 1, 2) @ f[ok]
    assert np.allclose(s, np.swapaxes(s, 1, 2), atol=1e-12)  # F = R S with S symmetric


def test_mass_and_gravity(cube):
    points, tets = cube
    fem = CorotationalFEM(points, tets, 1e5, 0.45, density=1200.0)
    vol = 0.03 * 0.02 * 0.025
    assert fem.total_volume == pytest.approx(vol)
    assert fem.lumped_mass().sum() == pytest.approx(1200.0 * vol)
    g = fem.gravity_forces([0, 0, -9.81])
    assert g.sum(axis=0) == pytest.approx([0, 0, -9.81 * 1200.0 * vol])
    mc = fem.consistent_mass_matrix()
    ones = np.tile([1.0, 0.0, 0.0], len(points))
    assert ones @ (mc @ ones) == pytest.approx(1200.0 * vol)  # rigid translation: total mass
    with pytest.raises(ValueError, match="density"):
        CorotationalFEM(points, tets, 1e5, 0.45).lumped_mass()


def test_bad_meshes_rejected(cube):
    points, tets = cube
    with pytest.raises(ValueError, match="negatively oriented"):
        CorotationalFEM(points, tets[:, [0, 2, 1, 3]], 1e5, 0.3)
    with pytest.raises(ValueError, match="every node is fixed"):
        CorotationalFEM(points, tets, 1e5, 0.3, np.arange(len(points)))


def test_consistent_tangent_matches_finite_differences(cube):
    points, tets = cube
    fem = CorotationalFEM(points, tets, 1e5, 0.4)
    rng = np.random.default_rng(6)
    x = points @ _rotation([0, 0, 1], 0.6).T + rng.normal(scale=1e-3, size=points.shape)
    k = fem.consistent_stiffness(x).toarray()
    h = 1e-7
    n = 3 * len(points)
    fd = np.zeros((n, n))
    for col in range(n):
        d = np.zeros(n)
        d[col] = h
        fd[:, col] = -(fem.internal_forces(x + d.reshape(-1, 3))
                       - fem.internal_forces(x - d.reshape(-1, 3))).ravel() / (2 * h)
    assert np.abs(k - fd).max() <= 1e-7 * np.abs(fd).max()
    assert np.allclose(fem.consistent_stiffness(points).toarray(), fem.rest_stiffness().toarray(),
                       atol=1e-12 * np.abs(k).max())


def test_compiled_kernels_match_numpy(cube):
    pytest.importorskip("numba")
    points, tets = cube
    fixed = np.flatnonzero(points[:, 0] < 1e-9)
    ref = CorotationalFEM(points, tets, 1e5, 0.45, fixed, kernels="numpy")
    fast = CorotationalFEM(points, tets, 1e5, 0.45, fixed, kernels="numba")
    assert (ref.kernels, fast.kernels) == ("numpy", "numba")
    rng = np.random.default_rng(7)
    x = points @ _rotation([1, 1, 0], 0.4).T + rng.normal(scale=1e-3, size=points.shape)
    x[points[:, 0] < 0.011, 0] *= -1.0  # mirror the first layer: inverted elements (SVD path)
    a, b = ref.element_state(x), fast.element_state(x)
    assert b.svd_fallbacks == a.svd_fallbacks > 0
    assert np.allclose(b.forces, a.forces, atol=1e-11 * np.abs(a.forces).max())
    assert b.energy == pytest.approx(a.energy, rel=1e-12)
    assert np.allclose(b.rotations, a.rotations, atol=1e-12)
    ka, kb = ref.stiffness(a), fast.stiffness(b)
    assert np.abs((ka - kb).toarray()).max() <= 1e-13 * np.abs(ka.toarray()).max()


def test_compiled_polar_batches_match_numpy_across_batch_boundaries():
    """The compiled element state iterates the polar rotation on batches of elements
    (fem_kernels.BATCH); over several batches, the last one partial, with inverted and
    collapsed elements (SVD path) in different batches and a large rotation, it gives the
    numpy path's rotations, forces and energy."""
    pytest.importorskip("numba")
    from soft_inverse_ros.core.model import fem_kernels

    mesh = box_mesh((0.06, 0.02, 0.02), (9, 3, 3))
    points, tets = np.asarray(mesh.points), np.asarray(mesh.tets)
    assert len(tets) > 3 * fem_kernels.BATCH and len(tets) % fem_kernels.BATCH
    fixed = np.flatnonzero(points[:, 0] < 1e-9)
    ref = CorotationalFEM(points, tets, 1e5, 0.45, fixed, kernels="numpy")
    fast = CorotationalFEM(points, tets, 1e5, 0.45, fixed, kernels="numba")
    rng = np.random.default_rng(3)
    x = points @ _rotation([0.2, 1, 0.3], 2.6).T + rng.normal(scale=5e-4, size=points.shape)
    last = tets[-1]
    x[last[3]] = x[last[0]]  # a collapsed element in the last (partial) batch
    middle = tets[len(tets) // 2]
    x[middle[0]] = 2.0 * x[middle[1]] - x[middle[0]]  # inverted elements mid-mesh
    a, b = ref.element_state(x), fast.element_state(x)
    assert b.svd_fallbacks == a.svd_fallbacks >= 2
    np.testing.assert_allclose(b.rotations, a.rotations, rtol=0, atol=1e-12)
    assert np.allclose(b.forces, a.forces, rtol=0, atol=1e-11 * np.abs(a.forces).max())
    assert b.energy == pytest.approx(a.energy, rel=1e-12)
    assert np.allclose(np.linalg.det(np.moveaxis(b.rotations, -1, 0)), 1.0, atol=1e-12)


def test_compiled_consistent_tangent_matches_numpy_on_both_of_its_paths():
    """The compiled exact tangent (polar rotation and (tr S I − S)⁻¹, no SVD) against the
    numpy path's SVD formula: a large rotation with a moderate deformation, then with
    inverted elements (which take the SVD formula inside the kernel too)."""
    pytest.importorskip("numba")
    mesh = box_mesh((0.06, 0.02, 0.02), (9, 3, 3))
    points, tets = np.asarray(mesh.points), np.asarray(mesh.tets)
    fixed = np.flatnonzero(points[:, 0] < 1e-9)
    ref = CorotationalFEM(points, tets, 1e5, 0.45, fixed, kernels="numpy")
    fast = CorotationalFEM(points, tets, 1e5, 0.45, fixed, kernels="numba")
    rng = np.random.default_rng(5)
    x = (points * [1.1, 0.95, 1.0]) @ _rotation([0.3, 1, 0.2], 2.2).T + rng.normal(scale=3e-4, size=points.shape)
    inverted = x.copy()
    inverted[points[:, 0] < 0.011, 0] *= -1.0
    for pos in (x, inverted):
        a, b = ref.consistent_stiffness(pos).toarray(), fast.consistent_stiffness(pos).toarray()
        assert np.abs(a - b).max() <= 1e-12 * np.abs(a).max()
    assert ref.element_state(inverted).svd_fallbacks > 0 == ref.element_state(x).svd_fallbacks
