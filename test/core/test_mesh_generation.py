"""Generated meshes: structured boxes and the built-in Diamond-like robot."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.model.mesh_generation import DIAMOND_DEFAULTS, box_mesh, diamond_robot_mesh


def test_box_mesh_volume_is_exact_and_tets_positive() -> None:
    m = box_mesh((0.3, 0.2, 0.1), (6, 4, 3), origin=(1.0, -1.0, 0.5))
    assert m.n_points == 7 * 5 * 4 and m.n_tets == 6 * 6 * 4 * 3
    assert m.total_volume == pytest.approx(0.3 * 0.2 * 0.1, rel=1e-12)
    assert np.all(m.volumes() > 0)
    lo, hi = m.bounding_box()
    np.testing.assert_allclose(lo, [1.0, -1.0, 0.5])
    np.testing.assert_allclose(hi, [1.3, -0.8, 0.6])


def test_box_mesh_is_conforming() -> None:
    # Non-conforming neighbours would leave interior faces counted once as "boundary".
    m = box_mesh((1.0, 1.0, 1.0), (3, 3, 3))
    assert len(m.boundary_faces()) == 6 * 3 * 3 * 2
    count, _ = m.face_components()
    assert count == 1
    assert m.quality().min() > 0.5


def test_box_mesh_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="positive"):
        box_mesh((1.0, 0.0, 1.0), (1, 1, 1))
    with pytest.raises(ValueError, match="divisions"):
        box_mesh((1.0, 1.0, 1.0), (1, 0, 1))


@pytest.fixture(scope="module")
def diamond():
    return diamond_robot_mesh()


def test_builtin_diamond_size_and_quality(diamond) -> None:
    assert 1500 <= diamond.n_points <= 2200
    assert np.all(diamond.volumes() > 0)
    assert diamond.quality().min() > 0.5
    count, _ = diamond.face_components()
    assert count == 1  # one piece, connected through faces (not just edges or nodes)
    assert diamond.report.dropped_nodes == 0


def test_builtin_diamond_geometry_matches_the_sofa_layout(diamond) -> None:
    mm = 1e-3
    fixed_box = (np.array([-15, -15, -40]) * mm, np.array([15, 15, 10]) * mm)
    in_box = np.all((diamond.points >= fixed_box[0]) & (diamond.points <= fixed_box[1]), axis=1)
    assert in_box.sum() >= 20
    knees = np.array([[0, 97, 45], [-97, 0, 45], [0, -97, 45], [97, 0, 45]]) * mm
    effector = np.array([[0, 0, 125]]) * mm
    assert diamond.contains(knees).all()
    assert diamond.contains(effector).all()
    # the cables are pulled from the hollow inside the diamond, not from the material
    pulls = np.array([[0, 10, 30], [-10, 0, 30], [0, -10, 30], [10, 0, 30]]) * mm
    assert not diamond.contains(pulls).any()
    # four-fold symmetric node cloud
    p = np.round(diamond.points / mm, 6)
    rotated = p @ np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1]]).T
    assert {tuple(r) for r in rotated} == {tuple(r) for r in p}


def test_builtin_diamond_is_deterministic_and_parametric(diamond) -> None:
    again = diamond_robot_mesh()
    np.testing.assert_array_equal(again.points, diamond.points)
    np.testing.assert_array_equal(again.tets, diamond.tets)
    finer = diamond_robot_mesh(cell_size=DIAMOND_DEFAULTS["cell_size"] * 0.9)
    assert finer.n_points > diamond.n_points
    with pytest.raises(ValueError, match="unknown diamond parameter"):
        diamond_robot_mesh(cel_size=0.005)
