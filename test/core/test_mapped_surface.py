"""The collision surface mapped barycentrically into the tet mesh (core/contact/mapped_surface)."""

from pathlib import Path

import meshio
import numpy as np
import pytest
import scipy.sparse as sp

from soft_inverse_ros.core.contact.mapped_surface import (
    check_closed_oriented, load_surface, map_surface, merge_vertices, subdivide)
from soft_inverse_ros.core.model.mesh_generation import box_mesh


def _write_stl(path: Path, points: np.ndarray, faces: np.ndarray) -> Path:
    """An STL as written by CAD tools: every triangle with its own three vertices."""
    soup = points[faces].reshape(-1, 3)
    meshio.write_points_cells(str(path), soup, [("triangle", np.arange(len(soup)).reshape(-1, 3))],
                              file_format="stl", binary=False)
    return path


def test_box_boundary_as_stl_merges_to_the_boundary_and_maps_to_its_nodes(tmp_path):
    mesh = box_mesh((0.02, 0.01, 0.01), (4, 2, 2))
    faces = mesh.boundary_faces()
    path = _write_stl(tmp_path / "box.stl", mesh.points * 1e3, faces)  # in mm
    f, p = load_surface(path, scale=1e-3)
    assert len(f) == len(faces) and len(p) == len(np.unique(faces))
    ms = map_surface(f, p, mesh.points, mesh.tets)
    x = mesh.points + 1e-3 * np.random.default_rng(0).standard_normal(mesh.points.shape)
    # each surface vertex follows the node it sits on: M x picks that node's position
    nearest = np.argmin(np.linalg.norm(p[:, None] - mesh.points[None], axis=2), axis=1)
    np.testing.assert_allclose(ms.positions(x), x[nearest], atol=1e-9)
    np.testing.assert_allclose(ms.matrix() @ x.ravel(), x[nearest].ravel(), atol=1e-9)


def test_composed_rows_match_finite_differences_of_the_surface_gaps():
    mesh = box_mesh((0.02, 0.01, 0.01), (2, 1, 1))
    rng = np.random.default_rng(1)
    pts = mesh.points.min(0) + rng.random((5, 3)) * (mesh.points.max(0) - mesh.points.min(0))
    ms = map_surface(np.array([[0, 1, 2]]), pts, mesh.points, mesh.tets)
    normals = rng.standard_normal((5, 3))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    # surface rows: gap_k = n_k · s_k (a plane through the origin per surface vertex)
    hs = sp.csr_matrix((normals.ravel(), (np.repeat(np.arange(5), 3), np.arange(15))), shape=(5, 15))
    h = ms.compose_rows(hs)
    assert h.shape == (5, 3 * mesh.n_points)
    gap = lambda x: np.einsum("ka,ka->k", normals, ms.positions(x.reshape(-1, 3)))
    x0 = mesh.points.ravel() + 1e-3 * rng.standard_normal(mesh.points.size)
    eps = 1e-7
    fd = np.stack([(gap(x0 + eps * e) - gap(x0 - eps * e)) / (2 * eps) for e in np.eye(x0.size)], axis=1)
    np.testing.assert_allclose(h.toarray(), fd, atol=1e-6)


def test_inward_surface_is_flipped_and_open_or_misoriented_surfaces_are_refused():
    p = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
    out = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    np.testing.assert_array_equal(check_closed_oriented(p, out, "s"), out)
    np.testing.assert_array_equal(check_closed_oriented(p, out[:, ::-1], "s"), out)
    with pytest.raises(ValueError, match="not a closed manifold"):
        check_closed_oriented(p, out[:3], "s")
    flipped = out.copy()
    flipped[0] = flipped[0, ::-1]
    with pytest.raises(ValueError, match="not consistently oriented"):
        check_closed_oriented(p, flipped, "s")


def test_merge_vertices_drops_collapsed_triangles():
    p = np.array([[0, 0, 0], [1, 0, 0], [1e-12, 0, 0], [0, 1, 0]], float)
    merged, faces = merge_vertices(p, np.array([[0, 1, 3], [0, 2, 3]]), 1e-9)
    assert len(merged) == 3 and faces.tolist() == [[0, 1, 2]]


