"""visualization_msgs/MarkerArray from a :class:`~soft_inverse_ros.core.model.visualization.Scene`.

Pure conversion functions for the nodes that publish ``visualization/robot``
(:data:`soft_inverse_ros.topics.ROBOT_MARKERS`); no node here. Marker namespaces:

- ``surface``: one TRIANGLE_LIST of the deformed boundary; per-vertex colours when they
  differ (pressure colouring), else one ``color`` and no ``colors`` (half the work);
- ``effector``, ``target``: SPHERE markers;
- ``cables``: one LINE_STRIP per cable (id = cable index);
- ``contacts``: one SPHERE_LIST of the contact points, ``contact_forces``: one LINE_LIST of
  the normal contact forces (length ∝ force), both published (maybe empty) whenever the
  robot models contact, so fewer contacts replace more.

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
    return MarkerArray(markers=markers)


def delete_all_markers(frame_id: str = "base_link") -> Any:
    """MarkerArray with one DELETEALL marker (clears the display, e.g. on shutdown)."""
    from visualization_msgs.msg import Marker, MarkerArray

    m = Marker()
    m.header.frame_id = frame_id
    m.action = Marker.DELETEALL
    return MarkerArray(markers=[m])
