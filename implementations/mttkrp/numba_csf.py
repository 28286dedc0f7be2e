"""CPU portable: one CSF tree rooted at the output mode, walked fiber by fiber (Numba ``prange``).

**Arrangement** (once per mode, in ``arrange``): the nonzeros sorted by the modes in *level
order*: the output mode first, then the other modes by size, shortest first, so the upper
levels have the fewest nodes (SPLATT's default order). Level l's nodes are the distinct
prefixes (i_level0 .. i_levell) of the sorted nonzeros; each node stores its own index
(``ids[l]``, int32) and the range of its children one level down (``ptr[l]``); the leaves are
the nonzeros (index and value). Where the fibers average fewer than PAIR_BELOW leaves (nell-2's
mode 2: 1.17; lbnl's mode 4) factoring saves nothing and costs a pass per fiber, so the last
two levels are both kept per leaf ("paired": a leaf is x U_a(a, :) U_b(b, :)).

**Call**: a node's value is its factor row times the sum of its children's values, a leaf's
x U_leaf(k, :). So a leaf fiber costs one multiply-add of a factor row per nonzero and one
multiply by its parent's row, and each upper node one more row multiply: with fibers of 8
nonzeros (nell-2's modes 0 and 1) the products with the middle mode's rows are done 8x less
often than in the nonzero-by-nonzero formulation. A fiber's sum is kept in vector registers
(``numba_rows``: LLVM's own vectorization of the rank loop left a rank of 16 to its remainder
loop). A root slice's sum is V's row, written once. Numba has no CPU atomics, so threads own
rows: the level-1 nodes are cut into chunks of about equal nonzeros (a few per thread), a chunk
writes the slices that lie wholly inside it, and a slice shared with a neighbouring chunk
(lbnl's giant slices span several) leaves its partial sums in an edge buffer that one thread
adds afterwards (``numba_chunks``, as in ``numba-segmented``). Rows no nonzero touches are
zeroed; every other row is written once. The leaf rows are prefetched PREFETCH_AHEAD leaves
ahead: lbnl's leaf factor (868 k rows) is read from DRAM, and the walk's branches keep the CPU
from running far enough ahead by itself.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numba
import numpy as np

from ..backends import HOST
from ..numba_chunks import merge_edges
from ..tensor_inputs import INT32_MAX, order_unsupported
from .numba_rows import close_row1, close_row8, close_row16, fiber_sum1, fiber_sum8, fiber_sum16, prefetch_row
from .variant import MttkrpVariant, TensorArrays

CHUNKS_PER_THREAD = 8  # equal-nonzero chunks per thread: slack for slices cut at level-1 nodes
PREFETCH_AHEAD = 16  # leaves: lbnl's leaf factor (868 k rows, 111 MB at R = 16) is read from DRAM
PREFETCH_ABOVE = 8 << 20  # bytes of leaf factor: smaller ones stay in cache and prefetching only costs
PAIR_BELOW = 2.0  # leaves per fiber, on average, below which the last two levels stay leaf levels
MAX_ORDER = 5
KEY_LIMIT = 1 << 62


class CsfTree(NamedTuple):
    """A CSF tree of order N rooted at the output mode (level 0 = ``levels[0]``)."""

    levels: tuple[int, ...]  # the mode of each level
    ids: tuple[np.ndarray, ...]  # N arrays: each node's index in its level's mode (leaf levels: every nonzero)
    ptr: tuple[np.ndarray, ...]  # ``depth`` arrays: node p of level l has children ptr[l][p] .. ptr[l][p+1] - 1
    depth: int  # levels with nodes, the root's included: N - 1, or N - 2 if ``paired``
    paired: bool  # the last two levels are both leaf levels (fibers too short to factor)
    values: np.ndarray  # the leaves' values
    first_leaf: np.ndarray  # each level-1 node's first leaf, and nnz at the end: the chunks' weights
    empty_rows: np.ndarray  # output rows with no nonzero (zeroed each call)


def level_order(dims: tuple[int, ...], mode: int) -> tuple[int, ...]:
    """The output mode, then the others by size, shortest first (ties: the lower mode)."""
    return (mode, *sorted((m for m in range(len(dims)) if m != mode), key=lambda m: (dims[m], m)))


def lexicographic_order(tensor: TensorArrays, levels: tuple[int, ...]) -> np.ndarray:
    """The permutation sorting the nonzeros by (i_levels[0], i_levels[1], ...): the levels packed
    into as few int64 keys as hold them (nell-2: one argsort; lbnl: a lexsort of two keys)."""
    keys, key, span = [], None, 1
    for m in levels:
        size = tensor.dims[m]
        if key is not None and span * size >= KEY_LIMIT:
            keys.append(key)
            key, span = None, 1
        column = tensor.idx[m].astype(np.int64)
        key = column if key is None else key * size + column
        span *= size
    keys.append(key)
    return np.argsort(keys[0]) if len(keys) == 1 else np.lexsort(keys[::-1])  # lexsort: the last key sorts first


def build_tree(tensor: TensorArrays, mode: int) -> CsfTree:
    """The CSF tree of ``tensor`` for output mode ``mode`` (NumPy: a lexicographic sort, then
    one pass per level to find where each level's prefix changes)."""
    levels = level_order(tensor.dims, mode)
    nnz = tensor.nnz
    pointer = np.int32 if nnz <= INT32_MAX else np.int64
    order = lexicographic_order(tensor, levels)
    sorted_idx = [tensor.idx[m][order] for m in levels]
    new = np.zeros(nnz, dtype=bool)  # a node of the current level starts here
    new[:1] = True
    starts = []  # each internal level's node starts, as leaf positions
    for column in sorted_idx[:-1]:
        new[1:] |= column[1:] != column[:-1]
        starts.append(np.flatnonzero(new))
    every = np.arange(nnz)
    paired = nnz < PAIR_BELOW * starts[-1].size  # fibers too short to be worth a factored row
    if paired:
        starts[-1] = every
    starts.append(every)  # the leaves
    depth = len(levels) - 1 - int(paired)
    ids = tuple(column[s].astype(np.int32) for column, s in zip(sorted_idx, starts))
    ptr = tuple(np.append(np.searchsorted(starts[l + 1], starts[l]), starts[l + 1].size).astype(pointer)
                for l in range(depth))
    present = np.zeros(tensor.dims[mode], dtype=bool)
    present[ids[0]] = True
    return CsfTree(levels, ids, ptr, depth, paired, np.ascontiguousarray(tensor.values[order]),
                   np.append(starts[1], nnz).astype(np.int64), np.flatnonzero(~present).astype(np.int32))


def chunk_bounds(first_leaf: np.ndarray, chunks: int) -> np.ndarray:
    """Level-1 node ranges of about nnz / chunks leaves each (``chunks + 1`` bounds, repeats allowed)."""
    nnz = int(first_leaf[-1])
    targets = np.linspace(0, nnz, chunks + 1)
    bounds = np.searchsorted(first_leaf, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, first_leaf.size - 1
    return bounds


@numba.njit(inline="always", cache=True)
def _fiber(values, leaf_ids, u_leaf, paired, pair_ids, u_pair, start, stop, u, k, acc, parent, prefetch):
    """acc[parent] += (sum over leaves start..stop-1 of x U_leaf(b, :) [U_pair(a, :) if ``paired``])
    * U(k, :) (no last factor if k < 0): one fiber into its parent's sum, its columns summed in
    vector registers 16 or 8 at a time (``numba_rows``), prefetching the leaf rows PREFETCH_AHEAD
    leaves on. The rest of a rank that is not a multiple of 8 goes one column at a time through the
    same code: a scalar loop over ``acc`` in this function, even one never run, slowed the whole walk
    (EXPERIMENTS.md)."""
    rank = u_leaf.shape[1]
    if prefetch and stop + PREFETCH_AHEAD <= leaf_ids.size:
        for j in range(start, stop):
            prefetch_row(u_leaf, leaf_ids[j + PREFETCH_AHEAD])
    c = 0
    while c + 16 <= rank:
        fiber_sum16(paired, values, leaf_ids, u_leaf, pair_ids, u_pair, start, stop, u, k, acc, parent, c)
        c += 16
    if c + 8 <= rank:
        fiber_sum8(paired, values, leaf_ids, u_leaf, pair_ids, u_pair, start, stop, u, k, acc, parent, c)
        c += 8
    while c < rank:  # a rank that is not a multiple of 8: the rest one column at a time
        fiber_sum1(paired, values, leaf_ids, u_leaf, pair_ids, u_pair, start, stop, u, k, acc, parent, c)
        c += 1


@numba.njit(inline="always", cache=True)
def _close(acc, level, u, k):
    """acc[level - 1] += acc[level] * U(k, :): a finished node's children's sum times its own row,
    into its parent's; acc[level] starts again from zero."""
    rank, c = u.shape[1], 0
    while c + 16 <= rank:
        close_row16(acc, level, u, k, c)
        c += 16
    if c + 8 <= rank:
        close_row8(acc, level, u, k, c)
        c += 8
    while c < rank:
        close_row1(acc, level, u, k, c)
        c += 1


@numba.njit(inline="always", cache=True)
def _subtrees(depth, paired, values, leaf_ids, u_leaf, pair_ids, u_pair, ids1, ids2, ids3, ptr1, ptr2, ptr3,
              u1, u2, u3, lo, hi, acc, prefetch):
    """acc[0] += the values of level-1 nodes lo..hi-1 of a tree of ``depth`` node levels (acc[l]: a
    level-l node's children's sum, zero on entry and exit). One loop nest per
    depth; the leaves (level ``depth``, and ``depth + 1`` if ``paired``) hang under level depth - 1.
    Arrays come in one by one, taken out of their tuples once per call of ``_csf``: taking an array
    out of a tuple updates its shared reference count, and two threads doing so per node take turns
    owning that count's cache line (EXPERIMENTS.md)."""
    if depth == 1:  # leaves right under the root
        _fiber(values, leaf_ids, u_leaf, paired, pair_ids, u_pair, lo, hi, u1, -1, acc, 0, prefetch)
        return
    for n1 in range(lo, hi):
        if depth == 2:
            _fiber(values, leaf_ids, u_leaf, paired, pair_ids, u_pair, ptr1[n1], ptr1[n1 + 1], u1, ids1[n1], acc, 0, prefetch)
            continue
        for n2 in range(ptr1[n1], ptr1[n1 + 1]):
            if depth == 3:
                _fiber(values, leaf_ids, u_leaf, paired, pair_ids, u_pair, ptr2[n2], ptr2[n2 + 1], u2, ids2[n2], acc, 1, prefetch)
                continue
            for n3 in range(ptr2[n2], ptr2[n2 + 1]):
                _fiber(values, leaf_ids, u_leaf, paired, pair_ids, u_pair, ptr3[n3], ptr3[n3 + 1], u3, ids3[n3], acc, 2, prefetch)
            _close(acc, 2, u2, ids2[n2])
        _close(acc, 1, u1, ids1[n1])


@numba.njit(parallel=True, cache=True)
def _zero_rows(out, rows):
    for e in numba.prange(rows.size):
        out[rows[e], :] = 0.0


@numba.njit(parallel=True, cache=True)
def _csf(depth, paired, prefetch, ids, ptr, values, factors, bounds, first_slice, out, edge_rows, edge_sums, scratch):
    rank = out.shape[1]
    root_ptr, root_ids = ptr[0], ids[0]
    slices = root_ptr.size - 1
    last = MAX_ORDER - 1
    leaf_ids, u_leaf = ids[depth], factors[depth]
    pair_ids, u_pair = ids[min(depth + 1, last)], factors[min(depth + 1, last)]
    if paired:  # the last level's rows vary fastest: prefetch those
        leaf_ids, u_leaf, pair_ids, u_pair = pair_ids, u_pair, leaf_ids, u_leaf
    ids1, ids2, ids3 = ids[1], ids[2], ids[3]
    ptr1, ptr2, ptr3 = ptr[1], ptr[2], ptr[3]
    u1, u2, u3 = factors[1], factors[2], factors[3]
    for c in numba.prange(bounds.size - 1):
        a, b = bounds[c], bounds[c + 1]
        edge_rows[c, 0] = -1
        edge_rows[c, 1] = -1
        acc = scratch[c]
        acc[:, :] = 0.0
        s = first_slice[c]
        while a < b and s < slices and root_ptr[s] < b:
            _subtrees(depth, paired, values, leaf_ids, u_leaf, pair_ids, u_pair, ids1, ids2, ids3, ptr1, ptr2, ptr3,
                      u1, u2, u3, max(root_ptr[s], a), min(root_ptr[s + 1], b), acc, prefetch)
            row = root_ids[s]
            if root_ptr[s] >= a and root_ptr[s + 1] <= b:  # wholly inside this chunk: no other thread writes it
                for r in range(rank):
                    out[row, r] = acc[0, r]
                    acc[0, r] = 0.0
            else:  # shared with a neighbour: its first (or only) slice, else its last
                e = 0 if root_ptr[s] < a else 1
                edge_rows[c, e] = row
                for r in range(rank):
                    edge_sums[c, e, r] = acc[0, r]
                    acc[0, r] = 0.0
            s += 1
    for c in range(edge_rows.shape[0]):  # shared rows start from zero, then take every chunk's part
        for e in range(2):
            if edge_rows[c, e] >= 0:
                out[edge_rows[c, e], :] = 0.0


class NumbaCsf(MttkrpVariant):
    name = "numba-csf"
    family = "portable"
    backend = HOST
    description = "Numba prange over chunks of a CSF tree rooted at the output mode, fiber-factored, edge slices merged"

    def supports(self, problem: Any) -> str | None:
        return order_unsupported(problem.order, MAX_ORDER)  # the compiled walk has MAX_ORDER levels

    def arrange(self, tensor: TensorArrays, mode: int, rank: int) -> CsfTree:
        return build_tree(tensor, mode)

    def bind(self, arranged: CsfTree, factors: list[np.ndarray], out: np.ndarray) -> Callable[[], Any]:
        tree = arranged
        chunks = max(1, CHUNKS_PER_THREAD * numba.get_num_threads())
        bounds = chunk_bounds(tree.first_leaf, chunks)
        first_slice = (np.searchsorted(tree.ptr[0], bounds[:-1], side="right") - 1).astype(np.int64)
        edge_rows = np.empty((chunks, 2), dtype=np.int64)
        edge_sums = np.empty((chunks, 2, out.shape[1]))
        # Each chunk's sums in its own cache lines: rows padded to 64 bytes and a spare row between
        # chunks (small arrays allocated inside the kernel could share a line between the threads,
        # which then take turns owning it; EXPERIMENTS.md).
        scratch = np.zeros((chunks, MAX_ORDER, -(-out.shape[1] // 8) * 8))  # sums of levels 0-3, spare row
        # Every order runs one compiled kernel: tuples padded to order 5 (the walk never reads the padding).
        pad = MAX_ORDER - len(tree.levels)
        ids = tree.ids + (tree.ids[-1],) * pad
        ptr = tree.ptr + (tree.ptr[-1],) * (MAX_ORDER - 1 - tree.depth)
        level_factors = tuple(factors[m] for m in tree.levels) + (factors[0],) * pad
        prefetch = factors[tree.levels[-1]].nbytes > PREFETCH_ABOVE  # the leaf level's factor (paired or not)
        args = (tree.depth, tree.paired, prefetch, ids, ptr, tree.values, level_factors, bounds, first_slice, out,
                edge_rows, edge_sums, scratch)

        def call() -> None:
            if tree.empty_rows.size:
                _zero_rows(out, tree.empty_rows)
            _csf(*args)
            merge_edges(out, edge_rows, edge_sums)

        return call
