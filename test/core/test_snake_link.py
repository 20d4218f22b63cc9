"""The two-chamber bending link: mesh, constraints, curvature vs pressure."""

import numpy as np
import pytest

from soft_inverse_ros.core.snake.link_mesh import LinkGeometry, build_link_mesh
from soft_inverse_ros.core.snake.link_model import PSI, BendingLink
from soft_inverse_ros.core.snake.springs import SpringSet, spring_forces, spring_stiffness


def test_mesh_has_sections_and_two_chamber_voids():
    lm = build_link_mesh(LinkGeometry(sections=13))
    assert lm.grid_ids.shape[0] == 13
    full = 0.080 * 0.030 * 0.024
    chamber = 2 * 10 * (0.080 / 12) * (0.030 / 6) * (0.024 / 3)
    assert lm.mesh.total_volume == pytest.approx(full - chamber, rel=1e-9)
    assert np.all(lm.mesh.points[lm.centre_layer_ids().ravel(), 1] == pytest.approx(0.0, abs=1e-12))


def test_bad_geometry_is_rejected():
    with pytest.raises(ValueError):
        LinkGeometry(sections=2)


def test_spring_tangent_matches_finite_differences():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 3))
    s = SpringSet.between(x, [[0, 1], [1, 2], [3, 4], [0, 4]], 7.0)
    s = s.with_rest(s.rest * rng.uniform(0.5, 1.5, size=4))
    d = rng.normal(size=x.shape) * 1e-7
    df = (spring_forces(s, x + d) - spring_forces(s, x)).ravel()
    assert np.allclose(df, -spring_stiffness(s, x) @ d.ravel(), rtol=1e-4, atol=1e-12)


def test_pressure_bends_the_link_linearly_and_antagonistically():
    link = BendingLink(LinkGeometry(sections=7))
    yaws = [link.plate_yaw(link.solve(p * PSI)) for p in (0.0, 4.0, 8.0)]
    link.x = link.rest_points.copy()
    left = link.plate_yaw(link.solve(-8.0 * PSI))
    assert yaws[0] == pytest.approx(0.0, abs=1e-9)
    assert yaws[2] < 0 < left  # right chamber → negative yaw, left → positive
    assert yaws[2] == pytest.approx(2 * yaws[1], rel=0.02)  # linear in pressure
    assert abs(left + yaws[2]) < 0.05 * abs(left)  # symmetric within 5 %
