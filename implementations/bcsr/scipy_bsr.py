"""CPU vendor: SciPy's BSR product, ``bsr_array @ x`` (one thread, SciPy's compiled loop)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from portabench.datasets.matrices import BlockMatrix

from ..backends import HOST
from .variant import BcsrVariant, block_arrays


class ScipyBsr(BcsrVariant):
    name = "scipy-bsr"
    family = "vendor"
    backend = HOST
    description = "SciPy bsr_array @ x (int32 indices; returns a new y each run)"

    def bind(self, matrix: BlockMatrix, x: np.ndarray, y: np.ndarray) -> Callable[[], Any]:
        row_ptr, col_idx, val = block_arrays(matrix, order="row")
        size = matrix.n_padded
        a = sp.bsr_array((val, col_idx, row_ptr), shape=(size, size), blocksize=(matrix.bs, matrix.bs), copy=False)
        return lambda: a @ x
