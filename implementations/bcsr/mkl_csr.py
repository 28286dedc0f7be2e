"""CPU vendor: MKL's CSR matrix-vector product (inspector-executor) on the same matrix.

The CSR form is the true n x n matrix (``BlockMatrix.to_csr``: no padding, no zeros stored
inside blocks), what a code keeping this matrix in CSR would multiply; where blocks hold
zeros (fill > 1) it moves fewer value bytes than BCSR but an index per entry. Handle
built and optimised once in ``bind``; each run is one multi-threaded ``mkl_sparse_d_mv``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from portabench.datasets.matrices import BlockMatrix

from ..backends import MKL
from ..mkl_sparse import MklMatrix
from .variant import BcsrVariant


class MklCsr(BcsrVariant):
    name = "mkl-csr"
    family = "vendor"
    backend = MKL
    description = "MKL inspector-executor CSR mv on the unblocked matrix (handle built and optimised once)"

    def bind(self, matrix: BlockMatrix, x: np.ndarray, y: np.ndarray) -> Callable[[], Any]:
        csr = matrix.to_csr()
        n = matrix.n
        self.handle = MklMatrix("csr", n, n, csr.indptr, csr.indices, csr.data)
        x_n, y_n = x[:n], y[:n]  # contiguous views: the padded tail is not part of A
        return lambda: self.handle.mv(x_n, y_n)
