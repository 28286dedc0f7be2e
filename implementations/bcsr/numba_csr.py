"""CPU portable: CSR SpMV on the matrix's true nonzeros (the zeros stored in blocks left out).

As ``cupy-csr`` on the GPU: where blocks hold many stored zeros (fill above about 1.47: bmw7st_1,
pwtk, rm07r), CSR's 12 bytes per nonzero are fewer than the blocks' bytes, so a memory-bound
kernel that reads CSR wins; ``mkl-csr`` is the fastest vendor variant there for that reason.
The conversion is untimed, as the vendor CSR variants' is. Threads get runs of rows holding
equal numbers of nonzeros (``balanced_bounds``), two runs per thread; each row sums its even and
odd entries in two chains of fused multiply-adds (``fastmath={"contract"}`` only), with unsigned
indices (no negative-index wraparound code). Measurements: this folder's EXPERIMENTS.md.
"""

from __future__ import annotations

from typing import Any, Callable

import numba
import numpy as np

from portabench.datasets.matrices import BlockMatrix

from ..backends import HOST
from .numba_blockrow import RUNS_PER_THREAD
from .variant import BcsrVariant, balanced_bounds, csr_arrays

U1 = np.uint64(1)
U2 = np.uint64(2)


@numba.njit(parallel=True, cache=True, fastmath={"contract"})
def csr_spmv(bounds, row_ptr, base, col, val, x, y):
    """y = A x over runs of rows; ``col`` holds columns, or offsets from each row's ``base`` column
    (``numba-csr16``; ``base`` None: Numba compiles the branch away)."""
    for run in numba.prange(bounds.size - 1):
        for i in range(bounds[run], bounds[run + 1]):
            b = np.uint64(0) if base is None else np.uint64(base[i])  # an index, not a view: no reference count
            even = 0.0
            odd = 0.0
            k = np.uint64(row_ptr[i])
            stop = np.uint64(row_ptr[i + 1])
            while k + U1 < stop:
                even += val[k] * x[b + np.uint64(col[k])]
                odd += val[k + U1] * x[b + np.uint64(col[k + U1])]
                k += U2
            if k < stop:
                even += val[k] * x[b + np.uint64(col[k])]
            y[i] = even + odd
    return y


class NumbaCsr(BcsrVariant):
    name = "numba-csr"
    family = "portable"
    backend = HOST
    description = "Numba prange over runs of rows of equal nonzeros, CSR of the true nonzeros, two chains per row"

    def bind(self, matrix: BlockMatrix, x: np.ndarray, y: np.ndarray) -> Callable[[], Any]:
        row_ptr, col, val = csr_arrays(matrix, ptr_dtype=np.int64)
        bounds = balanced_bounds(row_ptr, RUNS_PER_THREAD * numba.get_num_threads())
        return lambda: csr_spmv(bounds, row_ptr, None, col, val, x, y)
