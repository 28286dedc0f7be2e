"""CPU portable: the paper's single-level parallel algorithm (Numba ``prange``).

One thread owns whole block rows, so every y entry has one writer (Numba has no CPU
atomics, and none are needed). For each block row a local accumulator of bs values sums
the row's blocks column by column (blocks stored column-major, ``val[k, c, r]``, as in
the seed: the inner loop over the bs rows is a contiguous axpy), then is written to y
once. The block size is a compile-time constant: ``spmv_kernel(bs)`` builds one kernel
per bs (cached on disk), whose loops over a block LLVM unrolls.

Threads get runs of block rows holding equal numbers of blocks (``balanced_bounds``),
two runs per thread; the accumulator is allocated once per run, not per block row. Blocks
are passed flattened with unsigned indices, each multiply-add is fused
(``fastmath={"contract"}`` only), and up to bs 7 even and odd block columns add into two
accumulator sets (``chains``). Where the time goes and what was measured: this folder's
EXPERIMENTS.md.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numba
import numpy as np

from portabench.datasets.matrices import BlockMatrix

from ..backends import HOST
from .variant import BcsrVariant, balanced_bounds, block_arrays

RUNS_PER_THREAD = 2
SPLIT_MAX_BS = 7


def chains(bs: int) -> int:
    """Accumulator sets per block row: block column c adds into set ``c % chains``, which halves
    each accumulator's chain of dependent multiply-adds per block (2 up to ``SPLIT_MAX_BS``; wider
    blocks have enough independent work per chain, and twice their accumulators cost registers)."""
    return 2 if bs <= SPLIT_MAX_BS else 1


@functools.cache
def spmv_kernel(bs: int, width: int = 0) -> Any:
    """The SpMV kernel for block size ``bs`` over the blocks flattened (``val.reshape(-1)``, block k
    column c row r at ``(k bs + c) width + r``) whose columns hold ``width`` entries (0: ``bs``; more:
    zero padding, ``numba_padded``). Both are closure constants, so the loops over a block unroll.
    Block indices are unsigned (Numba adds negative-index wraparound code to signed ones), and
    ``fastmath={"contract"}`` only fuses each multiply-add (no reassociation)."""
    width = width or bs
    ways = chains(bs)
    u = np.uint64
    ubs, uwidth, ublock, uways = u(bs), u(width), u(bs * width), u(ways)

    @numba.njit(parallel=True, cache=True, fastmath={"contract"})
    def spmv(bounds, row_ptr, col_idx, val, x, y):
        for run in numba.prange(bounds.size - 1):
            acc = np.empty((ways, width))
            for i in range(bounds[run], bounds[run + 1]):
                for w in range(ways):
                    for r in range(width):
                        acc[w, r] = 0.0
                for k in range(u(row_ptr[i]), u(row_ptr[i + 1])):
                    j = u(col_idx[k]) * ubs
                    start = k * ublock
                    for c in range(ubs):
                        xc = x[j + c]
                        for r in range(uwidth):  # padding entries, if any, are zero
                            acc[c % uways, r] += val[start + c * uwidth + r] * xc
                for r in range(bs):
                    total = acc[0, r]
                    for w in range(1, ways):
                        total += acc[w, r]
                    y[i * bs + r] = total
        return y

    return spmv


def bound_spmv(row_ptr: np.ndarray, col_idx: np.ndarray, blocks: np.ndarray, x: np.ndarray,
               y: np.ndarray) -> Callable[[], Any]:
    """A call of the kernel for ``blocks`` (nnzb x bs x width, column-major blocks, C-contiguous:
    passed flattened, as the kernel indexes them) over this process's thread runs."""
    kernel = spmv_kernel(blocks.shape[1], blocks.shape[2])
    bounds = run_bounds(row_ptr)
    flat = blocks.reshape(-1)
    return lambda: kernel(bounds, row_ptr, col_idx, flat, x, y)


def run_bounds(row_ptr: np.ndarray) -> np.ndarray:
    """Block-row runs for this process's Numba threads (counted here: a kernel that asks
    Numba for its thread count cannot be cached)."""
    return balanced_bounds(row_ptr, RUNS_PER_THREAD * numba.get_num_threads())


class NumbaBlockRow(BcsrVariant):
    name = "numba-blockrow"
    family = "portable"
    backend = HOST
    description = ("Numba prange over block rows (runs of equal blocks), bs-value local accumulators (two up to bs 7), "
                   "fused multiply-adds, bs compile-time")

    def bind(self, matrix: BlockMatrix, x: np.ndarray, y: np.ndarray) -> Callable[[], Any]:
        row_ptr, col_idx, val = block_arrays(matrix, order="column")
        return bound_spmv(row_ptr, col_idx, val, x, y)
