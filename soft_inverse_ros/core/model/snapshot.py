"""The compliance snapshot: what the low-rate FEM loop hands to the high-rate QP loop.

A snapshot linearizes the robot's quasi-static mechanics around one FEM equilibrium
x(λ0) reached under actuation λ0 (after Largilliere et al., ICRA 2015):

    effector positions   x_e(λ) ≈ x_e0 + W_ea (λ − λ0)
    actuator strokes     δ_a(λ) ≈ δ_a0 + W_aa (λ − λ0)

so, for a target t, the QP quantities are

    δ_e_free = x_e0 − W_ea λ0 − t        (effector error with no actuation change)
    δ_a_free = δ_a0 − W_aa λ0

and the predicted effector error and actuator strokes for efforts λ are
``W_ea λ + δ_e_free`` and ``W_aa λ + δ_a_free``.

Units are SI and frames follow REP-103 (robot base frame, x forward, y left, z up):
effector rows in metres; efforts in newtons (cable, linear force) or pascals (pressure
cavity); strokes in metres (cable shortening, positive when pulled; linear-force
displacement along its direction) or cubic metres (cavity volume growth).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from typing import Sequence

import numpy as np


class ActuatorKind(IntEnum):
    """Actuator families; values match the ``KIND_*`` constants of ComplianceSnapshot.msg."""

    CABLE = 0  #: unilateral, effort N (pull ≥ 0), stroke m (shortening)
    FORCE = 1  #: bilateral linear force, effort N, stroke m along its direction
    PRESSURE = 2  #: pressure cavity, effort Pa, stroke m³ (volume growth)


@dataclass(frozen=True, eq=False)  # holds arrays: compare by identity
class ContactBlock:
    """The active contacts of the FEM state a snapshot linearizes (m contacts, bounded by
    the producer's ``max_contacts``).

    With contact forces λ_c (normal, ≥ 0) next to the efforts λ::

        gaps        δ_c(λ, λ_c) ≈ gap + W_ca (λ − λ0) + W_cc (λ_c − force)     (≥ 0, ⊥ λ_c)
        effector    x_e(λ, λ_c) ≈ x_e0 + W_ea (λ − λ0) + W_ec (λ_c − force)

    Attributes:
        ids: (m,) the robot node of each contact (the vertex of a vertex–triangle or
            vertex–obstacle pair; with a mapped ``collision.surface``: the SURFACE vertex id
            0..S-1 of that file after merging duplicates — not a node id; consumers use
            ``points``, never ids, to place contacts).
        points: (m, 3) contact points [m]; normals: (m, 3) unit normals towards the vertex.
        gap: (m,) gaps at the state [m]; force: (m,) contact forces λ_c0 at the state [N].
        w_cc: (m, m) [m/N] symmetric; w_ca: (m, n_a) [m/N or m/Pa]; w_ec: (n_e, m) [m/N].
        source: (m,) what each contact touches: the obstacle index in the description's
            ``collision.obstacles``, or −1 for self-collision (default: all −1).
        force_weight: (m,) the total normal force [N] one unit of each contact variable
            carries (1 for a contact; a reduced basis vector: the sum of its entries over
            the detected contacts) (default: all 1).
        reduced: True when the block is a reduced contact basis's (Goury 2021, eq. 18–22;
            the description's ``collision: reduced_basis``): m = k "generalized contacts",
            one per basis vector ψ_j, with λ_c = Ψ_m β: ``ids`` the basis index j,
            ``force`` β_j [N] (≥ 0; Ψ is dimensionless), ``gap`` ψ_jᵀ δ [m] (the
            ψ_j-weighted sum of the gaps), W_cc = Ψ_mᵀ W Ψ_m, W_ca = Ψ_mᵀ W_ca,
            W_ec = W_ec Ψ_m (Ψ_m: the basis rows of the detected contact vertices, unit
            columns), ``force_weight`` Σ_i Ψ_mij; ``points`` the centroid of the detected
            contacts weighted by ψ_j, ``normals`` the unit ψ_j-weighted sum of their normals,
            ``source`` that of its heaviest-weighted contact. A basis vector touching none
            of the detected contacts has all its rows, gap, force, force weight, point and
            normal zero (source −1): the block stays k × k whatever touches. The algebra
            above holds unchanged (β ≥ 0 ⊥ reduced gaps ≥ 0). With the contact model's
            per-point gap check (``ContactModel.enrich_tolerance``, on by default) the
            contacts the reduced law would let sink in carry forces of their own, and
            their pattern (unit sum) is one more generalized contact, id k: the block is
            (k + 1) × (k + 1), that variable's ``force`` the enriched contacts' force sum
            [N] (force weight 1; all zero when none was enriched).
    """

    ids: np.ndarray
    points: np.ndarray
    normals: np.ndarray
    gap: np.ndarray
    force: np.ndarray
    w_cc: np.ndarray
    w_ca: np.ndarray
    w_ec: np.ndarray
    source: np.ndarray | None = None
    force_weight: np.ndarray | None = None
    reduced: bool = False

    @property
    def size(self) -> int:
        return int(self.gap.shape[0])

    def validate(self, n_a: int, n_e: int) -> None:
        """Own read-only copies with the shapes for n_a actuators and n_e effector rows.

        Raises:
            ValueError: a field with the wrong shape.
        """
        m = int(np.asarray(self.gap).reshape(-1).shape[0])
        expected = {"points": (m, 3), "normals": (m, 3), "gap": (m,), "force": (m,),
                    "w_cc": (m, m), "w_ca": (m, n_a), "w_ec": (n_e, m)}
        for name, shape in expected.items():
            value = np.array(getattr(self, name), dtype=float)
            if value.shape != shape:
                raise ValueError(f"snapshot contact field {name} has shape {value.shape}, expected {shape}")
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        ids = np.array(self.ids, dtype=np.int64).reshape(-1)
        if ids.shape != (m,):
            raise ValueError(f"snapshot contact ids has shape {ids.shape}, expected ({m},)")
        ids.setflags(write=False)
        object.__setattr__(self, "ids", ids)
        source = np.full(m, -1, dtype=np.int64) if self.source is None else np.array(self.source, dtype=np.int64)
        weight = np.ones(m) if self.force_weight is None else np.array(self.force_weight, dtype=float).reshape(-1)
        if source.shape != (m,) or weight.shape != (m,):
            raise ValueError(f"snapshot contact source/force_weight have shapes {source.shape}/{weight.shape}, "
                             f"expected ({m},)")
        if not (weight >= 0).all():
            raise ValueError("snapshot contact force_weight must be >= 0")
        for name, value in (("source", source), ("force_weight", weight)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    def arrays(self) -> tuple[np.ndarray, ...]:
        return (self.points, self.normals, self.gap, self.force, self.w_cc, self.w_ca, self.w_ec, self.force_weight)


@dataclass(frozen=True)
class ComplianceSnapshot:
    """Linearized compliance of the robot at one FEM state.

    Attributes:
        seq: Snapshot sequence number (monotonic per producer).
        stamp: Time of the FEM state it linearizes [s] (ROS time as float seconds).
        actuator_names: One name per actuator column.
        actuator_kinds: One :class:`ActuatorKind` per actuator.
        effector_names: One name per effector row (e.g. ``"tip.x"``).
        w_ea: (n_e, n_a) effector compliance [m/N or m/Pa].
        w_aa: (n_a, n_a) actuator compliance (symmetric positive semi-definite).
        w_ee: (n_e, n_e) effector compliance [m/N] (for contact/feedback extensions).
        effector_position: (n_e,) effector rows x_e0 at λ0 [m].
        actuator_stroke: (n_a,) actuator strokes δ_a0 at λ0 [m or m³].
        lambda0: (n_a,) efforts the state was computed under [N or Pa].
        fem_step_time: Wall time of the FEM update that produced the state [s].
        compliance_time: Wall time of computing W from that state [s].
        contacts: The active contacts of the state (:class:`ContactBlock`), or None when
            the model has no contact (then W_ea etc. ignore contact).
    """

    seq: int
    stamp: float
    actuator_names: tuple[str, ...]
    actuator_kinds: tuple[ActuatorKind, ...]
    effector_names: tuple[str, ...]
    w_ea: np.ndarray
    w_aa: np.ndarray
    w_ee: np.ndarray
    effector_position: np.ndarray
    actuator_stroke: np.ndarray
    lambda0: np.ndarray
    fem_step_time: float = 0.0
    compliance_time: float = 0.0
    contacts: ContactBlock | None = None

    def __post_init__(self) -> None:
        n_a = len(self.actuator_names)
        n_e = len(self.effector_names)
        if n_a == 0:
            raise ValueError("compliance snapshot has no actuators")
        if n_e == 0:
            raise ValueError("compliance snapshot has no effector rows")
        if len(self.actuator_kinds) != n_a:
            raise ValueError(
                f"actuator_kinds has {len(self.actuator_kinds)} entries, expected {n_a}"
            )
        expected = {
            "w_ea": (n_e, n_a),
            "w_aa": (n_a, n_a),
            "w_ee": (n_e, n_e),
            "effector_position": (n_e,),
            "actuator_stroke": (n_a,),
            "lambda0": (n_a,),
        }
        for name, shape in expected.items():
            # own copy: never freeze (or follow later writes to) the caller's arrays
            value = np.array(getattr(self, name), dtype=float)
            if value.shape != shape:
                raise ValueError(f"snapshot field {name} has shape {value.shape}, expected {shape}")
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        object.__setattr__(
            self, "actuator_kinds", tuple(ActuatorKind(k) for k in self.actuator_kinds)
        )
        if self.contacts is not None:
            self.contacts.validate(n_a, n_e)

    @property
    def n_actuators(self) -> int:
        return len(self.actuator_names)

    @property
    def n_effector_rows(self) -> int:
        return len(self.effector_names)

    def is_finite(self) -> bool:
        """True when every matrix and vector is finite (a NaN snapshot must not be used)."""
        return all(
            bool(np.all(np.isfinite(a)))
            for a in (
                self.w_ea,
                self.w_aa,
                self.w_ee,
                self.effector_position,
                self.actuator_stroke,
                self.lambda0,
                *(() if self.contacts is None else self.contacts.arrays()),
            )
        )

    @property
    def effector_free(self) -> np.ndarray:
        """x_e0 − W_ea λ0: effector rows extrapolated to zero effort [m]."""
        return self.effector_position - self.w_ea @ self.lambda0

    @property
    def delta_a_free(self) -> np.ndarray:
        """δ_a0 − W_aa λ0: actuator strokes extrapolated to zero effort [m or m³]."""
        return self.actuator_stroke - self.w_aa @ self.lambda0

    def delta_e_free(self, target: np.ndarray) -> np.ndarray:
        """δ_e_free for a target (n_e,) [m]: the only per-tick change in the QP."""
        return self.effector_free - np.asarray(target, dtype=float)


@dataclass(frozen=True)
class EffectorPoint:
    """The effector rows of one point: ``name`` (``tip``, ``tip[1]``), ``rows`` (k,) their
    indices in δ_e, ``axes`` (k,) the coordinate each row is (0, 1, 2 = x, y, z)."""

    name: str
    rows: np.ndarray
    axes: np.ndarray

    @property
    def topic_token(self) -> str:
        """The point's name as a ROS name token: ``tip[1]`` → ``tip_1``."""
        return self.name.replace("[", "_").replace("]", "")


def effector_points(names: Sequence[str]) -> tuple[EffectorPoint, ...]:
    """The points of effector rows named ``POINT.axis`` (axis x, y or z), in order of first
    appearance.

    Raises:
        ValueError: a name that is not POINT.x/y/z, an axis twice for one point, or two
            points whose names map to the same ROS name token.
    """
    axes = {"x": 0, "y": 1, "z": 2}
    grouped: dict[str, list[tuple[int, int]]] = {}
    for i, n in enumerate(names):
        point, _, axis = n.rpartition(".")
        if not point or axis not in axes:
            raise ValueError(f"effector rows must be named POINT.x/y/z, got {list(names)}")
        grouped.setdefault(point, []).append((i, axes[axis]))
    out = []
    for point, items in grouped.items():
        rows, point_axes = (np.array(v, dtype=np.int64) for v in zip(*items))
        if len(set(point_axes.tolist())) != len(point_axes):
            raise ValueError(f"effector point {point!r} has an axis twice: {list(names)}")
        out.append(EffectorPoint(point, rows, point_axes))
    tokens = [p.topic_token for p in out]
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"effector points {[p.name for p in out]} do not have distinct ROS names")
    return tuple(out)


def effector_row_axes(names: Sequence[str]) -> np.ndarray:
    """Index in (x, y, z) of each effector row named ``POINT.axis`` (one point only).

    Raises:
        ValueError: rows of several points, or a name that is not POINT.x/y/z.
    """
    points = {n.rsplit(".", 1)[0] for n in names}
    if len(points) != 1:
        raise ValueError(f"one effector point is supported here; the rows are {list(names)}")
    axes = {"x": 0, "y": 1, "z": 2}
    try:
        return np.array([axes[n.rsplit(".", 1)[1]] for n in names])
    except (KeyError, IndexError):
        raise ValueError(f"effector rows must be named POINT.x/y/z, got {list(names)}") from None
