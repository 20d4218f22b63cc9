"""Compiled (numba) strokes and point gradients of a constraint set's cables (optional).

The arithmetic of :class:`~soft_inverse_ros.core.model.constraints._CablePaths`' numpy
path (which stays the reference: the tests compare both) in one loop over the cables'
segments. That numpy path is about ten small array operations, ~100 µs per call on the
project's 2-core machine for SOFA's finger (one cable, 14 points) whatever the size; the
simulated robot calls it at every residual evaluation (five per 10 ms step on the finger)
and the controller's model at every update.

Importing this module needs numba; ``constraints.py`` keeps the numpy path without it, or
with ``SOFT_INVERSE_ROS_FEM_KERNELS=numpy``. Units: metres.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def strokes_and_gradient(points, pulls, start, end, owner, rows, rest, gradient, strokes):
    """Cable strokes δ = L0 − L into ``strokes`` (n_cables,) [m], and, when ``gradient``
    has rows, ∂δ/∂points added into the cables' rows of ``gradient`` (n_rows, 3K).

    Args:
        points: the mapped points (K, 3) [m]; pulls: the fixed pull points (P, 3) [m],
            entries K … K + P − 1 of the stacked points.
        start, end: (S,) stacked-point index of each segment's ends; owner: (S,) its cable.
        rows: (n_cables,) each cable's row; rest: (n_cables,) rest lengths L0 [m].
        gradient: (n_rows, 3K), zero in the cables' rows (added into), or (0, 0) for the
            strokes alone.
    """
    k = points.shape[0]
    for c in range(rest.shape[0]):
        strokes[c] = rest[c]
    with_gradient = gradient.shape[0] > 0
    for s in range(start.shape[0]):
        a = start[s]
        b = end[s]
        d0 = (points[b, 0] if b < k else pulls[b - k, 0]) - (points[a, 0] if a < k else pulls[a - k, 0])
        d1 = (points[b, 1] if b < k else pulls[b - k, 1]) - (points[a, 1] if a < k else pulls[a - k, 1])
        d2 = (points[b, 2] if b < k else pulls[b - k, 2]) - (points[a, 2] if a < k else pulls[a - k, 2])
        norm = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        c = owner[s]
        strokes[c] -= norm
        if with_gradient and norm > 0.0:  # a zero-length segment: no direction, no gradient
            u0, u1, u2 = d0 / norm, d1 / norm, d2 / norm
            r = rows[c]
            if b < k:  # dδ/dp_end = −u
                gradient[r, 3 * b] -= u0
                gradient[r, 3 * b + 1] -= u1
                gradient[r, 3 * b + 2] -= u2
            if a < k:  # dδ/dp_start = +u
                gradient[r, 3 * a] += u0
                gradient[r, 3 * a + 1] += u1
                gradient[r, 3 * a + 2] += u2
