"""Tet mesh validation, geometry and file loading (synthetic meshes; SOFA meshes elsewhere)."""

from __future__ import annotations

from pathlib import Path

import meshio
import numpy as np
import pytest

from soft_inverse_ros.core.model.mesh import (
    MeshError,
    TetMesh,
    load_mesh,
    load_surface,
    rotation_matrix,
    sniff_format,
    surface_volume,
)
from soft_inverse_ros.core.model.mesh_generation import box_mesh

UNIT_TET = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])


def two_tets() -> tuple[np.ndarray, np.ndarray]:
    """Two positive tets sharing the face (1, 2, 3)."""
    pts = np.vstack([UNIT_TET, [[1.0, 1.0, 1.0]]])
    return pts, np.array([[0, 1, 2, 3], [4, 3, 2, 1]])


def test_two_tets_are_positive_and_valid() -> None:
    pts, tets = two_tets()
    m = TetMesh.from_arrays(pts, tets)
    assert np.all(m.volumes() > 0)
    assert m.total_volume == pytest.approx(1 / 6 + 1 / 3)
    assert m.report.reoriented_tets == 0
    assert not m.points.flags.writeable and not m.tets.flags.writeable


def test_all_negative_orientation_is_a_convention_and_is_reoriented() -> None:
    pts, tets = two_tets()
    m = TetMesh.from_arrays(pts, tets[:, [1, 0, 2, 3]])
    assert np.all(m.volumes() > 0)
    assert m.report.orientation_flipped
    assert m.report.reoriented_tets == 2


def test_mixed_inverted_tets_are_an_error_unless_fixed() -> None:
    pts, tets = two_tets()
    mixed = tets.copy()
    mixed[1] = mixed[1][[1, 0, 2, 3]]
    with pytest.raises(MeshError, match=r"1 of 2 tetrahedra are inverted, first: \[1\]"):
        TetMesh.from_arrays(pts, mixed)
    fixed = TetMesh.from_arrays(pts, mixed, on_inverted="fix")
    assert np.all(fixed.volumes() > 0)
    assert fixed.report.reoriented_tets == 1 and not fixed.report.orientation_flipped


def test_degenerate_tet_is_an_error_naming_count_and_index() -> None:
    pts, tets = two_tets()
    pts = np.vstack([pts, [[0.5, 0.5, 0.0]]])  # in the plane z = 0 with nodes 0, 1, 2
    tets = np.vstack([tets, [[0, 1, 2, 5]]])
    with pytest.raises(MeshError, match=r"1 of 3 tetrahedra are degenerate.*first: \[2\]"):
        TetMesh.from_arrays(pts, tets)


def test_bad_arrays() -> None:
    pts, tets = two_tets()
    bad = pts.copy()
    bad[4, 0] = np.nan
    with pytest.raises(MeshError, match="NaN"):
        TetMesh.from_arrays(bad, tets)
    with pytest.raises(MeshError, match="out of range"):
        TetMesh.from_arrays(pts, tets + 1)
    with pytest.raises(MeshError, match="no tetrahedra"):
        TetMesh.from_arrays(pts, np.zeros((0, 4), dtype=np.int64))


def test_unreferenced_nodes_are_dropped_and_counted() -> None:
    pts, tets = two_tets()
    pts = np.vstack([[[9.0, 9, 9]], pts])
    m = TetMesh.from_arrays(pts, tets + 1)
    assert m.n_points == 5 and m.report.dropped_nodes == 1
    np.testing.assert_array_equal(m.points, pts[1:])
    with pytest.raises(MeshError, match="referenced by no tetrahedron"):
        TetMesh.from_arrays(pts, tets + 1, drop_unreferenced=False)


def test_quality_is_one_for_a_regular_tet_and_small_for_a_sliver() -> None:
    regular = np.array([[1.0, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]])
    m = TetMesh.from_arrays(regular, np.array([[0, 1, 2, 3]]), on_inverted="fix")
    assert m.quality()[0] == pytest.approx(1.0)
    sliver = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 1e-3]])
    q = TetMesh.from_arrays(sliver, np.array([[0, 1, 2, 3]]), on_inverted="fix").quality()[0]
    assert 0 < q < 0.01


def test_boundary_faces_point_outward() -> None:
    m = box_mesh((1.0, 2.0, 3.0), (2, 3, 4))
    faces = m.boundary_faces()
    assert len(faces) == 2 * 2 * (2 * 3 + 3 * 4 + 2 * 4)
    p = m.points[faces]
    normals = np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
    outward = p.mean(axis=1) - np.array([0.5, 1.0, 1.5])
    assert np.all(np.einsum("ij,ij->i", normals, outward) > 0)
    # the closed boundary encloses the mesh volume
    assert surface_volume(m.points, faces) == pytest.approx(m.total_volume)


