"""Opening the frame source a :class:`~soft_inverse_ros.core.mocap.config.MocapConfig` names.

Pull sources (``motioncapture``, ``replay_csv``, ``replay_bag``) have ``next_frame()``
(blocking for live systems; None at the end of a replay). The ``simulated`` source is
fed by the simulated robot instead (``observe(t, ...)`` then ``poll(now)``).
"""

from __future__ import annotations

import time
from typing import Callable, Protocol, Union

from soft_inverse_ros.core.mocap.config import MocapConfig
from soft_inverse_ros.core.mocap.frame import MocapFrame
from soft_inverse_ros.core.mocap.motioncapture_source import MotionCaptureSource
from soft_inverse_ros.core.mocap.replay_source import CsvReplaySource, RosbagReplaySource
from soft_inverse_ros.core.mocap.simulated_source import SimulatedMocapSource


class FrameSource(Protocol):
    def next_frame(self) -> MocapFrame | None: ...


AnySource = Union[MotionCaptureSource, CsvReplaySource, RosbagReplaySource, SimulatedMocapSource]


def open_source(config: MocapConfig, clock: Callable[[], float] = time.monotonic) -> AnySource:
    """The source of ``config.backend`` (connects to a live system for ``motioncapture``).

    Args:
        config: Validated mocap configuration.
        clock: Time source [s] stamping live frames (the node's clock).
    """
    if config.backend == "motioncapture":
        assert config.motioncapture is not None
        return MotionCaptureSource(config.motioncapture, clock=clock)
    if config.backend == "replay_csv":
        assert config.replay is not None
        return CsvReplaySource(config.replay.path)
    if config.backend == "replay_bag":
        assert config.replay is not None
        return RosbagReplaySource(
            config.replay.path, config.replay.topics, config.replay.stamp_tolerance
        )
    if config.backend == "simulated":
        assert config.simulated is not None
        return SimulatedMocapSource(config.simulated, config.registration)
    raise ValueError(f"unknown mocap backend {config.backend!r}")
