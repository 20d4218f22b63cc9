"""Visualization data (triangle lists, colours, spheres, cables) and the offscreen renderer."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.model.visualization import (
    SURFACE_RGBA,
    Scene,
    boundary_faces,
    cable_polyline,
    colormap,
    node_value_colors,
    pressure_face_colors,
    render_scene_png,
    robot_scene,
    triangle_list,
)


def _cube_tets():
    """Unit cube [0,1]^3 split into 6 tets around the diagonal 0-6 (positions in m)."""
    pts = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0],
                    [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]], dtype=float)
    tets = np.array([[0, 1, 2, 6], [0, 2, 3, 6], [0, 3, 7, 6],
                     [0, 7, 4, 6], [0, 4, 5, 6], [0, 5, 1, 6]])
    return pts, tets


def test_boundary_faces_of_a_cube_are_12_outward_triangles():
    pts, tets = _cube_tets()
    faces = boundary_faces(tets, pts)
    assert faces.shape == (12, 3)
    tri = pts[faces]
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    outward = tri.mean(axis=1) - 0.5
    assert np.all(np.einsum("ij,ij->i", normal, outward) > 0)
    # every triangle lies on one cube side: one coordinate constant at 0 or 1
    assert np.all(np.any(np.ptp(tri, axis=1) == 0, axis=1))
    # the surface encloses the unit volume (divergence theorem)
    volume = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6
    assert volume == pytest.approx(1.0)


def test_triangle_list_repeats_face_vertices_and_colours():
    pts, tets = _cube_tets()
    faces = boundary_faces(tets, pts)
    moved = pts + np.array([0.1, 0.0, 0.0])
    mesh = triangle_list(moved, faces)
    assert mesh.vertices.shape == (36, 3) and mesh.n_triangles == 12
    np.testing.assert_array_equal(mesh.vertices[3:6], moved[faces[1]])
    np.testing.assert_array_equal(mesh.colors, np.tile(SURFACE_RGBA, (36, 1)))
    with pytest.raises(ValueError, match="out of range"):
        triangle_list(pts, faces + 8)
    with pytest.raises(ValueError, match="face_rgba"):
        triangle_list(pts, faces, np.ones((3, 4)))


def test_colormap_ends_midpoint_clipping_and_nan():
    c = colormap(np.array([0.0, 10.0, -5.0, 20.0, 5.0, np.nan]), 0.0, 10.0)
    np.testing.assert_allclose(c[0, :3], [0.267, 0.005, 0.329])
    np.testing.assert_allclose(c[1, :3], [0.993, 0.906, 0.144])
    np.testing.assert_array_equal(c[2], c[0])
    np.testing.assert_array_equal(c[3], c[1])
    np.testing.assert_allclose(c[4, :3], [0.128, 0.567, 0.551])  # middle anchor of 11
    assert c[5, 3] == 0.0 and np.all(c[:5, 3] == 1.0)
    with pytest.raises(ValueError, match="vmax > vmin"):
        colormap(1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="unknown colormap"):
        colormap(1.0, 0.0, 2.0, "jet")


def test_pressure_colouring_only_touches_cavity_faces():
    rgba = pressure_face_colors(5, {"c0": np.array([1, 3])}, {"c0": 2000.0}, 0.0, 2000.0)
    np.testing.assert_array_equal(rgba[[0, 2, 4]], np.tile(SURFACE_RGBA, (3, 1)))
    np.testing.assert_allclose(rgba[1], colormap(2000.0, 0.0, 2000.0))
    np.testing.assert_array_equal(rgba[1], rgba[3])
    with pytest.raises(KeyError, match="c1"):
        pressure_face_colors(5, {"c1": np.array([0])}, {"c0": 1.0}, 0.0, 1.0)
    faces = np.array([[0, 1, 2], [1, 2, 3]])
    vals = node_value_colors(faces, np.array([0.0, 0.0, 3.0, 6.0]), 0.0, 3.0)
    np.testing.assert_allclose(vals, colormap(np.array([1.0, 3.0]), 0.0, 3.0))


def test_robot_scene_spheres_cables_and_bounds():
    pts, tets = _cube_tets()
    pts = pts * 0.01  # 1 cm cube
    faces = boundary_faces(tets, pts)
    scene = robot_scene(
        pts, faces,
        effector=np.array([0.01, 0.01, 0.01]), target=np.array([0.012, 0.01, 0.01]),
        cables={"cable0": np.array([[0.0, 0.0, 0.0], [0.005, 0.0, 0.005], [0.01, 0.0, 0.01]])},
        cavity_faces={"cav": np.array([0, 1])}, pressures={"cav": 500.0},
        pressure_range=(0.0, 1000.0),
    )
    assert [s.name for s in scene.spheres] == ["effector", "target"]
    diag = np.sqrt(3) * 0.01
    assert scene.spheres[0].radius == pytest.approx(0.02 * diag)
    assert scene.polylines[0].points.shape == (3, 2 + 1) and scene.polylines[0].width == pytest.approx(0.005 * diag)
    np.testing.assert_allclose(scene.surface.colors[0], colormap(500.0, 0.0, 1000.0))
    lo, hi = scene.bounds()
    np.testing.assert_allclose(lo, [0, 0, 0])
    np.testing.assert_allclose(hi, [0.012, 0.01, 0.01])
    assert scene.color_scale == ("pressure [Pa]", 0.0, 1000.0, "viridis")
    no_target = robot_scene(pts, faces, target=np.array([np.nan, 0, 0]))
    assert no_target.spheres == ()
    with pytest.raises(ValueError, match="pressure colouring"):
        robot_scene(pts, faces, cavity_faces={"cav": np.array([0])})
    with pytest.raises(ValueError, match="cable"):
        cable_polyline("c", np.zeros((1, 3)))


def test_render_scene_png_draws_the_robot(tmp_path):
    from matplotlib.image import imread

    pts, tets = _cube_tets()
    pts = pts * 0.02
    faces = boundary_faces(tets, pts)
    scene = robot_scene(pts, faces, effector=pts[6], target=pts[6] + 0.002,
                        cables={"c": pts[[0, 6]]}, cavity_faces={"cav": np.arange(4)},
                        pressures={"cav": 1.0}, pressure_range=(0.0, 1.0))
    out = render_scene_png(scene, tmp_path / "snap" / "robot.png", title="cube")
    image = imread(out)
    assert image.shape[:2] == (700, 900)
    # the surface colour (light grey-blue, shaded) and the pressure colour are on the image
    rgb = image[..., :3].reshape(-1, 3)
    non_white = rgb[np.any(rgb < 0.95, axis=1)]
    assert len(non_white) > 0.03 * len(rgb)
    yellow = colormap(1.0, 0.0, 1.0)[:3]
    assert np.any(np.all(np.abs(rgb - yellow * rgb.max(axis=1, keepdims=True) / yellow.max()) < 0.08, axis=1))
    empty = tmp_path / "empty.png"
    with pytest.raises(ValueError, match="empty scene"):
        render_scene_png(Scene(), empty)


def test_rviz_config_shows_the_graph_topics_in_base_link():
    from pathlib import Path

    import yaml

    from soft_inverse_ros import topics as T

    config = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "config" / "soft_inverse_ros.rviz").read_text())
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == T.BASE_FRAME
    shown = {d["Class"]: [] for d in manager["Displays"]}
    for d in manager["Displays"]:
        if "Topic" in d:
            shown[d["Class"]].append(d["Topic"]["Value"])
    assert shown["rviz_default_plugins/MarkerArray"] == [f"/{T.ROBOT_MARKERS}"]
    assert set(shown["rviz_default_plugins/PointStamped"]) == {
        f"/{T.TARGET}", f"/{T.PLANT_EFFECTOR_TRUE}", f"/{T.MOCAP_EFFECTOR}"}
    tools = {t["Class"]: t for t in manager["Tools"]}
    assert tools["rviz_default_plugins/PublishPoint"]["Topic"] == f"/{T.TARGET_GOAL}"
