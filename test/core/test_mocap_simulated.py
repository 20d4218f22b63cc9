"""The simulated mocap: noise, latency, dropouts, outliers match the configuration."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.mocap.effector import EffectorConfig
from soft_inverse_ros.core.mocap.frame import BodyPose
from soft_inverse_ros.core.mocap.pipeline import MocapPipeline
from soft_inverse_ros.core.mocap.registration import FrameRegistration
from soft_inverse_ros.core.mocap.rigid_transform import (
    RigidTransform,
    quaternion_angle,
    rotation_vector_to_quaternion,
)
from soft_inverse_ros.core.mocap.sample_filter import SampleFilterConfig
from soft_inverse_ros.core.mocap.simulated_source import SimulatedMocapConfig, SimulatedMocapSource

RATE = 100.0
TIP = np.array([0.02, -0.01, 0.12])


def truth(t):
    """A tip moving on a 1 cm circle at 0.5 Hz, and a fixed second marker."""
    w = 2 * np.pi * 0.5
    return {"tip": TIP + 0.01 * np.array([np.cos(w * t), np.sin(w * t), 0.0]),
            "ref": np.array([0.0, 0.05, 0.0])}


def collect(source, n, dt=1.0 / RATE, bodies=False):
    """Observe n frames and poll after each; returns (delivered frames, poll times)."""
    delivered = []
    for k in range(n):
        t = k * dt
        body = {"plate": BodyPose(truth(t)["tip"], [0, 0, 0, 1])} if bodies else None
        source.observe(t, markers=truth(t), bodies=body)
        delivered.extend((t, f) for f in source.poll(t))
    return delivered


def test_noise_statistics_match_configuration():
    sigma = 0.0002
    src = SimulatedMocapSource(SimulatedMocapConfig(noise_std=sigma, seed=1))
    delivered = collect(src, 4000)
    err = np.array([f.labeled_markers["tip"] - truth(f.stamp)["tip"] for _, f in delivered])
    assert len(err) == 4000
    assert np.allclose(err.std(axis=0), sigma, rtol=0.05)
    assert np.all(np.abs(err.mean(axis=0)) < 4 * sigma / np.sqrt(len(err)))


def test_orientation_noise_statistics():
    sigma = 0.002  # rad per axis
    src = SimulatedMocapSource(SimulatedMocapConfig(noise_std=0.0, orientation_noise_std=sigma,
                                                    seed=2))
    delivered = collect(src, 2000, bodies=True)
    angles = np.array([quaternion_angle(f.bodies["plate"].orientation, [0, 0, 0, 1])
                       for _, f in delivered])
    # The angle of a rotation vector with N(0, σ²) components is Maxwell: E[θ²] = 3σ².
    assert np.sqrt(np.mean(angles**2)) == pytest.approx(np.sqrt(3) * sigma, rel=0.05)


def test_latency_delays_delivery_and_keeps_capture_stamps():
    latency = 0.034
    dt = 1.0 / RATE
    src = SimulatedMocapSource(SimulatedMocapConfig(noise_std=0.0, latency=latency))
    delivered = collect(src, 300)
    assert len(delivered) == 300 - int(np.ceil(latency / dt - 1e-9))
    assert src.pending == int(np.ceil(latency / dt - 1e-9))
    for poll_time, frame in delivered:
        # Delivered at the first poll after capture + latency, never before.
        assert frame.stamp + latency <= poll_time + 1e-12
        assert poll_time - (frame.stamp + latency) < dt
        # The content is the truth at the capture stamp, not at delivery.
        assert np.allclose(frame.labeled_markers["tip"], truth(frame.stamp)["tip"], atol=1e-15)
    measured_delay = np.mean([p - f.stamp for p, f in delivered])
    assert measured_delay == pytest.approx(np.ceil(latency / dt) * dt, abs=1e-9)


def test_independent_dropouts_match_probability():
    src = SimulatedMocapSource(SimulatedMocapConfig(dropout_probability=0.1, seed=3))
    delivered = collect(src, 5000)
    rate = 1 - len(delivered) / 5000
    assert rate == pytest.approx(0.1, abs=0.015)
    assert src.stats.frames_dropped == 5000 - len(delivered)


def test_burst_dropouts_have_configured_mean_length():
    p, length = 0.02, 8.0
    src = SimulatedMocapSource(
        SimulatedMocapConfig(burst_probability=p, burst_mean_length=length, seed=4)
    )
    n = 15000
    stamps = np.array([f.stamp for _, f in collect(src, n)])
    k = np.rint(stamps * RATE).astype(int)
    gaps = np.diff(k) - 1
    bursts = gaps[gaps > 0]
    # ~260 bursts: the standard error of their mean length is ~6 %; allow 3 of them.
    assert len(bursts) > 200
    assert np.mean(bursts) == pytest.approx(length, rel=0.18)
    # Stationary fraction of dropped frames: p L / (1 + p L) for a start probability p.
    assert 1 - len(stamps) / n == pytest.approx(p * length / (1 + p * length), rel=0.2)


def test_outliers_have_configured_rate_and_magnitude():
    cfg = SimulatedMocapConfig(noise_std=0.0, outlier_probability=0.05, outlier_magnitude=0.03,
                               seed=5)
    src = SimulatedMocapSource(cfg)
    delivered = collect(src, 3000)
    d = np.array([np.linalg.norm(f.labeled_markers[n] - truth(f.stamp)[n])
                  for _, f in delivered for n in ("tip", "ref")])
    is_outlier = d > 1e-12
    assert np.allclose(d[is_outlier], 0.03)
    assert is_outlier.mean() == pytest.approx(0.05, abs=0.01)
    assert src.stats.outliers_injected == is_outlier.sum()


def test_occlusions_remove_items():
    src = SimulatedMocapSource(SimulatedMocapConfig(occlusion_probability=0.2, seed=6))
    delivered = collect(src, 2000)
    present = np.mean([len(f.labeled_markers) for _, f in delivered]) / 2
    assert present == pytest.approx(0.8, abs=0.03)


def test_same_seed_same_output_other_seed_differs():
    cfg = dict(noise_std=0.001, dropout_probability=0.2, outlier_probability=0.1)
    a = collect(SimulatedMocapSource(SimulatedMocapConfig(seed=7, **cfg)), 100)
    b = collect(SimulatedMocapSource(SimulatedMocapConfig(seed=7, **cfg)), 100)
    c = collect(SimulatedMocapSource(SimulatedMocapConfig(seed=8, **cfg)), 100)
    assert [f.stamp for _, f in a] == [f.stamp for _, f in b]
    assert all(np.array_equal(fa.labeled_markers["tip"], fb.labeled_markers["tip"])
               for (_, fa), (_, fb) in zip(a, b))
    assert [f.stamp for _, f in a] != [f.stamp for _, f in c]


def test_mocap_frame_output_is_undone_by_the_registration():
    robot_from_mocap = RigidTransform.from_quaternion(
        rotation_vector_to_quaternion([0.2, 0.1, 1.3]), [0.5, -0.2, 0.1]
    )
    reg = FrameRegistration(robot_from_mocap, mocap_unit_scale=1e-3)  # mocap reports mm
    src = SimulatedMocapSource(SimulatedMocapConfig(noise_std=0.0), reg)
    q_true = rotation_vector_to_quaternion([0.0, 0.3, 0.0])
    src.observe(0.0, markers=truth(0.0), bodies={"plate": BodyPose(TIP, q_true)})
    (frame,) = src.poll(0.0)
    assert not np.allclose(frame.labeled_markers["tip"], truth(0.0)["tip"])
    est = MocapPipeline(reg, SampleFilterConfig(confirm_first=1)).process(frame)
    assert np.allclose(est.frame.labeled_markers["tip"], truth(0.0)["tip"], atol=1e-12)
    assert np.allclose(est.frame.bodies["plate"].position, TIP, atol=1e-12)
    assert quaternion_angle(est.frame.bodies["plate"].orientation, q_true) < 1e-9


@pytest.mark.parametrize("labeled", [True, False])
def test_pipeline_on_corrupted_simulation_tracks_truth_without_outliers(labeled):
    """Noise 0.2 mm, 10 % dropouts, bursts, 3 % outliers of 5 cm: the effector (a labeled
    marker, or the nearest unlabeled marker) never follows an outlier."""
    sigma = 0.0002
    cfg = SimulatedMocapConfig(noise_std=sigma, latency=0.01, dropout_probability=0.1,
                               burst_probability=0.01, burst_mean_length=5,
                               outlier_probability=0.03, outlier_magnitude=0.05,
                               labeled=labeled, seed=9)
    src = SimulatedMocapSource(cfg)
    if labeled:
        effector = EffectorConfig(mode="labeled_marker", name="tip")
    else:
        effector = EffectorConfig(mode="nearest_marker", initial_position=tuple(truth(0.0)["tip"]),
                                  gate_radius=0.02)
    pipeline = MocapPipeline(
        FrameRegistration.identity(), SampleFilterConfig(max_jump=0.005, stale_after=0.05),
        effector,
    )
    errors = []
    stale_seen = False
    for k in range(1500):
        t = k / RATE
        src.observe(t, markers=truth(t))
        for frame in src.poll(t):
            est = pipeline.process(frame)
            if est.effector.fresh:
                errors.append(np.linalg.norm(est.effector.position - truth(frame.stamp)["tip"]))
        stale_seen |= pipeline.effector(t).stale
    errors = np.asarray(errors)
    assert len(errors) > 1000
    assert src.stats.outliers_injected > 50
    assert errors.max() < 6 * sigma  # no outlier accepted (they are 5 cm off)
    if labeled:  # outliers of the labeled marker are caught by the jump filter
        assert pipeline.statistics()["marker:tip"]["rejected_jumps"] > 10
    assert stale_seen  # the bursts are long enough to be reported
