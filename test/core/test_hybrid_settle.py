"""HybridScene.settle (core/rigid/hybrid_scene.py): a modified-Newton (chord) step follows only
a step that contracted against the step before it, and a settle that does not reach its
tolerance says so instead of returning the state it diverged to."""

from __future__ import annotations

import numpy as np
import pytest

from soft_inverse_ros.core.model.linear_solvers import ConvergenceError
from soft_inverse_ros.core.rigid.hybrid_scene import HybridScene


@pytest.fixture(scope="module")
def rest() -> tuple[HybridScene, tuple]:
    """The built-in scene settled at home (2 mm clearance: no contact) and its saved state."""
    scene = HybridScene()
    scene.settle(30, tolerance=1e-6)
    return scene, scene.save()


def _tip(scene: HybridScene) -> np.ndarray:
    """The probe tip (centroid of the rod's tip face) [m]."""
    return scene.rod_positions()[scene.tip].mean(0)


def test_a_first_joint_step_of_a_tenth_of_a_radian_settles_where_newton_steps_do(rest) -> None:
    """The first Newton step was always followed by a chord step (its "step before" was inf):
    on a 0.1 rad step of j1 the settle then diverged to a tip metres away pressing 30 N."""
    scene, home = rest
    step = np.array([0.1, 0.0, 0.0, 0.0, 0.0])
    scene.restore(home)
    scene.q_cmd = scene.q_cmd + step
    for _ in range(6):  # plain Newton steps (no tolerance: no chord steps)
        scene.settle(1)
    newton_tip, newton_force = _tip(scene), scene.forces.sum()
    assert scene.last_motion < 1e-9
    scene.restore(home)
    scene.q_cmd = scene.q_cmd + step
    scene.settle(30, tolerance=1e-6)
    assert scene.last_motion <= 1e-6
    np.testing.assert_allclose(_tip(scene), newton_tip, atol=1e-5)
    assert scene.forces.sum() == pytest.approx(newton_force, abs=1e-6)


def test_a_settle_that_misses_its_tolerance_raises(rest) -> None:
    """One Newton step of a 0.1 rad move cannot reach 1 µm: a ConvergenceError naming the
    setpoints and the last motion, not a silent return."""
    scene, home = rest
    scene.restore(home)
    scene.q_cmd = scene.q_cmd + np.array([0.1, 0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ConvergenceError, match=r"no equilibrium at the joint setpoints .* 1 Newton steps, the last "
                                               r"moved a node .* m \(tolerance 1e-06 m\)"):
        scene.settle(1, tolerance=1e-6)
    scene.restore(home)
    scene.settle(1)  # without a tolerance: exactly the steps asked for, no verdict
