"""CPU portable: per-thread private copies of V (Numba ``prange``), for comparison.

No sorting: each thread scatters its share of the nonzeros, in file order, into its own
zeroed I_n x R buffer, and the buffers are summed row by row in parallel afterwards. It
is race-free without atomics at the price of T copies of V to zero and reduce each run
(``reference/NOTES.md`` compares it with the segmented algorithm).
"""

from __future__ import annotations

from typing import Any, Callable

import numba
import numpy as np

from ..backends import HOST
from .variant import MttkrpVariant, TensorArrays


@numba.njit(parallel=True, cache=True)
def _privatized(idx, values, factors, mode, bounds, private, out):
    order = idx.shape[0]
    rank = out.shape[1]
    for t in numba.prange(private.shape[0]):
        mine = private[t]
        mine[:, :] = 0.0
        term = np.empty(rank)
        for j in range(bounds[t], bounds[t + 1]):
            x = values[j]
            for r in range(rank):
                term[r] = x
            for m in range(order):
                if m != mode:
                    u = factors[m]
                    k = idx[m, j]
                    for r in range(rank):
                        term[r] *= u[k, r]
            i = idx[mode, j]
            for r in range(rank):
                mine[i, r] += term[r]
    for i in numba.prange(out.shape[0]):
        for r in range(rank):
            s = 0.0
            for t in range(private.shape[0]):
                s += private[t, i, r]
            out[i, r] = s


class MttkrpNumbaPrivatized(MttkrpVariant):
    name = "numba-privatized"
    family = "portable"
    alternative = True  # numba-csf and numba-segmented are the main comparison's
    backend = HOST
    description = "Numba prange over nonzeros in file order, a private V per thread, parallel reduction"
    arranges = False

    def arrange(self, tensor: TensorArrays, mode: int, rank: int) -> tuple[TensorArrays, int]:
        return tensor, mode  # nothing to sort: the buffers are allocated in ``bind``

    def bind(self, arranged: tuple[TensorArrays, int], factors: list[np.ndarray],
             out: np.ndarray) -> Callable[[], Any]:
        tensor, mode = arranged
        threads = numba.get_num_threads()
        bounds = np.linspace(0, tensor.nnz, threads + 1).astype(np.int64)
        private = np.empty((threads, *out.shape))
        args = (tensor.idx, tensor.values, tuple(factors), mode, bounds, private, out)
        return lambda: _privatized(*args)
