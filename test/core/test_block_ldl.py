"""The node-block LDLᵀ (core/model/block_ldl.py, ``solver: block_ldl``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from soft_inverse_ros.core.model import block_ldl
from soft_inverse_ros.core.model.linear_solvers import BlockLDLSolver, ConvergenceError, make_solver

pytestmark = pytest.mark.skipif(block_ldl.njit is None, reason="block_ldl needs numba")


def _spd_blocks(nb: int, seed: int) -> sp.csr_matrix:
    """A random SPD matrix over nb node triples with a random sparse node graph."""
    rng = np.random.default_rng(seed)
    g = sp.random(nb, nb, density=3.0 / nb, random_state=seed, format="csr")
    g = ((g + g.T) > 0).astype(float)
    blocks = sp.kron(g, np.ones((3, 3)), format="csr")
    blocks.data = rng.standard_normal(blocks.nnz)
    a = blocks + blocks.T
    return sp.csr_matrix(a + sp.diags(np.asarray(abs(a).sum(axis=1)).ravel() + 1.0))


@pytest.mark.parametrize("order", ["amd", "metis", "rcm", "best"])
def test_it_solves_random_block_systems_in_every_ordering(order, monkeypatch):
    if order == "metis":
        pytest.importorskip("pymetis")
    if order == "amd":
        pytest.importorskip("qdldl")
    monkeypatch.setattr(block_ldl, "symbolic", lambda g, o="best", _f=block_ldl.symbolic: _f(g, order))
    a = _spd_blocks(60, 3)
    b = np.random.default_rng(0).standard_normal((a.shape[0], 5))
    s = BlockLDLSolver()
    s.factorize(a)
    x = s.solve(b)
    np.testing.assert_allclose(a @ x, b, atol=1e-10 * np.abs(b).max())
    np.testing.assert_allclose(s.solve(b[:, 0]), x[:, 0], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("solver", ["block_ldl", "qdldl", "scipy"])
def test_the_quadratic_form_is_bt_k_inverse_b(solver):
    """Bᵀ K⁻¹ B from the forward substitution alone (block LDLᵀ) or a whole solve (the others),
    symmetric; the interpreted forward kernel gives the compiled one's result."""
    if solver == "qdldl":
        pytest.importorskip("qdldl")
    a = _spd_blocks(40, 7)
    b = np.random.default_rng(2).standard_normal((a.shape[0], 6))
    s = make_solver(solver)
    s.factorize(a)
    w = s.quadratic_form(b)
    expected = b.T @ np.linalg.solve(a.toarray(), b)
    np.testing.assert_allclose(w, expected, rtol=1e-9, atol=1e-12 * np.abs(expected).max())
    np.testing.assert_allclose(w, w.T, atol=1e-14 * np.abs(w).max())
    if solver == "block_ldl":
        dofs, *_, colptr, rows = s._symbolic
        compiled = block_ldl.forward_blocks(colptr, rows, s._l_vals, dofs, b)
        interpreted = block_ldl.forward_blocks_py(colptr, rows, s._l_vals, dofs, b)
        np.testing.assert_allclose(compiled, interpreted, rtol=1e-12, atol=1e-14)


def test_the_compiled_and_interpreted_factors_agree():
    """The Python loops (the kernels' source) give the compiled kernels' factor and solve."""
    a = _spd_blocks(30, 5)
    a.sort_indices()
    perm, colptr, rows = block_ldl.symbolic(block_ldl.node_pattern(a), "rcm")
    a_colptr, a_rows, a_pos = block_ldl.gather_index(a, perm)
    out = []
    for factorize, solve in ((block_ldl.factorize_blocks, block_ldl.solve_blocks),
                             (block_ldl.factorize_blocks_py, block_ldl.solve_blocks_py)):
        l_vals, d, d_inv = np.zeros((rows.size, 3, 3)), np.zeros((30, 3, 3)), np.zeros((30, 3, 3))
        assert factorize(a.data, a_colptr, a_rows, a_pos, colptr, rows, l_vals, d, d_inv) == -1
        dofs = (3 * perm[:, None] + np.arange(3)).ravel()
        out.append((l_vals, d, solve(colptr, rows, l_vals, d_inv, dofs, np.ones((90, 2)))))
    for compiled, interpreted in zip(*out):
        np.testing.assert_allclose(compiled, interpreted, rtol=1e-12, atol=1e-14)


def test_a_singular_matrix_is_one_clear_error_and_other_sizes_go_to_qdldl():
    pytest.importorskip("qdldl")
    s = BlockLDLSolver()
    singular = sp.csr_matrix(np.kron(np.ones((2, 2)), np.eye(3)))  # two identical node rows
    with pytest.raises(ConvergenceError, match="singular"):
        s.factorize(singular)
    odd = sp.csr_matrix(np.eye(7) * 2.0)  # not node triples (a hybrid system's joints)
    s.factorize(odd)
    assert s.name == "qdldl"
    np.testing.assert_allclose(s.solve(np.ones(7)), 0.5)
    s.factorize(_spd_blocks(10, 1))
    assert s.name == "block_ldl"


def test_the_fem_stiffness_factor_matches_scipy():
    """The box robot's K at rest, and after its values change on the same pattern."""
    from scipy.sparse.linalg import spsolve

    from soft_inverse_ros.bench.fem import box_robot
    from soft_inverse_ros.core.model.robot_model import RobotModel

    desc, mesh = box_robot(400)
    k = RobotModel.from_description(desc, mesh=mesh, solver="scipy", factor_reuse=False).fem.rest_stiffness().tocsr()
    s = make_solver("block_ldl")
    b = np.random.default_rng(2).standard_normal(k.shape[0])
    for matrix in (k, k + sp.diags(k.diagonal() * 0.5)):
        s.factorize(matrix)
        np.testing.assert_allclose(s.solve(b), spsolve(matrix.tocsc(), b), rtol=1e-9, atol=1e-12 * np.abs(spsolve(matrix.tocsc(), b)).max())
