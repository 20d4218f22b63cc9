"""A sparse LDLᵀ over 3 × 3 node blocks, compiled with numba: the FEM's refactorization.

A tetrahedral FEM's stiffness couples nodes, not single coordinates: its pattern is the
node graph with a dense 3 × 3 block per coupled node pair. QDLDL (the pip solver the set-up
installs) factorizes coordinate by coordinate, so it walks nine times the index structure
a node-level factorization needs and never works on more than one number at a time. This
module factorizes K = P (L D Lᵀ) Pᵀ with L unit lower triangular by 3 × 3 blocks and D
block diagonal (dense symmetric 3 × 3 blocks, inverted as such):

- **Symbolic** (once per pattern, :func:`symbolic`): a fill-reducing ordering of the node
  graph (AMD from QDLDL applied to the node graph, or METIS nested dissection when pymetis
  is installed, whichever fills less; reverse Cuthill–McKee without either), the elimination tree and the pattern of L by row
  subtrees (Davis, *Direct Methods for Sparse Linear Systems*, §4).
- **Numeric** (every update, :func:`factorize_blocks`): left-looking by block columns;
  each column gathers its blocks of A into a dense work array indexed by node, subtracts
  L(i, k) D_k L(j, k)ᵀ for every earlier column k with L(j, k) ≠ 0 (linked lists of the
  columns waiting for each row), then D_j = W(j, j) and L(i, j) = W(i, j) D_j⁻¹.
- **Solve** (:func:`solve_blocks`): forward, block-diagonal and backward substitution for
  several right-hand sides at once.

There is no pivoting: every pivot block D_j must be nonsingular, which holds for any
symmetric positive-definite K (each D_j is then a Schur complement's diagonal block, itself
positive definite) whatever the grouping into triples. :func:`factorize_blocks` returns the
first singular or non-finite pivot, and
:class:`~soft_inverse_ros.core.model.linear_solvers.BlockLDLSolver` raises
:class:`~soft_inverse_ros.core.model.linear_solvers.ConvergenceError` for it. The kernels
are compiled with the ``contract``/``reassoc`` fast-math flags (fused multiply-adds, sums
reordered), never ``nnan``/``ninf``: the pivot test must see NaN and infinity. Without
numba the same functions run interpreted (correct, slow; the solver then refuses to be
built and ``auto`` takes QDLDL). Units: whatever K's are.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["BLOCK", "node_pattern", "symbolic", "factorize_blocks_py", "solve_blocks_py", "gather_index", "warm_up"]

#: unknowns per node
BLOCK = 3


def node_pattern(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """The node graph (nb × nb, symmetric, with its diagonal) of a 3-blocked matrix."""
    coo = matrix.tocoo()
    nb = matrix.shape[0] // BLOCK
    g = sp.csr_matrix((np.ones(coo.nnz), (coo.row // BLOCK, coo.col // BLOCK)), shape=(nb, nb))
    g = ((g + g.T + sp.eye(nb)) > 0).astype(float).tocsr()
    g.sort_indices()
    return g


def _amd_order(graph: sp.csr_matrix) -> np.ndarray:
    """QDLDL's AMD ordering of the node graph (QDLDL orders what it factorizes; a
    diagonally dominant matrix on the graph's pattern gives its permutation)."""
    import qdldl

    n = graph.shape[0]
    spd = graph.copy()
    spd.data[:] = -1.0
    spd = spd + sp.diags(np.asarray(np.abs(spd).sum(axis=1)).ravel() + 1.0)
    _, _, perm = qdldl.Solver(sp.triu(spd, format="csc"), upper=True).factors()
    perm = np.asarray(perm, dtype=np.int64)
    assert perm.size == n
    return perm


