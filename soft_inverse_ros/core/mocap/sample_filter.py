"""Data hygiene for mocap tracks: jump rejection, re-acquisition, staleness, no NaN out.

Each tracked item (a rigid body, a labeled marker, the derived effector) has a
:class:`TrackFilter`. A sample is

* dropped (``dropped_nonfinite``) when it has NaN/inf (or a zero quaternion),
* accepted when it lies within ``max_jump`` [m] of the last accepted position,
* otherwise rejected (``rejected_jumps``).

A track without a reference (new, or after :meth:`TrackFilter.reset`) starts on
``confirm_first`` consecutive samples that agree with one another (each within
``max_jump`` of the previous one); the samples before are counted as ``unconfirmed``.
With ``confirm_first=1`` the first finite sample is trusted as it is.

So that the filter cannot lock out forever after a real displacement (e.g. the body
reappearing elsewhere after an occlusion, or a bad first sample), it re-acquires:

* after ``reacquire_after`` consecutive rejected samples that agree with one another
  (each within ``max_jump`` of the previous rejected one): the latest becomes the new
  reference. Isolated outliers and bursts of random outliers do not agree, so they do
  not capture the track;
* unconditionally after ``force_reacquire_after`` consecutive rejections, whatever they
  are (the last resort against a lock-out).

A track is stale when its last accepted sample is older than ``stale_after`` [s]
(``stale_events`` counts transitions to stale). Times are seconds on the caller's clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np


@dataclass(frozen=True)
class SampleFilterConfig:
    """Hygiene thresholds (SI units).

    Attributes:
        max_jump: Largest accepted distance from the last accepted sample [m]
            (``inf`` disables jump rejection).
        reacquire_after: Consecutive mutually consistent rejections that re-acquire.
        force_reacquire_after: Consecutive rejections of any kind that re-acquire.
        stale_after: Age of the last accepted sample beyond which the track is stale [s].
        confirm_first: Consecutive consistent samples that start a track.
    """

    max_jump: float = 0.02
    reacquire_after: int = 5
    force_reacquire_after: int = 50
    stale_after: float = 0.1
    confirm_first: int = 3

    def __post_init__(self) -> None:
        if not (self.max_jump > 0):
            raise ValueError(f"filter.max_jump must be > 0 m, got {self.max_jump!r}")
        if int(self.reacquire_after) != self.reacquire_after or self.reacquire_after < 1:
            raise ValueError(
                f"filter.reacquire_after must be an integer ≥ 1, got {self.reacquire_after!r}"
            )
        if (
            int(self.force_reacquire_after) != self.force_reacquire_after
            or self.force_reacquire_after < self.reacquire_after
        ):
            raise ValueError(
                "filter.force_reacquire_after must be an integer ≥ filter.reacquire_after, "
                f"got {self.force_reacquire_after!r}"
            )
        if not (np.isfinite(self.stale_after) and self.stale_after > 0):
            raise ValueError(f"filter.stale_after must be > 0 s, got {self.stale_after!r}")
        if int(self.confirm_first) != self.confirm_first or self.confirm_first < 1:
            raise ValueError(
                f"filter.confirm_first must be an integer ≥ 1, got {self.confirm_first!r}"
            )


@dataclass
class FilterStats:
    """Counters for diagnostics (cumulative since construction or reset)."""

    accepted: int = 0
    rejected_jumps: int = 0
    dropped_nonfinite: int = 0
    reacquired: int = 0
    stale_events: int = 0
    unconfirmed: int = 0

    def __iadd__(self, other: "FilterStats") -> "FilterStats":
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class TrackFilter:
    """Hygiene state of one tracked position (see the module docstring)."""

    def __init__(self, config: SampleFilterConfig) -> None:
        self.config = config
        self.stats = FilterStats()
        self._reference: tuple[float, ...] | None = None  # last accepted position [m]
        self._reference_stamp: float | None = None
        self._candidate: tuple[float, ...] | None = None  # last rejected/unconfirmed sample
        self._consistent_run = 0
        self._rejected_run = 0
        self._stale_reported = False

    @property
    def last_position(self) -> np.ndarray | None:
        """Last accepted position [m] (a copy), or None before the first one."""
        return None if self._reference is None else np.array(self._reference)

    @property
    def last_stamp(self) -> float | None:
        """Stamp of the last accepted sample [s]."""
        return self._reference_stamp

    def reset(self) -> None:
        """Forget the reference and keep the counters: the track restarts like a new one
        (accepted after ``confirm_first`` consistent finite samples)."""
        self._reference = None
        self._reference_stamp = None
        self._candidate = None
        self._consistent_run = 0
        self._rejected_run = 0
        self._stale_reported = False

    def update(self, stamp: float, position: np.ndarray, *, finite: bool | None = None) -> bool:
        """Offer one sample; True when it is accepted (and becomes the reference).

        Args:
            stamp: Sample time [s].
            position: (3,) position [m].
            finite: Caller's verdict on finiteness (e.g. including the quaternion);
                computed from ``position`` when None.
        """
        # the positions as tuples of floats: a track is updated for every marker and body of
        # every frame, and numpy's norm and isfinite on three numbers cost ~5 µs each
        p = tuple(np.asarray(position, dtype=float).reshape(-1).tolist())
        if finite is None:
            finite = all(map(math.isfinite, p))
        if not finite or not math.isfinite(stamp):
            self.stats.dropped_nonfinite += 1
            return False
        cfg = self.config
        if self._reference is not None and math.dist(p, self._reference) <= cfg.max_jump:
            self._accept(stamp, p)
            return True
        if self._candidate is not None and math.dist(p, self._candidate) <= cfg.max_jump:
            self._consistent_run += 1
        else:
            self._consistent_run = 1
        self._candidate = p
        if self._reference is None:  # acquisition
            if self._consistent_run >= cfg.confirm_first:
                self._accept(stamp, p)
                return True
            self.stats.unconfirmed += 1
            return False
        self.stats.rejected_jumps += 1
        self._rejected_run += 1
        if (
            self._consistent_run >= cfg.reacquire_after
            or self._rejected_run >= cfg.force_reacquire_after
        ):
            self.stats.reacquired += 1
            self._accept(stamp, p)
            return True
        return False

    def _accept(self, stamp: float, p: tuple[float, ...]) -> None:
        self.stats.accepted += 1
        self._reference = p
        self._reference_stamp = float(stamp)
        self._candidate = None
        self._consistent_run = 0
        self._rejected_run = 0
        self._stale_reported = False

    def is_stale(self, now: float) -> bool:
        """True when nothing was accepted within ``stale_after`` before ``now`` (or ever).

        The first transition to stale after an accepted sample increments
        ``stats.stale_events``.
        """
        stale = (
            self._reference_stamp is None or now - self._reference_stamp > self.config.stale_after
        )
        if stale and self._reference_stamp is not None and not self._stale_reported:
            self._stale_reported = True
            self.stats.stale_events += 1
        return stale

    def age(self, now: float) -> float:
        """Age of the last accepted sample at ``now`` [s] (inf before the first)."""
        return float("inf") if self._reference_stamp is None else now - self._reference_stamp


class TrackSet:
    """One :class:`TrackFilter` per name, created on first use, with summed statistics."""

    def __init__(self, config: SampleFilterConfig) -> None:
        self.config = config
        self.tracks: dict[str, TrackFilter] = {}

    def track(self, name: str) -> TrackFilter:
        filt = self.tracks.get(name)
        if filt is None:
            filt = self.tracks[name] = TrackFilter(self.config)
        return filt

    def stale_names(self, now: float) -> list[str]:
        return sorted(n for n, t in self.tracks.items() if t.is_stale(now))

    def total_stats(self) -> FilterStats:
        total = FilterStats()
        for t in self.tracks.values():
            total += t.stats
        return total
