"""The contact step bound (core/contact/step_bound.py): the longest share of a step that
lets no vertex–triangle pair approach by more than max(near, 0.9 × its distance)."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.contact.correction import ContactModel
from soft_inverse_ros.core.contact.geometry import Plane, SelfCollision
from soft_inverse_ros.core.contact.step_bound import (
    CLEARANCE_FRACTION,
    point_triangle_distance_py,
    surface_step_bound_py,
)
from soft_inverse_ros.core.model.mesh_generation import box_mesh

ipctk = pytest.importorskip("ipctk")


def _pairs(detector: SelfCollision):
    """Every (vertex, triangle) pair of the detector's surface outside the excluded rings."""
    n_s, n_f = detector.surface_nodes.size, len(detector.faces_local)
    v, f = np.meshgrid(np.arange(n_s), np.arange(n_f), indexing="ij")
    v, f = v.ravel(), f.ravel()
    return v[~detector._excluded(v, f)], f[~detector._excluded(v, f)]


def _reference_bound(x, d, faces, v, f, near):
    """min(1, allowed / approach) over the pairs, the distances from ipctk."""
    s = 1.0
    for vi, fi in zip(v, f):
        tri = faces[fi]
        rel = np.linalg.norm(d[tri] - d[vi], axis=1).max()
        dist = np.sqrt(ipctk.point_triangle_distance(x[vi], x[tri[0]], x[tri[1]], x[tri[2]]))
        if rel > 0:
            s = min(s, max(near, CLEARANCE_FRACTION * dist) / rel)
    return s


def test_the_point_triangle_distance_matches_ipctk():
    rng = np.random.default_rng(1)
    for _ in range(3000):
        p, a, b, c = rng.standard_normal((4, 3))
        if rng.random() < 0.1:  # nearly degenerate triangles too
            c = a + rng.random() * (b - a) + 1e-9 * rng.standard_normal(3)
        ours = point_triangle_distance_py(*p, *a, *b, *c)
        assert ours == pytest.approx(np.sqrt(ipctk.point_triangle_distance(p, a, b, c)), rel=1e-9, abs=1e-12)


def test_the_compiled_surface_bound_is_the_pairwise_minimum_and_keeps_pairs_apart(monkeypatch):
    """A crumpled thin slab under random steps: the kernel's fraction equals the minimum over
    every non-adjacent pair (ipctk distances), the broad-phase path gives the same, and
    along the shortened step no pair farther than near / 0.9 comes closer than 0.1 × its
    distance (sampled)."""
    mesh = box_mesh((0.02, 0.02, 0.003), (6, 6, 1))
    detector = SelfCollision(mesh.boundary_faces(), mesh.points)
    x0 = detector.surface_nodes
    faces = detector.faces_local
    v, f = _pairs(detector)
    rng = np.random.default_rng(7)
    near = 1e-3
    binding = 0
    for trial in range(6):
        x = mesh.points + 3e-4 * rng.standard_normal(mesh.points.shape)
        d = (2e-3 + 4e-3 * trial / 6) * rng.standard_normal(mesh.points.shape)
        s = detector.step_bound(x, d, near)
        xs, ds = x[x0], d[x0]
        assert s == pytest.approx(_reference_bound(xs, ds, faces, v, f, near), rel=1e-9)
        with monkeypatch.context() as m:  # ipctk's broad phase and the pair kernel
            m.setattr(detector, "brute_force", False)
            assert detector.step_bound(x, d, near) == pytest.approx(s, rel=1e-12)
        assert surface_step_bound_py(np.ascontiguousarray(xs), np.ascontiguousarray(ds),
                                     detector._faces_local_c, detector._excl_indptr, detector._excl_indices,
                                     near, 1.0) == pytest.approx(s, rel=1e-12)
        binding += s < 1.0
        for vi, fi in zip(v, f):
            tri = faces[fi]
            d0 = np.sqrt(ipctk.point_triangle_distance(xs[vi], *xs[tri]))
            if d0 <= near / CLEARANCE_FRACTION:
                continue
            for tau in (0.5, 1.0):
                y = xs + tau * s * ds
                dt = np.sqrt(ipctk.point_triangle_distance(y[vi], *y[tri]))
                assert dt >= (1.0 - CLEARANCE_FRACTION) * d0 - 1e-12
    assert binding >= 3  # the steps were long enough for the bound to act


def test_a_rigid_translation_is_not_shortened():
    mesh = box_mesh((0.02, 0.02, 0.003), (4, 4, 1))
    detector = SelfCollision(mesh.boundary_faces(), mesh.points)
    d = np.tile([0.5, -0.2, 0.3], (mesh.points.shape[0], 1))  # half a metre
    assert detector.step_bound(mesh.points, d, 1e-3) == 1.0
    # the slab's two faces (3 mm apart) pressed together by 4 mm: the step stops at 0.9 × 3 mm
    d = np.zeros_like(mesh.points)
    top = mesh.points[:, 2] > 0.0015
    d[top, 2] = -4e-3
    s = detector.step_bound(mesh.points, d, 1e-3)
    assert s * 4e-3 == pytest.approx(CLEARANCE_FRACTION * 3e-3, rel=1e-9)


def test_an_obstacle_bounds_the_nodes_own_motion():
    """Nodes 10 mm above a plane stepping 30 mm down stop at 9 mm. The bound takes a
    node's whole displacement as its approach to a fixed obstacle, whatever its direction."""
    mesh = box_mesh((0.02, 0.02, 0.003), (2, 2, 1))
    x = mesh.points + [0.0, 0.0, 0.01]
    model = ContactModel(obstacles=[Plane((0.0, 0.0, 0.0), (0.0, 0.0, 1.0))], alarm_distance=1e-3,
                         nodes=np.arange(x.shape[0]))
    down = np.tile([0.0, 0.0, -0.03], (x.shape[0], 1))
    assert model.step_bound(x, down, 2e-3) == pytest.approx(CLEARANCE_FRACTION * 0.01 / 0.03, rel=1e-9)
    side = np.tile([0.03, 0.0, 0.0], (x.shape[0], 1))
    assert model.step_bound(x, side, 2e-3) == pytest.approx(CLEARANCE_FRACTION * 0.01 / 0.03, rel=1e-9)
    assert model.step_bound(x, 0.001 * down, 2e-3) == 1.0  # 0.03 mm: within near


def test_the_finger_model_moves_further_than_the_alarm_distance_in_free_motion(sofa_data):
    """The controller's model of the finger, from rest, pulled to 2 N: the first updates
    (no contact) move the tip by more than the alarm distance each, where the rule before
    moved no node further than it, and no update creates a self-intersection."""
    from soft_inverse_ros.core.model.description import load_robot_description
    from soft_inverse_ros.core.model.robot_model import RobotModel

    desc = load_robot_description("finger")
    model = RobotModel.from_description(desc, mesh=desc.load_mesh(), contact=True)
    model.equilibrate(np.zeros(1), from_rest=True)
    detector = model.contact.self_collision
    alarm = model.contact.alarm_distance
    tips = [model.effectors.values(model.positions).copy()]
    moved = []
    for i in range(5):
        before = model.positions.copy()
        _, snap = model.update(np.array([2.0]), seq=i, stamp=0.0)
        assert snap.contacts is None or snap.contacts.gap.size == 0  # free motion
        moved.append(np.linalg.norm(model.positions - before, axis=1).max())
        tips.append(model.effectors.values(model.positions).copy())
        assert not ipctk.has_intersections(detector._mesh, np.asfortranarray(model.positions[detector.surface_nodes]))
    assert min(moved) > 1.5 * alarm
