"""experiment self-collision (quick) on SOFA's finger: contact changes the shape only once
the notches close, and then without penetration."""

from __future__ import annotations

import argparse

import pytest

from soft_inverse_ros.experiments.self_collision import measure


def _args(pull_mm: float) -> argparse.Namespace:
    return argparse.Namespace(pull_mm=pull_mm, collision_surface=None, refine=0, step_mm=0.25, dt=0.01, alarm_mm=0.5, measure_depth_mm=3.0,
                              cable_stiffness=1e5, gs_tolerance=1e-10, out=None)


@pytest.fixture()
def finger(sofa_data, monkeypatch):
    monkeypatch.setenv("SOFA_SOFTROBOTS_DATA", str(sofa_data))


def test_the_notches_close_and_self_collision_holds_them_open(finger):
    r = measure(_args(55.0))
    assert r["contacts_max"] >= 1 and r["first_contact_force_pull_mm"] is not None
    assert 45.0 < r["first_contact_force_pull_mm"] < 55.0
    assert r["tip_shift_vs_no_contact_mm"] > 1.0  # the run without contact interpenetrates
    assert r["max_penetration_mm"] <= 0.05
    assert r["complementarity_residual"] <= 1e-6 and r["complementarity_residual_exact"] <= 1e-8
    assert r["gs_vs_exact_max_diff"] < 1e-2


def test_no_contact_below_the_closing_pull(finger):
    r = measure(_args(40.0))
    assert r["contacts_max"] == 0 and r["tip_shift_vs_no_contact_mm"] == 0.0
