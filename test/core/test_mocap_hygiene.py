"""Mocap data hygiene: NaN drop, jump rejection, re-acquisition, staleness, statistics."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.mocap.effector import EffectorConfig
from soft_inverse_ros.core.mocap.frame import BodyPose, MocapFrame
from soft_inverse_ros.core.mocap.pipeline import MocapPipeline
from soft_inverse_ros.core.mocap.registration import FrameRegistration
from soft_inverse_ros.core.mocap.sample_filter import SampleFilterConfig, TrackFilter

CFG = SampleFilterConfig(max_jump=0.01, reacquire_after=4, force_reacquire_after=12,
                         stale_after=0.05, confirm_first=1)
P0 = np.array([0.1, 0.0, 0.2])


def test_isolated_outlier_is_rejected_and_the_track_continues():
    f = TrackFilter(CFG)
    assert f.update(0.00, P0)
    assert not f.update(0.01, P0 + [0.05, 0, 0])  # outlier
    assert f.update(0.02, P0 + [0.001, 0, 0])
    assert np.allclose(f.last_position, P0 + [0.001, 0, 0])
    assert f.stats.as_dict() == {"accepted": 2, "rejected_jumps": 1, "dropped_nonfinite": 0,
                                 "reacquired": 0, "stale_events": 0, "unconfirmed": 0}


def test_a_track_starts_only_on_consistent_samples():
    """An outlier as the very first sample must not become the reference."""
    f = TrackFilter(SampleFilterConfig(max_jump=0.01, confirm_first=3))
    results = [
        f.update(0.00, P0 + [0.05, 0, 0]),  # outlier first
        f.update(0.01, P0),
        f.update(0.02, P0 + [0.001, 0, 0]),
        f.update(0.03, P0 + [0.002, 0, 0]),  # third consistent sample: track starts
        f.update(0.04, P0 + [0.003, 0, 0]),
    ]
    assert results == [False, False, False, True, True]
    assert np.allclose(f.last_position, P0 + [0.003, 0, 0])
    assert f.stats.unconfirmed == 3 and f.stats.rejected_jumps == 0
    f.reset()  # e.g. on a configuration change: acquisition starts over
    assert not f.update(0.05, P0) and f.last_position is None


def test_burst_of_random_outliers_does_not_capture_the_track():
    rng = np.random.default_rng(0)
    f = TrackFilter(CFG)
    f.update(0.0, P0)
    for k in range(CFG.force_reacquire_after - 1):
        d = rng.standard_normal(3)
        assert not f.update(0.001 * (k + 1), P0 + 0.05 * d / np.linalg.norm(d))
    assert np.array_equal(f.last_position, P0)
    assert f.stats.reacquired == 0
    assert f.update(0.02, P0 + [0, 0.002, 0])  # the true signal is still accepted


def test_real_displacement_is_reacquired_after_n_consistent_rejections():
    f = TrackFilter(CFG)
    f.update(0.0, P0)
    moved = P0 + [0.0, 0.08, 0.0]  # e.g. the body reappears elsewhere after an occlusion
    results = [f.update(0.01 * (k + 1), moved + [0.001 * k, 0, 0]) for k in range(CFG.reacquire_after)]
    assert results == [False] * (CFG.reacquire_after - 1) + [True]
    assert f.stats.reacquired == 1
    assert np.allclose(f.last_position, moved + [0.001 * (CFG.reacquire_after - 1), 0, 0])
    assert f.update(0.1, moved)  # tracking continues from the new place


def test_forced_reacquire_prevents_lock_out():
    """A track moving faster than max_jump per sample never agrees with itself, but
    cannot lock out: after force_reacquire_after rejections it re-acquires."""
    f = TrackFilter(CFG)
    f.update(0.0, P0)
    accepted_at = []
    for k in range(1, 40):
        if f.update(0.001 * k, P0 + [0.02 * k, 0, 0]):
            accepted_at.append(k)
    assert accepted_at[0] == CFG.force_reacquire_after
    assert f.stats.reacquired == len(accepted_at) >= 3


def test_non_finite_samples_are_dropped_and_counted():
    f = TrackFilter(CFG)
    assert not f.update(0.0, [np.nan, 0, 0])
    assert not f.update(0.0, [0, np.inf, 0])
    assert not f.update(np.nan, P0)
    assert f.last_position is None
    assert f.update(0.01, P0)
    assert f.stats.dropped_nonfinite == 3 and f.stats.accepted == 1


def test_stale_marking_after_configured_age():
    f = TrackFilter(CFG)
    assert f.is_stale(0.0)  # nothing yet
    f.update(1.0, P0)
    assert not f.is_stale(1.0499)
    assert f.is_stale(1.0501)
    assert f.is_stale(1.2)
    assert f.stats.stale_events == 1  # one transition, however often it is asked
    f.update(1.3, P0)
    assert not f.is_stale(1.31)
    assert f.is_stale(2.0)
    assert f.stats.stale_events == 2


def test_config_validation_names_the_key():
    with pytest.raises(ValueError, match="filter.max_jump"):
        SampleFilterConfig(max_jump=0)
    with pytest.raises(ValueError, match="filter.force_reacquire_after"):
        SampleFilterConfig(reacquire_after=5, force_reacquire_after=3)
    with pytest.raises(ValueError, match="filter.stale_after"):
        SampleFilterConfig(stale_after=float("nan"))


def random_corrupted_frame(rng, t):
    """A frame with random NaN/inf in bodies, labeled and unlabeled markers."""
    def maybe_bad(v):
        v = np.array(v, dtype=float)
        r = rng.random()
        if r < 0.1:
            v[rng.integers(3)] = np.nan
        elif r < 0.15:
            v[rng.integers(3)] = np.inf
        return v

    q = np.array([0.0, 0.0, 0.0, 1.0])
    if rng.random() < 0.05:
        q = np.zeros(4)
    elif rng.random() < 0.05:
        q = np.array([np.nan, 0, 0, 1.0])
    pts = np.stack([maybe_bad(P0 + 0.01 * rng.standard_normal(3)) for _ in range(4)])
    return MocapFrame(
        stamp=t,
        bodies={"tip": BodyPose(maybe_bad(P0 + 1e-4 * rng.standard_normal(3)), q)},
        labeled_markers={"m": maybe_bad(P0)},
        markers=pts,
    )


def test_pipeline_never_outputs_nan_and_counts_drops():
    rng = np.random.default_rng(1)
    pipeline = MocapPipeline(FrameRegistration.identity(), CFG,
                             EffectorConfig(mode="rigid_body", name="tip", offset=(0, 0, 0.01)))
    outputs = [pipeline.process(random_corrupted_frame(rng, 0.01 * k)) for k in range(300)]
    # A frame with a NaN stamp is dropped as a whole.
    outputs.append(pipeline.process(MocapFrame(np.nan, labeled_markers={"m": P0})))
    for est in outputs:
        for body in est.frame.bodies.values():
            assert np.all(np.isfinite(body.position)) and np.all(np.isfinite(body.orientation))
            assert np.linalg.norm(body.orientation) == pytest.approx(1.0)
        assert all(np.all(np.isfinite(p)) for p in est.frame.labeled_markers.values())
        assert np.all(np.isfinite(est.frame.markers))
        assert est.effector.position is None or np.all(np.isfinite(est.effector.position))
    stats = pipeline.statistics()
    assert stats["body:tip"]["dropped_nonfinite"] > 20
    assert stats["marker:m"]["dropped_nonfinite"] > 20
    assert stats["unlabeled"]["dropped_nonfinite"] > 50
    assert stats["frames"]["dropped_nonfinite_stamp"] == 1
    assert outputs[-1].effector.stale
    total = stats["total"]
    assert total["accepted"] == sum(v["accepted"] for k, v in stats.items()
                                    if k.startswith(("body:", "marker:", "effector")))


def test_pipeline_marks_missing_bodies_stale():
    pipeline = MocapPipeline(FrameRegistration.identity(), CFG,
                             EffectorConfig(mode="rigid_body", name="tip"))
    both = {"tip": BodyPose(P0, [0, 0, 0, 1]), "base": BodyPose([0, 0, 0], [0, 0, 0, 1])}
    pipeline.process(MocapFrame(0.0, bodies=both))
    est = None
    for k in range(1, 10):  # "tip" occluded from here on
        est = pipeline.process(MocapFrame(0.01 * k, bodies={"base": both["base"]}))
    assert est.stale == ("body:tip", "effector")
    assert est.effector.stale and not est.effector.fresh
    assert np.allclose(est.effector.position, P0)  # last accepted value kept, flagged stale
    assert pipeline.effector(0.04).stale is False
    assert pipeline.stale_names(10.0) == ["body:base", "body:tip", "effector"]


@pytest.mark.parametrize("reacquire_radius", [None, 0.06])
def test_nearest_marker_effector_after_moving_during_an_occlusion(reacquire_radius):
    """The marker vanishes, then reappears 5 cm away (beyond the 2 cm search gate and the
    1 cm jump limit). With the gate alone the effector stays stale (the safe side: the
    nearby environment marker is never captured); with a 6 cm reacquire_radius the track
    re-acquires after reacquire_after consistent samples."""
    pipeline = MocapPipeline(
        FrameRegistration.identity(), CFG,
        EffectorConfig(mode="nearest_marker", initial_position=tuple(P0), gate_radius=0.02,
                       reacquire_radius=reacquire_radius),
    )
    far = P0 + [0.05, 0.0, 0.0]
    other = P0 + [0.0, 0.07, 0.0]  # a marker of the environment
    t = 0.0
    for _ in range(5):
        pipeline.process(MocapFrame(t, markers=[P0, other]))
        t += 0.01
    for _ in range(10):  # occluded: only the other marker
        est = pipeline.process(MocapFrame(t, markers=[other]))
        t += 0.01
    assert est.effector.stale and np.allclose(est.effector.position, P0)
    accepted_after = None
    for k in range(10):
        est = pipeline.process(MocapFrame(t, markers=[far, other]))
        t += 0.01
        if est.effector.fresh and accepted_after is None:
            accepted_after = k + 1
    if reacquire_radius is None:
        assert accepted_after is None and est.effector.stale
        assert np.allclose(est.effector.position, P0)
    else:
        assert accepted_after == CFG.reacquire_after
        assert np.allclose(est.effector.position, far) and not est.effector.stale
