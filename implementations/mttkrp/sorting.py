"""The sorted order the segmented variants (CPU and GPU) share.

Nonzeros are sorted by their output row i_n, and within a row by the index of a *second*
mode: the other mode with the fewest indices, whose runs of equal index are then the
longest, so a variant can keep that mode's factor row in registers across a run (the
reuse a CSF tree makes explicit, without building one).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .variant import TensorArrays


def second_mode(dims: tuple[int, ...], mode: int) -> int:
    """The other mode with the fewest indices (the first such, on ties)."""
    return min((m for m in range(len(dims)) if m != mode), key=lambda m: (dims[m], m))


def sorted_tensor(xp: ModuleType, tensor: TensorArrays, mode: int) -> tuple[TensorArrays, Any]:
    """The tensor with nonzeros sorted by (i_mode, i_second), and the permutation applied
    (``xp``: numpy or cupy; the key fits int64 for any int32 mode sizes)."""
    second = second_mode(tensor.dims, mode)
    key = tensor.idx[mode].astype(xp.int64) * tensor.dims[second] + tensor.idx[second]
    order = xp.argsort(key)  # ties (equal rows and second index) may land in any order
    idx = xp.ascontiguousarray(tensor.idx[:, order])
    return TensorArrays(idx, xp.ascontiguousarray(tensor.values[order]), tensor.dims), order
