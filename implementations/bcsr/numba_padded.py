"""CPU portable: the single-level algorithm on blocks whose columns are padded to 64 bytes.

The paper's "padded/aligned" variant: each block column of bs values is stored in a slot
of ``padded(bs)`` = bs rounded up to 8 doubles (zeros past bs), and the block array starts
on a 64-byte boundary, so every column starts on a cache-line boundary and the inner loop
runs over whole 8-wide slots (no remainder). The padding costs bandwidth: at bs 3 it moves
8/3 of the block bytes (the work model charges the unpadded bytes). The kernel is
``numba_blockrow``'s with the slot width as its column length; Numba leaves LLVM's SLP
vectorizer off, so a slot is 8 scalar fused multiply-adds, not vector ones (measured:
EXPERIMENTS.md).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from portabench.datasets.matrices import BlockMatrix

from ..backends import HOST
from .numba_blockrow import bound_spmv
from .variant import BcsrVariant, block_arrays

ALIGN_BYTES = 64
SLOT = ALIGN_BYTES // 8  # doubles per 64 bytes


def padded(bs: int) -> int:
    """bs rounded up to a multiple of 8 doubles (64 bytes)."""
    return -(-bs // SLOT) * SLOT


def aligned_zeros(shape: tuple[int, ...], align: int = ALIGN_BYTES) -> np.ndarray:
    """A float64 array of zeros whose first element sits on an ``align``-byte boundary."""
    count = int(np.prod(shape))
    raw = np.zeros(count * 8 + align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start : start + count * 8].view(np.float64).reshape(shape)


class NumbaPadded(BcsrVariant):
    name = "numba-padded"
    family = "portable"
    backend = HOST
    description = "as numba-blockrow, block columns padded to 64-byte boundaries (the paper's aligned variant)"

    def bind(self, matrix: BlockMatrix, x: np.ndarray, y: np.ndarray) -> Callable[[], Any]:
        row_ptr, col_idx, val = block_arrays(matrix, order="column")
        bs = matrix.bs
        slots = aligned_zeros((val.shape[0], bs, padded(bs)))
        slots[:, :, :bs] = val
        del val
        return bound_spmv(row_ptr, col_idx, slots, x, y)
