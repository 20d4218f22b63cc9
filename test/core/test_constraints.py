"""Actuator and effector rows: values, signs and Jacobians (finite differences)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from soft_inverse_ros.core.model.constraints import (
    CableActuator,
    ConstraintSet,
    Effector,
    ForceActuator,
    PressureActuator,
)
from soft_inverse_ros.core.model.mapping import map_points
from soft_inverse_ros.core.model.mesh_generation import box_mesh
from soft_inverse_ros.core.model.snapshot import ActuatorKind


@pytest.fixture(scope="module")
def mesh():
    m = box_mesh((0.06, 0.03, 0.03), (6, 3, 3))
    return np.array(m.points), np.array(m.tets)


def _fd_jacobian_t(cset: ConstraintSet, x: np.ndarray, free: np.ndarray, h=1e-7) -> np.ndarray:
    out = np.zeros((len(free), cset.n_rows))
    flat = x.ravel()
    for col, dof in enumerate(free):
        xp = flat.copy()
        xm = flat.copy()
        xp[dof] += h
        xm[dof] -= h
        out[col] = (cset.values(xp.reshape(-1, 3)) - cset.values(xm.reshape(-1, 3))) / (2 * h)
    return out


def _cube_surface(center, half):
    c = np.array(center, float)
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    pts = c + half * corners
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = []
    for a, b, cc, d in quads:
        tris += [(a, b, cc), (a, cc, d)]
    return pts, np.array(tris)


def test_cable_stroke_sign_and_jacobian(mesh):
    points, tets = mesh
    cable_pts = np.array([[0.02, 0.015, 0.025], [0.04, 0.015, 0.025], [0.055, 0.015, 0.02]])
    cable = CableActuator("c", map_points(points, tets, cable_pts), cable_pts,
                          pull_point=np.array([-0.01, 0.015, 0.025]))
    assert cable.kind == ActuatorKind.CABLE
    assert cable.rest_length == pytest.approx(0.03 + 0.02 + np.hypot(0.015, 0.005))
    assert cable.stroke(cable_pts) == pytest.approx(0.0, abs=1e-15)
    shortened = cable_pts + np.array([-0.005, 0, 0])  # all points move towards the pull point
    assert cable.stroke(shortened) == pytest.approx(0.005, rel=1e-9)
    free = np.arange(3 * len(points))[::2]
    cset = ConstraintSet([cable], free)
    rng = np.random.default_rng(0)
    x = points + rng.normal(scale=1e-3, size=points.shape)
    jt = cset.jacobian_t(x)
    assert np.allclose(jt, _fd_jacobian_t(cset, x, free), atol=1e-7)
    # with every DOF free, J^T λ sums to a pull of λ towards the pull point
    all_free = ConstraintSet([cable], np.arange(3 * len(points)))
    total = all_free.jacobian_t(x)[:, 0].reshape(-1, 3).sum(axis=0)
    p0 = all_free.points(x)[0]
    toward = (cable.pull_point - p0) / np.linalg.norm(cable.pull_point - p0)
    assert np.allclose(total, toward, atol=1e-12)
    with pytest.raises(ValueError, match="two points"):
        CableActuator("d", map_points(points, tets, cable_pts[:1]), cable_pts[:1])


def test_linear_force_rows(mesh):
    points, tets = mesh
    p = np.array([[0.05, 0.01, 0.02]])
    push = ForceActuator("push", map_points(points, tets, p), p, direction=np.array([0, 0, 2.0]))
    assert push.values(p + [0, 0, 0.003])[0] == pytest.approx(0.003)
    two = np.array([[0.01, 0.01, 0.01], [0.05, 0.02, 0.02]])
    squeeze = ForceActuator("squeeze", map_points(points, tets, two), two)
    d0 = np.linalg.norm(two[1] - two[0])
    assert squeeze.values(two * [0.5, 1, 1])[0] > 0  # closer together: positive stroke
    assert squeeze.rest_distance == pytest.approx(d0)
    free = np.arange(3 * len(points))
    cset = ConstraintSet([push, squeeze], free)
    x = points + np.random.default_rng(1).normal(scale=1e-3, size=points.shape)
    assert np.allclose(cset.jacobian_t(x), _fd_jacobian_t(cset, x, free), atol=1e-7)
    with pytest.raises(ValueError, match="direction or a second point"):
        ForceActuator("bad", map_points(points, tets, p), p)


def test_pressure_volume_and_gradient(mesh):
    points, tets = mesh
    surf, tris = _cube_surface([0.03, 0.015, 0.015], 0.005)
    cav = PressureActuator("cav", map_points(points, tets, surf), surf, tris)
    assert cav.rest_volume == pytest.approx(0.01**3)
    # inward-oriented triangles are flipped
    cav_in = PressureActuator("cav2", map_points(points, tets, surf), surf, tris[:, [0, 2, 1]])
    assert cav_in.rest_volume == pytest.approx(0.01**3)
    grown = (surf - [0.03, 0.015, 0.015]) * 1.1 + [0.03, 0.015, 0.015]
    assert cav.values(grown)[0] == pytest.approx(0.01**3 * (1.1**3 - 1), rel=1e-9)
    free = np.arange(3 * len(points))[1::2]
    cset = ConstraintSet([cav], free)
    x = points + np.random.default_rng(2).normal(scale=3e-4, size=points.shape)
    jt = cset.jacobian_t(x)
    assert np.allclose(jt, _fd_jacobian_t(cset, x, free), atol=1e-9 * np.abs(jt).max() + 1e-14)
    assert cav.kind == ActuatorKind.PRESSURE


def test_effector_rows_names_and_barycenter(mesh):
    points, tets = mesh
    pts = np.array([[0.05, 0.01, 0.01], [0.05, 0.02, 0.02]])
    e_pts = Effector("tip", map_points(points, tets, pts), axes=("x", "z"))
    assert e_pts.row_names == ("tip[0].x", "tip[0].z", "tip[1].x", "tip[1].z")
    assert np.allclose(e_pts.values(pts), [0.05, 0.01, 0.05, 0.02])
    e_bar = Effector("c", map_points(points, tets, pts), weights=[1, 3], mode="barycenter")
    assert e_bar.row_names == ("c.x", "c.y", "c.z")
    assert np.allclose(e_bar.values(pts), 0.25 * pts[0] + 0.75 * pts[1])
    free = np.arange(3 * len(points))
    cset = ConstraintSet([e_pts, e_bar], free)
    x = points * 1.01
    assert np.allclose(cset.jacobian_t(x), _fd_jacobian_t(cset, x, free), atol=1e-8)
    with pytest.raises(ValueError, match="axes"):
        Effector("bad", map_points(points, tets, pts), axes=("w",))


@pytest.mark.parametrize("kernels", ["auto", "numpy"])
def test_a_set_evaluates_its_cables_together_as_each_cable_alone(mesh, kernels, monkeypatch):
    """The set's batched cable pass (:class:`_CablePaths`, compiled with numba and its numpy
    path) against each constraint's own ``values``/``point_gradient``, in a set mixing
    cables with and without a pull point, a one-segment cable, a cable with a zero-length
    segment and a non-cable row between them."""
    if kernels == "numpy":
        monkeypatch.setenv("SOFT_INVERSE_ROS_FEM_KERNELS", "numpy")
    points, tets = mesh
    rng = np.random.default_rng(4)
    a = np.array([[0.01, 0.01, 0.01], [0.03, 0.012, 0.01], [0.05, 0.01, 0.012]])
    b = np.array([[0.02, 0.02, 0.02], [0.04, 0.02, 0.02]])
    c = np.array([[0.015, 0.015, 0.015]])
    d = np.array([[0.02, 0.01, 0.02], [0.02, 0.01, 0.02], [0.04, 0.01, 0.02]])  # repeated point
    cables = [
        CableActuator("a", map_points(points, tets, a), a, pull_point=np.array([-0.01, 0.01, 0.01])),
        CableActuator("b", map_points(points, tets, b), b),
        CableActuator("c", map_points(points, tets, c), c, pull_point=np.array([-0.01, 0.015, 0.015])),
        CableActuator("d", map_points(points, tets, d), d, pull_point=np.array([-0.01, 0.01, 0.02])),
    ]
    force = ForceActuator("f", map_points(points, tets, b[:1]), b[:1], direction=np.array([0.0, 0.0, 1.0]))
    tip = Effector("tip", map_points(points, tets, a[-1:]))
    cset = ConstraintSet([cables[0], force, cables[1], tip, cables[2], cables[3]], np.arange(3 * len(points)))
    numba = importlib.util.find_spec("numba") is not None
    assert cset._cables.kernels == ("numba" if numba and kernels == "auto" else "numpy")
    x = points + rng.normal(scale=1e-3, size=points.shape)
    values, g = cset.values_and_point_gradient(x)
    pts = cset.points(x)
    row = 0
    for con, s in zip(cset.constraints, cset._point_slices):
        np.testing.assert_allclose(values[row:row + con.n_rows], con.values(pts[s]), rtol=1e-13, atol=1e-16)
        expected = np.zeros((con.n_rows, 3 * cset.n_points))
        expected[:, 3 * s.start:3 * s.stop] = con.point_gradient(pts[s]).reshape(con.n_rows, -1)
        np.testing.assert_allclose(g[row:row + con.n_rows], expected, rtol=1e-13, atol=1e-16)
        row += con.n_rows
    np.testing.assert_allclose(cset.values(x), values, rtol=0, atol=0)
    assert np.allclose(cset.jacobian_t(x), _fd_jacobian_t(cset, x, np.arange(3 * len(points))), atol=1e-7)
