"""A simulated mocap system fed by the simulated robot.

The simulation hands :meth:`SimulatedMocapSource.observe` the true robot-frame positions
of markers (and optionally rigid-body poses) at capture time ``t``. The source corrupts
them as a real system would and delivers them ``latency`` seconds later through
:meth:`SimulatedMocapSource.poll`:

* Gaussian noise of standard deviation ``noise_std`` [m] per axis (and
  ``orientation_noise_std`` [rad] per axis of a small random rotation for bodies);
* whole-frame dropouts: independent (``dropout_probability``) and in bursts (a
  two-state Gilbert–Elliott chain: a burst starts with ``burst_probability`` per frame
  and lasts a geometric number of frames with mean ``burst_mean_length``);
* per-item occlusions (``occlusion_probability``);
* outliers (``outlier_probability`` per item): the position is displaced by
  ``outlier_magnitude`` [m] in a uniformly random direction.

Frames come out in the mocap frame (``registration`` maps mocap → robot; identity by
default) and in mocap units, stamped with their capture time. Markers are reported
labeled, or as an unlabeled, shuffled point list (``labeled=False``). Every random draw
comes from one ``numpy`` generator seeded by ``seed``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.mocap.frame import BodyPose, MocapFrame
from soft_inverse_ros.core.mocap.registration import FrameRegistration
from soft_inverse_ros.core.mocap.rigid_transform import (
    quaternion_multiply,
    rotation_vector_to_quaternion,
)


@dataclass(frozen=True)
class SimulatedMocapConfig:
    """Corruption model of the simulated mocap (SI units; probabilities in [0, 1])."""

    noise_std: float = 0.0002
    orientation_noise_std: float = 0.0
    latency: float = 0.0
    dropout_probability: float = 0.0
    burst_probability: float = 0.0
    burst_mean_length: float = 5.0
    occlusion_probability: float = 0.0
    outlier_probability: float = 0.0
    outlier_magnitude: float = 0.05
    labeled: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        for key in ("noise_std", "orientation_noise_std", "latency", "outlier_magnitude"):
            value = getattr(self, key)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"simulated.{key} must be a finite number ≥ 0, got {value!r}")
        for key in (
            "dropout_probability", "burst_probability", "occlusion_probability",
            "outlier_probability",
        ):
            value = getattr(self, key)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"simulated.{key} must be in [0, 1], got {value!r}")
        if not (np.isfinite(self.burst_mean_length) and self.burst_mean_length >= 1):
            raise ValueError(
                f"simulated.burst_mean_length must be ≥ 1 frame, got {self.burst_mean_length!r}"
            )


@dataclass
class SimulatedMocapStats:
    """What the simulator did (for tests and diagnostics)."""

    frames_observed: int = 0
    frames_dropped: int = 0
    frames_delivered: int = 0
    items_occluded: int = 0
    outliers_injected: int = 0


class SimulatedMocapSource:
    """Noisy, delayed, lossy mocap of simulated truth (see the module docstring)."""

    def __init__(
        self,
        config: SimulatedMocapConfig,
        registration: FrameRegistration | None = None,
    ) -> None:
        self.config = config
        self.registration = registration or FrameRegistration.identity()
        self._mocap_from_robot = self.registration.transform.inverse()
        self.rng = np.random.default_rng(config.seed)
        self.stats = SimulatedMocapStats()
        self._in_burst = False
        self._queue: deque[tuple[float, MocapFrame]] = deque()
        self._last_stamp = -np.inf

    def observe(
        self,
        stamp: float,
        markers: dict[str, np.ndarray] | None = None,
        bodies: dict[str, BodyPose] | None = None,
    ) -> None:
        """Capture the true state at time ``stamp`` [s] (robot frame, metres).

        Args:
            stamp: Capture time [s]; must increase from call to call.
            markers: True marker positions (3,) by name.
            bodies: True rigid-body poses by name.
        """
        if not stamp > self._last_stamp:
            raise ValueError(f"observe() stamps must increase: {stamp} after {self._last_stamp}")
        self._last_stamp = stamp
        cfg = self.config
        rng = self.rng
        self.stats.frames_observed += 1
        if self._frame_dropped():
            self.stats.frames_dropped += 1
            return
        markers = markers or {}
        bodies = bodies or {}
        marker_names = list(markers)
        body_names = list(bodies)
        n_m, n_b = len(marker_names), len(body_names)
        truth = np.zeros((n_m + n_b, 3))
        if n_m:
            truth[:n_m] = np.stack([np.asarray(markers[n], dtype=float) for n in marker_names])
        if n_b:
            truth[n_m:] = np.stack([bodies[n].position for n in body_names])

        measured = truth + cfg.noise_std * rng.standard_normal(truth.shape)
        outlier = rng.random(len(truth)) < cfg.outlier_probability
        if np.any(outlier):
            direction = rng.standard_normal((int(outlier.sum()), 3))
            direction /= np.linalg.norm(direction, axis=1, keepdims=True)
            measured[outlier] += cfg.outlier_magnitude * direction
            self.stats.outliers_injected += int(outlier.sum())
        visible = rng.random(len(truth)) >= cfg.occlusion_probability
        self.stats.items_occluded += int(np.count_nonzero(~visible))

        # Robot frame → mocap frame and units.
        measured = self.registration.to_mocap(measured)
        out_bodies = {}
        if n_b:
            q_true = np.stack([bodies[n].orientation for n in body_names])
            q_noise = rotation_vector_to_quaternion(
                cfg.orientation_noise_std * rng.standard_normal((n_b, 3))
            )
            q_mocap = quaternion_multiply(
                self._mocap_from_robot.quaternion, quaternion_multiply(q_noise, q_true)
            )
            for k, name in enumerate(body_names):
                if visible[n_m + k]:
                    out_bodies[name] = BodyPose(measured[n_m + k], q_mocap[k])
        labeled: dict[str, np.ndarray] = {}
        points = np.zeros((0, 3))
        if n_m:
            keep = np.flatnonzero(visible[:n_m])
            if cfg.labeled:
                labeled = {marker_names[i]: measured[i] for i in keep}
            else:
                points = measured[rng.permutation(keep)]
        frame = MocapFrame(stamp, out_bodies, labeled, points)
        self._queue.append((stamp + cfg.latency, frame))

    def _frame_dropped(self) -> bool:
        cfg = self.config
        rng = self.rng
        if self._in_burst:
            if rng.random() < 1.0 / cfg.burst_mean_length:
                self._in_burst = False
        elif rng.random() < cfg.burst_probability:
            self._in_burst = True
        if self._in_burst:
            return True
        return bool(rng.random() < cfg.dropout_probability)

    def poll(self, now: float) -> list[MocapFrame]:
        """Frames whose delivery time (capture + latency) is ≤ ``now`` [s], oldest first."""
        out = []
        while self._queue and self._queue[0][0] <= now:
            out.append(self._queue.popleft()[1])
        self.stats.frames_delivered += len(out)
        return out

    @property
    def pending(self) -> int:
        """Frames captured but not yet delivered (in the delay line)."""
        return len(self._queue)
