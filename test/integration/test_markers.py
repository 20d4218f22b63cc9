"""Scene -> visualization_msgs/MarkerArray (rclpy messages), and back from a bag."""

from __future__ import annotations

import numpy as np
import pytest

try:
    from rclpy.serialization import serialize_message
    from visualization_msgs.msg import Marker, MarkerArray
except ImportError as err:  # pragma: no cover - depends on the installation
    pytest.skip(f"rclpy or visualization_msgs not importable: {err}", allow_module_level=True)

from soft_inverse_ros import topics as T
from soft_inverse_ros.analysis.snapshots import scene_from_markers
from soft_inverse_ros.core.model.visualization import boundary_faces, robot_scene
from soft_inverse_ros.nodes.markers import delete_all_markers, scene_to_marker_array
from soft_inverse_ros.recording.bag_reader import BagReader
from soft_inverse_ros.recording.bag_writer import BagWriter


def _scene():
    pts = np.array([[0, 0, 0], [0.03, 0, 0], [0, 0.03, 0], [0, 0, 0.03], [0.03, 0.03, 0.03]])
    tets = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    faces = boundary_faces(tets, pts)
    return robot_scene(
        pts, faces, effector=pts[4], target=pts[4] + [0.001, 0.0, 0.0],
        cables={"cable0": pts[[0, 3, 4]], "cable1": pts[[1, 4]]},
        cavity_faces={"cav": np.array([0, 2])}, pressures={"cav": 800.0},
        pressure_range=(0.0, 1000.0),
    )


def test_scene_to_marker_array_content():
    scene = _scene()
    array = scene_to_marker_array(scene)
    kinds = [(m.ns, m.id, m.type) for m in array.markers]
    assert kinds == [
        ("surface", 0, Marker.TRIANGLE_LIST), ("effector", 0, Marker.SPHERE),
        ("target", 0, Marker.SPHERE), ("cables", 0, Marker.LINE_STRIP),
        ("cables", 1, Marker.LINE_STRIP),
    ]
    assert all(m.header.frame_id == T.BASE_FRAME and m.pose.orientation.w == 1.0 for m in array.markers)
    surface = array.markers[0]
    assert len(surface.points) == len(surface.colors) == 3 * scene.surface.n_triangles == 18
    assert surface.points[4].x == scene.surface.vertices[4, 0]
    assert surface.colors[0].r == pytest.approx(scene.surface.colors[0, 0])
    eff = array.markers[1]
    assert (eff.pose.position.x, eff.scale.x) == (0.03, pytest.approx(2 * scene.spheres[0].radius))
    cable = array.markers[3]
    assert [p.z for p in cable.points] == [0.0, 0.03, 0.03] and cable.text == "cable0"
    assert cable.scale.x == pytest.approx(scene.polylines[0].width)
    assert delete_all_markers().markers[0].action == Marker.DELETEALL
    plain = scene_to_marker_array(robot_scene(_scene().surface.vertices[:3], np.array([[0, 1, 2]])))
    assert len(plain.markers[0].colors) == 0  # uniform colour: one `color`, no per-vertex list
    assert plain.markers[0].color.b == pytest.approx(0.86)


def test_contacts_are_drawn_as_points_and_force_segments():
    pts = _scene().surface.vertices[:3]
    contacts = (np.array([[0.0, 0.0, 0.0], [0.01, 0.0, 0.0]]), np.array([[0, 0, 1.0], [0, 0, 1.0]]), np.array([2.0, 0.0]))
    array = scene_to_marker_array(robot_scene(pts, np.array([[0, 1, 2]]), contacts=contacts))
    by_ns = {m.ns: m for m in array.markers}
    assert by_ns["contacts"].type == Marker.SPHERE_LIST and len(by_ns["contacts"].points) == 2
    forces = by_ns["contact_forces"]
    assert forces.type == Marker.LINE_LIST and len(forces.points) == 2  # only the loaded contact
    assert forces.points[1].z > forces.points[0].z  # along the normal
    empty = scene_to_marker_array(robot_scene(pts, np.array([[0, 1, 2]]), contacts=(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0))))
    by_ns = {m.ns: m for m in empty.markers}
    assert len(by_ns["contacts"].points) == 0 and len(by_ns["contact_forces"].points) == 0  # replace the last


def test_uniform_surface_decodes_to_the_same_colours():
    scene = robot_scene(_scene().surface.vertices[:6], np.array([[0, 1, 2], [3, 4, 5]]))
    back = scene_from_markers(scene_to_marker_array(scene).markers)
    np.testing.assert_allclose(back.surface.colors, scene.surface.colors, atol=1e-7)


def test_markers_survive_the_bag_and_decode_to_the_same_scene(tmp_path):
    scene = _scene()
    with BagWriter(tmp_path / "bag") as bag:
        bag.add_topic("/visualization/robot", "visualization_msgs/msg/MarkerArray")
        bag.write("/visualization/robot", 5, serialize_message(scene_to_marker_array(scene)))
        bag.write_message("/visualization/robot", 6, scene_to_marker_array(scene))  # rclpy object
        with pytest.raises(TypeError, match="Marker message written"):
            bag.write_message("/visualization/robot", 7, scene_to_marker_array(scene).markers[0])
    with BagReader(tmp_path / "bag") as reader:
        ((_, decoded), (_, decoded_again)) = reader.read_topic("/visualization/robot")
    assert len(decoded_again.markers) == len(decoded.markers)
    back = scene_from_markers(decoded.markers)
    np.testing.assert_array_equal(back.surface.vertices, scene.surface.vertices)
    np.testing.assert_allclose(back.surface.colors, scene.surface.colors, atol=1e-7)  # float32
    assert [s.name for s in back.spheres] == ["effector", "target"]
    np.testing.assert_array_equal(back.spheres[1].center, scene.spheres[1].center)
    assert [p.name for p in back.polylines] == ["cable0", "cable1"]
    np.testing.assert_array_equal(back.polylines[0].points, scene.polylines[0].points)
