"""CPU portable: the seed's single-level parallel algorithm (Numba ``prange``).

One thread owns whole block rows, so every y entry has one writer (Numba has no CPU
atomics, and none are needed). For each block row a local accumulator of bs values sums
the row's blocks column by column (blocks stored column-major, ``val[k, c, r]``, as in
the seed: the inner loop over the bs rows is a contiguous axpy), then is written to y
once. The block size is a compile-time constant: ``_kernel(bs)`` builds one kernel per
bs (cached on disk), whose loops over a block LLVM unrolls.

Threads get runs of block rows holding equal numbers of blocks (``balanced_bounds``),
two runs per thread; the accumulator is allocated once per run, not per block row.
Measured on the 2-core VM (shared, +-10 %), 64 MiB sweep matrices, 2 threads: 1 / 4 / 16 runs
per thread 2.88 / 3.06 / 3.13 ms at bs 3, 2.54 / 2.52 / 2.84 ms at bs 6. One thread streams
about 15 GB/s, two 25-30 GB/s (the STREAM roof), and keeping the accumulator in bs scalar
locals (generated code) instead of the array changed neither: the kernel is memory-bound.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numba
import numpy as np

from portabench.datasets.matrices import BlockMatrix

from .variant import BcsrVariant, balanced_bounds, block_arrays

RUNS_PER_THREAD = 2


@functools.cache
def spmv_kernel(bs: int, width: int = 0) -> Any:
    """The SpMV kernel for block size ``bs`` whose block columns (``val[k, c, :]``) hold ``width``
    entries (0: ``bs``; more: zero padding, ``numba_padded``). Both are closure constants, so the
    loops over a block unroll."""
    width = width or bs

    @numba.njit(parallel=True, cache=True)
    def spmv(bounds, row_ptr, col_idx, val, x, y):
        for run in numba.prange(bounds.size - 1):
            acc = np.empty(width)
            for i in range(bounds[run], bounds[run + 1]):
                for r in range(width):
                    acc[r] = 0.0
                for k in range(row_ptr[i], row_ptr[i + 1]):
                    j = col_idx[k] * bs
                    for c in range(bs):
                        xc = x[j + c]
                        for r in range(width):  # padding entries, if any, are zero
                            acc[r] += val[k, c, r] * xc
                for r in range(bs):
                    y[i * bs + r] = acc[r]
        return y

    return spmv


def run_bounds(row_ptr: np.ndarray) -> np.ndarray:
    """Block-row runs for this process's Numba threads (counted here: a kernel that asks
    Numba for its thread count cannot be cached)."""
    return balanced_bounds(row_ptr, RUNS_PER_THREAD * numba.get_num_threads())


class NumbaBlockRow(BcsrVariant):
    name = "numba-blockrow"
    family = "portable"
    device = "cpu"
    description = "Numba prange over block rows (runs of equal blocks), bs-value local accumulator, bs compile-time"

    @classmethod
    def unavailable(cls) -> str | None:
        return None

    def bind(self, matrix: BlockMatrix, x: np.ndarray, y: np.ndarray) -> Callable[[], Any]:
        row_ptr, col_idx, val = block_arrays(matrix, order="column")
        kernel = spmv_kernel(matrix.bs)
        bounds = run_bounds(row_ptr)
        return lambda: kernel(bounds, row_ptr, col_idx, val, x, y)
