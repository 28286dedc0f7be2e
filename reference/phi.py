"""Float64 oracle for CP-APR's multiplicative-update kernel Φ (paper [000]).

For a sparse tensor X (coordinates, values), a mode n, B (I_n x R) and the Khatri-Rao rows
Π (nnz x R, ``reference.pi.pi_rows``): for each nonzero j of row i = i_n,
s_j = x_j / max(<B(i, :), Π(j, :)>, ε) and Φ(i, :) += s_j Π(j, :).

Written for clarity, not speed: a loop over the nonzeros in file order, compiled with
Numba because a check at benchmark sizes (tens of millions of nonzeros) would take
minutes in Python; the loop itself is the definition, serial so the sum order is the file's.
"""

from __future__ import annotations

import numba
import numpy as np


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
