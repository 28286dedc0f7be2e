"""GPU vendor: cuSPARSE's CSR SpMV (through cupyx) on the same matrix.

As ``mkl-csr``: the true n x n matrix in CSR (no padding, no zeros stored inside blocks),
built on the host and moved once in ``bind``; each run is one ``cusparseSpMV`` (the generic
cuSPARSE SpMV) into the prepared y. Its descriptors and workspace are made once in ``bind``, as
cupyx's own Krylov solvers do: ``cupyx.cusparse.spmv`` makes them again at every call, Python
work that the GPU waits for (measured in this folder's README.md).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from portabench.datasets.matrices import BlockMatrix

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
        from cupy_backends.cuda.libs import cusparse as library

        descriptors = (cusparse.SpMatDescriptor.create(a), cusparse.DnVecDescriptor.create(x_n),
                       cusparse.DnVecDescriptor.create(y_n))
        alpha, beta = np.ones(1), np.zeros(1)  # host scalars (cuSPARSE's default pointer mode)
        head = (cp.cuda.device.get_cusparse_handle(), library.CUSPARSE_OPERATION_NON_TRANSPOSE, alpha.ctypes.data,
                descriptors[0].desc, descriptors[1].desc, beta.ctypes.data, descriptors[2].desc,
                cp.cuda.runtime.CUDA_R_64F, library.CUSPARSE_MV_ALG_DEFAULT)
        workspace = cp.empty(max(1, library.spMV_bufferSize(*head)), dtype=cp.int8)

        def call() -> Any:
            library.spMV(*head, workspace.data.ptr)
            return y_n

        call.keep = (a, descriptors, alpha, beta, workspace)  # what the handles point into lives as long as call
        return call
