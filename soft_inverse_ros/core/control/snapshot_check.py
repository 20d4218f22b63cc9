"""Physical checks of a compliance snapshot before the controller uses it.

A finite snapshot can still be absurd (a broken or hostile producer): a stroke of −1e296 m,
W_aa scaled by 1e6, a non-symmetric or indefinite W_aa, pressure kinds for cables. The
QP would answer it with OK commands. :func:`check_snapshot` compares the snapshot with
what the robot description says: names and kinds, the symmetry and positive
semi-definiteness of W_aa, magnitudes against the robot's size (SI), and the efforts it
was linearized at against the actuators' bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soft_inverse_ros.core.model.snapshot import ActuatorKind, ComplianceSnapshot

#: relative asymmetry ‖W_aa − W_aaᵀ‖ / ‖W_aa‖ accepted (round-off of the block solve)
SYMMETRY_TOLERANCE = 1e-6
#: most negative eigenvalue of W_aa accepted, relative to its largest
PSD_TOLERANCE = 1e-8
#: a quantity of the snapshot may be at most this many robot sizes (lengths), or this
#: factor times the robot's volume (volumes)
SCALE_FACTOR = 10.0
#: the efforts a snapshot was linearized at (``lambda0``) may be at most this factor times
#: the actuators' largest effort: they are the controller's own commands (within the
#: bounds) or a measurement of them; ten times a bound is a unit mistake (N for mN, kPa for Pa)
LAMBDA0_FACTOR = 2.0


@dataclass(frozen=True)
class SnapshotExpectations:
    """What a snapshot of this robot must look like.

    Attributes:
        actuator_names, actuator_kinds, effector_names: as in the description.
        size_m: the robot's bounding-box diagonal [m].
        effort_max: (n_a,) largest |effort| of each actuator [N or Pa] (inf: unbounded).
    """

    actuator_names: tuple[str, ...]
    actuator_kinds: tuple[ActuatorKind, ...]
    effector_names: tuple[str, ...]
    size_m: float
    effort_max: np.ndarray

    def reach(self) -> float:
        """Largest plausible |coordinate| [m] of a point of this robot in its base frame (an
        effector, a target, a measurement): beyond it, a unit or frame mistake."""
        return SCALE_FACTOR * self.size_m

    def stroke_scale(self) -> np.ndarray:
        """Largest plausible |stroke| per actuator: m for cables/forces, m³ for cavities."""
        return np.array([SCALE_FACTOR * (self.size_m ** 3 if k is ActuatorKind.PRESSURE
                                         else self.size_m) for k in self.actuator_kinds])


def check_snapshot(snapshot: ComplianceSnapshot, expect: SnapshotExpectations) -> str:
    """Why ``snapshot`` is physically unusable for this robot ("" when it is fine)."""
    if tuple(snapshot.actuator_names) != tuple(expect.actuator_names):
        return f"actuators {list(snapshot.actuator_names)}, expected {list(expect.actuator_names)}"
    if tuple(snapshot.actuator_kinds) != tuple(expect.actuator_kinds):
        got = [k.name for k in snapshot.actuator_kinds]
        return f"actuator kinds {got}, expected {[k.name for k in expect.actuator_kinds]}"
    if tuple(snapshot.effector_names) != tuple(expect.effector_names):
        return f"effector rows {list(snapshot.effector_names)}, expected {list(expect.effector_names)}"
    if not snapshot.is_finite():
        return "snapshot contains NaN or inf"
    w = np.asarray(snapshot.w_aa, float)
    scale = float(np.abs(w).max())
    if scale == 0.0:
        return "W_aa is zero"
    if float(np.abs(w - w.T).max()) > SYMMETRY_TOLERANCE * scale:
        return "W_aa is not symmetric"
    eig = np.linalg.eigvalsh(0.5 * (w + w.T))
    if eig[-1] <= 0.0 or eig[0] < -PSD_TOLERANCE * eig[-1]:
        return f"W_aa is not positive semi-definite (eigenvalues {eig[0]:.3g} .. {eig[-1]:.3g})"
    stroke_scale = expect.stroke_scale()
    stroke = np.asarray(snapshot.actuator_stroke, float)
    if np.any(np.abs(stroke) > stroke_scale):
        return f"actuator strokes {stroke.tolist()} beyond the robot's scale"
    reach = expect.reach()
    if np.any(np.abs(snapshot.effector_position) > reach):
        return f"effector {np.asarray(snapshot.effector_position).tolist()} m beyond the robot's scale"
    bounded = np.isfinite(expect.effort_max)
    lambda0 = np.asarray(snapshot.lambda0, float)
    if lambda0.shape == bounded.shape and np.any(
            np.abs(lambda0[bounded]) > LAMBDA0_FACTOR * expect.effort_max[bounded]):
        return (f"lambda0 {lambda0.tolist()} (the efforts it was linearized at) is beyond "
                f"{LAMBDA0_FACTOR:g} times the actuators' effort bounds "
                f"{expect.effort_max.tolist()}: a unit mistake, or another robot's state")
    if np.any(bounded):
        # the stroke/effector motion the largest effort would cause, alone
        motion = np.abs(np.diag(w))[bounded] * expect.effort_max[bounded]
        if np.any(motion > stroke_scale[bounded]):
            return "W_aa: the largest efforts would move the actuators beyond the robot's scale"
        moves = np.abs(np.asarray(snapshot.w_ea, float))[:, bounded] * expect.effort_max[bounded]
        if np.any(moves > reach):
            return "W_ea: the largest efforts would move the effector beyond the robot's scale"
    return ""