def _metis_order(graph: sp.csr_matrix) -> np.ndarray | None:
    try:
        import pymetis
    except ImportError:
        return None
    n = graph.shape[0]
    g = graph - sp.diags(graph.diagonal())
    g.eliminate_zeros()
    g = g.tocsr()
    perm, _ = pymetis.nested_dissection(pymetis.CSRAdjacency(g.indptr.astype(np.int64), g.indices.astype(np.int64)))
    perm = np.asarray(perm, dtype=np.int64)  # METIS: row i of the permuted matrix is row perm[i]
    assert perm.size == n
    return perm


def _etree(indptr: np.ndarray, indices: np.ndarray, n: int) -> np.ndarray:
    """Elimination tree of a symmetric pattern given by its full CSR rows (Liu's algorithm)."""
    parent = np.full(n, -1, dtype=np.int64)
    ancestor = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        for p in range(indptr[i], indptr[i + 1]):
            k = indices[p]
            while k != -1 and k < i:
                nxt = ancestor[k]
                ancestor[k] = i
                if nxt == -1:
                    parent[k] = i
                k = nxt
    return parent


def _l_pattern(indptr: np.ndarray, indices: np.ndarray, parent: np.ndarray, n: int):
    """Column pattern of L (block CSC, strictly below the diagonal, rows sorted) by row
    subtrees: row i of L holds every node on the tree paths from A's entries k < i up to i."""
    mark = np.full(n, -1, dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    for i in range(n):
        mark[i] = i
        for p in range(indptr[i], indptr[i + 1]):
            k = indices[p]
            while k < i and mark[k] != i:
                counts[k] += 1
                mark[k] = i
                k = parent[k]
    colptr = np.zeros(n + 1, dtype=np.int64)
    for j in range(n):
        colptr[j + 1] = colptr[j] + counts[j]
    rows = np.empty(colptr[n], dtype=np.int64)
    fill = colptr[:n].copy()
    mark[:] = -1
    for i in range(n):  # rows arrive in increasing i: each column's rows come out sorted
        mark[i] = i
        for p in range(indptr[i], indptr[i + 1]):
            k = indices[p]
            while k < i and mark[k] != i:
                rows[fill[k]] = i
                fill[k] += 1
                mark[k] = i
                k = parent[k]
    return colptr, rows


def _rcm_order(graph: sp.csr_matrix) -> np.ndarray:
    """Reverse Cuthill–McKee (scipy): a band ordering, more fill than AMD or METIS; the
    ordering when neither qdldl nor pymetis is installed."""
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    return np.asarray(reverse_cuthill_mckee(graph, symmetric_mode=True), dtype=np.int64)


def symbolic(graph: sp.csr_matrix, order: str = "best"):
    """(perm, L colptr, L rows) of the node graph: ``perm[new] = old``; ``order``: ``amd``
    (QDLDL's), ``metis`` (pymetis), ``rcm`` or ``best`` (of those installed, the one with
    the fewest blocks in L; RCM only when neither of the others is there)."""
    candidates = []
    if order in ("amd", "best"):
        try:
            candidates.append(_amd_order(graph))
        except ImportError:
            if order == "amd":
                raise
    if order in ("metis", "best"):
        m = _metis_order(graph)
        if m is not None:
            candidates.append(m)
    if order == "rcm" or (order == "best" and not candidates):
        candidates.append(_rcm_order(graph))
    if not candidates:
        raise ValueError(f"block LDL: no ordering {order!r} here")
    best = None
    for perm in candidates:
        pg = graph[perm][:, perm].tocsr()
        pg.sort_indices()
        parent = etree(pg.indptr.astype(np.int64), pg.indices.astype(np.int64), graph.shape[0])
        colptr, rows = l_pattern(pg.indptr.astype(np.int64), pg.indices.astype(np.int64), parent, graph.shape[0])
        if best is None or colptr[-1] < best[1][-1]:
            best = (perm, colptr, rows)
    return best


def gather_index(matrix: sp.csr_matrix, perm: np.ndarray):
    """Where each lower block of P K Pᵀ (by permuted block column, in block CSC order: the
    diagonal first, then the rows below) takes its 9 entries in K.data.

    Returns (a_colptr (nb + 1,), a_rows (nbl,), a_pos (nbl, 3, 3): index into K.data, −1 for
    an entry outside K's pattern)."""
    nb = matrix.shape[0] // BLOCK
    inv = np.empty(nb, dtype=np.int64)
    inv[perm] = np.arange(nb)
    coo = matrix.tocoo()
    pos = np.arange(matrix.nnz)
    bi = inv[coo.row // BLOCK]
    bj = inv[coo.col // BLOCK]
    lower = bi >= bj  # each symmetric block once: row block ≥ column block (permuted)
    bi, bj, ri, rj, pos = bi[lower], bj[lower], coo.row[lower] % BLOCK, coo.col[lower] % BLOCK, pos[lower]
    key = bj * nb + bi
    blocks, which = np.unique(key, return_inverse=True)
    a_pos = np.full((blocks.size, BLOCK, BLOCK), -1, dtype=np.int64)
    a_pos[which, ri, rj] = pos
    cols = blocks // nb
    a_rows = blocks % nb
    a_colptr = np.zeros(nb + 1, dtype=np.int64)
    np.add.at(a_colptr, cols + 1, 1)
    a_colptr = np.cumsum(a_colptr)
    return a_colptr, a_rows.astype(np.int64), a_pos


def factorize_blocks_py(data, a_colptr, a_rows, a_pos, l_colptr, l_rows, l_vals, d_blocks, d_inv):
    """Numeric block LDLᵀ (module docstring) of the matrix whose CSR values are ``data``,
    in place into ``l_vals`` (nnzL, 3, 3), ``d_blocks`` and ``d_inv`` (nb, 3, 3) (D's
    blocks and their inverses). Returns the first block column whose pivot block is
    singular or not finite, or −1."""
    nb = a_colptr.shape[0] - 1
    work = np.zeros((nb, 3, 3))
    # linked lists: head[j] = first finished column k with L(j, k) != 0 still to apply, nxt[k] the next
    head = np.full(nb, -1, dtype=np.int64)
    nxt = np.full(nb, -1, dtype=np.int64)
    ptr = np.zeros(nb, dtype=np.int64)  # per finished column: position of its next row in l_rows
    y = np.empty((3, 3))
    for j in range(nb):
        for p in range(a_colptr[j], a_colptr[j + 1]):  # A's blocks of column j (rows ≥ j)
            i = a_rows[p]
            for r in range(3):
                for c in range(3):
                    q = a_pos[p, r, c]
                    work[i, r, c] = data[q] if q >= 0 else 0.0
        k = head[j]
        while k != -1:  # W(:, j) -= L(:, k) D_k L(j, k)^T for each column k with L(j, k) != 0
            knext = nxt[k]
            p0 = ptr[k]
            ljk = l_vals[p0]
            dk = d_blocks[k]
            for r in range(3):
                for c in range(3):
                    y[r, c] = dk[r, 0] * ljk[c, 0] + dk[r, 1] * ljk[c, 1] + dk[r, 2] * ljk[c, 2]
            y00, y01, y02 = y[0, 0], y[0, 1], y[0, 2]  # in registers for the rows below
            y10, y11, y12 = y[1, 0], y[1, 1], y[1, 2]
            y20, y21, y22 = y[2, 0], y[2, 1], y[2, 2]
            for p in range(p0, l_colptr[k + 1]):  # rows j (the diagonal block) and below: L(i, k) y
                i = l_rows[p]
                lik = l_vals[p]
                w = work[i]
                for r in range(3):
                    a0, a1, a2 = lik[r, 0], lik[r, 1], lik[r, 2]
                    w[r, 0] -= a0 * y00 + a1 * y10 + a2 * y20
                    w[r, 1] -= a0 * y01 + a1 * y11 + a2 * y21
                    w[r, 2] -= a0 * y02 + a1 * y12 + a2 * y22
            ptr[k] = p0 + 1  # column k waits next for its next row
            if p0 + 1 < l_colptr[k + 1]:
                nr = l_rows[p0 + 1]
                nxt[k] = head[nr]
                head[nr] = k
            k = knext
        a = work[j]
        det = (a[0, 0] * (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1]) - a[0, 1] * (a[1, 0] * a[2, 2] - a[1, 2] * a[2, 0])
               + a[0, 2] * (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]))
        if not (np.isfinite(det) and det != 0.0):
            return j
        inv = d_inv[j]
        inv[0, 0] = (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1]) / det
        inv[0, 1] = (a[0, 2] * a[2, 1] - a[0, 1] * a[2, 2]) / det
        inv[0, 2] = (a[0, 1] * a[1, 2] - a[0, 2] * a[1, 1]) / det
        inv[1, 0] = (a[1, 2] * a[2, 0] - a[1, 0] * a[2, 2]) / det
        inv[1, 1] = (a[0, 0] * a[2, 2] - a[0, 2] * a[2, 0]) / det
        inv[1, 2] = (a[0, 2] * a[1, 0] - a[0, 0] * a[1, 2]) / det
        inv[2, 0] = (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]) / det
        inv[2, 1] = (a[0, 1] * a[2, 0] - a[0, 0] * a[2, 1]) / det
        inv[2, 2] = (a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0]) / det
        for r in range(3):
            for c in range(3):
                d_blocks[j, r, c] = a[r, c]
                a[r, c] = 0.0
        v00, v01, v02 = inv[0, 0], inv[0, 1], inv[0, 2]
        v10, v11, v12 = inv[1, 0], inv[1, 1], inv[1, 2]
        v20, v21, v22 = inv[2, 0], inv[2, 1], inv[2, 2]
        for p in range(l_colptr[j], l_colptr[j + 1]):  # L(i, j) = W(i, j) D_j^-1; clear W
            i = l_rows[p]
            w = work[i]
            out = l_vals[p]
            for r in range(3):
                w0, w1, w2 = w[r, 0], w[r, 1], w[r, 2]
                out[r, 0] = w0 * v00 + w1 * v10 + w2 * v20
                out[r, 1] = w0 * v01 + w1 * v11 + w2 * v21
                out[r, 2] = w0 * v02 + w1 * v12 + w2 * v22
                w[r, 0] = 0.0
                w[r, 1] = 0.0
                w[r, 2] = 0.0
        ptr[j] = l_colptr[j]
        if l_colptr[j] < l_colptr[j + 1]:
            nr = l_rows[l_colptr[j]]
            nxt[j] = head[nr]
            head[nr] = j
    return -1


