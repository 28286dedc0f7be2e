"""CPU vendor: the library formulation through MKL (multi-threaded sparse x dense).

As ``scipy_scatter``, but the scatter product runs in MKL through ``sparse_dot_mkl``,
accumulating chunk after chunk into V (``out_scalar=0`` on the first chunk overwrites it).
The gather stays NumPy's: MKL has no gather of rows by index.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import MKL
from ..mkl import sparse_dot_mkl
from .scipy_scatter import MttkrpScipyScatter


class MttkrpMklScatter(MttkrpScipyScatter):
    name = "mkl-scatter"
    backend = MKL
    description = "np.take gather of the Khatri-Rao rows, then MKL CSR scatter matrix @ rows (sparse_dot_mkl), chunked"

    def accumulate(self, scatter: Any, rows: np.ndarray, out: np.ndarray, first: bool) -> None:
        sparse_dot_mkl().dot_product_mkl(scatter, rows, out=out, out_scalar=0.0 if first else 1.0)
