"""The compiled self-collision narrow phase (core/contact/narrow_phase.py) gives the
contacts the detection's numpy path gives."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.contact import geometry
from soft_inverse_ros.core.contact.geometry import SelfCollision
from soft_inverse_ros.core.contact.narrow_phase import box_candidates, narrow_phase
from soft_inverse_ros.core.model.mesh_generation import box_mesh


def _both(detector: SelfCollision, x: np.ndarray, alarm: float, depth: float, monkeypatch):
    """(compiled, numpy path) contacts; the compiled path with the detector's broad phase,
    and checked equal with ipctk's broad phase too."""
    compiled = detector.contacts(x, alarm, depth)
    with monkeypatch.context() as m:
        m.setattr(detector, "brute_force", not detector.brute_force)
        _same(detector.contacts(x, alarm, depth), compiled)
    with monkeypatch.context() as m:
        m.setattr(geometry, "narrow_phase", None)
        m.setattr(detector, "brute_force", False)
        numpy_path = detector.contacts(x, alarm, depth)
    return compiled, numpy_path


def _same(a, b) -> None:
    np.testing.assert_array_equal(a.vertex, b.vertex)
    np.testing.assert_array_equal(a.other, b.other)
    np.testing.assert_allclose(a.weights, b.weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.normals, b.normals, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.gaps, b.gaps, rtol=0, atol=1e-15)
    np.testing.assert_allclose(a.rows.toarray(), b.rows.toarray(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.points, b.points, rtol=0, atol=1e-15)


def _boxes_by_every_pair(x, faces, radius):
    """Every (vertex, triangle) pair tested: the broad phase's definition."""
    lo = x[faces].min(axis=1) - radius
    hi = x[faces].max(axis=1) + radius
    inside = np.all((lo[:, None, :] <= x[None]) & (x[None] <= hi[:, None, :]), axis=2)  # (F, S)
    inside[np.arange(len(faces))[:, None], faces] = False  # a triangle's own corners
    f, v = np.nonzero(inside)  # by triangle, then vertex
    return v, f


@pytest.mark.skipif(box_candidates is None, reason="numba is not installed: ipctk's broad phase runs instead")
def test_the_sweep_broad_phase_finds_every_pair_in_the_grown_boxes():
    """The sorted sweep against testing every pair, in the same order: small random
    triangles over an elongated cloud (the sweep along its long axis, y), coordinates
    tied along it, a vertex with a NaN coordinate (in no box), radius 0 and larger."""
    rng = np.random.default_rng(11)
    x = rng.random((300, 3)) * np.array([0.01, 0.08, 0.02])
    x[20:40, 1] = x[0, 1]  # ties along the sweep axis
    x[57, 2] = np.nan
    near = np.argsort(x[:, 1])  # triangles of vertices near each other along y
    near = near[near != 57]  # (a triangle with a NaN corner has no defined box)
    faces = np.array([near[i:i + 3] for i in rng.integers(0, 296, 500)])
    for radius in (0.0, 0.002, 0.01):
        v, f = box_candidates(x, faces, radius)
        v_ref, f_ref = _boxes_by_every_pair(x, faces, radius)
        assert v_ref.size > 100
        np.testing.assert_array_equal(f, f_ref)
        np.testing.assert_array_equal(v, v_ref)
        assert 57 not in v


@pytest.mark.skipif(narrow_phase is None, reason="numba is not installed: the numpy path is the only one")
def test_the_compiled_narrow_phase_finds_the_numpy_paths_contacts(monkeypatch):
    """A thin slab whose faces lie within the search band of each other, shaken: hundreds
    of candidate pairs, exclusions, vertices over shared edges; both paths agree."""
    mesh = box_mesh((0.02, 0.02, 0.002), (8, 8, 1))
    detector = SelfCollision(mesh.boundary_faces(), mesh.points)
    assert detector.brute_force  # a small surface: both phases compiled
    rng = np.random.default_rng(4)
    seen = 0
    for trial in range(40):
        # shaken a little (faces still opposite), then crumpled (normals every way: the
        # facing test and the barycentric bounds decide)
        noise = 2e-4 if trial < 20 else 1.2e-3
        x = mesh.points + noise * rng.standard_normal(mesh.points.shape)
        compiled, numpy_path = _both(detector, x, 1e-3, 3e-3, monkeypatch)
        _same(compiled, numpy_path)
        seen += compiled.size
    assert seen > 100


@pytest.mark.skipif(narrow_phase is None, reason="numba is not installed: the numpy path is the only one")
def test_the_finger_pulled_until_its_notches_close(sofa_data, monkeypatch):
    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))
    from soft_inverse_ros.experiments.self_collision import _plant

    plant = _plant(1e5, 0.01)
    detector = SelfCollision(plant.surface_faces(), plant.fem.rest_points)
    seen = 0
    for k in range(0, 1161, 5):
        plant.step(cable_strokes=[k * 0.05e-3])
        if k >= 900:
            compiled, numpy_path = _both(detector, plant.positions, 1.5e-3, 3e-3, monkeypatch)
            _same(compiled, numpy_path)
            seen += compiled.size
    assert seen > 20


def test_contact_rows_built_directly_equal_the_coo_build():
    """geometry._rows builds H's CSR directly when every row is alike; the COO build (mixed
    rows, a vertex of its own triangle) is the reference."""
    rng = np.random.default_rng(2)
    n, m = 60, 25
    for case in ("self", "obstacle", "mixed", "own triangle"):
        vertex = rng.choice(n, m, replace=False)
        other = np.stack([rng.choice(np.setdiff1d(np.arange(n), [v]), 3, replace=False) for v in vertex])
        if case == "obstacle":
            other[:] = -1
        elif case == "mixed":
            other[::3] = -1
        elif case == "own triangle":
            other[0, 1] = vertex[0]
        weights, normals = rng.random((m, 3)), rng.standard_normal((m, 3))
        rows = geometry._rows(vertex, other, weights, normals, n)
        reference = geometry._rows_coo(vertex, other, weights, normals, n)
        assert rows.shape == (m, 3 * n) and rows.has_sorted_indices
        np.testing.assert_array_equal(rows.toarray(), reference.toarray())


def test_the_contact_thread_setting_limits_ipctks_broad_phase(monkeypatch):
    """SOFT_INVERSE_ROS_CONTACT_THREADS (1 in the node processes and the experiments) sets
    ipctk's thread count when a detector is built; a bad value is one clear error."""
    import ipctk

    mesh = box_mesh((0.02, 0.02, 0.002), (2, 2, 1))
    monkeypatch.setenv(geometry.CONTACT_THREADS_ENV, "1")
    SelfCollision(mesh.boundary_faces(), mesh.points)
    assert ipctk.get_num_threads() == 1
    for bad in ("0", "two"):
        monkeypatch.setenv(geometry.CONTACT_THREADS_ENV, bad)
        with pytest.raises(ValueError, match="SOFT_INVERSE_ROS_CONTACT_THREADS must be a positive integer"):
            SelfCollision(mesh.boundary_faces(), mesh.points)
