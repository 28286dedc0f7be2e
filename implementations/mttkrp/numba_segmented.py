"""CPU portable: the sorted, segmented algorithm (Numba ``prange``, no atomics).

Numba has no CPU atomics, so threads must own their output rows. The nonzeros, sorted
by output row (``sorting.py``), are cut into equal chunks, several per thread; a chunk
sums each of its rows in a local accumulator and writes the rows that lie wholly inside
it with plain stores. Its first and last rows may continue in the neighbouring chunks:
their partial sums go to a small edge buffer that one thread adds in afterwards (the seed
000's Algorithm 4). Equal chunks, not chunks cut at row boundaries, keep the threads
balanced when one row holds half the nonzeros (lbnl). A 3-way tensor's two factor rows are
read in place; for higher orders the second mode's row stays in a local array while its
index repeats.
"""

from __future__ import annotations

from typing import Any, Callable

import numba
import numpy as np

from ..backends import HOST
from ..numba_chunks import keep_edges, merge_edges
from .sorting import second_mode, sorted_tensor
from .variant import MttkrpVariant, TensorArrays

CHUNKS_PER_THREAD = 4


@numba.njit(parallel=True, cache=True)
def _segmented(idx, values, factors, mode, second, bounds, out, edge_rows, edge_sums):
    order = idx.shape[0]
    rank = out.shape[1]
    for i in numba.prange(out.shape[0]):
        out[i, :] = 0.0
    for c in numba.prange(bounds.size - 1):
        start, stop = bounds[c], bounds[c + 1]
        edge_rows[c, 0] = -1
        edge_rows[c, 1] = -1
        if start == stop:
            continue
        first = idx[mode, start]
        third = 3 - mode - second  # the remaining mode of a 3-way tensor
        acc = np.zeros(rank)
        term = np.empty(rank)
        kept = np.empty(rank)
        kept_index = -1
        row = first
        for j in range(start, stop):
            i = idx[mode, j]
            if i != row:
                if row == first:
                    edge_sums[c, 0, :] = acc
                else:
                    out[row, :] = acc  # a row wholly inside this chunk: no other thread writes it
                acc[:] = 0.0
                row = i
            x = values[j]
            if order == 3:  # two factor rows, read in place: no temporaries
                u, v = factors[second], factors[third]
                ka, kb = idx[second, j], idx[third, j]
                for r in range(rank):
                    acc[r] += x * u[ka, r] * v[kb, r]
                continue
            a = idx[second, j]
            if a != kept_index:
                kept[:] = factors[second][a, :]
                kept_index = a
            for r in range(rank):
                term[r] = x * kept[r]
            for m in range(order):
                if m != mode and m != second:
                    u = factors[m]
                    k = idx[m, j]
                    for r in range(rank):
                        term[r] *= u[k, r]
            for r in range(rank):
                acc[r] += term[r]
        keep_edges(edge_rows, edge_sums, c, first, row, acc)
    merge_edges(out, edge_rows, edge_sums)  # rows shared with neighbouring chunks


class MttkrpNumbaSegmented(MttkrpVariant):
    name = "numba-segmented"
    family = "portable"
    backend = HOST
    description = "Numba prange over equal chunks of row-sorted nonzeros, plain writes, edge rows merged after"

    def arrange(self, tensor: TensorArrays, mode: int, rank: int) -> tuple[TensorArrays, int, int]:
        ordered, _ = sorted_tensor(np, tensor, mode)
        return ordered, mode, second_mode(tensor.dims, mode)

    def bind(self, arranged: tuple[TensorArrays, int, int], factors: list[np.ndarray],
             out: np.ndarray) -> Callable[[], Any]:
        tensor, mode, second = arranged
        chunks = max(1, min(tensor.nnz, CHUNKS_PER_THREAD * numba.get_num_threads()))
        bounds = np.linspace(0, tensor.nnz, chunks + 1).astype(np.int64)
        edge_rows = np.empty((chunks, 2), dtype=np.int64)
        edge_sums = np.empty((chunks, 2, out.shape[1]))
        args = (tensor.idx, tensor.values, tuple(factors), mode, second, bounds, out, edge_rows, edge_sums)
        return lambda: _segmented(*args)
