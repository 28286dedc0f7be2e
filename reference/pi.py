"""Float64 oracle for CP-APR's Khatri-Rao rows Π (paper [000]).

For a sparse tensor X (coordinates), a mode n and factors A_1..A_N (I_m x R):

    Π(j, :) = prod_{m != n} A_m(i_m(j), :)        for every nonzero j   (nnz x R)

Written from that definition in plain NumPy, sharing no code with the variants (neither
their index layout nor ``tensor_inputs``' gathers): for each other mode, the rows its
indices pick multiply the running product. Each entry is the product of N - 1 factor entries, rounded N - 2
times whatever the order, which is what Π's check allows for. Nonzeros go in blocks so the
gathered rows add a bounded amount of memory at benchmark sizes (tens of millions of nonzeros).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

BLOCK = 1 << 20  # nonzeros per block: a 10-column gather of 80 MiB


def pi_rows(coords: np.ndarray, factors: Sequence[np.ndarray], mode: int) -> np.ndarray:
    """Π (nnz x R): each nonzero's product of the other modes' factor rows.

    ``coords``: (nnz, N) 0-based indices; ``factors``: N arrays (I_m x R); ``mode``: n.
    """
    coords = np.asarray(coords)
    factors = [np.asarray(u, dtype=np.float64) for u in factors]
    if coords.ndim != 2 or coords.shape[1] != len(factors) or not 0 <= mode < len(factors):
        raise ValueError(f"coords {coords.shape} and {len(factors)} factors do not fit mode {mode}")
    out = np.empty((coords.shape[0], factors[0].shape[1]))  # first touched by the threads, in parallel
    others = [m for m in range(len(factors)) if m != mode]

    def fill(start: int) -> None:
        block = slice(start, start + BLOCK)
        if not others:  # a 1-way tensor: the empty product
            out[block] = 1.0
        for k, m in enumerate(others):
            if k == 0:
                out[block] = factors[m][coords[block, m]]
            else:
                out[block] *= factors[m][coords[block, m]]

    # NumPy's gathers and products release the GIL: blocks on every core (tens of seconds on one
    # core at 77 M nonzeros), each block written by one thread.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(fill, range(0, coords.shape[0], BLOCK)))
    return out
