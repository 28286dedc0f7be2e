"""cuSPARSE's generic CSR SpMV with its descriptors and workspace made once, for vendor variants.

``cupyx.cusparse.spmv`` (and so ``csr_matrix @ x``) makes three descriptors, asks for the
workspace size and allocates it at every call: Python work that the GPU waits for (measured in
``implementations/bcsr/EXPERIMENTS.md``), which would be charged to cuSPARSE.
``csr_spmv`` makes them once, untimed, as cupyx's own Krylov solvers do.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .gpu import cupy


def csr_spmv(matrix: Any, x: Any, y: Any) -> Callable[[], Any]:
    """A call writing ``matrix @ x`` into ``y`` and returning ``y``: ``matrix`` a
    ``cupyx.scipy.sparse.csr_matrix`` of float64 (made canonical here, in place), ``x`` and ``y``
    contiguous float64 vectors that stay where they are (the descriptors point into them)."""
    cp = cupy()
    from cupyx import cusparse

    # cuSPARSE's CSR wants sorted, duplicate-free column indices; a kernel and a synchronisation
    # the first time, a flag check after, so done here, untimed.
    matrix.sum_duplicates()

    if not cusparse.check_availability("spmv"):  # older CUDA: cupyx's own choice of routine
        def product() -> Any:
            y[...] = matrix @ x
            return y

        return product
    from cupy_backends.cuda.libs import cusparse as library

    descriptors = (cusparse.SpMatDescriptor.create(matrix), cusparse.DnVecDescriptor.create(x),
                   cusparse.DnVecDescriptor.create(y))
    alpha, beta = np.ones(1), np.zeros(1)  # host scalars (cuSPARSE's default pointer mode)
    head = (cp.cuda.device.get_cusparse_handle(), library.CUSPARSE_OPERATION_NON_TRANSPOSE, alpha.ctypes.data,
            descriptors[0].desc, descriptors[1].desc, beta.ctypes.data, descriptors[2].desc,
            cp.cuda.runtime.CUDA_R_64F, library.CUSPARSE_MV_ALG_DEFAULT)
    workspace = cp.empty(max(1, library.spMV_bufferSize(*head)), dtype=cp.int8)

    def call() -> Any:
        library.spMV(*head, workspace.data.ptr)
        return y

    call.keep = (matrix, x, y, descriptors, alpha, beta, workspace)  # what the handles point into lives as long as call
    return call
