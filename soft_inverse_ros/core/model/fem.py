"""Co-rotational linear tetrahedral finite elements (vectorized numpy).

Model
-----
Each linear tetrahedron ``e`` with rest nodes ``X_e`` (4, 3) has constant shape gradients
``g_i`` (rows of ``Dm⁻¹`` with ``g_0 = −Σ g_i``), rest volume ``V_e`` and deformation
gradient ``F = Σ_i x_i ⊗ g_i``. Its rotation ``R`` is the rotational factor of the polar
decomposition ``F = R S`` (SOFA's ``TetrahedronFEMForceField`` method ``"polar"``; SOFA's
default ``"large"`` uses a Gram–Schmidt frame of two edges instead). Inverted or degenerate
elements (``det F ≤ 0``) take the proper rotation of an SVD with the sign of the smallest
singular direction flipped, so ``R`` is always a rotation (never a reflection).

Internal forces are the co-rotational linear ones, ``f_e = −R K0 (Rᵀ x_e − X_e)`` with the
isotropic linear-elastic 12×12 rest stiffness ``K0``; for isotropic material this equals
``f_i = −V R σ(S − I) g_i`` with ``σ(ε) = λ tr(ε) I + 2 μ ε``, which is also the exact
gradient of the "corotated linear" energy ``V (μ |S − I|² + λ/2 tr(S − I)²)`` (used for line
searches). The tangent stiffness is the usual co-rotational approximation ``R K0 Rᵀ``
(the derivative of ``R`` is neglected, as in SOFA): symmetric, and positive definite once
enough nodes are fixed. Its 3×3 blocks are evaluated in closed form from the rotated
gradients ``g'_i = R g_i``::

    K_ij = V (λ g'_i g'_jᵀ + μ g'_j g'_iᵀ + μ (g_i · g_j) I)

Assembly scatters the per-element blocks of the 10 upper node pairs through a pattern
built once (the CSR slot of every element entry and of its transposed twin, found at the
node-block level), so a re-assembly never sorts: with numba (``fem_kernels``) one fused
pass adds the entries into the CSR data; the numpy reference path computes the values in
a few vectorized passes and sums them with one sparse mat-vec.

Units: positions in m, Young's modulus in Pa, forces in N, stiffness in N/m, mass in kg.
Fixed nodes are removed from the system: ``free_dofs`` lists the retained DOFs (3 per free
node, x/y/z interleaved) and every reduced vector/matrix is indexed by it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = [
    "CorotationalFEM",
    "ElementState",
    "lame_parameters",
    "polar_rotation",
    "shape_gradients",
    "UpperBlockStiffness",
]


def lame_parameters(young_modulus: float, poisson_ratio: float) -> tuple[float, float]:
    """Lamé parameters (λ, μ) [Pa] from Young's modulus [Pa] and Poisson's ratio."""
    if not np.isfinite(young_modulus) or young_modulus <= 0.0:
        raise ValueError(f"young_modulus must be > 0 Pa, got {young_modulus}")
    if not -1.0 < poisson_ratio < 0.5:
        raise ValueError(f"poisson_ratio must be in (-1, 0.5), got {poisson_ratio}")
    lam = young_modulus * poisson_ratio / ((1.0 + poisson_ratio) * (1.0 - 2.0 * poisson_ratio))
    mu = young_modulus / (2.0 * (1.0 + poisson_ratio))
    return lam, mu


_I1 = np.array([1, 2, 0])
_I2 = np.array([2, 0, 1])
#: Node pairs (i ≤ j) of the upper block triangle of a 4-node element.
_PAIR_I = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 3])
_PAIR_J = np.array([0, 1, 2, 3, 1, 2, 3, 2, 3, 3])


def _det3(a: np.ndarray) -> np.ndarray:
    """Determinants of a component-major batch (3, 3, M)."""
    return (
        a[0, 0] * (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1])
        - a[0, 1] * (a[1, 0] * a[2, 2] - a[1, 2] * a[2, 0])
        + a[0, 2] * (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0])
    )


def _cofactor3(a: np.ndarray) -> np.ndarray:
    """Cofactor matrices of a component-major batch (3, 3, M): ``cof(A) = det(A) A⁻ᵀ``."""
    out = np.empty_like(a)
    for i in range(3):
        i1, i2 = _I1[i], _I2[i]
        for j in range(3):
            j1, j2 = _I1[j], _I2[j]
            np.multiply(a[i1, j1], a[i2, j2], out=out[i, j])
            out[i, j] -= a[i1, j2] * a[i2, j1]
    return out


def _matmul3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Batched product of component-major (3, 3, M) @ (3, K, M) -> (3, K, M)."""
    return a[:, 0, None] * b[0] + a[:, 1, None] * b[1] + a[:, 2, None] * b[2]


