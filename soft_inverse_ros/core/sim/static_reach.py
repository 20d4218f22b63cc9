"""Static reach of a simulated cable robot: how close its effector can come to a target.

For a target T (the effector rows' values [m]), :meth:`StaticReach.solve` finds

    gap(T) = min over cable strokes s of ‖e(s) − T‖,

e(s) being the effector at the static equilibrium under the strokes s (the plant's own
``equilibrate``: its model, its discretization, gravity). A target with a gap above the
tolerance is out of the robot's reach: no command holds the effector there, and a
controller (open or closed loop) can only come as close as the gap.

The minimization is a projected Levenberg–Marquardt iteration on finite-difference
Jacobians, from several starts. Cables are pull-only: a slack cable's Jacobian column is
zero, so the iteration could never tighten it; its column is taken at its taut point
instead (the stroke at which it just touches), and its step is a pull from there or
nothing. And a cable on the
far side of a bend is an antagonist unless it is let out: from the rest (every cable just
taut) the iteration stops in a local minimum with the far cables holding the robot back
(the built-in robot's corner (10, 10) mm: 124.8 mm high from rest, 118.65 mm with the two
far cables released). So the starts are the rest and, for every set of at most n_e − 1
cables, those cables just taut and the others released; each start gets a few iterations
and the best one is iterated to convergence.

Units SI; the effector rows and targets in the plant's frame (the robot's base frame).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.model.snapshot import ActuatorKind

__all__ = ["ReachResult", "StaticReach"]


@dataclass(frozen=True)
class ReachResult:
    """The closest static equilibrium to a target.

    Attributes:
        target: (n_e,) the target [m].
        gap: ‖effector − target‖ at the best equilibrium found [m] (an upper bound on the
            true gap: the search is local from several starts).
        effector: (n_e,) the effector there [m].
        cable_strokes: (n_cables,) the commanded strokes there [m] (plant convention:
            shortening, pulled in > 0).
        equilibria: static equilibria computed for this target.
    """

    target: np.ndarray
    gap: float
    effector: np.ndarray
    cable_strokes: np.ndarray
    equilibria: int


class StaticReach:
    """Static reach of a plant whose actuators are all cables (see the module docstring).

    Args:
        plant: a ``SoftRobotPlant`` (or ``ModalPlant``); its state and inputs are changed.
        release: how far a released cable is let out below its rest taut stroke [m].
        max_pull: the largest stroke above the rest taut stroke [m].
        fd_step: finite-difference step of the strokes [m].
        tolerance: a gap below this ends a start's iteration [m].
        probe_iterations: iterations given to every start before the best one goes on.
        max_iterations: iterations of the best start.

    Raises:
        ValueError: the plant has an actuator that is not a cable, or a bad setting.
    """

    def __init__(self, plant, *, release: float = 0.01, max_pull: float = 0.02, fd_step: float = 2e-5,
                 tolerance: float = 1e-6, probe_iterations: int = 3, max_iterations: int = 40) -> None:
        kinds = tuple(plant.actuator_kinds)
        if not kinds or any(k is not ActuatorKind.CABLE for k in kinds):
            raise ValueError("static reach: only robots actuated by cables alone are supported "
                             f"(actuators: {', '.join(k.name.lower() for k in kinds) or 'none'})")
        for name, value in (("release", release), ("max_pull", max_pull), ("fd_step", fd_step),
                            ("tolerance", tolerance)):
            if not (np.isfinite(value) and value > 0.0):
                raise ValueError(f"static reach: {name} must be a positive length, got {value!r}")
        if probe_iterations < 1 or max_iterations < 1:
            raise ValueError("static reach: iteration counts must be at least 1")
        self._plant = plant
        self._fd = float(fd_step)
        self._tol = float(tolerance)
        self._probe = int(probe_iterations)
        self._max = int(max_iterations)
        self._count = 0
        plant.equilibrate(slack_cables=True)  # rest under gravity, every cable just taut
        self._rest = plant.positions
        self._taut = plant.cable_strokes
        self.rest_effector = plant.effector_position
        self._lower = self._taut - float(release)
        self._upper = self._taut + float(max_pull)
        n = len(self._taut)
        n_e = len(self.rest_effector)
        self._starts = [np.arange(n)]  # the rest: every cable just taut
        for size in range(1, min(n_e - 1, n) + 1):
            self._starts += [np.array(c) for c in itertools.combinations(range(n), size) if size < n]

    @property
    def cable_lower(self) -> np.ndarray:
        """The lowest stroke searched per cable (released) [m]."""
        return self._lower.copy()

    @property
    def cable_upper(self) -> np.ndarray:
        """The highest stroke searched per cable [m]."""
        return self._upper.copy()

    # ------------------------------------------------------------------ equilibria
    def _equilibrium(self, strokes: np.ndarray, positions: np.ndarray) -> tuple:
        """(effector, positions, cable shortenings, cable tensions) at the equilibrium under
        ``strokes``, started from ``positions``; raises the plant's ConvergenceError."""
        plant = self._plant
        plant.set_state(positions)
        plant.set_inputs(cable_strokes=strokes)
        self._count += 1
        plant.equilibrate(max_iterations=200)
        state = plant.state()
        return state.effector_position, state.positions, state.actuator_strokes, state.cable_tensions

    def _iterate(self, target: np.ndarray, s: np.ndarray, state: tuple, damping: float, iterations: int):
        """Projected Levenberg–Marquardt steps from strokes ``s`` at equilibrium ``state``.

        A slack cable (no tension) sits at its taut point for the Jacobian, and its step is
        a pull or nothing: letting it out further changes nothing, which a two-sided
        Jacobian column would not know (the bounded step is scipy's ``lsq_linear``)."""
        from scipy.optimize import lsq_linear

        p, x, shortening, tension = state
        r = target - p
        for _ in range(iterations):
            if float(np.linalg.norm(r)) <= self._tol:
                break
            slack = tension <= 0.0
            # steps are taken from a slack cable's taut point; one it does not pull stays
            # where it is (moved to its taut point, it would hold the robot back as the
            # robot bends away from it)
            base = np.where(slack, np.clip(shortening, self._lower, self._upper), s)
            jac = np.empty((len(r), len(s)))
            for i in range(len(s)):
                e = s.copy()
                e[i] = base[i] + self._fd
                try:
                    jac[:, i] = (self._equilibrium(e, x)[0] - p) / self._fd
                except Exception:  # noqa: BLE001 - the plant's ConvergenceError: no information
                    jac[:, i] = 0.0
            lower, upper = self._lower - base, self._upper - base
            lower[slack] = 0.0
            lower = np.minimum(lower, upper)
            scale = np.sqrt(np.einsum("ij,ij->j", jac, jac) + 1e-18)
            improved = False
            for _ in range(8):
                a = np.vstack((jac, np.sqrt(damping) * np.diag(scale)))
                step = lsq_linear(a, np.concatenate((r, np.zeros(len(s)))), bounds=(lower, upper + 1e-15)).x
                s_new = np.where(slack & (step <= 0.0), s, np.clip(base + step, self._lower, self._upper))
                try:
                    trial = self._equilibrium(s_new, x)
                except Exception:  # noqa: BLE001 - not converged: a shorter step
                    damping *= 10.0
                    continue
                r_new = target - trial[0]
                if float(np.linalg.norm(r_new)) < float(np.linalg.norm(r)):
                    s, (p, x, shortening, tension), r = s_new, trial, r_new
                    damping = max(damping / 3.0, 1e-7)
                    improved = True
                    break
                damping *= 10.0
            if not improved:
                break
        return s, (p, x, shortening, tension), damping

    def solve(self, target) -> ReachResult:
        """The closest static equilibrium to ``target`` (n_e,) [m]."""
        target = np.asarray(target, dtype=float)
        if target.shape != self.rest_effector.shape or not np.all(np.isfinite(target)):
            raise ValueError(f"static reach: target must be {self.rest_effector.shape[0]} finite values [m]")
        count0 = self._count
        runs = []
        for taut in self._starts:
            s = self._lower.copy()
            s[taut] = self._taut[taut]
            try:
                state = self._equilibrium(s, self._rest)
            except Exception:  # noqa: BLE001 - a start the plant cannot settle: skip it
                continue
            runs.append(self._iterate(target, s, state, 1e-3, self._probe))
        if not runs:
            raise RuntimeError("static reach: the plant settled from none of the starts")
        s, state, damping = min(runs, key=lambda run: float(np.linalg.norm(target - run[1][0])))
        s, (p, _, _, _), _ = self._iterate(target, s, state, damping, self._max)
        return ReachResult(target.copy(), float(np.linalg.norm(target - p)), p.copy(), s.copy(),
                           self._count - count0)
