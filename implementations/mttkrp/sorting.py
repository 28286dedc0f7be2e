"""The sorted orders the segmented variants (CPU and GPU) share.

Nonzeros are sorted by their output row i_n, and within a row by the index of a *second*
mode: the other mode with the fewest indices, whose runs of equal index are then the
longest, so its factor row is re-read from cache (or kept in registers) across a run.

``tile`` > 0 sorts by *tiles* of the other modes first (index // tile in each), then as
above: all nonzeros whose other indices fall in one tile come together, so a processor
working through them touches tile x R entries of each other factor, which its cache
keeps, instead of the whole factors (HiCOO's blocking, without its compressed storage).
The price is shorter runs of one output row, hence more atomic flushes on the GPU.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .variant import TensorArrays

KEY_LIMIT = 1 << 62


def second_mode(dims: tuple[int, ...], mode: int) -> int:
    """The other mode with the fewest indices (the first such, on ties)."""
    return min((m for m in range(len(dims)) if m != mode), key=lambda m: (dims[m], m))


def sorted_tensor(xp: ModuleType, tensor: TensorArrays, mode: int, tile: int = 0) -> tuple[TensorArrays, Any]:
    """The tensor with nonzeros sorted by (other-mode tiles if ``tile``, i_mode, i_second), and
    the permutation applied (``xp``: numpy or cupy)."""
    second = second_mode(tensor.dims, mode)
    key = xp.zeros(tensor.nnz, dtype=xp.int64)
    span = 1  # the key's range so far: a key part is dropped rather than overflow int64
    parts = []
    if tile > 0:
        parts += [(tensor.idx[m] // tile, -(-tensor.dims[m] // tile)) for m in range(tensor.order) if m != mode]
    parts += [(tensor.idx[mode], tensor.dims[mode]), (tensor.idx[second], tensor.dims[second])]
    for values, size in parts:
        if span * size >= KEY_LIMIT:
            break
        key = key * size + values
        span *= size
    order = xp.argsort(key)  # ties may land in any order
    idx = xp.ascontiguousarray(tensor.idx[:, order])
    return TensorArrays(idx, xp.ascontiguousarray(tensor.values[order]), tensor.dims), order