def solve_blocks_py(l_colptr, l_rows, l_vals, d_inv, dofs, rhs):
    """X with K X = B for B = ``rhs`` (n, m) in K's own order; ``dofs`` (n,): the factor's
    order (row 3 a + r of the factored matrix is K's row dofs[3 a + r]). Forward
    (:func:`forward_blocks_py`, compiled when this is), block-diagonal and backward
    substitution on all m columns at once; each block row is copied out before it is used
    (no aliasing in the inner loops)."""
    nb = l_colptr.shape[0] - 1
    m = rhs.shape[1]
    y = forward_blocks(l_colptr, l_rows, l_vals, dofs, rhs)  # L y = Pᵀ b
    bj = np.empty((3, m))
    for j in range(nb):  # D z = y
        inv = d_inv[j]
        for r in range(3):
            for c in range(m):
                bj[r, c] = inv[r, 0] * y[j, 0, c] + inv[r, 1] * y[j, 1, c] + inv[r, 2] * y[j, 2, c]
        for r in range(3):
            for c in range(m):
                y[j, r, c] = bj[r, c]
    for j in range(nb - 1, -1, -1):  # Lᵀ x = z
        for r in range(3):
            for c in range(m):
                bj[r, c] = y[j, r, c]
        for p in range(l_colptr[j], l_colptr[j + 1]):
            i = l_rows[p]
            lij = l_vals[p]
            for r in range(3):
                l0, l1, l2 = lij[0, r], lij[1, r], lij[2, r]
                for c in range(m):
                    bj[r, c] -= l0 * y[i, 0, c] + l1 * y[i, 1, c] + l2 * y[i, 2, c]
        for r in range(3):
            for c in range(m):
                y[j, r, c] = bj[r, c]
    out = np.empty((rhs.shape[0], m))
    for a in range(nb):  # scatter back to K's order
        for r in range(3):
            for c in range(m):
                out[dofs[3 * a + r], c] = y[a, r, c]
    return out


