"""Mocap frame → robot-frame estimate: registration, hygiene filtering, effector.

:class:`MocapPipeline` is what the mocap node runs on every frame a source delivers:

1. convert units and re-express the frame in the robot frame with the registration;
2. drop NaN/inf items (counted), reject jumps per body / labeled marker / effector
   (:mod:`~soft_inverse_ros.core.mocap.sample_filter`);
3. derive the effector position (:mod:`~soft_inverse_ros.core.mocap.effector`).

The output never holds a non-finite number. Staleness is a function of the caller's
clock (``now`` [s]), so it is evaluated between frames too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from soft_inverse_ros.core.mocap.effector import EffectorConfig, EffectorExtractor
from soft_inverse_ros.core.mocap.frame import BodyPose, MocapFrame
from soft_inverse_ros.core.mocap.registration import FrameRegistration
from soft_inverse_ros.core.mocap.sample_filter import FilterStats, SampleFilterConfig, TrackSet

if TYPE_CHECKING:
    from soft_inverse_ros.core.mocap.config import MocapConfig

#: Track name of the derived effector in statistics and stale lists.
EFFECTOR_TRACK = "effector"


def body_track(name: str) -> str:
    return f"body:{name}"


def marker_track(name: str) -> str:
    return f"marker:{name}"


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class EffectorEstimate:
    """Latest accepted effector position.

    Attributes:
        position: (3,) [m] robot frame, or None before the first accepted sample.
        stamp: Capture time of ``position`` [s] (None before the first).
        stale: True when older than the filter's ``stale_after`` (or absent).
        fresh: True when ``position`` was accepted from the frame just processed.
    """

    position: np.ndarray | None
    stamp: float | None
    stale: bool
    fresh: bool = False


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class MocapEstimate:
    """Result of processing one frame.

    Attributes:
        frame: Accepted bodies and markers of this frame, in the robot frame (finite only).
        effector: The effector estimate after this frame.
        stale: Names of stale tracks (``body:NAME``, ``marker:NAME``, ``effector``).
    """

    frame: MocapFrame
    effector: EffectorEstimate
    stale: tuple[str, ...]

    @property
    def stamp(self) -> float:
        return self.frame.stamp


class MocapPipeline:
    """Registration + hygiene + effector extraction (see the module docstring)."""

    def __init__(
        self,
        registration: FrameRegistration,
        filter_config: SampleFilterConfig,
        effector_config: EffectorConfig | None = None,
    ) -> None:
        self.registration = registration
        self.filter_config = filter_config
        self.tracks = TrackSet(filter_config)
        self.extractor = None if effector_config is None else EffectorExtractor(effector_config)
        #: Unlabeled markers: ``accepted`` counts finite points, ``dropped_nonfinite`` the rest.
        self.unlabeled_stats = FilterStats()
        #: Whole frames dropped for a non-finite stamp.
        self.dropped_frames = 0

    @classmethod
    def from_config(cls, config: "MocapConfig") -> "MocapPipeline":
        """The pipeline a validated mocap configuration describes."""
        return cls(config.registration, config.filter, config.effector)

    @property
    def robot_frame(self) -> str:
        return self.registration.parent_frame

    def to_robot_frame(self, frame: MocapFrame) -> MocapFrame:
        """Unit conversion and registration; frames already in the robot frame pass through."""
        if frame.frame_id == self.robot_frame:
            return frame
        reg = self.registration
        # NaN/inf items propagate (inf·0 → NaN) and are dropped right after: no warning.
        with np.errstate(invalid="ignore", over="ignore"):
            return frame.scaled(reg.mocap_unit_scale).transformed(reg.transform, self.robot_frame)

    def process(self, frame: MocapFrame) -> MocapEstimate:
        """Filter one source frame; returns the accepted content and the effector estimate."""
        stamp = frame.stamp
        if not np.isfinite(stamp):
            # No usable time: nothing of the frame is trusted and, lacking a clock
            # reading, the effector is reported stale (the safe side).
            self.dropped_frames += 1
            last = self.effector(float("inf"))
            return MocapEstimate(MocapFrame(0.0, frame_id=self.robot_frame), last, ())
        robot = self.to_robot_frame(frame)

        bodies = {}
        for name, body in robot.bodies.items():
            finite = body.is_finite()
            if self.tracks.track(body_track(name)).update(stamp, body.position, finite=finite):
                q = body.orientation / np.linalg.norm(body.orientation)
                bodies[name] = BodyPose(body.position, q)
        labeled = {
            name: p
            for name, p in robot.labeled_markers.items()
            if self.tracks.track(marker_track(name)).update(stamp, p)
        }
        finite_rows = np.all(np.isfinite(robot.markers), axis=1)
        self.unlabeled_stats.accepted += int(np.count_nonzero(finite_rows))
        self.unlabeled_stats.dropped_nonfinite += int(np.count_nonzero(~finite_rows))
        clean = MocapFrame(stamp, bodies, labeled, robot.markers[finite_rows], self.robot_frame)

        fresh = False
        if self.extractor is not None:
            track = self.tracks.track(EFFECTOR_TRACK)
            lost = track.last_stamp is not None and track.is_stale(stamp)
            position = self.extractor.extract(clean, track.last_position, lost=lost)
            if position is not None:
                fresh = track.update(stamp, position)
        stale = tuple(self.stale_names(stamp))
        return MocapEstimate(clean, self.effector(stamp, fresh=fresh), stale)

    def effector(self, now: float, *, fresh: bool = False) -> EffectorEstimate:
        """The latest accepted effector position and whether it is stale at ``now`` [s]."""
        if self.extractor is None:
            return EffectorEstimate(None, None, True, False)
        track = self.tracks.track(EFFECTOR_TRACK)
        return EffectorEstimate(track.last_position, track.last_stamp, track.is_stale(now), fresh)

    def stale_names(self, now: float) -> list[str]:
        """Tracks whose last accepted sample is older than ``stale_after`` at ``now``."""
        return self.tracks.stale_names(now)

    def statistics(self) -> dict[str, dict[str, int]]:
        """Counters per track, plus ``total`` (tracks summed), ``unlabeled`` and ``frames``."""
        out = {name: t.stats.as_dict() for name, t in sorted(self.tracks.tracks.items())}
        out["total"] = self.tracks.total_stats().as_dict()
        out["unlabeled"] = self.unlabeled_stats.as_dict()
        out["frames"] = {"dropped_nonfinite_stamp": self.dropped_frames}
        return out
