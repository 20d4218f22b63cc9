"""Deriving the effector position from a (robot-frame) mocap frame.

Modes (``EffectorConfig.mode``):

* ``rigid_body``: the origin of the named body plus ``offset`` expressed in the body
  frame (e.g. the tip of a tool whose markers sit on a plate);
* ``labeled_marker``: the named labeled marker;
* ``nearest_marker``: the unlabeled marker nearest to the previous effector estimate
  (``initial_position`` before the first one), within ``gate_radius``;
* ``marker_centroid``: the centroid of the listed labeled markers (at least
  ``min_markers`` of them present), or, with no names, of the unlabeled markers within
  ``gate_radius`` of the previous estimate.

The searching modes never look beyond ``gate_radius`` (``reacquire_radius`` once the
effector is stale): a lost effector stays stale, and the feedback open loop, rather than
capture a neighbouring marker.

All positions are metres in the robot frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from soft_inverse_ros.core.mocap.frame import MocapFrame
from soft_inverse_ros.core.mocap.rigid_transform import quaternion_to_matrix

EFFECTOR_MODES = ("rigid_body", "labeled_marker", "nearest_marker", "marker_centroid")


@dataclass(frozen=True)
class EffectorConfig:
    """How the effector position is obtained (see the module docstring).

    Attributes:
        mode: One of :data:`EFFECTOR_MODES`.
        name: Body name (``rigid_body``) or marker label (``labeled_marker``).
        offset: (3,) effector point in the body frame [m] (``rigid_body``).
        markers: Labeled marker names averaged by ``marker_centroid``.
        min_markers: Fewest listed markers that must be present (default: all).
        initial_position: (3,) first guess in the robot frame [m] for the modes that
            search near the previous estimate.
        gate_radius: Largest distance from the previous estimate for a marker to be
            considered [m] (``inf``: no gate).
        reacquire_radius: While the effector is stale, search this far from the last
            estimate [m] (None: only ``gate_radius``). Larger values find a marker that
            moved during an occlusion, at the risk of capturing a neighbouring marker.
    """

    mode: str = "rigid_body"
    name: str = ""
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    markers: tuple[str, ...] = ()
    min_markers: int | None = None
    initial_position: tuple[float, float, float] | None = None
    gate_radius: float = float("inf")
    reacquire_radius: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in EFFECTOR_MODES:
            raise ValueError(f"effector.mode must be one of {EFFECTOR_MODES}, got {self.mode!r}")
        if self.mode in ("rigid_body", "labeled_marker") and not self.name:
            raise ValueError(f"effector.name is required for effector.mode={self.mode!r}")
        off = np.asarray(self.offset, dtype=float).reshape(-1)
        if off.shape != (3,) or not np.all(np.isfinite(off)):
            raise ValueError(f"effector.offset must be 3 finite numbers [m], got {self.offset!r}")
        object.__setattr__(self, "offset", tuple(float(v) for v in off))
        object.__setattr__(self, "markers", tuple(str(m) for m in self.markers))
        if self.initial_position is not None:
            p = np.asarray(self.initial_position, dtype=float).reshape(-1)
            if p.shape != (3,) or not np.all(np.isfinite(p)):
                raise ValueError(
                    f"effector.initial_position must be 3 finite numbers [m], "
                    f"got {self.initial_position!r}"
                )
            object.__setattr__(self, "initial_position", tuple(float(v) for v in p))
        searches = self.mode == "nearest_marker" or (
            self.mode == "marker_centroid" and not self.markers
        )
        if searches and self.initial_position is None:
            raise ValueError(
                f"effector.initial_position is required for effector.mode={self.mode!r} "
                "(the search starts near it)"
            )
        if self.mode == "marker_centroid" and not self.markers and not np.isfinite(
            self.gate_radius
        ):
            raise ValueError(
                "effector.gate_radius must be finite for a centroid of unlabeled markers"
            )
        if not (self.gate_radius > 0):
            raise ValueError(f"effector.gate_radius must be > 0 m, got {self.gate_radius!r}")
        if self.reacquire_radius is not None and not (
            self.reacquire_radius >= self.gate_radius and searches
        ):
            raise ValueError(
                "effector.reacquire_radius applies to the searching modes and must be "
                f"≥ effector.gate_radius, got {self.reacquire_radius!r}"
            )
        if self.min_markers is not None:
            if self.mode != "marker_centroid" or not self.markers:
                raise ValueError("effector.min_markers applies to marker_centroid with markers")
            if not 1 <= self.min_markers <= len(self.markers):
                raise ValueError(
                    f"effector.min_markers must be in [1, {len(self.markers)}], "
                    f"got {self.min_markers!r}"
                )


@dataclass
class EffectorExtractor:
    """Stateless effector extraction; the caller supplies the previous estimate."""

    config: EffectorConfig
    _offset: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._offset = np.asarray(self.config.offset, dtype=float)

    def extract(
        self, frame: MocapFrame, previous: np.ndarray | None = None, *, lost: bool = False
    ) -> np.ndarray | None:
        """Effector position (3,) [m] from ``frame`` (robot frame), or None if unavailable.

        Args:
            frame: Hygiene-filtered frame in the robot frame.
            previous: Previous accepted effector estimate [m] (falls back to
                ``initial_position``); used by the searching modes.
            lost: The previous estimate is stale: the searching modes first re-center on
                the marker nearest to it within ``reacquire_radius``, so that a marker
                that moved during an occlusion can be found again (the effector track's
                jump filter then decides whether to re-acquire).
        """
        cfg = self.config
        if cfg.mode == "rigid_body":
            body = frame.bodies.get(cfg.name)
            if body is None:
                return None
            if not np.any(self._offset):
                return body.position.copy()
            return body.position + quaternion_to_matrix(body.orientation) @ self._offset
        if cfg.mode == "labeled_marker":
            marker = frame.labeled_markers.get(cfg.name)
            return None if marker is None else marker.copy()
        if cfg.mode == "marker_centroid" and cfg.markers:
            present = [frame.labeled_markers[m] for m in cfg.markers if m in frame.labeled_markers]
            needed = len(cfg.markers) if cfg.min_markers is None else cfg.min_markers
            if len(present) < needed:
                return None
            return np.mean(present, axis=0)
        # Searching modes over unlabeled markers.
        ref = previous if previous is not None else np.asarray(cfg.initial_position)
        pts = frame.markers
        if len(pts) == 0:
            return None
        dist = np.linalg.norm(pts - ref, axis=1)
        if lost and cfg.reacquire_radius is not None:
            i = int(np.argmin(dist))
            if dist[i] > cfg.reacquire_radius:
                return None
            ref = pts[i]
            dist = np.linalg.norm(pts - ref, axis=1)
        if cfg.mode == "nearest_marker":
            i = int(np.argmin(dist))
            return pts[i].copy() if dist[i] <= cfg.gate_radius else None
        inside = dist <= cfg.gate_radius
        if not np.any(inside):
            return None
        return pts[inside].mean(axis=0)
