"""visualization_msgs/MarkerArray from a :class:`~soft_inverse_ros.core.model.visualization.Scene`.

Pure conversion functions for the nodes that publish ``visualization/robot``
(:data:`soft_inverse_ros.topics.ROBOT_MARKERS`); no node here. Marker namespaces:

- ``surface``: one TRIANGLE_LIST of the deformed boundary; per-vertex colours when they
  differ (pressure colouring), else one ``color`` and no ``colors`` (half the work);
- ``effector``, ``target``: SPHERE markers;
- ``cables``: one LINE_STRIP per cable (id = cable index);
- ``contacts``: one SPHERE_LIST of the contact points, ``contact_forces``: one LINE_LIST of
  the normal contact forces (length ∝ force), both published (maybe empty) whenever the
  robot models contact, so fewer contacts replace more;
- ``obstacles``: one TRIANGLE_LIST per rigid obstacle of the collision section (id = its
  index), at its current pose (moving obstacles move);
- a hybrid robot (hybrid_plant_node, core/rigid/hybrid_live.py ``hybrid_visual_scene``):
  ``arm_links`` (LINE_LIST between the arm's joint origins, from the chain's frame poses)
  and ``arm_joints`` (SPHERE_LIST), the soft part and the soft block in ``surface``, the
  probe tip in ``effector``.

All markers are in the scene frame (``base_link``), in metres, with an identity pose, and
never expire (``lifetime`` 0): each publication replaces the previous one by (ns, id).
The report decodes the same markers back with
:func:`soft_inverse_ros.analysis.snapshots.scene_from_markers`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from soft_inverse_ros.core.model.visualization import Scene

NS_SURFACE = "surface"
NS_CABLES = "cables"
NS_OBSTACLES = "obstacles"


def _points(array: np.ndarray) -> list:
    from geometry_msgs.msg import Point

    return [Point(x=x, y=y, z=z) for x, y, z in np.asarray(array, dtype=float).tolist()]


def _colors(array: np.ndarray) -> list:
    from std_msgs.msg import ColorRGBA

    return [ColorRGBA(r=r, g=g, b=b, a=a) for r, g, b, a in np.asarray(array, dtype=float).tolist()]


def _marker(ns: str, marker_id: int, kind: int, frame_id: str, stamp: Any) -> Any:
    from visualization_msgs.msg import Marker

    m = Marker()
    m.header.frame_id = frame_id
    if stamp is not None:
        m.header.stamp = stamp
    m.ns = ns
    m.id = marker_id
    m.type = kind
    m.action = Marker.ADD
    m.pose.orientation.w = 1.0
    m.frame_locked = False
    return m


def scene_to_marker_array(scene: Scene, stamp: Any = None) -> Any:
    """MarkerArray drawing ``scene`` (see module doc).

    Args:
        scene: Surface, spheres and polylines [m] in ``scene.frame_id``.
        stamp: ``builtin_interfaces/Time`` of the state drawn (e.g. FemState header stamp);
            None leaves it zero (RViz then uses the latest transform).
    """
    from visualization_msgs.msg import Marker, MarkerArray

    markers = []
    if scene.surface is not None and scene.surface.n_triangles:
        m = _marker(NS_SURFACE, 0, Marker.TRIANGLE_LIST, scene.frame_id, stamp)
        m.scale.x = m.scale.y = m.scale.z = 1.0
        m.points = _points(scene.surface.vertices)
        colors = scene.surface.colors
        if np.all(colors == colors[0]):
            m.color.r, m.color.g, m.color.b, m.color.a = map(float, colors[0])
        else:
            m.color.r = m.color.g = m.color.b = m.color.a = 1.0
            m.colors = _colors(colors)
        markers.append(m)
    for sphere in scene.spheres:
        m = _marker(sphere.name, 0, Marker.SPHERE, scene.frame_id, stamp)
        m.pose.position.x, m.pose.position.y, m.pose.position.z = map(float, sphere.center)
        m.scale.x = m.scale.y = m.scale.z = 2.0 * float(sphere.radius)
        m.color.r, m.color.g, m.color.b, m.color.a = map(float, sphere.rgba)
        markers.append(m)
    for i, line in enumerate(scene.polylines):
        m = _marker(NS_CABLES, i, Marker.LINE_STRIP, scene.frame_id, stamp)
        m.scale.x = float(line.width)
        m.color.r, m.color.g, m.color.b, m.color.a = map(float, line.rgba)
        m.points = _points(line.points)
        m.text = line.name
        markers.append(m)
    for point_set in scene.point_sets:
        m = _marker(point_set.name, 0, Marker.SPHERE_LIST, scene.frame_id, stamp)
        m.scale.x = m.scale.y = m.scale.z = 2.0 * float(point_set.radius)
        m.color.r, m.color.g, m.color.b, m.color.a = map(float, point_set.rgba)
        m.points = _points(point_set.points)
        markers.append(m)
    for segments in scene.segments:
        m = _marker(segments.name, 0, Marker.LINE_LIST, scene.frame_id, stamp)
        m.scale.x = float(segments.width)
        m.color.r, m.color.g, m.color.b, m.color.a = map(float, segments.rgba)
        pairs = np.empty((2 * len(segments.starts), 3))
        pairs[0::2], pairs[1::2] = segments.starts, segments.ends
        m.points = _points(pairs)
        markers.append(m)
    for i, obstacle in enumerate(scene.obstacles):
        m = _marker(NS_OBSTACLES, i, Marker.TRIANGLE_LIST, scene.frame_id, stamp)
        m.scale.x = m.scale.y = m.scale.z = 1.0
        m.color.r, m.color.g, m.color.b, m.color.a = map(float, obstacle.colors[0])
        m.points = _points(obstacle.vertices)
        markers.append(m)
    return MarkerArray(markers=markers)


def delete_all_markers(frame_id: str = "base_link") -> Any:
    """MarkerArray with one DELETEALL marker (clears the display, e.g. on shutdown)."""
    from visualization_msgs.msg import Marker, MarkerArray

    m = Marker()
    m.header.frame_id = frame_id
    m.action = Marker.DELETEALL
    return MarkerArray(markers=[m])


class SurfaceMarkerSerializer:
    """The ``surface`` TRIANGLE_LIST as a one-marker MarkerArray in serialized CDR bytes,
    patched in place frame after frame.

    Converting a rclpy message with thousands of ``geometry_msgs/Point`` to its C struct
    costs ~14 µs per point (measured here: a 3000-vertex surface takes 40 ms to publish),
    which made the plant's 5 Hz RViz surface a tenth of a core. The layout is rclpy's own:
    a template message with recognisable sentinel coordinates, colours and stamp is
    serialized once per (vertex count, colouring, frame) with
    :func:`rclpy.serialization.serialize_message`, and each frame writes the vertices
    (float64), per-vertex colours (float32) and stamp over those sentinels. Pass the bytes
    to ``Publisher.publish`` (rclpy publishes ``bytes`` as a serialized message).
    Works whatever the distro's Marker definition; when a sentinel cannot be located
    uniquely (or the CDR is not little-endian), :meth:`serialize` returns None and the
    caller publishes messages instead.
    """

    _SEC, _NSEC = 0x5A17C0DE, 0x1DEC0DED  # sentinel stamp

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._template: bytes | None = None
        self._offsets: tuple[int, int | None, int] | None = None

    @staticmethod
    def _find_once(buf: bytes, block: bytes) -> int | None:
        at = buf.find(block)
        if at < 0 or buf.find(block, at + 1) >= 0:
            return None
        return at

    def _build(self, n: int, per_vertex: bool, color: tuple, frame_id: str) -> None:
        import struct

        from builtin_interfaces.msg import Time
        from rclpy.serialization import serialize_message
        from visualization_msgs.msg import Marker, MarkerArray

        m = _marker(NS_SURFACE, 0, Marker.TRIANGLE_LIST, frame_id,
                    Time(sec=self._SEC, nanosec=self._NSEC))
        m.scale.x = m.scale.y = m.scale.z = 1.0
        pts = 1e5 + np.arange(3 * n, dtype=float) / 7.0  # distinct, not a real coordinate
        m.points = _points(pts.reshape(n, 3))
        cols = None
        if per_vertex:
            m.color.r = m.color.g = m.color.b = m.color.a = 1.0
            cols = (np.arange(4 * n) + 1e6).astype(np.float32)  # exact in float32
            m.colors = _colors(cols.reshape(n, 4))
        else:
            m.color.r, m.color.g, m.color.b, m.color.a = color
        buf = serialize_message(MarkerArray(markers=[m]))
        self._template = self._offsets = None
        self._key = (n, per_vertex, color, frame_id)
        if len(buf) < 4 or buf[1] != 1:  # encapsulation CDR_LE (0x0001)
            return
        at_pts = self._find_once(buf, pts.astype("<f8").tobytes())
        at_cols = self._find_once(buf, cols.astype("<f4").tobytes()) if per_vertex else None
        at_stamp = self._find_once(buf, struct.pack("<iI", self._SEC, self._NSEC))
        if at_pts is None or at_stamp is None or (per_vertex and at_cols is None):
            return
        self._template, self._offsets = buf, (at_pts, at_cols, at_stamp)

    def serialize(self, surface: Any, frame_id: str, stamp: Any = None) -> bytes | None:
        """CDR bytes of ``MarkerArray([surface marker])`` as :func:`scene_to_marker_array`
        draws ``surface`` (a :class:`~soft_inverse_ros.core.model.visualization.SurfaceMesh`),
        stamped ``stamp`` (builtin_interfaces/Time or None: zero); None when the layout
        could not be located (publish messages then)."""
        import struct

        vertices = np.ascontiguousarray(surface.vertices, dtype="<f8")
        colors = surface.colors
        per_vertex = not bool(np.all(colors == colors[0]))
        color = (1.0, 1.0, 1.0, 1.0) if per_vertex else tuple(float(c) for c in colors[0])
        key = (len(vertices), per_vertex, color, frame_id)
        if key != self._key:
            self._build(*key)
        if self._template is None:
            return None
        at_pts, at_cols, at_stamp = self._offsets
        buf = bytearray(self._template)
        buf[at_pts:at_pts + vertices.nbytes] = vertices.tobytes()
        if per_vertex:
            rgba = np.ascontiguousarray(colors, dtype="<f4")
            buf[at_cols:at_cols + rgba.nbytes] = rgba.tobytes()
        sec, nsec = (int(stamp.sec), int(stamp.nanosec)) if stamp is not None else (0, 0)
        buf[at_stamp:at_stamp + 8] = struct.pack("<iI", sec, nsec)
        return bytes(buf)


class ScenePublisher:
    """Publishes a :class:`Scene` on one ``visualization_msgs/MarkerArray`` publisher as
    :func:`scene_to_marker_array` draws it, in two messages per frame: the surface through
    :class:`SurfaceMarkerSerializer` (serialized bytes), everything else as messages.
    Displays and :class:`soft_inverse_ros.analysis.snapshots.MarkerState` key markers by
    (ns, id), so the split draws the same."""

    def __init__(self, publisher: Any) -> None:
        self.publisher = publisher
        self._surface = SurfaceMarkerSerializer()

    def publish(self, scene: Scene, stamp: Any = None) -> None:
        import dataclasses

        if scene.surface is not None and scene.surface.n_triangles:
            data = self._surface.serialize(scene.surface, scene.frame_id, stamp)
            if data is not None:
                self.publisher.publish(data)
                scene = dataclasses.replace(scene, surface=None)
        self.publisher.publish(scene_to_marker_array(scene, stamp))
