"""Compile the inverse solver's numba kernels before a control loop starts.

Numba compiles a kernel on its first call (about 1 s per kernel on a cold cache, a disk
load after). The solver runs its kernels once when it accepts its first snapshot; in a
node that happens in the executor thread the 1 kHz ticks share, so the first snapshot of
a cold start would stop the ticks for the whole compilation (seconds; longer on a loaded
machine). :func:`warm_up_solver` runs the same code on a synthetic snapshot of the robot's
shapes, in a throw-away solver, at start-up.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from soft_inverse_ros.core.control.actuator_limits import ActuatorLimits
from soft_inverse_ros.core.control.inverse_qp import InverseSolver, InverseSolverConfig
from soft_inverse_ros.core.model.snapshot import ActuatorKind, ComplianceSnapshot, ContactBlock

__all__ = ["warm_up_solver"]


def _synthetic_snapshot(n_a: int, kinds: Sequence[ActuatorKind], effector_names: Sequence[str],
                        actuator_names: Sequence[str], with_contact: bool) -> ComplianceSnapshot:
    """A well-conditioned snapshot (W_aa = 1e-3·I, every actuator moving the effector) of
    the given shapes; with one contact when ``with_contact``."""
    n_e = len(effector_names)
    w_ea = 1e-3 * (np.eye(n_e, n_a) + 0.1)
    contacts = None
    if with_contact:
        contacts = ContactBlock(
            ids=np.zeros(1, dtype=np.int64), points=np.zeros((1, 3)), normals=np.array([[0.0, 0.0, 1.0]]),
            gap=np.array([1e-3]), force=np.zeros(1), w_cc=np.array([[1e-3]]),
            w_ca=1e-4 * np.ones((1, n_a)), w_ec=1e-4 * np.ones((n_e, 1)))
    return ComplianceSnapshot(
        seq=0, stamp=0.0, actuator_names=tuple(actuator_names), actuator_kinds=tuple(kinds),
        effector_names=tuple(effector_names), w_ea=w_ea, w_aa=1e-3 * np.eye(n_a),
        w_ee=1e-3 * np.eye(n_e), effector_position=np.zeros(n_e), actuator_stroke=np.zeros(n_a),
        lambda0=np.zeros(n_a), contacts=contacts)


def warm_up_solver(config: InverseSolverConfig, limits: ActuatorLimits,
                   actuator_kinds: Sequence[ActuatorKind], effector_names: Sequence[str], *,
                   actuator_names: Sequence[str] | None = None, with_contact: bool = False) -> float:
    """Run a throw-away :class:`InverseSolver` (same config and limits) through a snapshot
    and two ticks (and their active bounds, which the controller's status reports), so that
    every kernel a live solver calls is compiled (or loaded from numba's cache) now.
    Returns the wall time it took [s].

    Raises:
        RuntimeError: the synthetic snapshot was rejected (a bug: the shapes come from the
            same limits).
    """
    t0 = time.perf_counter()
    n_a = limits.n_actuators
    names = tuple(actuator_names) if actuator_names is not None else \
        (limits.names if limits.names is not None else tuple(f"a{i}" for i in range(n_a)))
    solver = InverseSolver(config, limits)
    update = solver.set_snapshot(_synthetic_snapshot(n_a, actuator_kinds, effector_names, names, with_contact))
    if not update.accepted:
        raise RuntimeError(f"kernel warm-up: synthetic snapshot rejected: {update.reason}")
    target = np.full(len(effector_names), 1e-4)
    for stamp in (0.001, 0.002):
        result = solver.solve(target, stamp=stamp)
        if result.ok:
            result.active  # noqa: B018 -- the status message's active bounds (a kernel of its own)
    return time.perf_counter() - t0