def _transpose_product3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Batched aᵀ b for component-major (3, 3, M) and (3, K, M) -> (3, K, M)."""
    return a[0, :, None] * b[0] + a[1, :, None] * b[1] + a[2, :, None] * b[2]


def shape_gradients(points: np.ndarray, tets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shape-function gradients (M, 4, 3) [1/m] and signed volumes (M,) [m³] of linear tets.

    Raises:
        ValueError: for degenerate (zero-volume) tetrahedra.
    """
    x = np.asarray(points, dtype=float)[tets]
    dm = np.stack((x[:, 1] - x[:, 0], x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]), axis=-1)
    dm_c = np.moveaxis(dm, 0, -1)  # (3, 3, M)
    det = _det3(dm_c)
    bad = ~(np.abs(det) > 0.0)
    if np.any(bad):
        raise ValueError(
            f"{int(bad.sum())} degenerate tetrahedra (zero volume), e.g. #{int(np.flatnonzero(bad)[0])}"
        )
    inv_t = _cofactor3(dm_c) / det  # Dm^-T (3, 3, M): column k holds grad N_{k+1}
    grads = np.empty((len(tets), 4, 3))
    grads[:, 1:, :] = np.moveaxis(inv_t, -1, 0).transpose(0, 2, 1)
    grads[:, 0, :] = -grads[:, 1:, :].sum(axis=1)
    return grads, det / 6.0


def polar_rotation(
    f: np.ndarray, *, tol: float = 1e-13, max_iterations: int = 40
) -> tuple[np.ndarray, int]:
    """Rotational factors R of the polar decompositions F = R S of a batch (M, 3, 3).

    See :func:`polar_rotation_components`; this wrapper takes and returns (M, 3, 3).
    """
    rot, n = polar_rotation_components(np.ascontiguousarray(np.moveaxis(f, 0, -1)), tol=tol,
                                       max_iterations=max_iterations)
    return np.ascontiguousarray(np.moveaxis(rot, -1, 0)), n


def polar_rotation_components(
    f: np.ndarray, *, tol: float = 1e-13, max_iterations: int = 40
) -> tuple[np.ndarray, int]:
    """Polar rotations of a component-major batch F (3, 3, M) -> (R (3, 3, M), #fallbacks).

    Uses the scaled Newton iteration ``R ← (ζ R + R⁻ᵀ / ζ) / 2`` (quadratic convergence,
    closed-form 3×3 inverses, vectorized over elements) on elements with ``det F > 0``.
    Elements that are inverted, degenerate or do not converge use an SVD whose smallest
    singular direction is flipped when needed, so every returned R is a proper rotation
    (det +1, never a reflection).
    """
    scale = np.sqrt((f * f).sum(axis=(0, 1)) / 3.0)
    newton = _det3(f) > 1e-6 * scale**3
    all_newton = bool(newton.all())
    r = f / scale if all_newton else f[:, :, newton] / scale[newton]
    converged = False
    for _ in range(max_iterations):
        cof = _cofactor3(r)
        inv_t = cof / (r[0] * cof[0]).sum(axis=0)
        # Frobenius scaling zeta = sqrt(|R^-1| / |R|) accelerates the first iterations.
        zeta = np.sqrt(np.sqrt((inv_t * inv_t).sum(axis=(0, 1)) / (r * r).sum(axis=(0, 1))))
        r_new = 0.5 * (zeta * r + inv_t / zeta)
        change = np.abs(r_new - r).max(axis=(0, 1))
        r = r_new
        # Quadratic convergence (e_{k+1} ≈ e_k²/2): a change c leaves an error ≈ c²/2 and
        # the final unscaled refinement ≈ c⁴/8, below tol once c ≤ tol**0.25.
        if change.max(initial=0.0) <= tol**0.25:  # initial: no Newton element at all
            converged = True
            break
    cof = _cofactor3(r)
    r = 0.5 * (r + cof / (r[0] * cof[0]).sum(axis=0))
    if all_newton and converged:
        return r, 0
    fallback = ~newton
    if not converged:
        fallback[np.flatnonzero(newton)[change > np.sqrt(tol)]] = True
    rot = np.empty_like(f)
    rot[:, :, newton] = r
    n_fallback = int(fallback.sum())
    u, _, vt = np.linalg.svd(np.moveaxis(f[:, :, fallback], -1, 0))
    flip = np.linalg.det(u) * np.linalg.det(vt) < 0.0
    u[flip, :, 2] *= -1.0
    rot[:, :, fallback] = np.moveaxis(u @ vt, 0, -1)
    return rot, n_fallback


