"""The sorted orders the segmented variants (CPU and GPU) share.

Nonzeros are sorted by their output row i_n, and within a row by the index of a *second*
mode: the other mode with the fewest indices, whose runs of equal index are then the
longest, so its factor row is re-read from cache (or kept in registers) across a run.

``slices = (s, rows)`` sorts by *slices* of mode s first (i_s // rows), then as above: all
nonzeros whose mode-s rows lie in one slice come together, so a processor working through
them needs only that slice of U_s, which fits in its shared memory (the GPU variant stages
it there) or, for the second mode, in its L1 cache. The price is more, shorter runs of one
output row: one per slice.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .variant import TensorArrays

KEY_LIMIT = 1 << 62


def second_mode(dims: tuple[int, ...], mode: int) -> int:
    """The other mode with the fewest indices (the first such, on ties)."""
    return min((m for m in range(len(dims)) if m != mode), key=lambda m: (dims[m], m))


def sorted_tensor(xp: ModuleType, tensor: TensorArrays, mode: int,
                  slices: tuple[int, int] | None = None) -> tuple[TensorArrays, Any]:
    """The tensor with nonzeros sorted by (mode-s slice if ``slices``, i_mode, i_second), and
    the permutation applied (``xp``: numpy or cupy)."""
    second = second_mode(tensor.dims, mode)
    key = xp.zeros(tensor.nnz, dtype=xp.int64)
    span = 1  # the key's range so far: a key part is dropped rather than overflow int64
    parts = []
    if slices is not None:
        staged, rows = slices
        parts.append((tensor.idx[staged] // rows, -(-tensor.dims[staged] // rows)))
    parts += [(tensor.idx[mode], tensor.dims[mode]), (tensor.idx[second], tensor.dims[second])]
    for values, size in parts:
        if span * size >= KEY_LIMIT:
            break
        key = key * size + values
        span *= size
    order = xp.argsort(key)  # ties may land in any order
    idx = xp.ascontiguousarray(tensor.idx[:, order])
    return TensorArrays(idx, xp.ascontiguousarray(tensor.values[order]), tensor.dims), order


def row_pairs(xp: ModuleType, ordered: TensorArrays, mode: int) -> int:
    """The distinct (i_mode, i_second) pairs of a tensor sorted by them (or by slices of the second
    mode first, which keeps each pair's nonzeros together): nnz / pairs is how many nonzeros in a row
    share one second-mode factor row."""
    if ordered.nnz == 0:
        return 0
    rows, seconds = ordered.idx[mode], ordered.idx[second_mode(ordered.dims, mode)]
    return 1 + int(xp.count_nonzero((rows[1:] != rows[:-1]) | (seconds[1:] != seconds[:-1])))
