"""CPU vendor: MKL's BSR matrix-vector product through the inspector-executor API.

The handle (row-major blocks, int32 indices under LP64) is built, hinted and optimised in
``bind``, untimed; each run is one multi-threaded ``mkl_sparse_d_mv``. The handle is
freed with the variant (``MklMatrix.close`` on garbage collection).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from portabench.datasets.matrices import BlockMatrix

from ..backends import MKL
from ..mkl_sparse import MklMatrix
from .variant import BcsrVariant, block_arrays


class MklBsr(BcsrVariant):
    name = "mkl-bsr"
    family = "vendor"
    backend = MKL
    description = "MKL inspector-executor BSR mv (handle built and optimised once), multi-threaded"

    def bind(self, matrix: BlockMatrix, x: np.ndarray, y: np.ndarray) -> Callable[[], Any]:
        row_ptr, col_idx, val = block_arrays(matrix, order="row")
        self.handle = MklMatrix("bsr", matrix.block_rows, matrix.block_rows, row_ptr, col_idx, val,
                                block_size=matrix.bs)
        return lambda: self.handle.mv(x, y)