@dataclass(frozen=True)
class ElementState:
    """Per-element quantities of one configuration (component-major, M elements last).

    Attributes:
        rotations: (3, 3, M) co-rotational frames R.
        rotated_gradients: (3, 4, M) g'_i = R g_i [1/m] (component, node, element).
        forces: (N, 3) internal nodal forces, all nodes [N].
        energy: total strain energy [J].
        svd_fallbacks: elements that needed the inverted/degenerate SVD path.
    """

    rotations: np.ndarray
    rotated_gradients: np.ndarray
    forces: np.ndarray
    energy: float
    svd_fallbacks: int
    #: (M, 4, 3) element-major copy of the rotated gradients (compiled kernels), or None
    rotated_gradients_em: np.ndarray | None = None


@dataclass(frozen=True)
class UpperBlockStiffness:
    """The symmetric tangent K over free DOFs as its upper 3 × 3 node blocks (block CSR):
    block row I holds blocks (I, J), J ≥ I, of free nodes I, J (the diagonal block first).
    K = K_U + D + K_Uᵀ with K_U the strictly upper blocks and D the diagonal ones.

    Attributes:
        block_ptr: (n_free_nodes + 1,) start of each block row in ``block_cols``.
        block_cols: (B,) free node index J of each block, sorted within a row.
        blocks: (B, 3, 3) the blocks [N/m].
    """

    block_ptr: np.ndarray
    block_cols: np.ndarray
    blocks: np.ndarray

    def to_csr(self) -> sp.csr_matrix:
        """The full symmetric matrix (for tests and inspection)."""
        n = len(self.block_ptr) - 1
        upper = sp.bsr_matrix((self.blocks, self.block_cols, self.block_ptr), shape=(3 * n, 3 * n))
        rows = np.repeat(np.arange(n), np.diff(self.block_ptr))
        diagonal = sp.bsr_matrix((self.blocks * (rows == self.block_cols)[:, None, None],
                                  self.block_cols, self.block_ptr), shape=(3 * n, 3 * n))
        return (upper + upper.T - diagonal).tocsr()


