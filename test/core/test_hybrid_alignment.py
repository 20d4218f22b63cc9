"""The hybrid scene and the hybrid-alignment experiment (quick)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from soft_inverse_ros.core.contact.signorini import complementarity_residual
from soft_inverse_ros.core.rigid.hybrid_inverse import InverseConfig, inverse_step, probe_alignment
from soft_inverse_ros.core.rigid.hybrid_scene import HybridScene, HybridSceneConfig
from soft_inverse_ros.experiments import hybrid_alignment


def test_settled_contacts_satisfy_signorini_and_pressing_raises_the_force() -> None:
    scene = HybridScene()
    scene.settle()
    assert scene.forces.sum() < 1e-12  # home: 2 mm clearance
    scene.q_cmd = scene.q_cmd + np.array([0.0, 0.03, 0.0, 0.0, 0.0])
    scene.settle(5)
    lin = scene.linearize()
    assert scene.forces.sum() > 0.1 and np.all(scene.forces >= 0)
    # re-linearised at the settled state, the contacts still solve Signorini to < 1 µm
    assert complementarity_residual(lin.w_cc, lin.gap_free, scene.forces) < 1e-6
    # the block was pushed down under the tip
    assert scene.block_positions()[lin.block_nodes, 2].min() < scene.block_top_z - 1e-4


def test_inverse_steps_align_the_probe_within_the_force_limit() -> None:
    scene = HybridScene(HybridSceneConfig(rod_young=0.8e6))
    scene.settle()
    node = hybrid_alignment._targets(scene, 1)[0]
    e0 = np.linalg.norm(probe_alignment(scene, node))
    cfg = InverseConfig(force_limit=0.5)
    active = None
    for _ in range(15):
        prob, res = inverse_step(scene, node, cfg, active)
        assert res.feasible
        assert res.forces.sum() <= 0.5 + 1e-9  # the QP honours eq. 14
        lo, hi = prob.stroke_min, prob.stroke_max
        assert np.all(hi - lo <= 2 * scene.chain.limits().velocity * cfg.period + 1e-12)
        active = res.active
        scene.settle(3)
    assert e0 > 0.01
    assert np.linalg.norm(probe_alignment(scene, node)) < 1e-5
    assert scene.forces.sum() > 0.4  # still pressing


def test_experiment_rejects_bad_options(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(frames=0, force_limit=1.0, ticks=10, rod_grid=2, quick=True, json=False, out=None)
    assert hybrid_alignment.main(args) == 2
    assert "--frames must be > 0" in capsys.readouterr().err
