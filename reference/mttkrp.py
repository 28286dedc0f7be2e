"""Float64 oracle for MTTKRP: V(i_n, :) = sum over nonzeros x * prod_{m != n} U_m(i_m, :).

Written for clarity, not speed: one serial loop over the nonzeros in file order, each
adding its Khatri-Rao row times x into its output row (and |x| times the rows of |U_m| into
the bound the check scales errors by). Compiled with Numba because at
benchmark sizes (tens of millions of nonzeros) a NumPy formulation takes a minute per
check; the loop itself is the definition.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np


@numba.njit(cache=True)
def _accumulate(coords, values, factors, mode, out, bound):
    rank = out.shape[1]
    term = np.empty(rank)
    size = np.empty(rank)  # |term|: the same product of absolute values
    for j in range(values.size):
        for r in range(rank):
            term[r] = values[j]
            size[r] = abs(values[j])
        for m in range(coords.shape[1]):
            if m != mode:
                u = factors[m]
                k = coords[j, m]
                for r in range(rank):
                    term[r] *= u[k, r]
                    size[r] *= abs(u[k, r])
        i = coords[j, mode]
        for r in range(rank):
            out[i, r] += term[r]
            bound[i, r] += size[r]


def mttkrp_with_bound(coords: np.ndarray, values: np.ndarray, factors: Sequence[np.ndarray],
                      mode: int) -> tuple[np.ndarray, np.ndarray]:
    """(V, bound): V = X_(mode) (Khatri-Rao of the other factors), an (I_mode x R) float64
    array, and the componentwise bound sum |x| prod |U_m| that its rounding errors scale with,
    in one pass.

    ``coords``: (nnz, N) 0-based indices; ``values``: (nnz,); ``factors``: N arrays (I_m x R).
    """
    coords = np.ascontiguousarray(coords, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    factors = tuple(np.ascontiguousarray(u, dtype=np.float64) for u in factors)
    out = np.zeros((factors[mode].shape[0], factors[0].shape[1]))
    bound = np.zeros_like(out)
    _accumulate(coords, values, factors, mode, out, bound)
    return out, bound


def mttkrp(coords: np.ndarray, values: np.ndarray, factors: Sequence[np.ndarray], mode: int,
           absolute: bool = False) -> np.ndarray:
    """V (or, with ``absolute``, its bound sum |x| prod |U_m|): see ``mttkrp_with_bound``."""
    return mttkrp_with_bound(coords, values, factors, mode)[1 if absolute else 0]
