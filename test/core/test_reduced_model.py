"""The controller's reduced-order model (core/model/reduced_model.py): training, the
Galerkin compliance against the full model, the file, and its refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from soft_inverse_ros.bench.fem import box_robot
from soft_inverse_ros.core.model.compliance import compute_compliance
from soft_inverse_ros.core.model.linear_solvers import make_solver
from soft_inverse_ros.core.model.reduced_model import (
    ReducedRobotModel,
    ReductionError,
    _energy_pod,
    build_model_reduction,
    load_model_reduction,
    model_fingerprint,
    training_efforts,
)
from soft_inverse_ros.core.model.robot_model import RobotModel


def _box(nodes: int = 300, **kw) -> RobotModel:
    desc, mesh = box_robot(nodes, **kw)
    return RobotModel.from_description(desc, mesh=mesh)


@pytest.fixture(scope="module")
def trained():
    full = _box()
    reduction = build_model_reduction(full, samples=10, mode_tolerance=1e-6)
    return full, reduction


def _exact_w(full: RobotModel, positions: np.ndarray, efforts: np.ndarray):
    ev = full.statics.evaluate(positions, efforts)
    k = full.fem.stiffness(ev.state)
    _, je_t = full.effectors.values_and_jacobian_t(positions)
    return compute_compliance(k, ev.jacobian_t, je_t, make_solver("scipy"))


def _rel(a, b) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def test_reduced_w_is_exact_at_the_reference_state(trained):
    full, reduction = trained
    reduced = ReducedRobotModel(full, reduction)
    reduced.set_state(reduction.reference_positions, np.zeros(reduced.n_actuators))
    np.testing.assert_allclose(reduced.positions, reduction.reference_positions, atol=1e-12)
    exact = _exact_w(full, reduction.reference_positions, np.zeros(reduced.n_actuators))
    w = reduced.compliance()
    # the columns K⁻¹ Jᵀ at x_ref are training snapshots: in the span up to the dropped energy
    for block in ("w_aa", "w_ea", "w_ee"):
        assert _rel(getattr(w, block), getattr(exact, block)) < 1e-6


def test_held_out_efforts_follow_the_full_model(trained):
    full, reduction = trained
    reduced = ReducedRobotModel(full, reduction)
    reduced.equilibrate(np.zeros(reduced.n_actuators), from_rest=True)
    lam = training_efforts(full.actuator_limits(), 2, seed=7)[1]  # not a training vector
    full.equilibrate(lam)
    reduced.equilibrate(lam)
    moved = np.abs(full.positions - reduction.reference_positions).max()
    assert moved > 1e-4  # a real deformation (m)
    assert np.abs(reduced.effector_position - full.effector_position).max() < 1e-3 * moved
    exact = _exact_w(full, np.array(reduced.positions), lam)
    w = reduced.compliance()
    assert _rel(w.w_aa, exact.w_aa) < 1e-5 and _rel(w.w_ea, exact.w_ea) < 1e-5
    # the Galerkin W_aa is a lower bound of the exact one (energy of the dropped part)
    assert np.linalg.eigvalsh(exact.w_aa - w.w_aa).min() > -1e-12 * np.abs(exact.w_aa).max()


def test_update_advances_towards_the_reduced_equilibrium_and_snapshots_w(trained):
    full, reduction = trained
    reduced = ReducedRobotModel(full, reduction)
    reduced.equilibrate(np.zeros(reduced.n_actuators), from_rest=True)
    lam = np.array([1.0, 0.0, 0.5, 0.0])
    before = np.array(reduced.positions)
    info, snap = reduced.update(lam, seq=3, stamp=1.5)
    assert snap.seq == 3 and snap.stamp == 1.5
    assert snap.actuator_names == full.actuator_names and snap.effector_names == full.effector_names
    assert info.residual_norm < info.residual_before
    np.testing.assert_allclose(snap.lambda0, lam)
    np.testing.assert_allclose(snap.effector_position, reduced.effector_position)
    # W at the state the update started from (x_k), as the full model's update. set_state
    # projects the positions back onto the basis: round-off of order 1e-13 of max |W|
    # (machine-dependent BLAS); W at x_{k+1} differs by ~1e-3 here.
    reduced_at_k = ReducedRobotModel(full, reduction)
    reduced_at_k.set_state(before, lam)
    assert _rel(snap.w_aa, reduced_at_k.compliance().w_aa) < 1e-9
    reduced_at_k1 = ReducedRobotModel(full, reduction)
    reduced_at_k1.set_state(np.array(reduced.positions), lam)
    assert _rel(snap.w_aa, reduced_at_k1.compliance().w_aa) > 1e-6
    for _ in range(30):
        info, _ = reduced.update(lam, seq=4, stamp=2.0)
    target = ReducedRobotModel(full, reduction)
    target.equilibrate(lam, from_rest=True)
    np.testing.assert_allclose(reduced.positions, target.positions, atol=1e-9)


def test_reset_is_the_rest_shape(trained):
    full, reduction = trained
    reduced = ReducedRobotModel(full, reduction)
    reduced.equilibrate(np.array([1.0, 1.0, 0.0, 0.0]))
    reduced.reset()
    np.testing.assert_allclose(reduced.positions, full.fem.rest_points, atol=1e-12)
    assert not reduced.efforts.any()


def test_step_and_equilibrate_refuse_bad_efforts(trained):
    full, reduction = trained
    reduced = ReducedRobotModel(full, reduction)
    with pytest.raises(ValueError):
        reduced.step(np.array([np.nan, 0, 0, 0]))
    with pytest.raises(ValueError):
        reduced.update(np.zeros(3), seq=1, stamp=0.0)


def test_the_file_round_trips_and_refuses_another_model(trained, tmp_path):
    full, reduction = trained
    path = reduction.save(tmp_path / "box")
    assert path.suffix == ".npz"
    loaded = load_model_reduction(path, full)
    np.testing.assert_array_equal(loaded.basis, reduction.basis)
    assert loaded.training["samples_used"] == reduction.training["samples_used"]
    other = _box(young_modulus=200e3)
    assert model_fingerprint(other) != model_fingerprint(full)
    with pytest.raises(ReductionError, match="reduce-model"):
        load_model_reduction(path, other)
    with pytest.raises(ReductionError):
        ReducedRobotModel(other, reduction)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ReductionError, match="not an .npz archive"):
        load_model_reduction(tmp_path / "junk.npz")
    np.savez(tmp_path / "other.npz", basis=np.zeros(3))
    with pytest.raises(ReductionError, match="not a model reduction"):
        load_model_reduction(tmp_path / "other.npz")
    with pytest.raises(ReductionError, match="cannot read"):
        load_model_reduction(tmp_path / "missing.npz")


def test_contact_is_refused():
    full = _box()
    full.contact = object()  # any contact model
    with pytest.raises(ReductionError, match="contact"):
        build_model_reduction(full, samples=2)


def test_training_efforts_are_a_latin_hypercube_inside_the_ranges():
    limits = _box().actuator_limits()
    e = training_efforts(limits, 8, seed=1)
    lo, hi = limits.effort_min, limits.effort_max
    assert e.shape == (8, 4) and np.all(e >= lo) and np.all(e <= hi)
    strata = np.floor((e - lo) / (hi - lo) * 8).astype(int)
    for column in strata.T:  # each stratum once per actuator
        assert sorted(column) == list(range(8))
    np.testing.assert_array_equal(e, training_efforts(limits, 8, seed=1))
    unbounded = dataclasses.replace(limits, effort_max=np.full(4, np.inf))
    with pytest.raises(ReductionError, match="finite effort range"):
        training_efforts(unbounded, 4, seed=1, names=["a", "b", "c", "d"])


def test_energy_pod_keeps_each_snapshot_within_the_tolerance():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((60, 60))
    k = sp.csr_matrix(a @ a.T + 60 * np.eye(60))
    snapshots = rng.standard_normal((60, 5)) @ rng.standard_normal((5, 30)) + 1e-3 * rng.standard_normal((60, 30))
    for tol in (1e-2, 1e-9):
        modes, _ = _energy_pod(snapshots, k, tol, 100)
        np.testing.assert_allclose(modes.T @ modes, np.eye(modes.shape[1]), atol=1e-10)
        kd = k.toarray()
        # the energy-orthogonal projection's remainder, per unit-energy snapshot
        kr = modes.T @ kd @ modes
        for s in snapshots.T:
            s = s / np.sqrt(s @ kd @ s)
            proj = modes @ np.linalg.solve(kr, modes.T @ (kd @ s))
            rest = s - proj
            assert rest @ kd @ rest <= tol * (1 + 1e-9)
    assert _energy_pod(snapshots, k, 1e-2, 100)[0].shape[1] < _energy_pod(snapshots, k, 1e-9, 100)[0].shape[1]


def test_bad_options_are_refused():
    full = _box()
    for kw in ({"samples": 0}, {"mode_tolerance": 0.0}, {"max_modes": 0}, {"hyper_tolerance": -1.0}):
        with pytest.raises(ReductionError):
            build_model_reduction(full, **kw)


def test_the_compiled_and_the_scipy_tangent_agree(trained, monkeypatch):
    pytest.importorskip("numba")
    full, reduction = trained
    compiled = ReducedRobotModel(full, reduction)
    assert compiled._product is not None
    monkeypatch.setenv("SOFT_INVERSE_ROS_FEM_KERNELS", "numpy")
    reference = ReducedRobotModel(full, reduction)
    assert reference._product is None
    lam = np.array([0.5, 1.0, 0.0, 0.2])
    compiled.equilibrate(lam)
    reference.set_state(compiled.positions, lam)
    np.testing.assert_allclose(compiled._tangent(compiled._ev), reference._tangent(reference._ev),
                               rtol=1e-12, atol=1e-12 * np.abs(reference._tangent(reference._ev)).max())
    # the compiled Φ q and Φᵀ f: the same state and reduced forces
    assert np.abs(compiled._ev.positions - reference._ev.positions).max() < 1e-15
    assert _rel(compiled._ev.elastic_r, reference._ev.elastic_r) < 1e-10


def test_the_upper_blocks_are_the_stiffness_and_their_product_gives_the_projection():
    pytest.importorskip("numba")
    from soft_inverse_ros.core.model.fem import CorotationalFEM
    from soft_inverse_ros.core.model.projection_kernels import upper_blocks_times_dense

    full = _box(nodes=120)
    rng = np.random.default_rng(0)
    x = full.fem.rest_points + 2e-3 * rng.standard_normal(full.fem.rest_points.shape)
    compiled = full.fem
    reference = CorotationalFEM(compiled.rest_points, compiled.tets, compiled.young_modulus,
                                compiled.poisson_ratio, fixed_nodes=np.flatnonzero(compiled.fixed_mask),
                                kernels="numpy")
    k = compiled.stiffness(compiled.element_state(x))
    upper = compiled.upper_block_stiffness(compiled.element_state(x))
    scale = np.abs(k.data).max()
    assert np.abs(upper.to_csr() - k).max() < 1e-12 * scale
    from_csr = reference.upper_block_stiffness(reference.element_state(x))
    np.testing.assert_array_equal(from_csr.block_cols, upper.block_cols)
    assert np.abs(from_csr.blocks - upper.blocks).max() < 1e-12 * scale
    rows = np.repeat(np.arange(len(upper.block_ptr) - 1), np.diff(upper.block_ptr))
    assert np.all(upper.block_cols >= rows) and np.all(upper.block_cols[upper.block_ptr[:-1]] == rows[upper.block_ptr[:-1]])
    phi = rng.standard_normal((k.shape[0], 7))
    m = np.zeros((7, 7))
    blocks = k.shape[0] // 3
    for b0, b1 in ((0, 4), (4, blocks - 1), (blocks - 1, blocks)):  # in chunks of node rows
        out = np.empty((3 * (b1 - b0), 7))
        upper_blocks_times_dense(upper.block_ptr, upper.block_cols, upper.blocks, phi, b0, b1, out)
        m += phi[3 * b0:3 * b1].T @ out
    assert _rel(m + m.T, phi.T @ (k @ phi)) < 1e-12 * blocks


def test_hyper_reduced_training_samples_elements_and_a_tighter_sample_errs_less(trained):
    full, _ = trained
    lam = np.array([1.0, 0.0, 0.0, 0.0])
    errors, sizes = [], []
    for tolerance in (0.05, 0.002):
        reduction = build_model_reduction(full, samples=6, mode_tolerance=1e-4, hyper_tolerance=tolerance)
        assert reduction.hyper_reduced and reduction.training["hyper_training_error"] <= tolerance
        sizes.append(reduction.hyper_elements.size)
        reduced = ReducedRobotModel(full, reduction)
        reduced.equilibrate(lam, from_rest=True)
        full.equilibrate(lam)
        errors.append(np.abs(reduced.effector_position - full.effector_position).max())
    assert 0 < sizes[0] < sizes[1] < full.fem.n_elements
    assert errors[1] < errors[0]


def test_training_efforts_beyond_the_stroke_limits_are_halved():
    from soft_inverse_ros.core.model.reduced_model import equilibrium_within_limits

    full = _box()
    full.equilibrate(np.zeros(4), from_rest=True)
    start = np.array(full.positions)
    slack = full.actuator_stroke[0]
    limits = full.actuator_limits()
    lam = np.array([2.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(equilibrium_within_limits(full, lam, limits, start), lam)
    reached = full.actuator_stroke[0]
    assert reached > slack  # pulling shortens the cable
    bound = slack + 0.4 * (reached - slack)
    tight = dataclasses.replace(limits, stroke_max=np.array([bound, np.inf, np.inf, np.inf]))
    used = equilibrium_within_limits(full, lam, tight, start)
    assert used is not None and 0 < used[0] <= 0.5 * lam[0]
    assert full.actuator_stroke[0] <= bound
    none = dataclasses.replace(limits, stroke_max=np.full(4, -1.0))  # nothing is within
    assert equilibrium_within_limits(full, lam, none, start) is None
    np.testing.assert_allclose(full.positions, start)


def _edited(path, tmp_path, name, drop=(), **changes):
    """A copy of the reduction file at ``path`` with entries replaced or dropped."""
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files if k not in drop}
    arrays.update(changes)
    out = tmp_path / name
    np.savez(out, **arrays)
    return out


def test_damaged_or_edited_files_are_refused_with_one_line(trained, tmp_path):
    full, reduction = trained
    path = reduction.save(tmp_path / "good.npz")
    data = path.read_bytes()
    (tmp_path / "half.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ReductionError, match="damaged .npz"):
        load_model_reduction(tmp_path / "half.npz")
    np.save(tmp_path / "plain.npy", reduction.basis)
    (tmp_path / "plain.npy").rename(tmp_path / "plain.npz")
    with pytest.raises(ReductionError, match="not an .npz archive"):
        load_model_reduction(tmp_path / "plain.npz")
    phi, x_ref = reduction.basis, reduction.reference_positions
    nan_basis = phi.copy()
    nan_basis[0, 0] = np.nan
    cases = [
        ({"format": np.array([1, 1])}, "format entry"),
        ({"format": np.array(1.9)}, "format entry"),
        ({"basis": phi[:, 0]}, "not \\(DOFs, r >= 1\\)"),
        ({"basis": phi[:, :0]}, "r >= 1"),
        ({"basis": nan_basis}, "not finite"),
        ({"basis": 1e6 * phi}, "not orthonormal"),
        ({"reference_positions": x_ref + 0.05}, "checksum"),
        ({"training_samples": np.arange(3)}, "not a scalar"),
        ({"hyper_elements": np.array([0, 5]), "hyper_weights": np.ones(2)}, "element sample has"),
    ]
    for i, (changes, needle) in enumerate(cases):
        with pytest.raises(ReductionError, match=needle):
            load_model_reduction(_edited(path, tmp_path, f"edit{i}.npz", **changes), full)
    # without the checksum (a file of an older version), the model's own checks still hold
    for i, shift in enumerate((np.array([0.05, 0.0, 0.0]), None)):
        moved = x_ref + shift if shift is not None else x_ref.copy()
        if shift is None:  # the free nodes off the equilibrium, the clamped ones in place
            moved[~full.fem.fixed_mask] += 1e-3 * reduction.basis[:, 1].reshape(-1, 3) / np.abs(reduction.basis[:, 1]).max()
        edited = _edited(path, tmp_path, f"ref{i}.npz", drop=("contents_sha256",), reference_positions=moved)
        with pytest.raises(ReductionError, match="not the equilibrium under gravity of robot 'box_"):
            ReducedRobotModel(full, load_model_reduction(edited, full))
    far = _edited(path, tmp_path, "far.npz", drop=("contents_sha256",), hyper_elements=np.array([0, 10**6]),
                  hyper_weights=np.ones(2), hyper_offset=np.zeros(reduction.size))
    with pytest.raises(ReductionError, match="outside the mesh"):
        load_model_reduction(far, full)
    old = _edited(path, tmp_path, "old.npz", drop=("contents_sha256", "trained_effort_range",
                                                   "trained_stroke_range"))
    loaded = load_model_reduction(old, full)
    assert loaded.trained_effort_range.shape == (2, 0)
    np.testing.assert_array_equal(loaded.basis, phi)


def test_actuator_limits_beyond_the_trained_ranges_are_refused(trained):
    import dataclasses

    from soft_inverse_ros.core.model.reduced_model import check_reduction_fits

    full, reduction = trained
    limits = full.actuator_limits()
    np.testing.assert_array_equal(reduction.trained_effort_range, np.vstack((limits.effort_min, limits.effort_max)))
    np.testing.assert_array_equal(reduction.trained_stroke_range, np.vstack((limits.stroke_min, limits.stroke_max)))
    check_reduction_fits(reduction, full)
    narrower = dataclasses.replace(reduction, trained_effort_range=0.5 * reduction.trained_effort_range)
    with pytest.raises(ReductionError, match="effort within"):
        check_reduction_fits(narrower, full)
    with pytest.raises(ReductionError, match="effort within"):
        ReducedRobotModel(full, narrower)
    shorter = dataclasses.replace(reduction, trained_stroke_range=0.5 * reduction.trained_stroke_range)
    with pytest.raises(ReductionError, match="stroke within"):
        check_reduction_fits(shorter, full)
    wider = dataclasses.replace(reduction, trained_effort_range=2.0 * reduction.trained_effort_range)
    check_reduction_fits(wider, full)  # the model's limits inside the trained ranges


def test_an_element_sample_that_leaves_the_tangent_singular_is_refused(trained, monkeypatch):
    import soft_inverse_ros.core.sim.hyper_reduction as hyper

    full, _ = trained
    real = hyper.build_ecsw

    def one_element(fem, basis, x_eq, configurations, tolerance, max_elements=None):
        return real(fem, basis, x_eq, configurations, tolerance, max_elements=1)

    monkeypatch.setattr(hyper, "build_ecsw", one_element)
    with pytest.raises(ReductionError, match="singular at the reduction's reference state .its element sample: 1 of"):
        build_model_reduction(full, samples=4, mode_tolerance=1e-4, hyper_tolerance=0.05)


def test_a_file_with_a_singular_sample_or_pickled_objects_is_refused(trained, tmp_path, monkeypatch):
    """Files an older version could write (no check at training) or another tool wrote."""
    import soft_inverse_ros.core.sim.hyper_reduction as hyper

    full, reduction = trained
    sample = hyper.build_ecsw(full.fem, reduction.basis, reduction.reference_positions,
                              [reduction.reference_positions + full.fem.expand(1e-3 * reduction.basis[:, 1])],
                              0.5, max_elements=1)
    path = reduction.save(tmp_path / "good.npz")
    singular = _edited(path, tmp_path, "one.npz", drop=("contents_sha256",), hyper_elements=sample.elements,
                       hyper_weights=sample.weights, hyper_offset=sample.offset)
    with pytest.raises(ReductionError, match="singular at the reduction's reference state .its element sample: 1 of"):
        ReducedRobotModel(full, load_model_reduction(singular, full))
    pickled = _edited(path, tmp_path, "objects.npz", basis=np.array([object()], dtype=object))
    with pytest.raises(ReductionError, match="pickled Python objects"):
        load_model_reduction(pickled)