def forward_blocks_py(l_colptr, l_rows, l_vals, dofs, rhs):
    """Y = L⁻¹ Pᵀ B (nb, 3, m) for B = ``rhs`` (n, m) in K's own order: the forward half of
    :func:`solve_blocks_py`, for the quadratic form Bᵀ K⁻¹ B = Yᵀ D⁻¹ Y."""
    nb = l_colptr.shape[0] - 1
    m = rhs.shape[1]
    y = np.empty((nb, 3, m))
    for a in range(nb):  # gather into the factor's order
        for r in range(3):
            for c in range(m):
                y[a, r, c] = rhs[dofs[3 * a + r], c]
    bj = np.empty((3, m))
    for j in range(nb):  # L y = b
        for r in range(3):
            for c in range(m):
                bj[r, c] = y[j, r, c]
        for p in range(l_colptr[j], l_colptr[j + 1]):
            i = l_rows[p]
            lij = l_vals[p]
            for r in range(3):
                l0, l1, l2 = lij[r, 0], lij[r, 1], lij[r, 2]
                for c in range(m):
                    y[i, r, c] -= l0 * bj[0, c] + l1 * bj[1, c] + l2 * bj[2, c]
    return y


factorize_blocks, solve_blocks, etree, l_pattern = factorize_blocks_py, solve_blocks_py, _etree, _l_pattern
forward_blocks = forward_blocks_py
try:
    from numba import njit
