"""CPU portable: the paper [000]'s Algorithm 4 (SparTen's CPU Φ), race-free without atomics.

The nonzeros are sorted by output row through a permutation P (built once per mode in
``arrange``; x, Π and the indices stay in file order, read through P as in SparTen).
Chunks of V consecutive sorted nonzeros run in parallel (Numba ``prange``); a chunk sums
each of its rows in a local accumulator of R values and writes the rows that lie wholly
inside it with plain stores. Its first and last rows may continue in the neighbouring
chunks: their partial sums go to an edge buffer that one thread adds in afterwards
(paper [000]'s atomics at chunk boundaries; Numba has no CPU atomics).

Launch parameters (the paper's Experiments 3-6): V (``per_thread``; 0: the default rule,
``CHUNKS_PER_THREAD`` chunks per thread) and the thread count (0: Numba's current one, ``numba.get_num_threads()``).
Pressure point: ``reuse`` reads B and Π at row 0 only.
"""

from __future__ import annotations

from typing import Any, Callable

import numba
import numpy as np

from ..backends import HOST
from ..numba_chunks import keep_edges, merge_edges
from ..tensor_inputs import TensorArrays
from .variant import PhiVariant, row_order, thread_count

CHUNKS_PER_THREAD = 4  # default V = nnz / (4 threads): balanced, few edge rows (see the launch sweep)


@numba.njit(inline="always", cache=True)
def nonzero_weight(b, pi, bi, pj, x, epsilon):
    """s = x / max(<B(bi, :), Π(pj, :)>, ε): the weight of one nonzero's Π row (shared by the CPU kernels)."""
    dot = 0.0
    for r in range(pi.shape[1]):
        dot += b[bi, r] * pi[pj, r]
    return x / max(dot, epsilon)


@numba.njit(parallel=True, cache=True)
def _segmented(perm, rows, values, b, pi, epsilon, per_thread, reuse, out, edge_rows, edge_sums):
    nnz, rank = pi.shape[0], out.shape[1]
    chunks = edge_rows.shape[0]
    for i in numba.prange(out.shape[0]):
        out[i, :] = 0.0
    for c in numba.prange(chunks):
        start = c * per_thread
        stop = min(start + per_thread, nnz)
        edge_rows[c, 0] = -1
        edge_rows[c, 1] = -1
        if start >= stop:
            continue
        acc = np.zeros(rank)
        first = rows[perm[start]]
        row = first
        for z in range(start, stop):
            j = perm[z]
            i = rows[j]
            if i != row:
                if row == first:
                    edge_sums[c, 0, :] = acc
                else:
                    out[row, :] = acc  # a row wholly inside this chunk: no other chunk writes it
                acc[:] = 0.0
                row = i
            bi = 0 if reuse else i
            pj = 0 if reuse else j
            s = nonzero_weight(b, pi, bi, pj, values[j], epsilon)
            for r in range(rank):
                acc[r] += s * pi[pj, r]
        keep_edges(edge_rows, edge_sums, c, first, row, acc)
    merge_edges(out, edge_rows, edge_sums)  # rows shared with neighbouring chunks


class PhiNumbaSegmented(PhiVariant):
    name = "numba-segmented"
    family = "portable"
    backend = HOST
    description = "Algorithm 4: Numba prange over chunks of V row-sorted nonzeros (permutation), edge rows merged after"
    perturbations = ("none", "reuse")

    def __init__(self, perturbation: str = "none", per_thread: int = 0, threads: int = 0) -> None:
        super().__init__(perturbation)
        self.per_thread, self.threads = int(per_thread), int(threads)

    def arrange(self, tensor: TensorArrays, mode: int) -> tuple[Any, Any, Any]:
        rows = tensor.idx[mode]
        return row_order(np, rows), rows, tensor.values

    def bind(self, arranged: tuple[Any, Any, Any], b: np.ndarray, pi: np.ndarray, epsilon: float,
             out: np.ndarray, perturbation: str) -> Callable[[], Any]:
        perm, rows, values = arranged
        nnz = values.size
        threads = self.threads or numba.get_num_threads()  # as set now (set_num_threads), not the pool size
        per_thread = self.per_thread or max(1, -(-nnz // (CHUNKS_PER_THREAD * threads)))
        chunks = max(1, -(-nnz // per_thread))
        edge_rows = np.empty((chunks, 2), dtype=np.int64)
        edge_sums = np.empty((chunks, 2, out.shape[1]))
        args = (perm, rows, values, b, pi, float(epsilon), per_thread, perturbation == "reuse", out, edge_rows, edge_sums)

        def call() -> None:
            with thread_count(threads):
                _segmented(*args)

        return call
