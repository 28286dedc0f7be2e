"""Float64 oracle for BCSR SpMV: y = A x, A in block-CSR with dense ``bs x bs`` blocks.

Written for clarity, not speed: one serial loop over the block rows, their blocks, and
each block's entries, in storage order. Compiled with Numba because at benchmark sizes
(hundreds of MiB of blocks) a Python loop would take minutes; the loop is the definition.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _matvec(indptr, indices, blocks, x, absolute, y):
    bs = blocks.shape[1]
    for i in range(indptr.size - 1):  # block row
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]  # block column
            for r in range(bs):
                for c in range(bs):
                    a = blocks[k, r, c]
                    v = x[j * bs + c]
                    y[i * bs + r] += abs(a) * abs(v) if absolute else a * v


def bcsr_matvec(indptr: np.ndarray, indices: np.ndarray, blocks: np.ndarray, x: np.ndarray,
                absolute: bool = False) -> np.ndarray:
    """y = A x for A given as block-CSR arrays: ``indptr`` (block rows + 1), ``indices``
    (block column of each block), ``blocks`` (nnzb x bs x bs, row-major within a block, as
    scipy's ``bsr_array.data``); ``x`` has block rows x bs entries (padded with zeros where
    the matrix is). With ``absolute``: |A| |x|, the bound that rounding errors scale with.
    """
    blocks = np.ascontiguousarray(blocks, dtype=np.float64)
    if blocks.ndim != 3 or blocks.shape[1] != blocks.shape[2]:
        raise ValueError(f"blocks must be nnzb x bs x bs, got shape {blocks.shape}")
    rows = (len(indptr) - 1) * blocks.shape[1]
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.shape != (rows,):
        raise ValueError(f"x has shape {x.shape}; the matrix has {rows} (padded) columns")
    y = np.zeros(rows)
    _matvec(np.ascontiguousarray(indptr, dtype=np.int64), np.ascontiguousarray(indices, dtype=np.int64),
            blocks, x, bool(absolute), y)
    return y
