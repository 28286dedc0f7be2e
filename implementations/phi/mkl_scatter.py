"""CPU vendor: as ``scipy_scatter``, with the scatter product S(s) @ Π in MKL (multi-threaded,
through ``sparse_dot_mkl``). The gathers and the division stay NumPy's: MKL has none."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import MKL
from ..mkl import sparse_dot_mkl
from .scipy_scatter import PhiScipyScatter


class PhiMklScatter(PhiScipyScatter):
    name = "mkl-scatter"
    backend = MKL
    description = "NumPy gathered row dots and division, then MKL CSR scatter matrix S(s) @ Π (sparse_dot_mkl)"

    @staticmethod
    def product(scatter: Any, pi: np.ndarray, out: np.ndarray) -> None:
        sparse_dot_mkl().dot_product_mkl(scatter, pi, out=out, out_scalar=0.0)