except ImportError:  # interpreted: correct, slow
    njit = None
if njit is not None:
    # fused multiply-adds and reordered sums (8 % on the Diamond's factorization); not
    # 'nnan'/'ninf', which would let the compiler drop the singular-pivot test
    _FAST = {"contract", "reassoc", "nsz", "arcp"}
    factorize_blocks = njit(cache=True, fastmath=_FAST)(factorize_blocks_py)
    solve_blocks = njit(cache=True, fastmath=_FAST)(solve_blocks_py)
    forward_blocks = njit(cache=True, fastmath=_FAST)(forward_blocks_py)
    etree = njit(cache=True)(_etree)
    l_pattern = njit(cache=True)(_l_pattern)


_warm = False


def warm_up() -> None:
    """Compile the five kernels (or load them from numba's cache) on a two-node matrix, with
    the argument types the solver passes: at a node's start-up (the solver is built), not
    at its first factorization inside a running loop. Once per process."""
    global _warm
    if _warm or njit is None:
        return
    _warm = True
    k = sp.csr_matrix(np.eye(6) * 4.0 + np.eye(6, k=3) + np.eye(6, k=-3))
    graph = node_pattern(k)
    parent = etree(graph.indptr.astype(np.int64), graph.indices.astype(np.int64), 2)
    colptr, rows = l_pattern(graph.indptr.astype(np.int64), graph.indices.astype(np.int64), parent, 2)
    a_colptr, a_rows, a_pos = gather_index(k, np.arange(2, dtype=np.int64))
    l_vals, d, d_inv = np.zeros((rows.size, 3, 3)), np.zeros((2, 3, 3)), np.zeros((2, 3, 3))
    factorize_blocks(k.data, a_colptr, a_rows, a_pos, colptr, rows, l_vals, d, d_inv)
    solve_blocks(colptr, rows, l_vals, d_inv, np.arange(6, dtype=np.int64), np.ones((6, 1)))
    forward_blocks(colptr, rows, l_vals, np.arange(6, dtype=np.int64), np.ones((6, 1)))
