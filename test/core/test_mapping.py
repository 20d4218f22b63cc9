"""Barycentric mapping of points into a tetrahedral mesh."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from soft_inverse_ros.core.model.mapping import MappingError, map_points
from soft_inverse_ros.core.model.mesh_generation import box_mesh


@pytest.fixture(scope="module")
def mesh():
    m = box_mesh((0.04, 0.02, 0.02), (4, 2, 2))
    return np.array(m.points), np.array(m.tets)


def test_inside_points_reproduce_positions_and_follow_the_mesh(mesh):
    points, tets = mesh
    rng = np.random.default_rng(0)
    query = rng.uniform([0, 0, 0], [0.04, 0.02, 0.02], size=(50, 3))
    query[0] = points[7]  # exactly on a node
    query[1] = [0.04, 0.01, 0.01]  # on the boundary
    m = map_points(points, tets, query)
    assert np.allclose(m.apply(points), query, atol=1e-14)
    assert np.all(m.weights >= 0) and np.allclose(m.weights.sum(1), 1)
    assert np.all(m.distances == 0)
    # affine motion of the mesh moves mapped points the same way
    a = np.array([[1.1, 0.2, 0], [0, 0.9, 0.1], [0.05, 0, 1.0]])
    moved = points @ a.T + 0.3
    assert np.allclose(m.apply(moved), query @ a.T + 0.3, atol=1e-14)
    # the interpolation matrix is the same map
    phi = m.matrix()
    assert phi.shape == (150, 3 * len(points))
    assert np.allclose(phi @ moved.ravel(), m.apply(moved).ravel(), atol=1e-14)
    v = rng.normal(size=(50, 3))
    assert np.allclose(m.transpose_apply(v).ravel(), phi.T @ v.ravel())


def test_point_slightly_outside_maps_to_nearest_with_warning(mesh, caplog):
    points, tets = mesh
    with caplog.at_level(logging.WARNING, logger="soft_inverse_ros.core.model.mapping"):
        m = map_points(points, tets, [[0.0405, 0.01, 0.01]], name="cable c1")
    assert "cable c1" in caplog.text and "outside the mesh" in caplog.text
    assert m.distances[0] == pytest.approx(0.0005, rel=1e-6)
    assert np.allclose(m.apply(points), [[0.04, 0.01, 0.01]])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="soft_inverse_ros.core.model.mapping"):
        many = map_points(points, tets, [[0.0405, 0.01, 0.01], [0.0402, 0.02, 0.01], [0.02, 0.02, 0.02]],
                          name="surface vertex")
    lines = [r for r in caplog.records if "outside the mesh" in r.getMessage()]
    assert len(lines) == 1 and "2 surface vertex(s)" in lines[0].getMessage()  # one line, not one per point
    assert "#0" in lines[0].getMessage() and np.count_nonzero(many.distances) == 2


def test_point_far_outside_raises_clear_error(mesh):
    points, tets = mesh
    with pytest.raises(MappingError, match=r"effector tip #1 .* outside the mesh .*units"):
        map_points(points, tets, [[0.01, 0.01, 0.01], [0.5, 0.01, 0.01]], name="effector tip")
    with pytest.raises(ValueError, match="finite"):
        map_points(points, tets, [[np.nan, 0, 0]])
