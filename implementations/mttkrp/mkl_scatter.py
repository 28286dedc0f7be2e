"""CPU vendor: the library formulation through MKL (multi-threaded sparse x dense).

As ``scipy_scatter``, but the scatter product runs in MKL through ``sparse_dot_mkl``,
accumulating chunk after chunk into V (``out_scalar=0`` on the first chunk overwrites it).
The gather stays NumPy's: MKL has no gather of rows by index.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ..mkl import mkl_unavailable, sparse_dot_mkl
from .scipy_scatter import scatter_matrices
from .variant import MttkrpVariant, TensorArrays, gather_kr


class MklScatter(MttkrpVariant):
    name = "mkl-scatter"
    family = "vendor"
    device = "cpu"
    description = "np.take gather of the Khatri-Rao rows, then MKL CSR scatter matrix @ rows (sparse_dot_mkl), chunked"

    @classmethod
    def unavailable(cls) -> str | None:
        return mkl_unavailable()

    def arrange(self, tensor: TensorArrays, mode: int, rank: int) -> tuple[TensorArrays, int, list]:
        return tensor, mode, scatter_matrices(sp, np, tensor, mode, rank)

    def bind(self, arranged: tuple[TensorArrays, int, list], factors: list[np.ndarray],
             out: np.ndarray) -> Callable[[], Any]:
        tensor, mode, chunks = arranged
        rank = out.shape[1]
        longest = max(e - s for s, e, _ in chunks)
        kr, tmp = np.empty((longest, rank)), np.empty((longest, rank))
        dot = sparse_dot_mkl().dot_product_mkl

        def call() -> None:
            for k, (start, stop, scatter) in enumerate(chunks):
                rows = gather_kr(np, factors, tensor.idx, mode, start, stop, kr, tmp)
                dot(scatter, rows, out=out, out_scalar=0.0 if k == 0 else 1.0)

        return call
