"""The snake's compiled step (numba, core/snake/snake_kernels.py) against its numpy/scipy
reference step (``Snake(kernels="numpy")``, the implementation it replaced)."""

import numpy as np
import pytest

pytest.importorskip("numba")

from soft_inverse_ros.core.snake.gait import Gait  # noqa: E402
from soft_inverse_ros.core.snake.snake import Snake, SnakeParams  # noqa: E402


def _run(params: SnakeParams, kernels: str, steps: int) -> Snake:
    snake = Snake(params, kernels=kernels)
    gait = Gait(1.0, np.pi / 2, 0.0, 4e4)
    n = params.n_snakes
    for i in range(steps):
        p = gait.pressures(snake.time, params.n_links) * (1.0 + 0.1 * np.arange(n))[:, None]
        snake.step(np.stack([np.maximum(-p, 0.0), np.maximum(p, 0.0)], axis=-1))
    return snake


@pytest.mark.parametrize("solver", ["minres", "direct"])
def test_compiled_step_matches_the_reference_step(solver):
    # two snakes with different pressures: the block-diagonal system, the wheels' friction
    # (they land on and slide over the ground), the springs and the actuators
    params = SnakeParams(n_links=2, dt=0.01, n_snakes=2, linear_solver=solver, newton_iterations=2)
    ref, fast = _run(params, "numpy", 25), _run(params, "numba", 25)
    assert ref.kernels == "numpy" and fast.kernels == "numba"
    moved = np.abs(ref.x - Snake(params, kernels="numpy").x).max()
    assert moved > 1e-4  # the run does move the snakes (m)
    assert np.abs(fast.x - ref.x).max() <= 1e-9 * moved
    assert np.abs(fast.v - ref.v).max() <= 1e-9 * np.abs(ref.v).max()


def test_compiled_jacobian_is_the_reference_jacobian():
    import scipy.sparse as sp

    from soft_inverse_ros.core.snake.link_model import actuated_springs
    from soft_inverse_ros.core.snake.springs import spring_stiffness

    params = SnakeParams(n_links=2, dt=0.01, newton_iterations=1)
    fast = _run(params, "numba", 3)
    ref = Snake(params, kernels="numpy")
    x0, v0 = fast.x.copy(), fast.v.copy()
    fast.step(np.array([[0.0, 3e4], [1e4, 0.0]]))
    x = x0 + params.dt * v0  # the one Newton iteration's linearization point
    springs = actuated_springs(ref.constraints, ref.actuators, [0.0, 3e4, 1e4, 0.0], params.material.young_modulus)
    _, kn, _ = ref._contact(x, v0)
    _, _, damping = ref._contact(x0, v0)
    k = ref.fem.stiffness(ref.fem.element_state(x)) + spring_stiffness(springs, x) + sp.diags(kn)
    jac = (sp.diags(ref._m3 / params.dt) + damping + params.dt * k).toarray()
    assert np.abs(fast.jacobian().toarray() - jac).max() <= 1e-12 * np.abs(jac).max()


def test_kernels_argument_is_checked():
    with pytest.raises(ValueError):
        Snake(SnakeParams(n_links=1), kernels="cuda")


@pytest.mark.parametrize("kernels", ["numpy", "numba"])
def test_equal_friction_coefficients_are_isotropic_and_within_the_coulomb_bound(kernels):
    # a wheel slipping at 45° to the body in the Coulomb regime (|v| >> ε): with equal
    # coefficients the force opposes the slip and has magnitude μN (a per-axis
    # regularization would give a box-shaped force, √2·μN, along the body's axes)
    snake = Snake(SnakeParams(n_links=1, mu_along=0.5, mu_across=0.5, slip_regularization=1e-6), kernels=kernels)
    x = snake.x.copy()
    x[snake.wheels.ravel(), 2] = -1e-3  # every wheel pressed 1 mm into the ground
    v = np.zeros_like(x)
    v[:, :2] = [0.01, 0.01]  # 14 mm/s at 45° to the body
    if kernels == "numpy":
        _, _, damping = snake._contact(x, v)
        force = -(damping @ v.ravel()).reshape(-1, 3)[snake.wheels.ravel()]
    else:
        blocks = np.empty((snake.wheels.size, 3, 3))
        snake._kernels.contact_damping(x, v, snake.wheels, 0.5, 0.5, snake.params.ground_stiffness, 1e-6, blocks)
        force = -np.einsum("wab,wb->wa", blocks, v[snake.wheels.ravel()])
    normal = snake.params.ground_stiffness * 1e-3
    assert np.allclose(np.linalg.norm(force, axis=1), 0.5 * normal, rtol=1e-6)
    assert np.allclose(force[:, :2] / np.linalg.norm(force[:, :2], axis=1, keepdims=True), -np.sqrt(0.5))
