"""GPU vendor: the N systems as one block-diagonal cuSPARSE CSR matrix, one SpMV per run.

The GPU twin of ``scipy-blockdiag``: a ``cupyx.scipy.sparse.csr_matrix`` whose diagonal
blocks are the systems, assembled on the device in ``prepare`` (untimed); each run is one
cuSPARSE CSR SpMV (``cusparseSpMV``, its descriptors and workspace made once: ``..cusparse``)
and CuPy elementwise scaling by the per-system alpha and beta. With entry-major inputs the
run also transposes x into the system-major order the block matrix needs and the product
back into the layout: part of what this way of computing costs, hence timed.

cupyx's CSR matrices index with 32 bits: problems whose N nnz exceeds 2^31 - 1 are not
supported by this variant.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..cusparse import csr_spmv
from ..gpu import cupy
from .definition import BatchedSpmvProblem
from .variant import INT32_MAX, CupyBatchedSpmvVariant, block_diagonal_pattern


class CusparseBlockDiag(CupyBatchedSpmvVariant):
    name = "cusparse-blockdiag"
    family = "vendor"
    description = ("cuSPARSE CSR SpMV (descriptors made once) on the block-diagonal matrix of the N systems, "
                   "CuPy scaling by alpha, beta")

    def supports(self, problem: BatchedSpmvProblem) -> str | None:
        s = problem.systems
        if problem.size * max(s.nnz, s.n) > INT32_MAX:
            return (f"the block-diagonal matrix has N nnz = {problem.size * s.nnz} entries; "
                    "cupyx CSR indices are 32-bit (at most 2^31 - 1)")
        return None

    def bind(self, arrays: dict[str, Any], layout: str) -> Callable[[], Any]:
        cp = cupy()
        from cupyx.scipy import sparse as cusp

        row_ptr, col_idx, values = arrays["row_ptr"], arrays["col_idx"], arrays["values"]
        x, y, out = arrays["x"], arrays["y"], arrays["y_out"]
        n = int(row_ptr.size) - 1
        entry_major = layout == "entry-major"
        count = int(x.shape[1] if entry_major else x.shape[0])
        # System-major values are the block matrix's data as they are; entry-major ones are
        # transposed once here, untimed.
        data = cp.ascontiguousarray(values.T).reshape(-1) if entry_major else values.reshape(-1)
        indptr, indices = block_diagonal_pattern(cp, row_ptr, col_idx, count, n, np.int32)
        matrix = cusp.csr_matrix((data, indices, indptr), shape=(count * n, count * n), copy=False)
        ax = cp.empty(count * n)
        if entry_major:
            alpha, beta = arrays["alpha"][None, :], arrays["beta"][None, :]
            x_system_major = cp.empty(count * n)
            product = csr_spmv(matrix, x_system_major, ax)

            def run_entry_major() -> None:
                cp.copyto(x_system_major.reshape(count, n), x.T)  # x to system-major
                product()
                cp.multiply(ax.reshape(count, n).T, alpha, out=out)  # and back to entry-major
                cp.add(out, beta * y, out=out)

            return run_entry_major
        alpha, beta = arrays["alpha"][:, None], arrays["beta"][:, None]
        product = csr_spmv(matrix, x.reshape(-1), ax)

        def run_system_major() -> None:
            product()
            cp.multiply(ax.reshape(count, n), alpha, out=out)
            cp.add(out, beta * y, out=out)

        return run_system_major
