"""Float64 oracle for MTTKRP: V(i_n, :) = sum over nonzeros x * prod_{m != n} U_m(i_m, :).

Written for clarity, not speed: one serial loop over the nonzeros in file order, each
adding its Khatri-Rao row times x into its output row. Compiled with Numba because at
benchmark sizes (tens of millions of nonzeros) a NumPy formulation takes a minute per
check; the loop itself is the definition.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np


@numba.njit(cache=True)
def _accumulate(coords, values, factors, mode, absolute, out):
    rank = out.shape[1]
    term = np.empty(rank)
    for j in range(values.size):
        x = abs(values[j]) if absolute else values[j]
        for r in range(rank):
            term[r] = x
        for m in range(coords.shape[1]):
            if m != mode:
                u = factors[m]
                k = coords[j, m]
                for r in range(rank):
                    term[r] *= abs(u[k, r]) if absolute else u[k, r]
        i = coords[j, mode]
        for r in range(rank):
            out[i, r] += term[r]


def mttkrp(coords: np.ndarray, values: np.ndarray, factors: Sequence[np.ndarray], mode: int,
           absolute: bool = False) -> np.ndarray:
    """V = X_(mode) (Khatri-Rao of the other factors), an (I_mode x R) float64 array.

    ``coords``: (nnz, N) 0-based indices; ``values``: (nnz,); ``factors``: N arrays
    (I_m x R). With ``absolute``, every value and factor entry counts by its absolute
    value: the componentwise bound sum |x| prod |U_m| that rounding errors scale with.
    """
    coords = np.ascontiguousarray(coords, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    factors = tuple(np.ascontiguousarray(u, dtype=np.float64) for u in factors)
    out = np.zeros((factors[mode].shape[0], factors[0].shape[1]))
    _accumulate(coords, values, factors, mode, bool(absolute), out)
    return out
