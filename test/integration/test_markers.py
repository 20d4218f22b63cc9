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
from soft_inverse_ros.nodes.markers import (ScenePublisher, SurfaceMarkerSerializer, delete_all_markers,
                                           scene_to_marker_array)
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


def test_obstacles_are_drawn_at_their_pose_and_left_out_of_the_report_scene():
    from soft_inverse_ros.core.contact.geometry import Box, Plane, Sphere
    from soft_inverse_ros.core.contact.mesh_obstacle import MeshGeometry, MeshObstacle

    pts = _scene().surface.vertices[:3]
    box = Box((0.0, 0.0, 0.05), (0.01, 0.02, 0.06))
    corners = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], dtype=float) * 0.01
    faces = np.array([[0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3], [0, 4, 5], [0, 5, 1],
                      [2, 3, 7], [2, 7, 6], [0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5]])
    mesh = MeshObstacle(MeshGeometry(corners, faces)).moved((0.0, 0.0, 0.1))
    obstacles = (Plane((0, 0, -0.01), (0, 0, 1)), Sphere((0, 0, 0.2), 0.01), box, mesh)
    array = scene_to_marker_array(robot_scene(pts, np.array([[0, 1, 2]]), obstacles=obstacles))
    drawn = [m for m in array.markers if m.ns == "obstacles"]
    assert [m.id for m in drawn] == [0, 1, 2, 3] and all(m.type == Marker.TRIANGLE_LIST for m in drawn)
    xyz = [np.array([[p.x, p.y, p.z] for p in m.points]) for m in drawn]
    assert np.allclose(xyz[0][:, 2], -0.01) and len(xyz[0]) == 6  # the plane's square
    assert np.allclose(np.linalg.norm(xyz[1] - [0, 0, 0.2], axis=1), 0.01)  # on the sphere
    assert np.allclose(xyz[2].min(axis=0), box.lower) and np.allclose(xyz[2].max(axis=0), box.upper)
    assert len(xyz[3]) == 36 and np.allclose(xyz[3][:, 2].min(), 0.1)  # the mesh, moved
    back = scene_from_markers(array.markers)
    assert back.surface.n_triangles == 1  # the robot only: obstacles do not frame the snapshots


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


def _roundtrip(marker):
    from rclpy.serialization import deserialize_message

    return deserialize_message(serialize_message(MarkerArray(markers=[marker])), MarkerArray).markers[0]


@pytest.mark.parametrize("pressure_coloured", [False, True])
def test_the_serialized_surface_is_the_message_surface_frame_after_frame(pressure_coloured):
    from builtin_interfaces.msg import Time
    from rclpy.serialization import deserialize_message

    base = _scene()
    faces = boundary_faces(np.array([[0, 1, 2, 3], [1, 2, 3, 4]]), base.surface.vertices[:5])
    serializer = SurfaceMarkerSerializer()
    rng = np.random.default_rng(3)
    for frame, n_points in enumerate((5, 5, 5)):  # the template is reused after frame 0
        pts = rng.normal(scale=0.02, size=(n_points, 3))
        scene = robot_scene(pts, faces, cavity_faces={"cav": np.array([0, 2])} if pressure_coloured else None,
                            pressures={"cav": 300.0 * (frame + 1)} if pressure_coloured else None,
                            pressure_range=(0.0, 1000.0))
        assert (len(np.unique(scene.surface.colors, axis=0)) > 1) == pressure_coloured
        stamp = Time(sec=100 + frame, nanosec=1234 * frame)
        data = serializer.serialize(scene.surface, "base_link", stamp)
        assert isinstance(data, bytes)
        (got,) = deserialize_message(data, MarkerArray).markers
        assert got == _roundtrip(scene_to_marker_array(scene, stamp).markers[0]), frame
    # another vertex count or frame rebuilds the layout instead of writing past it
    small = robot_scene(base.surface.vertices[:3], np.array([[0, 1, 2]]))
    (got,) = deserialize_message(serializer.serialize(small.surface, "odom"), MarkerArray).markers
    assert got == _roundtrip(scene_to_marker_array(
        robot_scene(base.surface.vertices[:3], np.array([[0, 1, 2]]), frame_id="odom")).markers[0])
    assert len(got.points) == 3 and got.header.stamp.sec == 0


def test_the_scene_publisher_draws_what_one_marker_array_draws():
    from rclpy.serialization import deserialize_message

    from soft_inverse_ros.analysis.snapshots import MarkerState

    class Recorder:
        def __init__(self):
            self.sent = []

        def publish(self, msg):
            self.sent.append(deserialize_message(msg, MarkerArray) if isinstance(msg, bytes) else msg)

    scene, pub = _scene(), Recorder()
    ScenePublisher(pub).publish(scene)
    assert len(pub.sent) == 2 and [m.ns for m in pub.sent[0].markers] == ["surface"]
    assert "surface" not in [m.ns for m in pub.sent[1].markers]
    state = MarkerState()
    for array in pub.sent:
        state.apply(array)
    back, ref = state.scene(), scene_from_markers(scene_to_marker_array(scene).markers)
    np.testing.assert_array_equal(back.surface.vertices, ref.surface.vertices)
    np.testing.assert_allclose(back.surface.colors, ref.surface.colors, atol=1e-7)
    assert [s.name for s in back.spheres] == [s.name for s in ref.spheres]
    assert [p.name for p in back.polylines] == [p.name for p in ref.polylines]
