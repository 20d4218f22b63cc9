"""Contact in a time step: free motion, then the contact correction (Goury 2021 §II-D).

Contacts are detected at the start of the step (positions x₀, gaps below the alarm
distance: the pairs, normals and barycentric weights are fixed for the step); after the
unconstrained implicit-Euler step has given the free positions x_free, the linearized
gaps δ_free = H x_free − offset tell how far the free motion went into contact (a motion
per step below the alarm distance cannot tunnel through). With A the step's system matrix (the Newton matrix of the
implicit Euler step, force per displacement) and H the contact rows over the free DOFs,

    W = H A⁻¹ Hᵀ,   δ = W λ + δ_free,   0 ≤ δ_n ⊥ λ_n ≥ 0  (+ Coulomb on the tangents),
    x₊ = x_free + A⁻¹ Hᵀ λ,   v₊ = v_free + A⁻¹ Hᵀ λ / h.

λ are the contact forces [N] over the step. δ_free is the gap of x_free (normal rows)
and the tangential displacement of the contact over the step (tangent rows: sticking
cancels it).

:class:`ContactModel` holds what to detect (obstacles, self-collision), the law
(frictionless or Coulomb) and the solver (``gs``: projected Gauss–Seidel, ``exact``:
the LCP as a QP); :meth:`ContactModel.correct` does one correction given a callable that
applies A⁻¹ to a block of columns.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import scipy.sparse as sp

from soft_inverse_ros.core.contact.geometry import ContactSet, Obstacle, SelfCollision, merge
from soft_inverse_ros.core.contact.step_bound import candidate_radius, obstacle_step_bound

if TYPE_CHECKING:
    from soft_inverse_ros.core.contact.mapped_surface import MappedSurface
from soft_inverse_ros.core.contact.signorini import (
    ContactSolution,
    solve_coulomb_gs,
    solve_signorini_exact,
    solve_signorini_gs,
)


@dataclass(frozen=True)
class ReducedContactBasis:
    """A non-negative contact-force basis (Goury 2021 §III-B/C): the normal forces on the
    potential contact vertices ``nodes`` (n_c,) are λ = Ψ β with Ψ (n_c, k) ≥ 0 and β ≥ 0
    (core/contact/nnmf.py builds Ψ from snapshots)."""

    nodes: np.ndarray
    psi: np.ndarray

    def __post_init__(self) -> None:
        nodes = np.asarray(self.nodes, dtype=np.int64).reshape(-1)
        psi = np.asarray(self.psi, dtype=float)
        if psi.ndim != 2 or psi.shape[0] != nodes.size or psi.shape[1] < 1:
            raise ValueError(f"contact basis: psi must be (len(nodes), k), got {psi.shape} for {nodes.size} nodes")
        if not (np.isfinite(psi).all() and (psi >= 0).all()):
            raise ValueError("contact basis: psi must be finite and >= 0")
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "psi", psi)
        lookup = np.full(int(nodes.max(initial=-1)) + 2, -1, dtype=np.int64)  # node → row; last: -1
        lookup[nodes] = np.arange(nodes.size)
        object.__setattr__(self, "_lookup", lookup)

    @property
    def size(self) -> int:
        return int(self.psi.shape[1])

    def rows_for(self, vertices: np.ndarray) -> np.ndarray:
        """(m, k) rows of Ψ for contact vertices (zeros for a vertex outside the basis)."""
        v = np.asarray(vertices, dtype=np.int64).reshape(-1)
        rows = self._lookup[np.clip(v, -1, self._lookup.size - 1)]  # -1 and beyond: the last entry, -1
        out = np.zeros((v.size, self.size))
        inside = rows >= 0
        out[inside] = self.psi[rows[inside]]
        return out


#: a basis vector whose reduced compliance W_jj is below this fraction of the largest one
#: touches the detected contacts only through round-off-sized Ψ entries: it is left out of
#: the reduced LCP (β_j = 0), which would otherwise be ill-conditioned
USED_BASIS_RTOL = 1e-9
#: ridge added to the reduced W for its solve, relative to its largest diagonal entry: Ŵ =
#: Ψ_mᵀ W Ψ_m has rank ≤ min(m, k) (singular whenever fewer contacts than basis vectors
#: touch), and only the forces Ψ_m β are unique; the ridge picks one β among them and
#: moves the gaps by ≤ 1e-9 Ŵ_max β
REDUCED_RIDGE = 1e-9


def basis_vectors_in_use(w_hat: np.ndarray) -> np.ndarray:
    """(k,) bool: the basis vectors of a reduced W (k, k) [m/N] that enter the reduced LCP."""
    diag = np.diag(w_hat)
    top = float(diag.max(initial=0.0))
    return diag > USED_BASIS_RTOL * top if top > 0 else np.zeros(diag.shape, dtype=bool)


def solve_reduced(model: "ContactModel", w_hat: np.ndarray, d_hat: np.ndarray) -> tuple[np.ndarray, ContactSolution | None]:
    """β (k,) ≥ 0 [N] of the reduced Signorini problem 0 ≤ Ŵ β + δ̂ ⊥ β ≥ 0 (Goury eq. 21)
    by ``model``'s solver, on the basis vectors in use (the others: β_j = 0), with the
    :data:`REDUCED_RIDGE`; the solution (None when no vector is in use)."""
    used = basis_vectors_in_use(w_hat)
    beta = np.zeros(w_hat.shape[0])
    if not used.any():
        return beta, None
    sub = w_hat[np.ix_(used, used)]
    sub = sub + REDUCED_RIDGE * float(np.diag(sub).max()) * np.eye(sub.shape[0])
    solution = model.solve(sub, d_hat[used])
    beta[used] = solution.forces
    return beta, solution


@dataclass(frozen=True)
class EnrichedReducedSolution:
    """The reduced contact solve with its per-point gap check (:func:`solve_reduced_checked`).

    Attributes:
        basis: (m, k + v) the force directions of the detected contacts: Ψ_m, then one unit
            column per enriched contact (λ_c = basis @ coefficients).
        a_inv: (n_free, k + v) A⁻¹ Hᵀ basis [m/N].
        w: (k + v, k + v) basisᵀ H A⁻¹ Hᵀ basis [m/N] (symmetric).
        delta_free: (k + v,) basisᵀ δ_free [m].
        coefficients: (k + v,) β, then the enriched contacts' own forces γ (≥ 0) [N].
        enriched: (v,) the indices (into the m detected contacts) of the enriched contacts.
        gaps: (m,) the linearized gap of each detected contact after the correction [m].
        solution: the last LCP solution (None: no basis vector in use).
    """

    basis: np.ndarray
    a_inv: np.ndarray
    w: np.ndarray
    delta_free: np.ndarray
    coefficients: np.ndarray
    enriched: np.ndarray
    gaps: np.ndarray
    solution: ContactSolution | None

    @property
    def forces(self) -> np.ndarray:
        """(m,) the normal force of each detected contact [N]."""
        return self.basis @ self.coefficients


def solve_reduced_checked(model: "ContactModel", psi: np.ndarray, h, a_inv_psi: np.ndarray,
                          delta_free: np.ndarray, solve_columns: Callable[[np.ndarray], np.ndarray],
                          tolerance: float | None) -> EnrichedReducedSolution:
    """The reduced Signorini problem (Goury eq. 19–21) with a per-point gap check.

    Goury's reduced law 0 ≤ Ψᵀδ ⊥ β ≥ 0 constrains only the k Ψ-weighted sums of the
    gaps (eq. 20 ⇔ 21 holds only when every point's gap is a combination the basis can
    close): one point of a basis vector can sink in while its neighbours in that vector
    are open. Here, after the reduced solve, every detected contact's linearized gap
    δ_i = δ_free,i + h_i A⁻¹ Hᵀ Ψ β is checked; the contacts below −``tolerance`` get their
    own force direction (a unit column, its force γ_i ≥ 0 ⊥ δ_i ≥ 0 — the full contact's
    law for that point) and the enlarged problem is solved again, until no contact
    penetrates (each round adds at least one contact, so at most m rounds; in the worst
    case the full problem). The forces stay non-negative (Ψ, β, γ ≥ 0).

    Args:
        model: the contact model (its solver solves each LCP).
        psi: (m, k) Ψ_m, the basis rows of the detected contacts.
        h: (m, n_free) the contact rows (dense or sparse).
        a_inv_psi: (n_free, k) A⁻¹ Hᵀ Ψ_m.
        delta_free: (m,) the free gaps [m].
        solve_columns: B (n_free, j) ↦ A⁻¹ B.
        tolerance: [m] the penetration a contact may keep before it is enriched (None:
            Goury's reduced law alone, no check).
    """
    basis, a_inv = np.asarray(psi, dtype=float), np.asarray(a_inv_psi, dtype=float)
    m = basis.shape[0]
    enriched = np.zeros(0, dtype=np.int64)
    while True:
        hb = np.asarray(h.T @ basis)
        w = hb.T @ a_inv
        w = 0.5 * (w + w.T)
        d = basis.T @ delta_free
        coefficients, solution = solve_reduced(model, w, d)
        gaps = delta_free + np.asarray(h @ (a_inv @ coefficients)).reshape(-1)
        if tolerance is None:
            break
        bad = np.setdiff1d(np.flatnonzero(gaps < -tolerance), enriched)
        if bad.size == 0:
            break
        cols = h[bad].T
        cols = cols.toarray() if sp.issparse(cols) else np.asarray(cols)
        unit = np.zeros((m, bad.size))
        unit[bad, np.arange(bad.size)] = 1.0
        basis = np.hstack((basis, unit))
        a_inv = np.hstack((a_inv, np.asarray(solve_columns(np.ascontiguousarray(cols))).reshape(-1, bad.size)))
        enriched = np.concatenate((enriched, bad))
    return EnrichedReducedSolution(basis, a_inv, w, d, coefficients, enriched, gaps, solution)


@dataclass
class ContactStats:
    """What one correction did (for diagnostics, markers and experiments)."""

    contacts: int = 0
    forces: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (m,) normal [N]
    contact_set: ContactSet | None = None
    gs_iterations: int = 0
    complementarity_residual: float = 0.0  # [m]
    penetration_before: float = 0.0  # max(0, −δ_free): how far the free motion went in [m]
    detect_time: float = 0.0  # [s]
    solve_time: float = 0.0  # [s] (W and the LCP)
    w: np.ndarray | None = None  # the (m, m) normal W of this correction (reduced: (k+v) × (k+v))
    delta_free: np.ndarray | None = None  # (m,) [m] (reduced: Ψᵀ δ_free)
    gaps_after: np.ndarray | None = None  # (m,) linearized gaps after the correction [m]
    enriched: int = 0  # reduced: contacts the per-point gap check gave their own direction


@dataclass
class ContactModel:
    """Contacts of one body with obstacles and itself.

    Args:
        obstacles: rigid obstacles (plane, sphere, box, mesh).
        self_collision: the surface self-collision detector, or None.
        alarm_distance: contacts are created below this gap [m] (they may carry no force).
        friction: Coulomb coefficient(s): one value, or (μ_t1, μ_t2) for anisotropic
            friction along each contact's tangents (obstacle contacts only; 0: frictionless).
        solver: ``gs`` (projected Gauss–Seidel) or ``exact`` (frictionless only).
        tolerance: Gauss–Seidel complementarity tolerance [m].
        max_sweeps: Gauss–Seidel sweep cap.
        nodes: the robot nodes tested against obstacles (default: the surface nodes).
        basis: a reduced contact basis (frictionless only): the contact forces are Ψ β,
            the LCP is solved on β (k unknowns whatever the number of contacts). Its
            ``nodes`` are the ids of the points detection runs on: mesh nodes, or with a
            ``surface`` that surface's vertex ids (a basis built on the same surface).
        enrich_tolerance: with a basis, the per-point gap check of
            :func:`solve_reduced_checked` [m]: a detected contact whose linearized gap after
            the reduced solve is below −this gets its own force direction (None: Goury's
            reduced law Ψᵀδ ≥ 0 alone, which lets single points sink in).
        surface: a collision surface mapped into the mesh: detection (obstacles and
            ``self_collision``, then built over its S vertices) runs at its vertices M x; the
            contacts' ``vertex`` are surface vertex ids and their rows are composed with M.
        motions: per obstacle, its prescribed motion (core/contact/obstacle_motion.py) or
            None (fixed); :meth:`move_obstacles_to` applies them at a time. Whoever does not
            know the law (the controller's model) sets the measured offsets with
            :meth:`set_obstacle_offsets`. ``obstacles`` always holds the current poses.
    """

    obstacles: Sequence[Obstacle] = ()
    self_collision: SelfCollision | None = None
    alarm_distance: float = 1e-3
    friction: float | tuple[float, float] = 0.0
    solver: str = "gs"
    tolerance: float = 1e-10
    max_sweeps: int = 2000
    nodes: np.ndarray | None = None
    basis: ReducedContactBasis | None = None
    surface: "MappedSurface | None" = None
    motions: Sequence[Any] = ()
    enrich_tolerance: float | None = 1e-6

    def __post_init__(self) -> None:
        self.obstacles = tuple(self.obstacles)
        self._declared = self.obstacles  # the poses at t = 0 / zero offset
        self.motions = tuple(self.motions) or (None,) * len(self.obstacles)
        if len(self.motions) != len(self.obstacles):
            raise ValueError(f"contact: {len(self.motions)} motions for {len(self.obstacles)} obstacles")
        self._offsets = np.zeros((len(self.obstacles), 3))
        if self.solver not in ("gs", "exact"):
            raise ValueError(f"contact: solver must be 'gs' or 'exact', got {self.solver!r}")
        if not (np.isfinite(self.alarm_distance) and self.alarm_distance > 0):
            raise ValueError(f"contact: alarm_distance must be > 0 m, got {self.alarm_distance!r}")
        mu = np.atleast_1d(np.asarray(self.friction, dtype=float))
        if mu.size not in (1, 2) or not (np.isfinite(mu).all() and (mu >= 0).all()):
            raise ValueError(f"contact: friction must be μ ≥ 0 or (μ1, μ2), got {self.friction!r}")
        self._mu = np.array([mu[0], mu[-1]])
        if self.has_friction and self.solver == "exact":
            raise ValueError("contact: the exact solver is frictionless; use solver 'gs' with friction")
        if self.basis is not None and self.has_friction:
            raise ValueError("contact: the reduced contact basis is frictionless")
        if self.enrich_tolerance is not None and not (
                isinstance(self.enrich_tolerance, (int, float)) and 0 <= self.enrich_tolerance < np.inf):
            raise ValueError(f"contact: enrich_tolerance must be >= 0 m or None, got {self.enrich_tolerance!r}")

    @property
    def has_friction(self) -> bool:
        return bool((self._mu > 0).any())

    @property
    def moving(self) -> bool:
        """Some obstacle has a prescribed motion."""
        return any(m is not None for m in self.motions)

    @property
    def obstacle_offsets(self) -> np.ndarray:
        """(n_obstacles, 3) current translation of each obstacle from its declared pose [m]."""
        return self._offsets.copy()

    def set_obstacle_offsets(self, offsets: np.ndarray) -> None:
        """Translate every obstacle by ``offsets`` (n_obstacles, 3) [m] from its declared pose."""
        offsets = np.asarray(offsets, dtype=float)
        if offsets.shape != self._offsets.shape or not np.isfinite(offsets).all():
            raise ValueError(f"contact: obstacle offsets must be finite, shape {self._offsets.shape}, "
                             f"got shape {offsets.shape}")
        self._offsets = offsets.copy()
        self.obstacles = tuple(o if not np.any(d) else o.moved(d) for o, d in zip(self._declared, offsets))

    def move_obstacles_to(self, t: float) -> None:
        """Place the moving obstacles where their motion puts them at time ``t`` [s]."""
        if self.moving:
            self.set_obstacle_offsets(np.array([np.zeros(3) if m is None else m.offset(t) for m in self.motions]))

    def detect(self, positions: np.ndarray) -> ContactSet:
        """All contacts at node positions (N, 3) [m]."""
        if self.surface is not None:
            return self._detect_on_surface(positions)
        n = positions.shape[0]
        sets = []
        nodes = self._obstacle_points(n)
        for i, obstacle in enumerate(self.obstacles):
            sets.append(obstacle.contacts(positions, nodes, self.alarm_distance, i))
        if self.self_collision is not None:
            sets.append(self.self_collision.contacts(positions, self.alarm_distance))
        return merge(sets, n)

    def _detect_on_surface(self, positions: np.ndarray) -> ContactSet:
        """Contacts at the mapped surface's vertices, rows composed with M (3S × 3N)."""
        surf = self.surface
        s = surf.positions(positions)
        pts = self._obstacle_points(surf.n_vertices)
        sets = [o.contacts(s, pts, self.alarm_distance, i) for i, o in enumerate(self.obstacles)]
        if self.self_collision is not None:
            sets.append(self.self_collision.contacts(s, self.alarm_distance))
        cs = merge(sets, surf.n_vertices)
        m = surf.matrix()
        return replace(cs, rows=sp.csr_matrix(cs.rows @ m), surface_map=m)

    def _obstacle_points(self, n_points: int) -> np.ndarray:
        """Ids of the detection points tested against the obstacles, out of ``n_points``
        (the mapped surface's vertices, or the mesh nodes): ``nodes``; else every point of
        a mapped surface; else the self-collision surface's nodes; else every node."""
        if self.nodes is not None:
            return np.asarray(self.nodes)
        if self.surface is None and self.self_collision is not None:
            return self.self_collision.surface_nodes
        return np.arange(n_points)

    def step_bound(self, positions: np.ndarray, displacement: np.ndarray, near: float) -> float:
        """The largest fraction s ∈ [0, 1] of the step ``displacement`` (N, 3) [m] from node
        ``positions`` (N, 3) [m] such that every pair that can touch (a detection point and
        an obstacle, a surface vertex and a non-adjacent triangle) approaches by at most
        max(``near``, 0.9 × its current distance) along the straight step
        (core/contact/step_bound.py): a pair farther than ``near`` / 0.9 cannot be passed
        unseen. On a mapped ``surface`` the points' displacements are M d."""
        if self.surface is not None:
            x = self.surface.positions(positions)
            d = np.asarray(self.surface.matrix() @ np.asarray(displacement, dtype=float).ravel()).reshape(-1, 3)
        else:
            x, d = positions, np.asarray(displacement, dtype=float)
        pts = self._obstacle_points(x.shape[0])
        s = 1.0
        if self.obstacles:
            radius = candidate_radius(d[pts], near)
            for obstacle in self.obstacles:
                s = obstacle_step_bound(obstacle.clearance(x[pts], radius), d[pts], near, s)
        if self.self_collision is not None:
            s = self.self_collision.step_bound(x, d, near, s)
        return s

    def solve(self, w: np.ndarray, delta_free: np.ndarray, mu: np.ndarray | None = None) -> ContactSolution:
        """The contact law on (W, δ_free): rows per contact [n] or [n, t1, t2] with ``mu``."""
        if mu is not None:
            return solve_coulomb_gs(w, delta_free, mu, tolerance=self.tolerance, max_sweeps=self.max_sweeps)
        if self.solver == "exact":
            return solve_signorini_exact(w, delta_free)
        return solve_signorini_gs(w, delta_free, tolerance=self.tolerance, max_sweeps=self.max_sweeps)

    def correct(
        self,
        positions: np.ndarray,
        start_positions: np.ndarray,
        free_dofs: np.ndarray,
        solve_columns: Callable[[np.ndarray], np.ndarray],
    ) -> tuple[np.ndarray | None, ContactStats]:
        """The contact correction at the free positions.

        Args:
            positions: (N, 3) free-motion node positions x_free [m].
            start_positions: (N, 3) positions at the start of the step [m] (detection,
                tangential slip).
            free_dofs: (n_free,) indices of the free coordinates in the flattened (3N,) positions.
            solve_columns: B (n_free, k) ↦ A⁻¹ B with the step's system matrix.

        Returns:
            (dx (n_free,) the correction [m] or None without contact, stats).
        """
        t0 = time.perf_counter()
        cs = self.detect(start_positions)
        stats = ContactStats(contacts=cs.size, contact_set=cs, detect_time=time.perf_counter() - t0)
        if cs.size == 0:
            return None, stats
        t1 = time.perf_counter()
        normal = cs.rows[:, free_dofs]
        movable = np.sqrt(np.asarray(normal.multiply(normal).sum(axis=1)).ravel()) > 1e-9
        if not movable.all():  # contacts between clamped nodes: nothing to correct
            cs = cs.subset(movable)
            stats.contacts, stats.contact_set = cs.size, cs
            if cs.size == 0:
                return None, stats
            normal = cs.rows[:, free_dofs]
        friction = self.has_friction and bool((cs.kind == 0).any())
        if friction:
            tangent_full = cs.tangent_rows()
            tangent = tangent_full[:, free_dofs]
            m = cs.size
            rows = sp.vstack([normal, tangent], format="csr")
            order = np.empty(3 * m, dtype=np.int64)  # interleave [n_i, t1_i, t2_i]
            order[0::3] = np.arange(m)
            order[1::3] = m + 2 * np.arange(m)
            order[2::3] = m + 2 * np.arange(m) + 1
            rows = rows[order]
            slip = tangent_full @ (positions - start_positions).reshape(-1)
            delta_free = np.empty(3 * m)
            delta_free[0::3] = cs.gaps_at(positions)
            delta_free[1::3] = slip[0::2]
            delta_free[2::3] = slip[1::2]
            mu = np.where((cs.kind == 0)[:, None], self._mu[None, :], 0.0)
        else:
            rows = normal
            delta_free = cs.gaps_at(positions)
            mu = None
        if self.basis is not None:
            return self._correct_reduced(cs, rows, delta_free, solve_columns, stats, t1)
        ht = rows.T.toarray()  # (n_free, rows)
        a_inv_ht = solve_columns(ht)
        w = rows @ a_inv_ht
        w = 0.5 * (w + w.T)
        solution = self.solve(w, delta_free, mu)
        lam = solution.forces.reshape(-1)
        dx = a_inv_ht @ lam
        normal_forces = lam[0::3] if friction else lam
        n_rows = slice(0, None, 3) if friction else slice(None)
        stats.forces = normal_forces.copy()
        stats.gs_iterations = solution.iterations
        stats.complementarity_residual = solution.residual
        stats.penetration_before = float(max(0.0, -delta_free[n_rows].min()))
        stats.w = w[n_rows, n_rows]
        stats.delta_free = delta_free[n_rows]
        stats.gaps_after = (solution.gaps.reshape(-1))[n_rows]
        stats.solve_time = time.perf_counter() - t1
        return dx, stats

    def _correct_reduced(self, cs, rows, delta_free, solve_columns, stats: ContactStats, t1: float):
        """The correction with λ = Ψ_t β (Goury eq. 18–21): Ŵ = (HᵀΨ_t)ᵀ A⁻¹ (HᵀΨ_t) (k × k),
        δ̂_free = Ψ_tᵀ δ_free, Signorini on (δ̂, β); k solves whatever the contact count,
        plus one per contact the per-point gap check enriches (:func:`solve_reduced_checked`)."""
        psi_t = self.basis.rows_for(cs.vertex)  # (m, k)
        hpsi = np.asarray(rows.T @ psi_t)  # (n_free, k) = Hᵀ Ψ_t
        a_inv = solve_columns(hpsi)
        r = solve_reduced_checked(self, psi_t, rows, a_inv, delta_free, solve_columns, self.enrich_tolerance)
        residual, iterations = (0.0, 0) if r.solution is None else (r.solution.residual, r.solution.iterations)
        dx = r.a_inv @ r.coefficients
        stats.forces = r.forces
        stats.gs_iterations = iterations
        stats.complementarity_residual = residual
        stats.penetration_before = float(max(0.0, -delta_free.min()))
        stats.w, stats.delta_free = r.w, r.delta_free
        stats.gaps_after = r.gaps
        stats.enriched = int(r.enriched.size)
        stats.solve_time = time.perf_counter() - t1
        return dx, stats


def contact_model_from_spec(spec, faces: np.ndarray, rest_positions: np.ndarray, *,
                            solver: str | None = None, surface: "MappedSurface | None" = None) -> ContactModel:
    """The :class:`ContactModel` of a description's ``collision`` section
    (:class:`~soft_inverse_ros.core.model.description.CollisionSpec`): obstacles, and the
    self-collision of the outward boundary triangles ``faces`` (F, 3) of the mesh whose
    rest node positions are ``rest_positions`` (N, 3) [m].

    ``solver`` default: ``exact`` without friction (a daqp QP: ~0.1 ms for tens of contacts,
    where Gauss–Seidel on close contacts, an ill-conditioned W, can take thousands of
    sweeps: hundreds of ms in a live loop), ``gs`` with friction (the Coulomb law).

    With the section's ``reduced_basis`` the model carries its
    :class:`ReducedContactBasis` (λ = Ψ β, Signorini on β).

    With ``surface`` (the section's ``surface`` mapped into the mesh, see
    :func:`~soft_inverse_ros.core.contact.mapped_surface.surface_from_description`) detection
    runs on that surface instead of ``faces``.

    Raises:
        BasisFileError: the reduced basis was built on another mesh (one line)."""
    from soft_inverse_ros.core.contact.geometry import Box, Plane, Sphere
    from soft_inverse_ros.core.contact.mesh_obstacle import MeshObstacle

    obstacles = []
    for o in spec.obstacles:
        if o.kind == "plane":
            obstacles.append(Plane(o.get("point"), o.get("normal"), o.get("t1")))
        elif o.kind == "sphere":
            obstacles.append(Sphere(o.get("centre"), o.get("radius")))
        elif o.kind == "box":
            obstacles.append(Box(o.get("lower"), o.get("upper")))
        elif o.kind == "mesh":
            obstacles.append(MeshObstacle(o.get("geometry"), reach=spec.alarm_distance))
        else:  # the description parser only lets the three kinds through
            raise ValueError(f"contact: unknown obstacle type {o.kind!r}")
    if surface is not None:
        faces, rest_positions_det = surface.faces, surface.rest
    else:
        rest_positions_det = rest_positions
    self_collision = SelfCollision(faces, rest_positions_det, spec.exclude_rings) if spec.self_collision else None
    mu = spec.friction[0] if len(spec.friction) == 1 else tuple(spec.friction)
    if solver is None:
        solver = "gs" if any(m > 0 for m in spec.friction) else "exact"
    basis = None
    if spec.basis is not None:
        spec.basis.check_mesh(rest_positions, where=f"collision.reduced_basis {spec.reduced_basis}")
        basis = spec.basis.basis()
    model = ContactModel(obstacles=tuple(obstacles), self_collision=self_collision,
                         alarm_distance=spec.alarm_distance, friction=mu, solver=solver,
                         nodes=np.unique(np.asarray(faces)), basis=basis, surface=surface,
                         motions=tuple(o.motion for o in spec.obstacles))
    problem = rest_intersection(model, rest_positions)
    if problem:
        raise ValueError(f"collision: {problem}")
    return model


def contact_model_from_description(desc, faces: np.ndarray, rest_positions: np.ndarray,
                                   tets: np.ndarray) -> ContactModel:
    """The contact model of a description's ``collision`` section, as the controller's model,
    the simulated robot and ``mesh-info`` build it: its ``collision.surface`` mapped into the
    mesh (rest positions (N, 3) [m], ``tets`` (M, 4)) when it names one, else the boundary
    ``faces``; see :func:`contact_model_from_spec`.

    Raises:
        ValueError: as :func:`contact_model_from_spec`.
        SystemExit: the surface mapping's one-line refusal (``surface_from_description``).
    """
    from soft_inverse_ros.core.contact.mapped_surface import surface_from_description

    surface = surface_from_description(desc, rest_positions, tets)
    return contact_model_from_spec(desc.collision, faces, rest_positions, surface=surface)


def rest_intersection(model: ContactModel, rest_positions: np.ndarray) -> str:
    """Why the collision model cannot start from the robot's rest shape ("" when it can):
    an obstacle already inside the robot (a plane through it, a box around part of it),
    or a self-collision alarm distance so large that the opposite faces of the robot's own
    body register as penetrating contacts. A contact solve from there pushes with hundreds
    of newtons in its first step (a plane through the finger: 1.3 kN)."""
    contacts = model.detect(np.asarray(rest_positions, dtype=float))
    if not len(contacts.gaps):
        return ""
    tol = 1e-3 * model.alarm_distance
    worst = int(np.argmin(contacts.gaps))
    gap = float(contacts.gaps[worst])
    if gap >= -tol:
        return ""
    same = (contacts.kind == contacts.kind[worst]) & (contacts.obstacle == contacts.obstacle[worst])
    inside = int(np.sum((contacts.gaps < -tol) & same))
    if contacts.kind[worst] == 0:
        return (f"obstacle {int(contacts.obstacle[worst])} already intersects the robot at rest "
                f"({inside} point(s) inside, the deepest {-1e3 * gap:.3g} mm): move it clear of the mesh")
    return (f"at rest the self-collision finds {inside} point(s) {-1e3 * gap:.3g} mm deep behind the robot's "
            f"own faces: alarm_distance {1e3 * model.alarm_distance:g} mm spans the body's thickness "
            "(make it smaller than the gaps that close)")