def test_bad_inputs_give_one_line(tmp_path):
    with pytest.raises(ValueError, match="file not found") as e:
        load_surface(tmp_path / "missing.stl", 1e-3)
    assert "\n" not in str(e.value)
    meshio.write_points_cells(str(tmp_path / "pts.vtk"), np.zeros((2, 3)), [("line", np.array([[0, 1]]))])
    with pytest.raises(ValueError, match="has no triangles"):
        load_surface(tmp_path / "pts.vtk", 1e-3)
    mesh = box_mesh((0.02, 0.01, 0.01), (2, 1, 1))
    with pytest.raises(ValueError, match="outside the mesh") as e:
        map_surface(np.array([[0, 1, 2]]), np.array([[0.5, 0, 0], [0, 0, 0], [0, 0.01, 0]]),
                    mesh.points, mesh.tets)
    assert "\n" not in str(e.value)


def test_finger_stl_is_the_finger_boundary_not_a_finer_surface(sofa_data: Path):
    f, p = load_surface(sofa_data / "finger.stl", 1e-3)
    vol = meshio.read(str(sofa_data / "finger.vtk"))
    tets = np.concatenate([c.data for c in vol.cells if c.type == "tetra"])
    ms = map_surface(f, p, vol.points * 1e-3, tets)
    assert len(f) == 306 and ms.mapping.distances.max() < 1e-8  # float32 rounding only


def _boundary_as_surface(mesh):
    faces = mesh.boundary_faces()
    used, local = np.unique(faces, return_inverse=True)
    return map_surface(local.reshape(-1, 3), mesh.points[used], mesh.points, mesh.tets), used


def test_mapped_boundary_reproduces_todays_contacts_and_rows():
    from soft_inverse_ros.core.contact.correction import ContactModel
    from soft_inverse_ros.core.contact.geometry import Plane, SelfCollision

    mesh = box_mesh((0.02, 0.01, 0.01), (4, 2, 2))
    ms, used = _boundary_as_surface(mesh)
    x = mesh.points.copy()
    x[:, 2] -= 0.0005 * (x[:, 0] / 0.02)  # tilt into the floor z = 0
    x[:, 2] += 0.0002
    floor = (Plane((0, 0, 0), (0, 0, 1)),)
    faces = mesh.boundary_faces()
    today = ContactModel(obstacles=floor, self_collision=SelfCollision(faces, mesh.points),
                         alarm_distance=1e-3, nodes=used).detect(x)
    mapped = ContactModel(obstacles=floor, self_collision=SelfCollision(ms.faces, ms.rest),
                          alarm_distance=1e-3, surface=ms).detect(x)
    assert today.size > 0 and mapped.size == today.size
    np.testing.assert_array_equal(used[mapped.vertex], today.vertex)  # surface ids → node ids
    np.testing.assert_allclose(mapped.rows.toarray(), today.rows.toarray(), atol=1e-12)
    np.testing.assert_allclose(mapped.gaps, today.gaps, atol=1e-12)
    np.testing.assert_allclose(mapped.tangent_rows().toarray(), today.tangent_rows().toarray(), atol=1e-12)
    k_inv = np.diag(np.random.default_rng(2).random(3 * mesh.n_points) + 1.0)  # any SPD compliance
    w = lambda h: h @ k_inv @ h.T
    np.testing.assert_allclose(w(mapped.rows.toarray()), w(today.rows.toarray()), atol=1e-12)


def test_description_collision_surface_missing_file_is_one_line(tmp_path):
    import copy

    import yaml

    from soft_inverse_ros.core.model.description import DescriptionError, load_robot_description
    from test_contact_basis_description import ROBOT

    data = copy.deepcopy(ROBOT)
    data["collision"]["surface"] = "nowhere.stl"
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(DescriptionError, match="collision.surface.*file not found") as e:
        load_robot_description(path)
    assert "\n" not in str(e.value)


