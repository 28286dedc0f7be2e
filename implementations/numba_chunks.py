"""The chunk edges of the segmented Numba kernels (MTTKRP's and Φ's ``numba-segmented``).

Both cut row-sorted nonzeros into equal chunks run by ``prange``; a chunk stores the rows that
lie wholly inside it and keeps the partial sums of its first and last rows, which neighbouring
chunks may share, in ``edge_rows`` (chunks x 2, -1: none) and ``edge_sums`` (chunks x 2 x R).
Numba has no CPU atomics, so those are added in afterwards by one thread, here.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(inline="always", cache=True)
def keep_edges(edge_rows: np.ndarray, edge_sums: np.ndarray, c: int, first: int, row: int, acc: np.ndarray) -> None:
    """Chunk ``c`` ends with ``acc`` summed for ``row``: record its first row (whose sum went to
    ``edge_sums[c, 0]`` when the chunk left it) and, if another, its last."""
    edge_rows[c, 0] = first
    if row == first:
        edge_sums[c, 0, :] = acc
    else:
        edge_rows[c, 1] = row
        edge_sums[c, 1, :] = acc


@numba.njit(cache=True)
def merge_edges(out: np.ndarray, edge_rows: np.ndarray, edge_sums: np.ndarray) -> None:
    """Add every chunk's edge sums into ``out``, serially, chunk by chunk (a fixed sum order)."""
    for c in range(edge_rows.shape[0]):
        for e in range(2):
            if edge_rows[c, e] >= 0:
                out[edge_rows[c, e], :] += edge_sums[c, e, :]
