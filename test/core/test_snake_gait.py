"""The snake's gait, valve duties and implicit step."""

import numpy as np
import pytest

from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticParams, steady_state_pressure
from soft_inverse_ros.core.snake.gait import Gait, antagonistic_duties
from soft_inverse_ros.core.snake.snake import Snake, SnakeParams

PP = PneumaticParams(supply_pressure_pa=7e4, inflow_coefficient=5000.0, outflow_rate_pa_s=2e5, outflow_knee_pa=5e3)


def test_gait_is_eq9():
    g = Gait(frequency_hz=0.5, phase_rad=0.3, offset_pa=100.0, amplitude_pa=2e4)
    t = 0.7
    expected = 2e4 * np.sin(2 * np.pi * 0.5 * t + 0.3 * np.arange(4)) + 100.0
    assert np.allclose(g.pressures(t, 4), expected)
    with pytest.raises(ValueError):
        Gait(frequency_hz=-1.0, phase_rad=0.0, offset_pa=0.0, amplitude_pa=1.0)


def test_antagonistic_duties_hold_the_commanded_side_and_vent_the_other():
    d = antagonistic_duties(np.array([-3e4, 0.0, 2e4]), PP)
    assert d[0, 1] == 0 and d[2, 0] == 0 and np.all(d[1] == 0)
    assert steady_state_pressure(PP, d[0, 0]) == pytest.approx(3e4, rel=1e-6)
    assert steady_state_pressure(PP, d[2, 1]) == pytest.approx(2e4, rel=1e-6)


def test_snake_rests_on_its_wheels_and_pressure_bends_a_link():
    snake = Snake(SnakeParams(n_links=2, dt=0.01))
    for _ in range(15):
        snake.step(np.zeros((2, 2)))
    weight = snake.mass.sum() * snake.params.gravity
    pen = -snake.x[snake.wheels.ravel(), 2]
    assert np.all(pen > 0)  # every wheel carries load
    assert snake.params.ground_stiffness * pen.sum() == pytest.approx(weight, rel=0.1)

    def relative_yaw():
        ax = snake.x[snake.wheels[:, 1]] - snake.x[snake.wheels[:, 0]]
        yaw = np.arctan2(-ax[:, 0], ax[:, 1])
        return yaw[1] - yaw[0]

    before = relative_yaw()
    for _ in range(15):
        snake.step(np.array([[0.0, 4e4], [0.0, 0.0]]))  # right chamber of link 0
    assert relative_yaw() - before < -0.01  # link 0 bends away from its inflated right chamber


def test_snakes_stepped_together_match_one_snake_stepped_alone():
    one = Snake(SnakeParams(n_links=1, dt=0.01))
    two = Snake(SnakeParams(n_links=1, dt=0.01, n_snakes=2))
    p = np.array([[0.0, 3e4]])
    for _ in range(5):
        one.step(p)
        two.step(np.stack([p, p]))
    coms = two.coms()
    assert np.allclose(coms[0], one.com(), atol=1e-9)
    assert np.allclose(coms[1] - [0.0, two.params.snake_spacing, 0.0], one.com(), atol=1e-9)


def test_fixed_cost_minres_step_agrees_with_the_direct_solve():
    p = np.array([[0.0, 3e4]])
    runs = []
    for solver, newton in (("direct", 2), ("minres", 4)):
        snake = Snake(SnakeParams(n_links=1, dt=0.005, linear_solver=solver, newton_iterations=newton))
        for _ in range(10):
            snake.step(p)
        runs.append(snake.x - snake.fem.rest_points)
    moved = np.abs(runs[0]).max()
    assert moved > 1e-3  # the step moved the body, so the comparison means something
    # 20 MINRES iterations are inexact: 0.12 mm of 1.3 mm here (measured)
    assert np.abs(runs[0] - runs[1]).max() < 0.2 * moved
    with pytest.raises(ValueError):
        SnakeParams(linear_solver="cg")


def test_chamber_pressures_are_antagonistic():
    from soft_inverse_ros.core.snake.gait import chamber_pressures

    c = chamber_pressures(np.array([-3e4, 0.0, 2e4]))
    assert np.allclose(c, [[3e4, 0.0], [0.0, 0.0], [0.0, 2e4]])


def test_gait_limits_refuse_with_a_reason():
    from soft_inverse_ros.core.snake.gait import GaitLimits

    lim = GaitLimits(max_pressure_pa=5e4, max_frequency_hz=5.0)
    assert lim.check(1.0, 1.57, 0.0, 5e4) == ""
    assert "exceeds" in lim.check(1.0, 1.57, 1e3, 5e4)  # 51 kPa > 50 kPa
    assert "exceeds" in lim.check(1.0, 1.57, -2e4, 4e4)
    assert "frequency" in lim.check(6.0, 0.0, 0.0, 1e4)
    assert "frequency" in lim.check(-0.1, 0.0, 0.0, 1e4)
    assert "phase" in lim.check(1.0, 7.0, 0.0, 1e4)
    assert "negative" in lim.check(1.0, 0.0, 0.0, -1.0)
    assert "finite" in lim.check(float("nan"), 0.0, 0.0, 1.0)


