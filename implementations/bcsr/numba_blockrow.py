"""CPU portable: the seed's single-level parallel algorithm (Numba ``prange``).

One thread owns whole block rows, so every y entry has one writer (Numba has no CPU
atomics, and none are needed). For each block row a local accumulator of bs values sums
the row's blocks column by column (blocks stored column-major, ``val[k, c, r]``, as in
the seed: the inner loop over the bs rows is a contiguous axpy), then is written to y
once. The block size is a compile-time constant: ``spmv_kernel(bs)`` builds one kernel
per bs (cached on disk), whose loops over a block LLVM unrolls.

Threads get runs of block rows holding equal numbers of blocks (``balanced_bounds``),
two runs per thread; the accumulator is allocated once per run, not per block row.
Measured on the 2-core VM (shared, +-10 %), 64 MiB sweep matrices, 2 threads: 1 / 4 / 16 runs
per thread 2.88 / 3.06 / 3.13 ms at bs 3, 2.54 / 2.52 / 2.84 ms at bs 6.

**Where the time goes.** Beyond the 32 MB L3 (64 MiB of blocks) the kernel is memory-bound:
one thread runs at the single-thread read roof (bs 6 sweep 2.02 ms, a 64 MiB read 2.02 ms),
two at 45-68 GB/s, about what a plain parallel read of 64 MiB gets at the time (50-63 GB/s:
the VM's rate drifts). A matrix that fits in L3 is compute-bound: raefsky4 runs at its real size, 14.8 MiB
of blocks, where a parallel read reaches 189 GB/s but MKL's BSR 64 GB/s (0.243 ms) and the
first version of this kernel 58 GB/s (0.268 ms, 0.91x MKL: asv's 0.98x). That version was
scalar code with an overhead per block: Numba leaves LLVM's SLP vectorizer off and the
unrolled block loops give its loop vectorizer nothing, so a bs 3 block is 9 multiplies and
9 adds, each row's adds a chain of bs dependent ones; and signed indices (``k``, the block
column) get Numba's negative-index wraparound code and the 3-D array's runtime strides,
about 20 integer instructions per block plus spills. Now: the blocks are passed flattened
(constant offsets within a block), block indices are unsigned (no wraparound code), each
multiply-add is fused (``fastmath={"contract"}`` only: no reassociation, the code's
summation order), and up to bs 7 the even and odd block columns add into two accumulator
sets (``chains``), halving each chain: a bs 3 block is 9 fused multiply-adds reading the block,
4 loads (its block column, 3 x entries), 2 index updates and the loop test. raefsky4 0.268 -> 0.207 ms
(1.17x MKL); the memory-bound matrices move within the noise (0-10 %). Two sets beyond
bs 7 cost (bs 8 sweep 1.84x -> 1.57x MKL, bs 32 3.8x -> 2.9x); without them the fused
chains make bs 3 slower than unfused code (raefsky4 0.81x MKL).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numba
import numpy as np

from portabench.datasets.matrices import BlockMatrix

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
    device = "cpu"
    description = ("Numba prange over block rows (runs of equal blocks), bs-value local accumulators (two up to bs 7), "
                   "fused multiply-adds, bs compile-time")

    @classmethod
    def unavailable(cls) -> str | None:
        return None

    def bind(self, matrix: BlockMatrix, x: np.ndarray, y: np.ndarray) -> Callable[[], Any]:
        row_ptr, col_idx, val = block_arrays(matrix, order="column")
        return bound_spmv(row_ptr, col_idx, val, x, y)
