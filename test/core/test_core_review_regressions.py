"""Regressions found by reviewing soft_inverse_ros/core (one test per fixed bug)."""

import numpy as np

from soft_inverse_ros.core.model.fem import CorotationalFEM, polar_rotation


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
    np.testing.assert_allclose(states[0].forces, states[1].forces, rtol=1e-12,
                               atol=1e-12 * np.abs(states[0].forces).max())
    assert states[0].energy == states[1].energy


def test_looping_line_goes_back_and_forth_without_jumping():
    from soft_inverse_ros.core.control.trajectory import Trajectory, TrajectoryConfig

    line = Trajectory(TrajectoryConfig("line", (0.0, 0.0, 0.1), size=0.03, speed=0.01))
    assert line.lap_time == line.duration == 6.0  # out and back, no approach
    ts = np.arange(0.0, 4 * line.lap_time, 1e-2)
    p = np.array([line.position(t) for t in ts])
    steps = np.linalg.norm(np.diff(p, axis=0), axis=1)
    assert steps.max() <= 0.01 * 1e-2 * (1 + 1e-9)  # never faster than the speed (no jump)
    np.testing.assert_allclose(line.position(9.0), [0.03, 0.0, 0.1])


def test_snapshot_owns_its_arrays():
    from soft_inverse_ros.core.model.snapshot import ComplianceSnapshot

    lam, w_ea = np.zeros(1), np.ones((3, 1))
    snap = ComplianceSnapshot(0, 0.0, ("a",), (0,), ("x", "y", "z"), w_ea, np.ones((1, 1)),
                              np.eye(3), np.zeros(3), np.zeros(1), lam)
    assert lam.flags.writeable and w_ea.flags.writeable  # the caller's arrays are untouched
    lam[0], w_ea[0, 0] = 5.0, 7.0
    assert snap.lambda0[0] == 0.0 and snap.w_ea[0, 0] == 1.0
    assert not snap.w_ea.flags.writeable


def test_load_stiffness_takes_each_constraints_own_row_effort():
    from soft_inverse_ros.core.model.constraints import CableActuator, ConstraintSet, Effector
    from soft_inverse_ros.core.model.mapping import map_points

    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0], [1, 1, 1.0]])
    tets = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    free = np.arange(15)
    cable_pts = np.array([[0.2, 0.2, 0.2], [0.5, 0.4, 0.4]])
    cable = CableActuator("c", map_points(pts, tets, cable_pts), cable_pts, np.array([-1.0, 0, 0]))
    tip = Effector("tip", map_points(pts, tets, np.array([[0.3, 0.3, 0.3]])))
    x = pts + 0.01
    alone = ConstraintSet([cable], free).load_stiffness(x, [2.0]).toarray()
    mixed = ConstraintSet([tip, cable], free).load_stiffness(x, [0.0, 0.0, 0.0, 2.0])
    assert mixed is not None  # the cable's tension was read from the effector's rows before
    np.testing.assert_allclose(mixed.toarray(), alone)