class CorotationalFEM:
    """Co-rotational linear-tetrahedron FEM of one body with fixed nodes eliminated.

    Args:
        points: (N, 3) rest node positions [m].
        tets: (M, 4) node indices, positively oriented (positive volume).
        young_modulus: E [Pa].
        poisson_ratio: ν (−1 < ν < 0.5).
        fixed_nodes: indices of nodes held at their rest position (all three DOFs).
        density: ρ [kg/m³] for the mass (optional).
        kernels: ``"numba"`` (fused compiled kernels, needs numba), ``"numpy"`` or ``"auto"``
            (numba when it imports, unless ``SOFT_INVERSE_ROS_FEM_KERNELS=numpy``).
        element_weights: (M,) weights ≥ 0 of the elements' elastic terms (forces, energy,
            stiffness): the quadrature of a hyper-reduced model, whose few sampled
            elements stand for the whole mesh (core/sim/hyper_reduction.py); None: 1.
            Mass and gravity keep the geometric volumes.
    """

    def __init__(
        self,
        points: np.ndarray,
        tets: np.ndarray,
        young_modulus: float,
        poisson_ratio: float,
        fixed_nodes: np.ndarray | None = None,
        density: float | None = None,
        kernels: str = "auto",
        element_weights: np.ndarray | None = None,
    ) -> None:
        if kernels not in ("auto", "numpy", "numba"):
            raise ValueError(f"kernels must be 'auto', 'numpy' or 'numba', got {kernels!r}")
        self._kernels = None
        if kernels == "auto" and os.environ.get("SOFT_INVERSE_ROS_FEM_KERNELS") == "numpy":
            kernels = "numpy"
        if kernels != "numpy":
            try:
                from soft_inverse_ros.core.model import fem_kernels
            except ImportError:
                if kernels == "numba":
                    raise ValueError("kernels='numba' needs numba (requirements/fast.txt)") from None
            else:
                self._kernels = fem_kernels
        #: "numba" (compiled fused kernels) or "numpy" (vectorized reference)
        self.kernels = "numba" if self._kernels is not None else "numpy"
        points = np.ascontiguousarray(points, dtype=float)
        tets = np.ascontiguousarray(tets, dtype=np.int64)
        if points.ndim != 2 or points.shape[1] != 3:
            raise ValueError(f"points must be (N, 3), got {points.shape}")
        if tets.ndim != 2 or tets.shape[1] != 4 or len(tets) == 0:
            raise ValueError(f"tets must be (M, 4) with M > 0, got {tets.shape}")
        if tets.min() < 0 or tets.max() >= len(points):
            raise ValueError("tets reference nodes outside points")
        self.rest_points = points
        self.tets = tets
        self.n_nodes = len(points)
        self.n_elements = len(tets)
        self.young_modulus = float(young_modulus)
        self.poisson_ratio = float(poisson_ratio)
        self.lam, self.mu = lame_parameters(young_modulus, poisson_ratio)
        self.gradients, self.volumes = shape_gradients(points, tets)
        if np.any(self.volumes <= 0.0):
            raise ValueError(
                f"{int((self.volumes <= 0).sum())} tetrahedra are negatively oriented; "
                "reorder their nodes (the mesh loader should do this)"
            )
        if element_weights is None:
            #: per-element volume in the elastic terms [m³]: the rest volume × its weight
            self.weighted_volumes = self.volumes
        else:
            weights = np.asarray(element_weights, dtype=float).ravel()
            if weights.shape != (len(tets),) or not np.all(np.isfinite(weights)) or np.any(weights < 0):
                raise ValueError(f"element_weights must be ({len(tets)},) finite and >= 0")
            self.weighted_volumes = np.ascontiguousarray(self.volumes * weights)
        self.density = None if density is None else float(density)
        #: component-major gradients (3, 4, M) used by the vectorized kernels.
        self._g = np.ascontiguousarray(self.gradients.transpose(2, 1, 0))
        # Gram products g_i . g_j of the 10 upper pairs (10, M): rotation invariant.
        self._gram = (self._g[:, _PAIR_I] * self._g[:, _PAIR_J]).sum(axis=0)
        self._gram_em = np.ascontiguousarray(self._gram.T)  # (M, 10)

        fixed = np.zeros(self.n_nodes, dtype=bool)
        if fixed_nodes is not None:
            fixed_nodes = np.asarray(fixed_nodes, dtype=np.int64).ravel()
            if fixed_nodes.size and (fixed_nodes.min() < 0 or fixed_nodes.max() >= self.n_nodes):
                raise ValueError("fixed_nodes reference nodes outside the mesh")
            fixed[fixed_nodes] = True
        self.fixed_mask = fixed
        self.free_nodes = np.flatnonzero(~fixed)
        self.n_free_nodes = len(self.free_nodes)
        if self.n_free_nodes == 0:
            raise ValueError("every node is fixed: nothing to simulate")
        #: free DOF indices into the flattened (3N,) position vector.
        self.free_dofs = (3 * self.free_nodes[:, None] + np.arange(3)).ravel()
        self.n_free = len(self.free_dofs)
        self._build_patterns()

    # ------------------------------------------------------------------ patterns
    def _pair_free_nodes(self) -> tuple[np.ndarray, np.ndarray]:
        """Free node indices (10, M) of the two nodes of each element's 10 upper node pairs
        (_PAIR_I, _PAIR_J); −1 for a fixed node."""
        node_free = np.full(self.n_nodes, -1, dtype=np.int64)
        node_free[self.free_nodes] = np.arange(self.n_free_nodes)
        fe = node_free[self.tets].T  # (4, M)
        return fe[_PAIR_I], fe[_PAIR_J]

    def _build_patterns(self) -> None:
        """Sparsity pattern and scatter operators, built once.

        Element stiffness values are produced in the layout (a, b, pair, element) for the 10
        upper node pairs; a summation matrix maps each value straight to its CSR data slot
        (and, for off-diagonal pairs, to the transposed slot), so assembly is one sparse
        mat-vec. The pattern is found at the node-block level (16 keys per element).
        """
        m = self.n_elements
        nf = self.n_free_nodes
        fi, fj = self._pair_free_nodes()
        live = (fi >= 0) & (fj >= 0)
        off = _PAIR_I != _PAIR_J
        keys_up = np.where(live, fi * nf + fj, -1)
        keys_lo = np.where(live & off[:, None], fj * nf + fi, -1)
        all_keys = np.concatenate((keys_up.ravel(), keys_lo.ravel()))
        ukeys, inverse = np.unique(all_keys, return_inverse=True)
        has_dead = ukeys[0] < 0
        inverse = inverse.ravel() - int(has_dead)  # -1 marks dropped (fixed) entries
        ukeys = ukeys[int(has_dead):]
        nnzb = len(ukeys)
        slot_up = inverse[: 10 * m].reshape(10, m)
        slot_lo = inverse[10 * m :].reshape(10, m)
        brow = ukeys // nf
        bcol = ukeys % nf
        indptr = np.zeros(nf + 1, dtype=np.int64)
        np.cumsum(np.bincount(brow, minlength=nf), out=indptr[1:])
        probe = sp.bsr_matrix(
            (np.arange(1, nnzb * 9 + 1, dtype=float).reshape(nnzb, 3, 3), bcol, indptr),
            shape=(3 * nf, 3 * nf),
        ).tocsr()
        probe.has_sorted_indices = False
        probe.sort_indices()
        csr_of_bsr = np.empty(nnzb * 9, dtype=np.int64)
        csr_of_bsr[probe.data.astype(np.int64) - 1] = np.arange(probe.nnz)
        itype = np.int32 if probe.nnz < 2**31 - 1 else np.int64
        self._csr_indptr = probe.indptr.astype(itype)
        self._csr_indices = probe.indices.astype(itype)
        self._nnz = probe.nnz
        self.n_blocks = nnzb
        # CSR slot of value [a, b, p, e] (upper block) and of its transposed twin (lower).
        ab = np.arange(9)
        ba = (ab % 3) * 3 + ab // 3
        itype_slot = np.int32 if self._nnz < 2**31 - 1 else np.int64
        up = np.where(slot_up[None] >= 0, csr_of_bsr[np.maximum(slot_up, 0)[None] * 9 + ab[:, None, None]], -1)
        lo = np.where(slot_lo[None] >= 0, csr_of_bsr[np.maximum(slot_lo, 0)[None] * 9 + ba[:, None, None]], -1)
        # element-major (M, 10, 9): one element's 90 slots are contiguous for the kernels
        self._slot_up_em = np.ascontiguousarray(up.astype(itype_slot).transpose(2, 1, 0))
        self._slot_lo_em = np.ascontiguousarray(lo.astype(itype_slot).transpose(2, 1, 0))
        del up, lo
        self._value_sum_cache: sp.csr_matrix | None = None
        self._upper_pattern: tuple | None = None  # upper_block_stiffness, built on first use
        # Force scatter: element nodal forces (3, 4, M) -> all DOFs (3N).
        dof = (3 * self.tets.T[None, :, :] + np.arange(3)[:, None, None]).ravel()
        self._force_scatter = sp.csr_matrix(
            (np.ones(12 * m), (dof, np.arange(12 * m))), shape=(3 * self.n_nodes, 12 * m)
        )
        self._tets_c = np.ascontiguousarray(self.tets.T)

    @property
    def _value_sum(self) -> sp.csr_matrix:
        """Summation matrix: element values (3·3·10·M) -> CSR data (built on first use)."""
        if self._value_sum_cache is None:
            m = self.n_elements
            vidx = np.arange(90 * m).reshape(9, 10, m)
            slot_up = self._slot_up_em.transpose(2, 1, 0)  # (9, 10, M) views
            slot_lo = self._slot_lo_em.transpose(2, 1, 0)
            up_ok = slot_up >= 0
            lo_ok = slot_lo >= 0
            rows = np.concatenate((slot_up[up_ok], slot_lo[lo_ok])).astype(np.int64)
            cols = np.concatenate((vidx[up_ok], vidx[lo_ok]))
            self._value_sum_cache = sp.csr_matrix(
                (np.ones(len(rows)), (rows, cols)), shape=(self._nnz, 90 * m)
            )
        return self._value_sum_cache

    @property
    def nnz(self) -> int:
        """Non-zeros of the reduced stiffness (full symmetric storage)."""
        return self._nnz

    # ------------------------------------------------------------------ state
    def _element_positions(self, positions: np.ndarray) -> np.ndarray:
        pos = np.asarray(positions, dtype=float).reshape(self.n_nodes, 3)
        return pos.T[:, self._tets_c]  # (3, 4, M)

    def _deformation_gradients_c(self, positions: np.ndarray) -> np.ndarray:
        xe = self._element_positions(positions)
        g = self._g
        return (
            xe[:, None, 0] * g[None, :, 0]
            + xe[:, None, 1] * g[None, :, 1]
            + xe[:, None, 2] * g[None, :, 2]
            + xe[:, None, 3] * g[None, :, 3]
        )

    def deformation_gradients(self, positions: np.ndarray) -> np.ndarray:
        """F per element (M, 3, 3) for node positions (N, 3) [m]."""
        return np.ascontiguousarray(np.moveaxis(self._deformation_gradients_c(positions), -1, 0))

    def element_state(self, positions: np.ndarray) -> ElementState:
        """Rotations, internal forces f_int(x) (N, 3) [N] and strain energy [J] at x (N, 3) m."""
        if self._kernels is not None:
            pos = np.ascontiguousarray(positions, dtype=float).reshape(self.n_nodes, 3)
            forces = np.empty((self.n_nodes, 3))
            rot = np.empty((self.n_elements, 3, 3))
            rg = np.empty((self.n_elements, 4, 3))
            energy, n_fallback = self._kernels.element_state(
                pos, self.tets, self.gradients, self.weighted_volumes, self.lam, self.mu, forces,
                rot, rg
            )
            return ElementState(
                rot.transpose(1, 2, 0), rg.transpose(2, 1, 0), forces, float(energy),
                int(n_fallback), rg,
            )
        rot, fe, energy, n_fallback = self._element_forces_c(positions)
        forces = (self._force_scatter @ fe.reshape(-1)).reshape(self.n_nodes, 3)
        rg = _matmul3(rot, self._g)  # g'_i = R g_i  (3, 4, M)
        return ElementState(rot, rg, forces, energy, n_fallback)

    def _element_forces_c(self, positions: np.ndarray):
        """Numpy reference: rotations (3, 3, M), element nodal forces (3, 4, M) [N] (weighted),
        strain energy [J] and the number of SVD fallbacks at x."""
        f = self._deformation_gradients_c(positions)
        rot, n_fallback = polar_rotation_components(f)
        s = _transpose_product3(rot, f)  # S = R^T F
        eps = 0.5 * (s + s.transpose(1, 0, 2))
        eps[0, 0] -= 1.0
        eps[1, 1] -= 1.0
        eps[2, 2] -= 1.0
        tr = eps[0, 0] + eps[1, 1] + eps[2, 2]
        vol = self.weighted_volumes
        energy = float(np.dot(vol, self.mu * (eps * eps).sum(axis=(0, 1)) + 0.5 * self.lam * tr**2))
        sigma = (2.0 * self.mu) * eps
        lt = self.lam * tr
        sigma[0, 0] += lt
        sigma[1, 1] += lt
        sigma[2, 2] += lt
        p = _matmul3(rot, sigma) * (-vol)  # -V R sigma  (3, 3, M)
        return rot, _matmul3(p, self._g), energy, n_fallback  # forces (3, 4, M)

    def element_forces(self, positions: np.ndarray) -> np.ndarray:
        """Each element's internal forces on its four nodes, (M, 4, 3) [N] at x (N, 3) m
        (weighted; their scatter-sum is ``internal_forces``): the training data of a
        hyper-reduction."""
        return np.ascontiguousarray(self._element_forces_c(positions)[1].transpose(2, 1, 0))

    def internal_forces(self, positions: np.ndarray) -> np.ndarray:
        """f_int(x) (N, 3) [N] (zero at rest)."""
        return self.element_state(positions).forces

    def energy(self, positions: np.ndarray) -> float:
        """Strain energy [J] of the corotated linear model at x."""
        return self.element_state(positions).energy

    # ------------------------------------------------------------------ stiffness
    def element_values(self, rotated_gradients: np.ndarray) -> np.ndarray:
        """Upper element stiffness blocks of R K0 Rᵀ in the layout (3, 3, 10, M) [N/m].

        Value [a, b, p, e] is entry (a, b) of the block K_ij of element e for the upper node
        pair p = (i ≤ j) (see ``_PAIR_I``/``_PAIR_J``). The array is a reused buffer: it is
        overwritten by the next call.
        """
        g = rotated_gradients
        gj = g[:, _PAIR_J]  # (3, 10, M)
        gi = g[:, _PAIR_I]
        hi = gi * (self.weighted_volumes * self.lam)
        ki = gi * (self.weighted_volumes * self.mu)
        m = self.n_elements
        if getattr(self, "_values_buf", None) is None or self._values_buf[0].shape[-1] != m:
            self._values_buf = (np.empty((3, 3, 10, m)), np.empty((3, 3, 10, m)))
        vals, tmp = self._values_buf
        np.multiply(hi[:, None], gj[None, :], out=vals)  # λV g'_ia g'_jb
        np.multiply(gj[:, None], ki[None, :], out=tmp)  # μV g'_ja g'_ib
        vals += tmp
        diag = self._gram * (self.weighted_volumes * self.mu)
        vals[0, 0] += diag
        vals[1, 1] += diag
        vals[2, 2] += diag
        return vals

    def assemble_values(self, values: np.ndarray) -> sp.csr_matrix:
        """Sum element values (3, 3, 10, M) into the reduced symmetric CSR matrix."""
        return self._csr(self._value_sum @ values.reshape(-1))

    def _csr(self, data: np.ndarray) -> sp.csr_matrix:
        """The reduced stiffness pattern with values ``data``, marked as sorted (it is, by
        construction: consumers then skip an O(nnz) check on every new matrix)."""
        n = 3 * self.n_free_nodes
        matrix = sp.csr_matrix((data, self._csr_indices, self._csr_indptr), shape=(n, n), copy=False)
        matrix.has_sorted_indices = True
        return matrix

    def element_blocks(self, state: ElementState | None = None) -> np.ndarray:
        """Full element stiffness blocks (M, 4, 4, 3, 3) [N/m] (for tests and inspection)."""
        g = self._g if state is None else state.rotated_gradients
        out = np.empty((self.n_elements, 4, 4, 3, 3))
        vals = np.moveaxis(self.element_values(g).copy(), -1, 0)  # (M, 3, 3, 10)
        for p, (i, j) in enumerate(zip(_PAIR_I, _PAIR_J)):
            out[:, i, j] = vals[..., p]
            out[:, j, i] = np.swapaxes(vals[..., p], 1, 2)
        return out

    def _gradients_em(self, state: ElementState | None) -> np.ndarray:
        """Element-major (M, 4, 3) rotated gradients of ``state`` (rest: the gradients) for
        the compiled assembly kernels."""
        if state is None:
            return self.gradients
        if state.rotated_gradients_em is not None:
            return state.rotated_gradients_em
        return np.ascontiguousarray(state.rotated_gradients.transpose(2, 1, 0))

    def stiffness(self, state: ElementState | None = None) -> sp.csr_matrix:
        """Reduced tangent stiffness K = Σ R K0 Rᵀ over free DOFs [N/m] (rest state if None)."""
        g = self._g if state is None else state.rotated_gradients
        if self._kernels is not None:
            data = np.empty(self._nnz)
            self._kernels.stiffness_data(
                self._gradients_em(state), self.weighted_volumes, self._gram_em, self.lam, self.mu,
                _PAIR_I, _PAIR_J, self._slot_up_em, self._slot_lo_em, data,
            )
            return self._csr(data)
        return self.assemble_values(self.element_values(g))

    def upper_block_stiffness(self, state: ElementState | None = None) -> UpperBlockStiffness:
        """The tangent of :meth:`stiffness` as its upper node blocks only (half the values,
        one write per element entry): what a reduced model's projection Φᵀ K Φ reads
        (core/model/projection_kernels.py). The pattern is built on the first call."""
        if self._upper_pattern is None:
            self._upper_pattern = self._build_upper_pattern()
        block_ptr, block_cols, block_of_pair, flip = self._upper_pattern
        if self._kernels is None:  # the full CSR's upper blocks (the reference)
            bsr = self.stiffness(state).tobsr(blocksize=(3, 3))
            bsr.sort_indices()
            rows = np.repeat(np.arange(self.n_free_nodes), np.diff(bsr.indptr))
            keep = bsr.indices >= rows
            return UpperBlockStiffness(block_ptr, block_cols, np.ascontiguousarray(bsr.data[keep]))
        blocks = np.empty((len(block_cols), 3, 3))
        self._kernels.upper_block_data(self._gradients_em(state), self.weighted_volumes, self._gram_em,
                                       self.lam, self.mu, _PAIR_I, _PAIR_J, block_of_pair, flip, blocks)
        return UpperBlockStiffness(block_ptr, block_cols, blocks)

    def _build_upper_pattern(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(block_ptr, block_cols, the block of each element pair (M, 10) (−1: dropped),
        whether it lands transposed (M, 10)) of :meth:`upper_block_stiffness`."""
        nf = self.n_free_nodes
        fi, fj = self._pair_free_nodes()
        keys = np.where((fi >= 0) & (fj >= 0), np.minimum(fi, fj) * nf + np.maximum(fi, fj), -1)
        ukeys, inverse = np.unique(keys.ravel(), return_inverse=True)
        dead = int(ukeys[0] < 0)
        block_of_pair = inverse.reshape(keys.shape) - dead  # sorted keys: row-major, columns sorted
        ukeys = ukeys[dead:]
        block_ptr = np.zeros(nf + 1, dtype=np.int64)
        np.cumsum(np.bincount(ukeys // nf, minlength=nf), out=block_ptr[1:])
        itype = np.int32 if len(ukeys) < 2**31 - 1 else np.int64
        return (block_ptr, (ukeys % nf).astype(np.int64),
                np.ascontiguousarray(block_of_pair.T.astype(itype)), np.ascontiguousarray((fi > fj).T))

    def consistent_stiffness(self, positions: np.ndarray) -> sp.csr_matrix:
        """Exact tangent −∂f_int/∂x of the corotated energy (includes ∂R/∂x) [N/m].

        The polar rotation's derivative is taken from a rotation-variant SVD F = U Σ Vᵀ
        (det U = det V = +1): ``dR = R V [ω]× Vᵀ`` where ω solves the skew part of
        ``Vᵀ Rᵀ dF V`` divided by the singular-value pair sums ``σ_j + σ_k``. It is symmetric and reduces to K0 at rest, but
        may be indefinite under strong compression (then use :meth:`stiffness`). Used by
        the equilibrium Newton solver for quadratic convergence at large rotations.
        """
        if self._kernels is not None:  # compiled, mostly without SVDs (fem_kernels.consistent_data)
            data = np.empty(self._nnz)
            self._kernels.consistent_data(
                np.ascontiguousarray(positions, dtype=float).reshape(self.n_nodes, 3), self.tets,
                self.gradients, self._gram_em, self.weighted_volumes, self.lam, self.mu, _PAIR_I, _PAIR_J,
                self._slot_up_em, self._slot_lo_em, data)
            return self._csr(data)
        f = np.moveaxis(self._deformation_gradients_c(positions), -1, 0)  # (M, 3, 3)
        u, sig, vt = np.linalg.svd(f)
        flip_u = np.linalg.det(u) < 0
        u[flip_u, :, 2] *= -1.0
        sig[flip_u, 2] *= -1.0
        flip_v = np.linalg.det(vt) < 0
        vt[flip_v, 2, :] *= -1.0
        sig[flip_v, 2] *= -1.0
        rot = u @ vt
        v = np.swapaxes(vt, 1, 2)
        coef = self.lam * (sig.sum(axis=1) - 3.0) - 2.0 * self.mu  # (M,)
        pair_sum = np.stack((sig[:, 1] + sig[:, 2], sig[:, 0] + sig[:, 2], sig[:, 0] + sig[:, 1]), 1)
        pair_sum = np.maximum(pair_sum, 1e-6)
        q = self.gradients @ v  # q_i = Vᵀ g_i  (M, 4, 3)
        # ω_{j,b} = −(U[b, :] × q_j) / (σ pair sums): the twist of R for dF = e_b ⊗ g_j
        omega = -np.cross(u[:, None, :, :], q[:, :, None, :]) / pair_sum[:, None, None, :]
        t = np.cross(omega[:, _PAIR_J], q[:, _PAIR_I][:, :, None, :])  # (M, 10, 3b, 3)
        rot_term = np.einsum("mac,mpbc->abpm", u, t)  # (3a, 3b, 10, M)
        g = _matmul3(np.ascontiguousarray(np.moveaxis(rot, 0, -1)), self._g)  # R g (3, 4, M)
        gi, gj = g[:, _PAIR_I], g[:, _PAIR_J]
        vals = gi[:, None] * gj[None, :] * (self.weighted_volumes * self.lam)
        vals += rot_term * (self.weighted_volumes * coef)
        diag = self._gram * (self.weighted_volumes * 2.0 * self.mu)
        vals[0, 0] += diag
        vals[1, 1] += diag
        vals[2, 2] += diag
        return self.assemble_values(vals)

    def rest_stiffness(self) -> sp.csr_matrix:
        """Linear-elastic stiffness K0 at rest (reduced) [N/m]."""
        return self.stiffness(None)

    # ------------------------------------------------------------------ mass
    def lumped_mass(self, density: float | None = None) -> np.ndarray:
        """Lumped nodal masses (N,) [kg]: each tet gives ρ V / 4 to its nodes."""
        rho = self._density(density)
        return np.bincount(self.tets.ravel(), np.repeat(rho * self.volumes / 4.0, 4), self.n_nodes)

    def consistent_mass_matrix(self, density: float | None = None) -> sp.csr_matrix:
        """Consistent mass over free DOFs (CSR) [kg]: M_ij = ρ V (1 + δ_ij) / 20 · I₃."""
        rho = self._density(density)
        coeff = (1.0 + (_PAIR_I == _PAIR_J))[:, None] * (rho * self.volumes / 20.0)[None, :]
        vals = np.zeros((3, 3, 10, self.n_elements))
        for c in range(3):
            vals[c, c] = coeff
        return self.assemble_values(vals)

    def gravity_forces(self, gravity: np.ndarray, density: float | None = None) -> np.ndarray:
        """Nodal gravity forces (N, 3) [N] from the lumped mass and g (3,) [m/s²]."""
        g = np.asarray(gravity, dtype=float).reshape(3)
        return self.lumped_mass(density)[:, None] * g[None, :]

    def _density(self, density: float | None) -> float:
        rho = self.density if density is None else float(density)
        if rho is None or not np.isfinite(rho) or rho < 0:
            raise ValueError(f"a density ≥ 0 kg/m³ is needed for the mass, got {rho}")
        return rho

    @property
    def total_volume(self) -> float:
        """Rest volume of the mesh [m³]."""
        return float(self.volumes.sum())

    # ------------------------------------------------------------------ DOF helpers
    def reduce(self, vector: np.ndarray) -> np.ndarray:
        """Restrict a full (N, 3) or (3N,) vector to the free DOFs (n_free,)."""
        return np.asarray(vector).reshape(-1)[self.free_dofs]

    def expand(self, reduced: np.ndarray) -> np.ndarray:
        """Full (N, 3) vector from free-DOF values (zeros on fixed DOFs)."""
        full = np.zeros(3 * self.n_nodes)
        full[self.free_dofs] = reduced
        return full.reshape(self.n_nodes, 3)
