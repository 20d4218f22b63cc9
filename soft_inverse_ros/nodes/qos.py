"""QoS profiles of the soft_inverse_ros topics (justified in the README, "QoS").

- High-rate streams (targets, actuator commands, solver status, the drivers' joint and
  chamber states): best effort, keep last 1 -- the newest sample is the only useful one,
  a retransmission would arrive late, and the receivers have watchdogs. Motion capture
  uses the standard sensor-data profile (best effort, depth 5).
- FEM state: reliable, keep last 1 -- low rate, large, and every state is wanted by
  compliance_node, but a newer one supersedes an unsent older one.
- Compliance snapshot: reliable + transient local, keep last 1 -- a controller that
  (re)starts gets the newest snapshot at once instead of waiting for the next update.
"""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

#: best effort, keep last 1 (sensor-data style, but depth 1: only the newest matters)
HIGH_RATE = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.BEST_EFFORT,
    durability=DurabilityPolicy.VOLATILE,
)
#: the standard sensor-data profile (depth 5) for measurement streams
SENSOR_DATA = qos_profile_sensor_data
#: reliable, keep last 1
STATE = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
#: reliable, transient local, keep last 1 (latched)
LATCHED = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)


def _with_depth(profile: QoSProfile, depth: int) -> QoSProfile:
    """``profile`` keeping the last ``depth`` samples instead."""
    return QoSProfile(history=profile.history, depth=depth, reliability=profile.reliability,
                      durability=profile.durability)


#: RViz markers (visualization/robot): STATE with depth 2 -- a frame is two MarkerArrays
#: (the pre-serialized surface and the rest, nodes/markers.ScenePublisher); depth 1 could
#: let the second replace the first before a reader took it
MARKERS = _with_depth(STATE, 2)
#: LATCHED with depth 2: a display started later still gets the last whole frame
MARKERS_LATCHED = _with_depth(LATCHED, 2)
#: diagnostics, as the ROS tools expect (reliable, depth 10)
DIAGNOSTICS = QoSProfile(depth=10)
#: /clock (simulation time): reliable keep last 1, matched by rclpy's best-effort clock
#: subscription; every tick supersedes the previous one
CLOCK = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