def test_rotation_order_is_x_then_y_then_z() -> None:
    r = rotation_matrix((90, 90, 0))
    # x-rotation first maps y to z, then the y-rotation maps z to x
    np.testing.assert_allclose(r @ [0, 1, 0], [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(rotation_matrix((90, 0, 0)) @ [0, 1, 0], [0, 0, 1], atol=1e-12)


# ----------------------------------------------------------------------------- files


def write(tmp_path: Path, name: str, pts: np.ndarray, cells: list[tuple[str, np.ndarray]], fmt: str, **kw) -> Path:
    path = tmp_path / name
    meshio.write(str(path), meshio.Mesh(pts, cells), file_format=fmt, **kw)
    return path


def test_format_is_detected_from_content_not_extension(tmp_path: Path) -> None:
    pts, tets = two_tets()
    xml = write(tmp_path, "xml_named.vtk", pts, [("tetra", tets)], "vtu")
    legacy = write(tmp_path, "legacy.vtu", pts, [("tetra", tets)], "vtk", binary=True)
    gmsh = write(tmp_path, "mesh.txt", pts, [("tetra", tets)], "gmsh")
    assert sniff_format(xml) == "vtu"
    assert sniff_format(legacy) == "vtk"
    assert sniff_format(gmsh) == "gmsh"
    for path in (xml, legacy, gmsh):
        assert load_mesh(path, unit_scale=1.0).n_tets == 2
    junk = tmp_path / "junk.vtk"
    junk.write_text("hello\n")
    with pytest.raises(MeshError, match="unrecognized mesh format"):
        sniff_format(junk)


def test_load_keeps_tets_drops_other_cells_and_transforms(tmp_path: Path) -> None:
    pts, tets = two_tets()
    pts = np.vstack([pts, [[5.0, 5, 5]]])  # referenced only by a vertex cell
    path = write(
        tmp_path,
        "mixed.vtk",
        pts,
        [("tetra", tets), ("triangle", np.array([[0, 1, 2]])), ("vertex", np.array([[5]]))],
        "vtk",
    )
    m = load_mesh(path, unit_scale=1e-3, rotation_deg=(90, 0, 0), translation=(0, 0, 35))
    assert m.n_tets == 2 and m.n_points == 5
    assert m.report.dropped_cells == {"triangle": 1, "vertex": 1}
    assert m.report.dropped_nodes == 1
    expected = (pts[:5] @ rotation_matrix((90, 0, 0)).T + [0, 0, 35]) * 1e-3
    np.testing.assert_allclose(m.points, expected)
    assert np.all(m.volumes() > 0)


def test_load_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.vtu"
    with pytest.raises(MeshError, match="nope.vtu: mesh file not found"):
        load_mesh(missing, unit_scale=1.0)
    pts, _ = two_tets()
    surf = write(tmp_path, "surf.vtu", pts, [("triangle", np.array([[0, 1, 2]]))], "vtu")
    with pytest.raises(MeshError, match="surf.vtu: no tetrahedra"):
        load_mesh(surf, unit_scale=1.0)
    pts, tets = two_tets()
    mixed = tets.copy()
    mixed[0] = mixed[0][[1, 0, 2, 3]]
    inv = write(tmp_path, "inv.vtu", pts, [("tetra", mixed)], "vtu")
    with pytest.raises(MeshError, match=r"inv.vtu: 1 of 2 tetrahedra are inverted"):
        load_mesh(inv, unit_scale=1.0)
    assert load_mesh(inv, unit_scale=1.0, on_inverted="fix").report.reoriented_tets == 1
    nan = pts.copy()
    nan[0, 1] = np.nan
    bad = write(tmp_path, "nan.vtu", nan, [("tetra", tets)], "vtu")
    with pytest.raises(MeshError, match="nan.vtu: .*NaN"):
        load_mesh(bad, unit_scale=1.0)
    good = write(tmp_path, "good.vtk", pts, [("tetra", tets)], "vtk")
    with pytest.raises(MeshError, match=r"good.vtk: rotation_deg must be 3 finite number\(s\), got \[nan, 0.0, 0.0\]"):
        load_mesh(good, unit_scale=1.0, rotation_deg=(np.nan, 0.0, 0.0))
    with pytest.raises(MeshError, match="good.vtk: translation must be 3 finite"):
        load_mesh(good, unit_scale=1.0, translation=(np.inf, 0.0, 0.0))
    with pytest.raises(MeshError, match="good.vtk: unit_scale must be > 0"):
        load_mesh(good, unit_scale=-1.0)
    # meshio's VTK reader ends the process (sys.exit) on a truncated file: one MeshError instead
    truncated = tmp_path / "truncated.vtk"
    truncated.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    with pytest.raises(MeshError, match="truncated.vtk: cannot read as vtk"):
        load_mesh(truncated, unit_scale=1.0)


def cube_surface() -> tuple[np.ndarray, np.ndarray]:
    m = box_mesh((2.0, 2.0, 2.0), (1, 1, 1))
    return np.asarray(m.points), m.boundary_faces()


def test_surface_is_merged_closed_and_oriented_outward(tmp_path: Path) -> None:
    pts, tris = cube_surface()
    # STL stores each triangle's corners separately; store the triangles inward-facing
    path = write(tmp_path, "cavity.stl", pts, [("triangle", tris[:, [0, 2, 1]])], "stl", binary=True)
    assert sniff_format(path) == "stl"
    p, t = load_surface(path, unit_scale=1e-2)
    assert len(p) == 8 and len(t) == 12
    assert surface_volume(p, t) == pytest.approx(8e-6)


def test_open_surface_is_an_error(tmp_path: Path) -> None:
    pts, tris = cube_surface()
    path = write(tmp_path, "open.stl", pts, [("triangle", tris[:-1])], "stl")
    with pytest.raises(MeshError, match="open.stl: the cavity surface is not closed: 3 boundary edges"):
        load_surface(path, unit_scale=1.0)
