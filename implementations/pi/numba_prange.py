"""CPU portable: Π by Numba ``prange`` over the nonzeros, each row's product formed in place."""

from __future__ import annotations

from typing import Any, Callable

import numba
import numpy as np

from ..backends import HOST
from ..tensor_inputs import TensorArrays
from .variant import PiVariant


@numba.njit(parallel=True, cache=True)
def _rows(idx, factors, mode, out):
    rank = out.shape[1]
    for j in numba.prange(out.shape[0]):
        for r in range(rank):
            out[j, r] = 1.0
        for m in range(idx.shape[0]):
            if m != mode:
                u = factors[m]
                k = idx[m, j]
                for r in range(rank):
                    out[j, r] *= u[k, r]


class PiNumbaPrange(PiVariant):
    name = "numba-prange"
    family = "portable"
    backend = HOST
    description = "Numba prange over nonzeros: each Π row the product of the other factors' rows"

    def bind(self, arranged: tuple[TensorArrays, int], factors: list[np.ndarray], out: np.ndarray) -> Callable[[], Any]:
        tensor, mode = arranged
        args = (tensor.idx, tuple(factors), mode, out)
        return lambda: _rows(*args)
