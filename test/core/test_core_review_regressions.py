"""Regressions found by reviewing soft_inverse_ros/core (one test per fixed bug)."""

import numpy as np

from soft_inverse_ros.core.fem import CorotationalFEM, polar_rotation


def test_polar_rotation_when_every_element_needs_the_svd_path():
    # numpy path: no element left for the Newton iteration (all inverted) used to raise
    rot, n_fallback = polar_rotation(np.diag([1.0, 1.0, -1.0])[None])
    assert n_fallback == 1
    assert np.isclose(np.linalg.det(rot[0]), 1.0)
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]])
    x = pts.copy()
    x[3, 2] = -1.0  # the only element is inverted
    states = [
        CorotationalFEM(pts, np.array([[0, 1, 2, 3]]), 1e5, 0.3, fixed_nodes=[0, 1, 2],
                        kernels=k).element_state(x)
        for k in ("numpy", "auto")
    ]
    for s in states:
        assert s.svd_fallbacks == 1 and np.all(np.isfinite(s.forces))
    np.testing.assert_allclose(states[0].forces, states[1].forces, rtol=1e-12)
    assert states[0].energy == states[1].energy
