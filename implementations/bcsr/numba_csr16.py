"""CPU portable: CSR of the true nonzeros with 2-byte column offsets from each row's first column.

``cupy-csr16``'s format (``variant.csr16_arrays``: 10 bytes a nonzero and 4 a row, against CSR's
12 a nonzero) through ``numba-csr``'s kernel. Beyond the last-level cache the two-core VM's CSR
kernels are near its memory bandwidth, so fewer bytes pay there too. Measurements: this folder's
EXPERIMENTS.md.
"""

from __future__ import annotations

from typing import Any, Callable

import numba
import numpy as np

from portabench.datasets.matrices import BlockMatrix

from .definition import BcsrProblem
from .numba_blockrow import RUNS_PER_THREAD
from .numba_csr import NumbaCsr, csr_spmv
from .variant import balanced_bounds, csr16_arrays, csr16_limit


class NumbaCsr16(NumbaCsr):
    name = "numba-csr16"
    description = ("Numba prange over runs of rows of equal nonzeros, CSR of the true nonzeros with 2-byte column "
                   "offsets from each row's first column, two chains per row")

    def supports(self, problem: BcsrProblem) -> str | None:
        return csr16_limit(problem) or super().supports(problem)

    def bind(self, matrix: BlockMatrix, x: np.ndarray, y: np.ndarray) -> Callable[[], Any]:
        row_ptr, base, offsets, val = csr16_arrays(matrix, ptr_dtype=np.int64)
        bounds = balanced_bounds(row_ptr, RUNS_PER_THREAD * numba.get_num_threads())
        return lambda: csr_spmv(bounds, row_ptr, base, offsets, val, x, y)
