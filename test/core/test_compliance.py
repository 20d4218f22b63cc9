"""Compliance W: finite differences of forward equilibria, factor reuse accuracy, solvers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from soft_inverse_ros.bench.fem import box_robot
from soft_inverse_ros.core.model.compliance import compute_compliance
from soft_inverse_ros.core.model.linear_solvers import (
    FactorReuseSolver,
    available_solvers,
    gram_from_columns,
    make_solver,
)
from soft_inverse_ros.core.model.robot_model import RobotModel


@pytest.fixture(scope="module")
def box():
    desc, mesh = box_robot(400)
    return desc, mesh


def _fd_columns(model: RobotModel, lam0: np.ndarray, eps: float):
    """Central differences of equilibrium effector rows and strokes w.r.t. each effort."""
    cols_e, cols_a = [], []
    for j in range(model.n_actuators):
        out = []
        for sign in (1.0, -1.0):
            lam = lam0.copy()
            lam[j] += sign * eps
            model.equilibrate(lam)
            out.append((model.effector_position, model.actuator_stroke))
            model.equilibrate(lam0)
        cols_e.append((out[0][0] - out[1][0]) / (2 * eps))
        cols_a.append((out[0][1] - out[1][1]) / (2 * eps))
    return np.array(cols_e).T, np.array(cols_a).T


def test_w_matches_finite_differences_at_rest(box):
    desc, mesh = box
    desc = dataclasses.replace(desc, gravity=np.zeros(3))
    model = RobotModel.from_description(desc, mesh=mesh, solver="scipy", factor_reuse=False)
    lam0 = np.zeros(model.n_actuators)
    snap = model.snapshot(seq=0, stamp=0.0)
    w_ea, w_aa = _fd_columns(model, lam0, 1e-3)
    assert np.abs(snap.w_ea - w_ea).max() <= 1e-6 * np.abs(w_ea).max()
    assert np.abs(snap.w_aa - w_aa).max() <= 1e-6 * np.abs(w_aa).max()
    # the snapshot's linear prediction of an actuated equilibrium
    lam = np.array([0.002, 0.0, 0.001, 0.0])
    model.equilibrate(lam)
    pred_e = snap.w_ea @ lam + snap.effector_free
    pred_a = snap.w_aa @ lam + snap.delta_a_free
    assert np.abs(model.effector_position - pred_e).max() <= 1e-4 * np.abs(snap.w_ea @ lam).max()
    assert np.abs(model.actuator_stroke - pred_a).max() <= 1e-4 * np.abs(snap.w_aa @ lam).max()


def test_w_at_a_loaded_state_close_to_finite_differences(box):
    """Under gravity and pull, W uses the co-rotational tangent R K0 Rᵀ (like SOFA): it
    differs from the exact sensitivity by the neglected rotation and cable terms."""
    desc, mesh = box
    model = RobotModel.from_description(desc, mesh=mesh, solver="scipy", factor_reuse=False)
    lam0 = np.array([0.2, 0.0, 0.1, 0.0])
    model.equilibrate(lam0, from_rest=True)
    snap = model.snapshot(seq=1, stamp=0.0)
    assert np.allclose(snap.lambda0, lam0)
    w_ea, w_aa = _fd_columns(model, lam0, 1e-3)
    assert np.abs(snap.w_ea - w_ea).max() <= 0.1 * np.abs(w_ea).max()
    assert np.abs(snap.w_aa - w_aa).max() <= 0.1 * np.abs(w_aa).max()
    assert np.all(np.linalg.eigvalsh(snap.w_aa) > 0)


def test_factor_reuse_pcg_w_within_1e6_of_exact(box):
    desc, mesh = box
    model = RobotModel.from_description(desc, mesh=mesh, solver="scipy")
    model.equilibrate(np.zeros(4), from_rest=True)
    rng = np.random.default_rng(0)
    lam = np.zeros(4)
    for k in range(15):
        lam = np.clip(lam + rng.normal(scale=0.02, size=4), 0, None)
        before = model.positions.copy()
        _, snap = model.update(lam, seq=k, stamp=0.0)
        ev = model.statics.evaluate(before, lam)
        exact = compute_compliance(model.fem.stiffness(ev.state), ev.jacobian_t,
                                   model.effectors.jacobian_t(before), make_solver("scipy"))
        scale = max(np.abs(exact.w_aa).max(), np.abs(exact.w_ea).max())
        assert np.abs(snap.w_aa - exact.w_aa).max() <= 1e-6 * scale
        assert np.abs(snap.w_ea - exact.w_ea).max() <= 1e-6 * scale
        assert np.abs(snap.w_ee - exact.w_ee).max() <= 1e-6 * np.abs(exact.w_ee).max()
    assert isinstance(model.linear_solver, FactorReuseSolver)
    stats = model.linear_solver.stats
    assert stats.solves >= 15
    # the test is about factor reuse: some of these W came from PCG with an older factor
    assert stats.total_iterations > 0 and stats.factorizations < stats.solves, stats


def test_direct_solvers_agree(box):
    desc, mesh = box
    model = RobotModel.from_description(desc, mesh=mesh, solver="scipy", factor_reuse=False)
    k = model.fem.rest_stiffness()
    b = np.random.default_rng(1).normal(size=(k.shape[0], 3))
    names = available_solvers()
    assert "scipy" in names
    ref = None
    for name in names:
        s = make_solver(name)
        s.factorize(k)
        x = np.asarray(s.solve(b)).reshape(b.shape)
        assert np.abs(k @ x - b).max() <= 1e-9 * np.abs(b).max()
        ref = x if ref is None else ref
        assert np.allclose(x, ref, rtol=1e-8, atol=1e-12)
        k2 = k.copy()
        k2.data *= 2.0  # same pattern: numeric refactorization
        s.factorize(k2)
        assert np.allclose(np.asarray(s.solve(b)).reshape(b.shape), 0.5 * ref, rtol=1e-8, atol=1e-12)
    with pytest.raises(ValueError, match="unknown solver"):
        make_solver("nope")


def test_factor_reuse_solver_policies(box):
    desc, mesh = box
    model = RobotModel.from_description(desc, mesh=mesh, solver="scipy", factor_reuse=False)
    fem = model.fem
    k0 = fem.rest_stiffness()
    rng = np.random.default_rng(2)
    x = fem.rest_points + rng.normal(scale=2e-4, size=fem.rest_points.shape)
    k1 = fem.stiffness(fem.element_state(x))
    b = rng.normal(size=(k0.shape[0], 3))
    exact = make_solver("scipy")
    exact.factorize(k1)
    x_exact = exact.solve(b)
    for background in (False, True):
        s = FactorReuseSolver(make_solver("scipy"), rtol=1e-10, adaptive=False,
                              refactor_iterations=1, background=background)
        s.solve(k0, b)  # first solve factorizes k0
        assert s.stats.factorizations == 1 and s.stats.last_iterations == 0
        x1 = s.solve(k1, b)  # PCG with the k0 factor
        assert s.stats.last_iterations > 0
        assert np.abs(x1 - x_exact).max() <= 1e-8 * np.abs(x_exact).max()
        # per-column tolerances: a loose first column stops earlier but stays accurate enough
        x2 = s.solve(k1, b, rtol=np.array([1e-4, 1e-10, 1e-10]))
        assert np.abs(x2[:, 1:] - x_exact[:, 1:]).max() <= 1e-8 * np.abs(x_exact).max()
        if background and s._pending is not None:
            s._pending.join()
        s.solve(k1, b)
        assert s.stats.factorizations >= 2  # refactorized (after >1 iteration)


def _perturbed_stiffness(box, scale: float, seed: int):
    """(K at rest, K of a randomly perturbed state, rng) of the box robot."""
    desc, mesh = box
    fem = RobotModel.from_description(desc, mesh=mesh, solver="scipy", factor_reuse=False).fem
    rng = np.random.default_rng(seed)
    x = fem.rest_points + rng.normal(scale=scale, size=fem.rest_points.shape)
    return fem.rest_stiffness(), fem.stiffness(fem.element_state(x)), rng


def test_gram_columns_stop_on_their_energy_error(box):
    """Gram columns stop when the bound on Bᵀ K⁻¹ B's error is met, earlier than a residual
    test of the same accuracy, and the corrected product is second-order accurate."""
    k0, k1, rng = _perturbed_stiffness(box, 2e-4, 3)
    b = rng.normal(size=(k0.shape[0], 3))
    exact = make_solver("scipy")
    exact.factorize(k1)
    g_exact = b.T @ exact.solve(b)
    s = FactorReuseSolver(make_solver("scipy"), rtol=1e-10, adaptive=False, refactor_iterations=50,
                          gram_rtol=1e-8)
    s.solve(k0, b)  # factorizes k0: the reference
    x = s.solve(k1, b, gram=np.ones(3, bool))
    gram_iterations = s.stats.last_iterations
    assert gram_iterations > 0
    r = s.residual_block
    assert np.abs(r - (b - k1 @ x)).max() <= 1e-9 * np.abs(b).max()
    g = gram_from_columns(b, x, r)
    scale = np.abs(np.diag(g_exact)).max()
    assert np.abs(g - g_exact).max() <= 1e-8 * scale
    # the correction is what makes it accurate: Bᵀ X alone is first order in the residual
    assert np.abs(b.T @ x - g_exact).max() > 10 * np.abs(g - g_exact).max()
    s.solve(k1, b)  # a residual test at rtol 1e-10 needs more iterations than the bound
    assert s.stats.last_iterations > gram_iterations
    # the eigenvalues of the bound are below the true ones
    spectrum = s._spectrum(k1)
    true = np.linalg.eigvalsh(k1.toarray())
    assert np.all(1.0 / spectrum[1] <= true[:s.GRAM_MODES]) and 1.0 / spectrum[2] <= true[s.GRAM_MODES]


def test_gram_warm_start_within_the_bound_needs_no_solve(box):
    k0, k1, rng = _perturbed_stiffness(box, 2e-4, 4)
    b = rng.normal(size=(k0.shape[0], 2))
    exact = make_solver("scipy")
    exact.factorize(k1)
    x_exact = exact.solve(b)
    s = FactorReuseSolver(make_solver("scipy"), adaptive=False)
    s.solve(k0, b)
    x0 = x_exact * (1.0 + 1e-7)  # a start whose energy error is ~1e-14 of G's diagonal
    r0 = b - k1 @ x0
    x = s.solve(k1, b, x0, gram=np.ones(2, bool), residual0=r0)
    assert s.stats.last_iterations == 0
    assert np.array_equal(x, x0) and np.array_equal(s.residual_block, r0)
    # judged by the residual (rtol 1e-7: |r0| is ~1e-7 |b|) the same start iterates
    s.solve(k1, b, x0, rtol=1e-9)
    assert s.stats.last_iterations > 0


def test_gram_columns_fall_back_to_the_residual_test_without_an_estimate(box, monkeypatch):
    k0, k1, rng = _perturbed_stiffness(box, 2e-4, 5)
    b = rng.normal(size=(k0.shape[0], 2))
    s = FactorReuseSolver(make_solver("scipy"), rtol=1e-10, adaptive=False, refactor_iterations=50)
    monkeypatch.setattr(s, "_estimate_lowest_modes", lambda matrix: False)
    s.solve(k0, b)
    x = s.solve(k1, b, gram=np.ones(2, bool))
    assert np.linalg.norm(b - k1 @ x, axis=0).max() <= 1e-10 * np.linalg.norm(b, axis=0).max() * 1.01


def test_policy_keeps_the_probe_interval_and_estimates_only_once_pcg_pays(box, monkeypatch):
    """A PCG probe that wins does not reset the probe interval (only a PCG solve that was
    not a probe does), and the gram columns' spectrum is estimated only once a PCG solve
    has cost less than a refactorization (the cost comparison is forced here)."""
    k0, k1, rng = _perturbed_stiffness(box, 2e-4, 6)
    b = rng.normal(size=(k0.shape[0], 2))
    gram = np.ones(2, bool)
    s = FactorReuseSolver(make_solver("scipy"), rtol=1e-8, probe_every=2, refactor_iterations=50)
    estimates = []
    real = s._estimate_lowest_modes
    monkeypatch.setattr(s, "_estimate_lowest_modes", lambda m: estimates.append(1) or real(m))
    pcg_costs_more = [True]
    monkeypatch.setattr(s, "_pcg_costs_more", lambda: pcg_costs_more[0])
    s.solve(k0, b, gram=gram)  # factorizes
    s._t_factor = 1e3  # PCG is capped at a refactorization's measured cost: never here
    assert s.next_solve_is_direct()  # PCG dearer and no probe due
    s._probe_interval, s._since_probe = 8, 8  # a probe is due (after lost ones)
    s.solve(k1, b, gram=gram)
    assert s.stats.last_iterations > 0 and s.stats.factorizations == 1  # the probe won...
    assert s._probe_interval == 8 and estimates == []  # ...but PCG did not pay: no reset
    pcg_costs_more[0] = False
    s.solve(k1, b, gram=gram)  # PCG in its own right, cheaper: interval reset
    assert s.stats.last_iterations > 0 and s._probe_interval == 2 and estimates == []
    s.solve(k1, b, gram=gram)  # now the gram columns are worth the estimate
    assert estimates == [1]


@pytest.mark.parametrize("name, module", [("qdldl", "qdldl"), ("superlu_nd", "pymetis"), ("block_ldl", "numba")])
def test_ldl_block_solve_and_pattern_changes(box, name, module):
    pytest.importorskip(module)
    import scipy.sparse as sp

    desc, mesh = box
    model = RobotModel.from_description(desc, mesh=mesh, solver="scipy", factor_reuse=False)
    k = model.fem.rest_stiffness().tocsr()
    rng = np.random.default_rng(4)
    b = rng.normal(size=(k.shape[0], 8))
    s = make_solver(name)
    for matrix in (
        k,
        k + sp.diags(rng.uniform(1.0, 2.0, k.shape[0]) * k.diagonal()),  # same pattern, other values
        k + sp.diags(np.full(k.shape[0], 1e3)) + sp.eye(k.shape[0], k=3) * 1e-3 + sp.eye(k.shape[0], k=-3) * 1e-3,
    ):  # the last one has a new pattern: a new analysis
        s.factorize(matrix)
        x = s.solve(b)
        assert np.abs(matrix @ x - b).max() <= 1e-9 * np.abs(b).max()
        per_column = np.column_stack([s.solve(np.ascontiguousarray(c)) for c in b.T])  # the library's own solve
        np.testing.assert_allclose(x, per_column, rtol=1e-10, atol=1e-14 * np.abs(x).max())


def test_auto_solver_is_supernodal_for_large_meshes(box, monkeypatch):
    """``auto`` takes the node-block LDLᵀ when numba is there; without it, QDLDL for small
    systems and the nested-dissection SuperLU from SUPERNODAL_SIZE unknowns, whose ordering
    is a permutation with less fill than none."""
    pytest.importorskip("pymetis")
    pytest.importorskip("qdldl")
    from scipy.sparse.linalg import splu

    from soft_inverse_ros.core.model import block_ldl
    from soft_inverse_ros.core.model.linear_solvers import SUPERNODAL_SIZE, SuperLUNDSolver

    if {"cholmod", "pardiso"} & set(available_solvers()):
        pytest.skip("auto prefers CHOLMOD/PARDISO on this machine")
    if block_ldl.njit is not None:
        assert make_solver("auto", size=SUPERNODAL_SIZE - 1).name == "block_ldl"
        assert make_solver("auto", size=SUPERNODAL_SIZE).name == "block_ldl"
    monkeypatch.setattr(block_ldl, "njit", None)  # as without numba
    assert make_solver("auto", size=SUPERNODAL_SIZE - 1).name == "qdldl"
    assert make_solver("auto", size=SUPERNODAL_SIZE).name == "superlu_nd"
    assert make_solver("auto").name == "qdldl"
    desc, mesh = box
    k = RobotModel.from_description(desc, mesh=mesh, solver="scipy", factor_reuse=False).fem.rest_stiffness()
    perm = SuperLUNDSolver.nested_dissection(k.tocsr())
    assert np.array_equal(np.sort(perm), np.arange(k.shape[0]))
    options = dict(permc_spec="NATURAL", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
    assert splu(k[perm][:, perm].tocsc(), **options).L.nnz < splu(k.tocsc(), **options).L.nnz


def test_qdldl_block_solve_is_compiled_when_the_solver_is_built():
    """The block-solve kernel is compiled (or loaded from numba's cache) when the solver is
    built, at a node's start-up, not at its first block solve inside the running loop."""
    pytest.importorskip("qdldl")
    pytest.importorskip("numba")
    import subprocess
    import sys

    # a new process: in this one an earlier test may have compiled the kernel already
    code = ("from soft_inverse_ros.core.model.linear_solvers import make_solver\n"
            "s = make_solver('qdldl')\n"
            "print(len(s._block_solve.signatures))\n"
            "try:\n    s.solve([1.0, 1.0])\nexcept RuntimeError:\n    print('no factor left')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "no", "factor", "left"], out.stdout
