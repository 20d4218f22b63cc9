"""Rigid→FEM mapping (Coevoet eq. 1-6): Jacobian against finite differences, virtual work."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from soft_inverse_ros.core.rigid.chain import RigidChain
from soft_inverse_ros.core.rigid.mapping import RigidMapping


@pytest.fixture(scope="module")
def chain() -> RigidChain:
    return RigidChain.from_urdf("hybrid_arm")


def _mapping(chain: RigidChain, seed: int = 0) -> tuple[RigidMapping, np.ndarray]:
    rng = np.random.default_rng(seed)
    q0 = np.array([0.3, -0.4, 0.7, 0.2, -0.5])
    p, r = chain.frame_pose(q0, chain.frame_id("flange"))
    x0 = p + rng.normal(scale=0.02, size=(12, 3))  # a soft part around the flange
    m = RigidMapping(chain, "flange", x0, nodes=[0, 2, 3, 7], q0=q0)
    z = np.concatenate([q0 + rng.normal(scale=0.3, size=5), x0[m.free].ravel()])
    return m, z


def test_chain_reads_the_urdf(chain: RigidChain) -> None:
    assert chain.nq == 5
    assert chain.joint_names == ["j1", "j2", "j3", "j4", "j5"]
    lim = chain.limits()
    assert np.all(lim.lower < 0) and np.all(lim.upper > 0) and np.all(lim.velocity > 0)


def test_rest_configuration_reproduces_rest_positions(chain: RigidChain) -> None:
    m, _ = _mapping(chain)
    q0 = np.array([0.3, -0.4, 0.7, 0.2, -0.5])
    p, r = chain.frame_pose(q0, m.frame)
    x0 = m.positions(np.concatenate([q0, np.zeros(3 * len(m.free))]))
    np.testing.assert_allclose(x0[m.nodes], p + m.offsets @ r.T)
    # rigidified nodes keep their mutual distances for any q
    _, z = _mapping(chain)
    x = m.positions(z)
    d0 = np.linalg.norm(x0[m.nodes][:, None] - x0[m.nodes][None], axis=-1)
    d = np.linalg.norm(x[m.nodes][:, None] - x[m.nodes][None], axis=-1)
    np.testing.assert_allclose(d, d0, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jacobian_matches_finite_differences(chain: RigidChain, seed: int) -> None:
    m, z = _mapping(chain, seed)
    jac = m.jacobian(z).toarray()
    h = 1e-6
    fd = np.empty_like(jac)
    for k in range(m.n_coords):
        e = np.zeros(m.n_coords)
        e[k] = h
        fd[:, k] = (m.positions(z + e) - m.positions(z - e)).ravel() / (2 * h)
    assert np.linalg.norm(jac - fd) <= 1e-6 * np.linalg.norm(fd)
    # the joint columns are non-trivial (the chain moves the rigidified nodes)
    assert np.linalg.norm(jac[:, :5]) > 0.1


def test_virtual_work(chain: RigidChain) -> None:
    """tau^T zdot equals f^T xdot, xdot measured by finite differences of the positions."""
    m, z = _mapping(chain, 3)
    rng = np.random.default_rng(7)
    f = rng.normal(size=3 * m.n_nodes)
    zdot = rng.normal(size=m.n_coords)
    h = 1e-6
    xdot = (m.positions(z + h * zdot) - m.positions(z - h * zdot)).ravel() / (2 * h)
    tau = m.forces_to_coords(z, f)
    assert tau @ zdot == pytest.approx(f @ xdot, rel=1e-7)


def test_projected_stiffness_is_jt_k_j(chain: RigidChain) -> None:
    m, z = _mapping(chain, 4)
    rng = np.random.default_rng(5)
    a = rng.normal(size=(3 * m.n_nodes, 3 * m.n_nodes))
    k = a @ a.T
    kz = m.project_stiffness(z, k).toarray()
    j = m.jacobian(z).toarray()
    np.testing.assert_allclose(kz, j.T @ k @ j, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(kz, kz.T, atol=1e-9)


def test_projected_sparse_stiffness_keeps_one_pattern_and_adds_the_joint_diagonal(chain: RigidChain) -> None:
    """A sparse, non-symmetric K: J^T K J (+ the joint diagonal) at two configurations, on the
    same pattern (the factorization's analysis is kept); K with duplicate entries is refused."""
    m, z = _mapping(chain, 4)
    rng = np.random.default_rng(6)
    n = 3 * m.n_nodes
    k = sp.random(n, n, density=0.3, random_state=7, format="csr") + sp.identity(n, format="csr")
    kj = rng.uniform(1.0, 5.0, chain.nq)
    patterns = []
    for zz in (z, z + rng.normal(scale=0.1, size=z.size)):
        kz = m.project_stiffness(zz, k, joint_diagonal=kj)
        j = m.jacobian(zz).toarray()
        expected = j.T @ k.toarray() @ j
        expected[np.arange(chain.nq), np.arange(chain.nq)] += kj
        np.testing.assert_allclose(kz.toarray(), expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
        patterns.append((kz.indptr.copy(), kz.indices.copy()))
    assert np.array_equal(patterns[0][0], patterns[1][0]) and np.array_equal(patterns[0][1], patterns[1][1])
    dup = sp.csr_matrix((np.ones(2), np.array([0, 0]), np.r_[0, np.full(n, 2)]), shape=(n, n))
    with pytest.raises(ValueError, match="duplicate"):
        m.project_stiffness(z, dup)


def test_bad_input_is_one_line(chain: RigidChain) -> None:
    x0 = np.zeros((4, 3))
    with pytest.raises(SystemExit, match="frame 'nope'"):
        RigidMapping(chain, "nope", x0, [0], np.zeros(5))
    with pytest.raises(SystemExit, match="rigidified node"):
        RigidMapping(chain, "flange", x0, [9], np.zeros(5))
    with pytest.raises(SystemExit, match="q0 must have 5"):
        RigidMapping(chain, "flange", x0, [0], np.zeros(3))
    with pytest.raises(SystemExit, match="URDF not found"):
        RigidChain.from_urdf("no_such_robot")
