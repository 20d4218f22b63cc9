"""The hybrid scene and the hybrid-alignment experiment (quick)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from soft_inverse_ros.core.contact.signorini import complementarity_residual
from soft_inverse_ros.core.rigid import hybrid_inverse
from soft_inverse_ros.core.rigid.hybrid_inverse import HybridInverse, InverseConfig, inverse_step, probe_alignment
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


def test_a_state_linearised_again_with_new_setpoints_equals_a_fresh_linearisation() -> None:
    """The settle starts from the inverse step's state with new joint setpoints: the kept
    linearisation moved to them equals linearising from scratch; a state met again is the
    same linearisation; a new state is linearised anew."""
    scene = HybridScene()
    scene.q_cmd = scene.q_cmd + np.array([0.0, 0.03, 0.0, 0.0, 0.0])
    scene.settle(5)
    first = scene.linearize()
    assert scene.linearize() is first
    scene.q_cmd = scene.q_cmd + np.array([0.01, -0.02, 0.015, 0.0, 0.005])
    moved = scene.linearize()
    assert moved.hybrid is first.hybrid
    scene._linearizations.clear()
    fresh = scene.linearize()
    assert fresh.hybrid is not first.hybrid
    for name in ("residual", "dz_free", "gap_free", "w_cc", "contact_solve", "block_fields"):
        a, b = getattr(moved, name), getattr(fresh, name)
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12 * max(np.abs(b).max(), 1e-30), err_msg=name)
    scene.settle(1)
    assert scene.linearize().hybrid is not fresh.hybrid


def test_w_cc_from_the_forward_half_equals_w_cc_from_the_contact_solve() -> None:
    """The settle's W_cc (forward substitution only) and the inverse step's (rows A⁻¹ rowsᵀ
    from the solved columns) agree."""
    import dataclasses

    scene = HybridScene()
    scene.q_cmd = scene.q_cmd + np.array([0.0, 0.03, 0.0, 0.0, 0.0])
    scene.settle(5)
    lin = scene.linearize()
    forward = lin.w_cc
    assert lin._contact_solve is None  # W_cc did not need the columns
    solved = dataclasses.replace(lin, _w_cc=None)
    solved.contact_solve
    np.testing.assert_allclose(solved.w_cc, forward, rtol=1e-9, atol=1e-12 * np.abs(forward).max())


def _settled(scene, monkeypatch, contraction: float):
    """Settle a press to 1 µm with the modified-Newton rule at ``contraction`` (0: Newton
    steps only); the scene and how many linearisations it built."""
    from soft_inverse_ros.core.rigid import hybrid_scene

    monkeypatch.setattr(hybrid_scene, "CHORD_CONTRACTION", contraction)
    built = []
    original = scene._linearize_now
    monkeypatch.setattr(scene, "_linearize_now", lambda: built.append(1) or original())
    scene.settle(30, tolerance=1e-6)
    return scene, len(built)


def test_modified_newton_steps_reach_the_newton_equilibrium_with_fewer_factorizations(monkeypatch) -> None:
    """A settle to 1 µm with modified-Newton steps ends where Newton steps end (within the
    tolerance), in contact, on fewer linearisations; re-linearised there, the contacts still
    solve Signorini to < 1 µm."""
    results = []
    for contraction in (0.0, 0.5):
        scene = HybridScene(HybridSceneConfig(rod_divisions=(3, 3, 5)))
        scene.q_cmd = scene.q_cmd + np.array([0.0, 0.03, 0.0, 0.0, 0.0])
        results.append(_settled(scene, monkeypatch, contraction))
    (newton, n_newton), (chord, n_chord) = results
    assert chord.last_motion <= 1e-6 and newton.last_motion <= 1e-6
    assert newton.forces.sum() > 0.05
    assert n_chord < n_newton, (n_chord, n_newton)
    np.testing.assert_allclose(chord.rod_positions(), newton.rod_positions(), atol=3e-6)
    assert abs(chord.forces.sum() - newton.forces.sum()) < 1e-3 * newton.forces.sum()
    lin = chord.linearize()
    assert complementarity_residual(lin.w_cc, lin.gap_free, chord.forces) < 1e-6


def test_contacts_read_the_block_top_face_bilinearly_and_continuously() -> None:
    scene = HybridScene()
    gx, gy, _ = scene._top_grid
    rng = np.random.default_rng(1)
    xy = np.column_stack([rng.uniform(gx[0], gx[-1], 50), rng.uniform(gy[0], gy[-1], 50)])
    corners, weights = scene._top_face_weights(xy)
    np.testing.assert_allclose(weights.sum(1), 1.0)
    # a linear field of the top nodes is read back exactly
    pts = scene.block.rest_points
    np.testing.assert_allclose(np.einsum("mk,mkd->md", weights, pts[corners][:, :, :2]), xy, atol=1e-12)
    # across a cell edge the reading does not jump (a nearest-node pairing did: Newton cycled)
    field = rng.normal(size=scene.block.n_nodes)
    edge = gx[3]
    for side in (-1e-9, 1e-9):
        c, w = scene._top_face_weights(np.array([[edge + side, 0.5 * (gy[2] + gy[3])]]))
        value = float((field[c] * w).sum())
        if side < 0:
            left = value
    assert abs(value - left) < 1e-6 * np.abs(field).max()


def test_inverse_step_honours_the_force_sum_bounds_in_its_prediction() -> None:
    scene = HybridScene(HybridSceneConfig(rod_young=0.8e6))
    scene.settle()
    node = hybrid_alignment._targets(scene, 1)[0]
    cfg = InverseConfig(force_limit=0.5, force_min=0.2)
    # from home (2 mm clearance) the minimum row cannot hold in a state with no contact: the
    # approach runs without it and asks for a force; once pressing, both rows hold
    prob, res = inverse_step(scene, node, cfg, lower=0.0, force_target=(0.35, 1e-3))
    assert res.feasible and res.forces.sum() <= 0.5 + 1e-9
    scene.settle(3)
    assert scene.forces.sum() > 0.2
    prob, res = inverse_step(scene, node, cfg)
    assert prob.sum_rows.shape == (2, prob.m)
    assert res.feasible and 0.2 - 1e-9 <= res.forces.sum() <= 0.5 + 1e-9


def test_frames_align_the_probe_and_keep_the_settled_force_in_its_band() -> None:
    scene = HybridScene(HybridSceneConfig(rod_young=0.8e6))
    scene.settle()
    node = hybrid_alignment._targets(scene, 1)[0]
    e0 = np.linalg.norm(probe_alignment(scene, node))
    cfg = InverseConfig(force_limit=0.5, force_min=0.2)
    inv = HybridInverse(scene, node, cfg)
    for _ in range(15):
        rep = inv.frame()
        if not rep.converged:  # the trust region within the URDF's velocity bound
            lo, hi = rep.problem.stroke_min, rep.problem.stroke_max
            assert np.all(hi - lo <= 2 * scene.chain.limits().velocity * cfg.period + 1e-12)
        assert scene.forces.sum() <= 0.5  # the settled plant, every frame
        if inv.in_contact:
            assert scene.forces.sum() >= 0.2
    assert inv.in_contact and e0 > 0.01
    assert np.linalg.norm(probe_alignment(scene, node)) < 1e-5


def test_a_trial_settling_above_the_limit_is_undone_and_resolved_with_a_corrected_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    scene = HybridScene(HybridSceneConfig(rod_young=0.08e6))
    scene.settle()
    node = hybrid_alignment._targets(scene, 1)[0]
    cfg = InverseConfig(force_limit=0.5, force_min=0.2)
    inv = HybridInverse(scene, node, cfg)
    for _ in range(5):
        inv.frame()
    assert inv.in_contact and cfg.force_min <= scene.forces.sum() <= cfg.force_limit
    # a model error: the first trial's command lands 0.05 rad further into the block than
    # the QP planned (its settled force far above the limit and the prediction)
    real, calls = hybrid_inverse.inverse_step, []

    def erring_step(*a, **k):
        prob, res = real(*a, **k)
        calls.append(prob.sum_limits[0])
        if len(calls) == 1:
            scene.q_cmd = scene.q_cmd + np.array([0.0, 0.05, 0.0, 0.0, 0.0])
        return prob, res

    monkeypatch.setattr(hybrid_inverse, "inverse_step", erring_step)
    q_before, z_before = scene.q_cmd.copy(), scene.z.copy()
    scene.q_cmd = q_before + np.array([0.0, 0.05, 0.0, 0.0, 0.0])
    scene.settle(3)
    assert scene.forces.sum() > cfg.force_limit  # the erring trial does exceed the limit
    scene.q_cmd, scene.z = q_before.copy(), z_before.copy()
    scene.settle(3)
    rep = inv.frame()
    assert rep.trials >= 2 and len(calls) >= 2
    assert scene.forces.sum() <= cfg.force_limit
    # measured / predicted > 1 tightened the QP's bound for the next trial
    assert inv.scale_upper > 1.0 and calls[1] < cfg.force_limit
    if not rep.accepted:  # every trial rejected: back to the state before the frame
        np.testing.assert_allclose(scene.q_cmd, q_before)


def test_soft_rod_at_a_fine_grid_converges_without_losing_contact() -> None:
    """The regression of the merged contact search (restarts from the extreme states) with
    the insertion row: the 0.08 MPa rod with a 5 x 5 tip grid lost contact on the second
    target and ended 2.1 mm off."""
    scene = HybridScene(HybridSceneConfig(rod_young=0.08e6, rod_divisions=(5, 5, 5)))
    scene.settle()
    node = hybrid_alignment._targets(scene, 4)[1]
    inv = HybridInverse(scene, node, InverseConfig())
    sums = []
    for _ in range(12):
        inv.frame()
        sums.append(scene.forces.sum())
    assert inv.in_contact and min(sums[1:]) >= 0.1 and max(sums) <= 1.0
    assert np.linalg.norm(probe_alignment(scene, node)) < 0.5e-3


def test_experiment_rejects_bad_options(capsys: pytest.CaptureFixture[str]) -> None:
    """Also --force-limit inf (it failed later, not naming the option) and a --stiffness of
    1 GPa (the contact solve's failure, not naming it)."""
    from soft_inverse_ros.cli import main

    for argv, message in ((["--frames", "0"], "--frames: must be at least 1"),
                          (["--force-min", "1.5"], "--force-min must be below --force-limit"),
                          (["--force-min", "0"], "--force-min: must be a finite number > 0"),
                          (["--force-limit", "inf"], "--force-limit: must be a finite number > 0"),
                          (["--stiffness", "0.8", "-1"], "--stiffness: must be a finite number > 0"),
                          (["--stiffness", "1000"], "--stiffness must be rod Young's moduli in (0, 100] MPa")):
        try:
            code = main(["experiment", "hybrid-alignment", "--quick", *argv])
        except SystemExit as exc:  # argparse's refusal
            code = exc.code
        assert code == 2, argv
        assert message in capsys.readouterr().err, argv


def test_quick_sizes_only_what_is_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """--quick capped an explicit --frames 30 to 15 without a word."""
    seen = {}
    monkeypatch.setattr(hybrid_alignment, "measure",
                        lambda args: seen.update(frames=args.frames, ticks=args.ticks) or {})
    hybrid_alignment.main(argparse.Namespace(frames=30, force_limit=1.0, force_min=0.1, stiffness=None,
                                             ticks=None, rod_grid=2, quick=True, json=False, out=None))
    assert seen == {"frames": 30, "ticks": 50}


def test_quick_experiment_reports_the_settled_force_band_and_the_error() -> None:
    args = argparse.Namespace(frames=15, force_limit=1.0, force_min=0.1, stiffness=(0.08e6,), ticks=20, rod_grid=2,
                              quick=True, json=False, out=None)
    out = hybrid_alignment.measure(args)
    assert out["alignment_error_max_mm"] < 0.5
    assert out["contact_force_sum_max_n"] <= out["contact_force_limit_n"]
    assert out["contact_force_sum_min_in_contact_n"] >= out["contact_force_min_n"]
    assert out["targets_not_in_contact"] == 0
    assert out["constraints"] == 3 + 5 + 9 + 2  # alignment, joints, 3 x 3 tip contacts, force sum max and min


def test_the_settled_force_never_exceeds_the_limit_where_the_plain_step_would() -> None:
    """0.08 MPa rod, band 0.9-1 N, fourth target: one QP step per frame, each kept, settles
    at 1.008 N (the settled force is not the linearised one); the frames undo such a trial
    and re-solve."""
    scene = HybridScene(HybridSceneConfig(rod_young=0.08e6))
    scene.settle()
    node = hybrid_alignment._targets(scene, 4)[3]
    cfg = InverseConfig(force_limit=1.0, force_min=0.9)
    inv = HybridInverse(scene, node, cfg)
    trials = solved = 0
    for _ in range(5):
        rep = inv.frame()
        trials += rep.trials
        solved += rep.trials > 0
        assert scene.forces.sum() <= cfg.force_limit
    assert trials > solved  # at least one trial was rejected
    assert inv.in_contact and scene.forces.sum() >= cfg.force_min
    assert np.linalg.norm(probe_alignment(scene, node)) < 0.5e-3


def test_nearest_pairing_reads_one_block_node_per_contact() -> None:
    cfg = HybridSceneConfig(contact_pairing="nearest")
    scene = HybridScene(cfg)
    scene.q_cmd = scene.q_cmd + np.array([0.0, 0.03, 0.0, 0.0, 0.0])
    scene.settle(5)
    lin = scene.linearize()
    fields = scene._block_fields(lin.block_nodes)
    w_rod = lin.contact_rows @ lin.contact_solve
    w_block = -fields[3 * lin.block_nodes + 2]
    np.testing.assert_allclose(lin.w_cc, 0.5 * (w_rod + w_rod.T + w_block + w_block.T), rtol=1e-9, atol=1e-15)
    with pytest.raises(SystemExit, match="contact_pairing"):
        HybridSceneConfig(contact_pairing="closest")


def test_experiment_reports_the_tick_with_the_shipped_controller_settings(capsys) -> None:
    """``experiment hybrid-alignment --quick``: the tick is timed with sim_hybrid.yaml's
    contact settings (its time budget reported), the cut ticks and what they cost."""
    import json

    from soft_inverse_ros.cli import main
    from soft_inverse_ros.core.control.shipped_settings import shipped_solver_config

    assert main(["experiment", "hybrid-alignment", "--quick", "--stiffness", "0.8", "--json"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    budget = shipped_solver_config("sim_hybrid.yaml").contact_tick_budget
    assert budget > 0 and res["qp_tick_budget_ms"] == 1e3 * budget
    assert 0 <= res["qp_ticks_cut_fraction"] <= 1 and res["qp_tick_cut_residual_excess_mm"] >= 0
    assert res["qp_tick_p99_ms"] > 0 and res["alignment_error_max_mm"] < 0.5


def test_the_targets_are_block_nodes_10_mm_deep_near_the_live_graphs_points() -> None:
    """What the docs say of the targets (they said 12 mm deep, the same points as the live
    graph's): the block nodes nearest the points 12 mm deep are 10 mm deep on the 10 mm grid,
    exactly 10 mm off the home axis, and within 0.13 mm of hybrid_four_targets.csv's points
    (12 mm deep in the live robot's block, whose top lies 0.1 mm below the tip, not 2 mm)."""
    from soft_inverse_ros.core.config_files import find_config

    scene = HybridScene()
    scene.settle()
    tip = scene.rod_positions()[scene.tip].mean(0)
    nodes = scene.block.rest_points[hybrid_alignment._targets(scene, 4)]
    np.testing.assert_allclose(scene.block_top_z - nodes[:, 2], 0.010, atol=1e-12)
    np.testing.assert_allclose(nodes[:, :2] - tip[:2], hybrid_alignment.TARGET_OFFSETS_M, atol=1e-12)
    lines = [line for line in find_config("trajectories/hybrid_four_targets.csv").read_text().splitlines()
             if line and not line.startswith("#")]
    assert lines[0] == "x,y,z,t"
    csv = np.array([[float(v) for v in line.split(",")[:3]] for line in lines[1::2]])  # each target once
    assert np.linalg.norm(csv - nodes, axis=1).max() < 1.3e-4
