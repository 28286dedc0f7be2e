"""GPU vendor: cuSPARSE's CSR SpMV (through cupyx) on the same matrix.

As ``mkl-csr``: the true n x n matrix in CSR (no padding, no zeros stored inside blocks),
built on the host and moved once in ``bind``; each run is one ``cusparseSpMV`` (the generic
cuSPARSE SpMV) into the prepared y, its descriptors and workspace made once (``..cusparse``;
what cupyx's per-call ones cost is measured in this folder's EXPERIMENTS.md).
"""

from __future__ import annotations

from typing import Any, Callable

from portabench.datasets.matrices import BlockMatrix

from ..cusparse import csr_spmv
from ..gpu import cupy
from .variant import CupyBcsrVariant, csr_arrays, csr_index_limit


class CusparseCsr(CupyBcsrVariant):
    name = "cusparse-csr"
    family = "vendor"
    description = "cuSPARSE CSR SpMV (cusparseSpMV, descriptors made once) on the unblocked matrix"

    def supports(self, problem) -> str | None:
        return csr_index_limit(problem) or super().supports(problem)

    def bind(self, matrix: BlockMatrix, x: Any, y: Any) -> Callable[[], Any]:
        cp = cupy()
        from cupyx.scipy import sparse as cusp

        n = matrix.n
        row_ptr, col, val = csr_arrays(matrix)
        a = cusp.csr_matrix((cp.asarray(val), cp.asarray(col), cp.asarray(row_ptr)), shape=(n, n))
        return csr_spmv(a, x[:n], y[:n])  # contiguous views: the padded tail is not part of A