def test_gait_source_is_eq9_keeps_its_phase_on_a_frequency_change_and_never_exceeds_the_limit():
    from soft_inverse_ros.core.snake.gait import GaitLimits, GaitSource

    g = Gait(frequency_hz=1.0, phase_rad=0.5, offset_pa=1e3, amplitude_pa=2e4)
    src = GaitSource(g, GaitLimits(5e4), 4)
    src.signed(0.0)
    for t in np.arange(0.01, 0.3, 0.01):  # small steps: the integrated phase is 2π f t
        p = src.signed(t)
    assert np.allclose(p, 2e4 * np.sin(2 * np.pi * 0.29 + 0.5 * np.arange(4)) + 1e3)
    theta = src.theta
    assert src.set(Gait(3.0, 0.5, 1e3, 2e4)) == ""
    assert src.theta == theta  # no jump at the change
    p2 = src.signed(0.29 + 0.01)
    assert np.allclose(p2, 2e4 * np.sin(theta + 2 * np.pi * 3.0 * 0.01 + 0.5 * np.arange(4)) + 1e3)
    assert src.set(Gait(1.0, 0.5, 4e4, 2e4)) != ""  # 60 kPa refused, running gait kept
    assert src.gait.frequency_hz == 3.0
    with pytest.raises(ValueError):
        GaitSource(Gait(1.0, 0.0, 0.0, 6e4), GaitLimits(5e4), 4)
    c = src.chambers(0.5)
    assert c.shape == (4, 2) and np.all(c >= 0) and np.all(c.max(1) <= 5e4) and np.all(c.min(1) == 0)


def test_plate_poses_start_at_identity_and_follow_a_bending_link():
    snake = Snake(SnakeParams(n_links=2, dt=0.01))
    pos, q = snake.plate_poses()
    assert pos.shape == (3, 3) and np.allclose(q, [0, 0, 0, 1])
    g = snake.params.geometry
    assert np.allclose(pos[:, 0], [0.0, g.length, 2 * g.length]) and np.allclose(pos[:, 1:], [0.0, g.height / 2])
    assert snake.plate_corner_ids().shape == (3, 4)
    for _ in range(20):
        snake.step(np.array([[0.0, 4e4], [0.0, 0.0]]))
    _, q = snake.plate_poses()
    yaw = 2 * np.arctan2(q[:, 2], q[:, 3])  # rotations about z only (planar bending)
    assert yaw[1] - yaw[0] < -0.01  # same sign as the wheel-axle yaw of the bending test


SNAKE_GAIT_VALVES = PneumaticParams(supply_pressure_pa=10 * 6894.757293168, inflow_coefficient=5000.0,
                                    outflow_rate_pa_s=2e5, outflow_knee_pa=5e3, latency_s=0.02)


def _chambers_under_gait(control: str, frequency_hz: float = 1.0, periods: int = 3):
    """Chamber pressures (T, 8) and setpoints (T, 8) [Pa] of the eq. 9 gait (8 psi) through the
    snake-gait valves, one duty per 60 Hz PWM period."""
    from soft_inverse_ros.core.drivers.pneumatic_model import PneumaticChambers
    from soft_inverse_ros.core.snake.gait import chamber_pressures, tracking_duties

    pp = SNAKE_GAIT_VALVES
    chambers = PneumaticChambers([pp] * 8)
    gait = Gait(frequency_hz, 1.5708, 0.0, 8 * 6894.757293168)
    t, next_cmd, pressure, setpoint = 0.0, 0.0, [], []
    while t < periods / frequency_hz:
        if t >= next_cmd - 1e-9:
            signed = gait.pressures(t, 4)
            duty = (tracking_duties(chambers, t, chamber_pressures(signed).ravel(), 1 / 60) if control == "tracking"
                    else antagonistic_duties(signed, pp).ravel())
            chambers.command(t, duty)
            next_cmd += 1 / 60
        chambers.advance(t)
        pressure.append(chambers.pressure.copy())
        setpoint.append(chamber_pressures(gait.pressures(t, 4)).ravel())
        t += 0.002
    return np.array(pressure), np.array(setpoint)


def test_tracking_duties_reach_the_gait_pressure_where_the_steady_state_duty_lags():
    psi = 6894.757293168
    last = slice(-500, None)  # the last period (1 s at 2 ms)
    tracked, setpoint = _chambers_under_gait("tracking")
    assert tracked[last].max(0).min() > 7.8 * psi  # every chamber reaches the 8 psi command
    assert tracked.max() < 8.05 * psi  # without overshooting it
    assert tracked[last].min(0).max() < 0.1 * psi  # and vents fully on the other half-cycle
    lagging, _ = _chambers_under_gait("feedforward")
    assert lagging[last].max(0).max() < 5.5 * psi  # measured 4.9 psi: the open-loop lag the fix removes


def _gait_travel_mm(**overrides) -> float:
    """Cycle-averaged CoM travel along +x [mm] of a 2 s snake-gait run: mean over the second
    gait period minus mean over the first (short, for the test's time; the experiment leaves
    the first period out)."""
    import argparse

    from soft_inverse_ros.experiments import snake_gait

    parser = argparse.ArgumentParser()
    snake_gait.register(parser.add_subparsers())
    args = parser.parse_args(["snake-gait", "--duration", "2", "--dt", "0.01"])
    for k, v in overrides.items():
        setattr(args, k, v)
    r = snake_gait.run(args, args.mu_along, args.mu_across, 0.0)
    return 1e3 * float(snake_gait._cycle_change(r["t"], r["com"][:, 0], 1.0, 0.0))


def test_gait_crawls_head_first_and_its_travel_is_converged_in_the_friction_regularization():
    # measured (2 s, dt 10 ms): +0.77 mm at ε = 0.5 mm/s, +0.75 mm at ε = 0.25 mm/s. Both checks
    # fail on what this replaced: at the old ε = 2 mm/s (+1.13 mm, 47 % off) the side friction was
    # viscous under the ~1 mm/s side slip; the open-loop steady-state duty gives +0.09 mm
    fine = _gait_travel_mm(slip_regularization=2.5e-4)
    default = _gait_travel_mm()
    assert default > 0.3 and fine > 0.3  # head first (+x), well above the isotropic creep (< 0.01 mm)
    assert abs(default - fine) < 0.1 * fine
