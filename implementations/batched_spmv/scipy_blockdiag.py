"""CPU vendor: the N systems as one block-diagonal SciPy CSR matrix, one ``A @ x`` per run.

This is how a library user batches small sparse products without a batched routine:
assemble (untimed, in ``prepare``) one (N n) x (N n) CSR matrix whose diagonal blocks are
the systems, then per run multiply it by all x's at once and scale by the per-system
alpha and beta with NumPy broadcasting. SciPy's CSR product runs on one thread.

The library wants the system-major order (system k's rows together), so with entry-major
inputs the run transposes x into it and the product back into the layout: both are part
of what this way of computing costs, hence timed. (Assembling the matrix in entry-major
row order would avoid them, but then it is no longer the plain block-diagonal matrix a
library user builds.)
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ..backends import HOST
from .variant import BatchedSpmvVariant, block_diagonal_pattern, block_index_dtype


class ScipyBlockDiag(BatchedSpmvVariant):
    name = "scipy-blockdiag"
    family = "vendor"
    backend = HOST
    description = "SciPy CSR block-diagonal matrix of the N systems: one A @ x, NumPy scaling by alpha, beta"

    def bind(self, arrays: dict[str, np.ndarray], layout: str) -> Callable[[], Any]:
        row_ptr, col_idx, values = arrays["row_ptr"], arrays["col_idx"], arrays["values"]
        x, y, out = arrays["x"], arrays["y"], arrays["y_out"]
        n, nnz = row_ptr.size - 1, col_idx.size
        entry_major = layout == "entry-major"
        count = x.shape[1] if entry_major else x.shape[0]
        # System-major values are the block matrix's data as they are; entry-major ones are
        # transposed once here, untimed.
        data = np.ascontiguousarray(values.T).reshape(-1) if entry_major else values.reshape(-1)
        indptr, indices = block_diagonal_pattern(np, row_ptr, col_idx, count, n, block_index_dtype(count, n, nnz))
        matrix = sp.csr_array((data, indices, indptr), shape=(count * n, count * n), copy=False)
        if entry_major:
            alpha, beta = arrays["alpha"][None, :], arrays["beta"][None, :]

            def run_entry_major() -> None:
                ax = matrix @ np.ascontiguousarray(x.T).reshape(-1)  # x to system-major
                np.multiply(ax.reshape(count, n).T, alpha, out=out)  # and back to entry-major
                np.add(out, beta * y, out=out)

            return run_entry_major
        alpha, beta = arrays["alpha"][:, None], arrays["beta"][:, None]

        def run_system_major() -> None:
            ax = matrix @ x.reshape(-1)
            np.multiply(ax.reshape(count, n), alpha, out=out)
            np.add(out, beta * y, out=out)

        return run_system_major
