"""A block on an inclined plane through the whole contact pipeline: detection against a
plane obstacle, normal and tangent rows, Coulomb Gauss–Seidel, the correction of an
implicit-Euler step. It sticks below tan θ = μ and slides above at g (sin θ − μ cos θ)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from soft_inverse_ros.core.contact.correction import ContactModel
from soft_inverse_ros.core.contact.geometry import Plane

G = 9.81
MASS = 0.05  # kg per corner node


def _slide(theta_deg: float, friction, *, t1=(1.0, 0.0, 0.0), direction=(1.0, 0.0), steps=200, h=0.005):
    """Four corner masses of a block on a plane tilted by θ (gravity −z); the downhill
    direction is ``direction`` in the plane's (x, y). Returns the downhill velocity history."""
    theta = math.radians(theta_deg)
    dx, dy = direction
    normal = np.array([-math.sin(theta) * dx, -math.sin(theta) * dy, math.cos(theta)])
    downhill = -np.array([dx * math.cos(theta), dy * math.cos(theta), math.sin(theta)])
    plane = Plane((0.0, 0.0, 0.0), tuple(normal), t1=t1)
    side = np.cross(normal, downhill)
    x = np.array([a * 0.01 * downhill + b * 0.01 * side for a in (0, 1) for b in (0, 1)])  # on the plane
    v = np.zeros_like(x)
    model = ContactModel(obstacles=[plane], alarm_distance=1e-3, friction=friction, tolerance=1e-14)
    free = np.arange(12)
    a_inv = h * h / MASS  # A = M / h² (point masses): A⁻¹ = h²/m
    speeds = []
    for _ in range(steps):
        v_free = v + h * np.array([0.0, 0.0, -G])
        x_free = x + h * v_free
        dxc, stats = model.correct(x_free, x, free, lambda block: a_inv * block)
        corr = np.zeros_like(x) if dxc is None else dxc.reshape(-1, 3)
        x = x_free + corr
        v = v_free + corr / h
        speeds.append(float(v.mean(axis=0) @ downhill))
        assert stats.contacts == 4
    return np.array(speeds), x, normal, stats


@pytest.mark.parametrize("theta,mu", [(20.0, 0.5), (30.0, 0.5), (40.0, 0.3)])
def test_block_sticks_below_and_slides_above_the_friction_angle(theta, mu):
    h, steps = 0.005, 200
    speeds, x, normal, stats = _slide(theta, mu, steps=steps, h=h)
    t = h * np.arange(1, steps + 1)
    th = math.radians(theta)
    assert (x @ normal).min() > -1e-12  # no penetration
    np.testing.assert_allclose(stats.forces.sum(), 4 * MASS * G * math.cos(th), rtol=1e-9)
    if math.tan(th) < mu:
        assert np.abs(speeds).max() < 1e-9
    else:
        expected = G * (math.sin(th) - mu * math.cos(th)) * t
        assert speeds[-1] == pytest.approx(expected[-1], rel=0.02)
        np.testing.assert_allclose(speeds[10:], expected[10:], rtol=0.02)


def test_anisotropic_friction_makes_sliding_direction_dependent():
    # μ = 0.6 along x (t1), 0.2 along y: at 25° the block sticks going down along x and
    # slides going down along y
    along_x, *_ = _slide(25.0, (0.6, 0.2), direction=(1.0, 0.0), steps=100)
    along_y, *_ = _slide(25.0, (0.6, 0.2), direction=(0.0, 1.0), steps=100)
    assert np.abs(along_x).max() < 1e-9
    th = math.radians(25.0)
    assert along_y[-1] == pytest.approx(G * (math.sin(th) - 0.2 * math.cos(th)) * 0.005 * 100, rel=0.02)
