"""GPU vendor: cuSPARSE's CSR SpMV (through cupyx) on the same matrix.

As ``mkl-csr``: the true n x n matrix in CSR (no padding, no zeros stored inside blocks),
built on the host and moved once in ``bind``; each run is one ``cupyx.cusparse.spmv``
(the generic cuSPARSE SpMV) into the prepared y.
"""

from __future__ import annotations

from typing import Any, Callable

from portabench.datasets.matrices import BlockMatrix

from ..gpu import cupy
from .variant import CupyBcsrVariant, csr_arrays, csr_index_limit


class CusparseCsr(CupyBcsrVariant):
    name = "cusparse-csr"
    family = "vendor"
    description = "cuSPARSE CSR SpMV (cupyx.cusparse.spmv) on the unblocked matrix"

    def supports(self, problem) -> str | None:
        return csr_index_limit(problem) or super().supports(problem)

    def bind(self, matrix: BlockMatrix, x: Any, y: Any) -> Callable[[], Any]:
        cp = cupy()
        from cupyx import cusparse
        from cupyx.scipy import sparse as cusp

        n = matrix.n
        row_ptr, col, val = csr_arrays(matrix)
        a = cusp.csr_matrix((cp.asarray(val), cp.asarray(col), cp.asarray(row_ptr)), shape=(n, n))
        # cupyx checks for a canonical format at the first product (a kernel and a
        # synchronisation): done here, untimed.
        a.sum_duplicates()
        x_n, y_n = x[:n], y[:n]  # contiguous views: the padded tail is not part of A
        if not cusparse.check_availability("spmv"):  # older CUDA: cupyx's own choice of routine
            return lambda: a @ x_n

        def call() -> Any:
            cusparse.spmv(a, x_n, y=y_n)
            return y_n

        return call
