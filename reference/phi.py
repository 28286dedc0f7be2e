"""Float64 oracles for CP-APR's multiplicative-update kernels Π and Φ (seed 000).

For a sparse tensor X (coordinates, values), a mode n and factors A_1..A_N (I_m x R):

- Π (nnz x R): Π(j, :) = prod_{m != n} A_m(i_m, :) for nonzero j;
- Φ (I_n x R): for each nonzero j of row i = i_n,
  s_j = x_j / max(<B(i, :), Π(j, :)>, ε) and Φ(i, :) += s_j Π(j, :).

Written for clarity, not speed: loops over the nonzeros in file order, compiled with
Numba because a check at benchmark sizes (tens of millions of nonzeros) would take
minutes in Python; the loops themselves are the definition. Π's rows are independent, so
its loop runs in parallel (same result; every benchmark setup builds Π); Φ's stays serial.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np


@numba.njit(cache=True, parallel=True)
def _pi(coords, factors, mode, out):
    rank = out.shape[1]
    for j in numba.prange(out.shape[0]):
        for r in range(rank):
            out[j, r] = 1.0
        for m in range(coords.shape[1]):
            if m != mode:
                u = factors[m]
                k = coords[j, m]
                for r in range(rank):
                    out[j, r] *= u[k, r]


@numba.njit(cache=True)
def _phi(rows, values, b, pi, epsilon, absolute, out):
    rank = out.shape[1]
    for j in range(values.size):
        i = rows[j]
        dot = 0.0
        for r in range(rank):
            dot += b[i, r] * pi[j, r]
        s = values[j] / max(dot, epsilon)
        if absolute:
            s = abs(s)
        for r in range(rank):
            out[i, r] += s * (abs(pi[j, r]) if absolute else pi[j, r])


def pi_rows(coords: np.ndarray, factors: Sequence[np.ndarray], mode: int) -> np.ndarray:
    """Π (nnz x R): each nonzero's product of the other modes' factor rows.

    ``coords``: (nnz, N) 0-based indices; ``factors``: N arrays (I_m x R).
    """
    coords = np.ascontiguousarray(coords, dtype=np.int64)
    factors = tuple(np.ascontiguousarray(u, dtype=np.float64) for u in factors)
    out = np.empty((coords.shape[0], factors[0].shape[1]))
    _pi(coords, factors, mode, out)
    return out


def phi(rows: np.ndarray, values: np.ndarray, b: np.ndarray, pi: np.ndarray, epsilon: float,
        absolute: bool = False) -> np.ndarray:
    """Φ (I_n x R, I_n = ``b.shape[0]``) from each nonzero's output row ``rows`` (its mode-n
    index), ``values``, B and Π. With ``absolute``, each term counts by its absolute value
    (|s_j| |Π(j, :)|): the componentwise bound that rounding errors scale with."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    pi = np.ascontiguousarray(pi, dtype=np.float64)
    out = np.zeros(b.shape)
    _phi(rows, values, b, pi, float(epsilon), bool(absolute), out)
    return out