def test_subdivision_keeps_the_shape_closed_and_oriented():
    """Each level: four triangles per triangle, one new vertex per edge, the old vertices
    first and unchanged, every new vertex on an old triangle (same enclosed volume), still
    closed and outward."""
    mesh = box_mesh((0.02, 0.01, 0.01), (4, 2, 2))
    faces = mesh.boundary_faces()
    used, local = np.unique(faces, return_inverse=True)
    f0, p0 = local.reshape(-1, 3), mesh.points[used]
    volume = lambda f, p: np.einsum("ij,ij->i", p[f[:, 0]], np.cross(p[f[:, 1]], p[f[:, 2]])).sum() / 6.0
    edges = len(np.unique(np.sort(f0[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1), axis=0))
    f1, p1 = subdivide(f0, p0, 1)
    assert len(f1) == 4 * len(f0) and len(p1) == len(p0) + edges
    np.testing.assert_array_equal(p1[:len(p0)], p0)
    np.testing.assert_array_equal(check_closed_oriented(p1, f1, "s"), f1)  # closed, not flipped
    assert volume(f1, p1) == pytest.approx(volume(f0, p0), rel=1e-12)
    f2, p2 = subdivide(f0, p0, 2)
    assert len(f2) == 16 * len(f0) and volume(f2, p2) == pytest.approx(volume(f0, p0), rel=1e-12)
    ms = map_surface(f2, p2, mesh.points, mesh.tets)  # every new vertex lies in the mesh
    assert ms.n_vertices == len(p2)
    np.testing.assert_array_equal(subdivide(f0, p0, 0)[0], f0)
    with pytest.raises(ValueError, match="integer >= 0"):
        subdivide(f0, p0, -1)


def test_a_reduced_basis_over_a_mapped_surface_uses_the_surface_vertex_ids():
    """The reduced correction on a mapped surface: with Ψ = I over the surface's vertices
    it makes the full correction on that surface (a basis indexed by mesh nodes would
    put the forces on the wrong points)."""
    from soft_inverse_ros.core.contact.correction import ContactModel, ReducedContactBasis
    from soft_inverse_ros.core.contact.geometry import Plane

    mesh = box_mesh((0.02, 0.01, 0.01), (4, 2, 2))
    faces = mesh.boundary_faces()
    used, local = np.unique(faces, return_inverse=True)
    f, p = subdivide(local.reshape(-1, 3), mesh.points[used], 1)
    ms = map_surface(f, p, mesh.points, mesh.tets)
    start = mesh.points.copy()
    start[:, 2] += 2e-4 - 5e-4 * (start[:, 0] / 0.02)  # tilted down towards the floor z = 0
    x_free = start + np.array([0.0, 0.0, -3e-4])
    n = 3 * mesh.n_points
    rng = np.random.default_rng(3)
    a = rng.normal(size=(n, n))
    a_mat = a @ a.T / n + np.eye(n) * 10.0
    solve = lambda b: np.linalg.solve(a_mat, b)  # noqa: E731
    floor = (Plane((0, 0, 0), (0, 0, 1)),)
    full = ContactModel(obstacles=floor, alarm_distance=1e-3, solver="exact", surface=ms)
    reduced = ContactModel(obstacles=floor, alarm_distance=1e-3, solver="exact", surface=ms,
                           basis=ReducedContactBasis(np.arange(ms.n_vertices), np.eye(ms.n_vertices)))
    dx_full, s_full = full.correct(x_free, start, np.arange(n), solve)
    dx_red, s_red = reduced.correct(x_free, start, np.arange(n), solve)
    assert (s_full.contact_set.vertex >= len(used)).any()  # edge midpoints touch too
    # more surface points than nodes under them: W is singular and the forces are not
    # unique, but the correction A⁻¹Hᵀλ is (the QP is strictly convex in Hᵀλ); daqp's
    # residual on the singular full W is ~1e-9 m
    np.testing.assert_allclose(dx_red, dx_full, atol=1e-5 * np.abs(dx_full).max())
    assert s_full.complementarity_residual < 1e-8 and s_red.complementarity_residual < 1e-8
