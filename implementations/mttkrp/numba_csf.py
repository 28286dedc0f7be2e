"""CPU portable: one CSF tree rooted at the output mode, walked fiber by fiber (Numba ``prange``).

**Arrangement** (once per mode, in ``arrange``): the nonzeros sorted by the modes in *level
order*: the output mode first, then the other modes by size, shortest first, so the upper
levels have the fewest nodes (SPLATT's default order). Level l's nodes are the distinct
prefixes (i_level0 .. i_levell) of the sorted nonzeros; each node stores its own index
(``ids[l]``, int32) and the range of its children one level down (``ptr[l]``); the leaves are
the nonzeros (index and value).

**Call**: a node's value is its factor row times the sum of its children's values, a leaf's
x U_leaf(k, :). So a leaf fiber costs one multiply-add of a factor row per nonzero and one
multiply by its parent's row, and each upper node one more row multiply: with fibers of 8
nonzeros (nell-2's modes 0 and 1) the products with the middle mode's rows are done 8x less
often than in the nonzero-by-nonzero formulation. A root slice's sum is V's row, written
once. Numba has no CPU atomics, so threads own rows: the level-1 nodes are cut into chunks of
about equal nonzeros (a few per thread), a chunk writes the slices that lie wholly inside it,
and a slice shared with a neighbouring chunk (lbnl's giant slices span several) leaves its
partial sums in an edge buffer that one thread adds afterwards (``numba_chunks``, as in
``numba-segmented``). Rows no nonzero touches are zeroed; every other row is written once.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..numba_chunks import merge_edges
from ..tensor_inputs import INT32_MAX
from .variant import MttkrpVariant, TensorArrays

CHUNKS_PER_THREAD = 8  # equal-nonzero chunks per thread: slack for slices cut at level-1 nodes
PREFETCH_AHEAD = 16  # leaves: lbnl's leaf factor (868 k rows, 111 MB at R = 16) is read from DRAM
MAX_ORDER = 5


class CsfTree(NamedTuple):
    """A CSF tree of order N rooted at the output mode (level 0 = ``levels[0]``)."""

    levels: tuple[int, ...]  # the mode of each level
    ids: tuple[np.ndarray, ...]  # N arrays: each node's index in its level's mode (the leaves: every nonzero)
    ptr: tuple[np.ndarray, ...]  # N - 1 arrays: node p of level l has children ptr[l][p] .. ptr[l][p+1] - 1
    values: np.ndarray  # the leaves' values
    first_leaf: np.ndarray  # each level-1 node's first leaf, and nnz at the end: the chunks' weights
    empty_rows: np.ndarray  # output rows with no nonzero (zeroed each call)
    rows: int  # I_n


def level_order(dims: tuple[int, ...], mode: int) -> tuple[int, ...]:
    """The output mode, then the others by size, shortest first (ties: the lower mode)."""
    return (mode, *sorted((m for m in range(len(dims)) if m != mode), key=lambda m: (dims[m], m)))


def build_tree(tensor: TensorArrays, mode: int) -> CsfTree:
    """The CSF tree of ``tensor`` for output mode ``mode`` (NumPy: a lexicographic sort, then
    one pass per level to find where each level's prefix changes)."""
    levels = level_order(tensor.dims, mode)
    nnz = tensor.nnz
    pointer = np.int32 if nnz <= INT32_MAX else np.int64
    order = np.lexsort(tensor.idx[list(levels[::-1])])  # the last key sorts first
    sorted_idx = [np.ascontiguousarray(tensor.idx[m][order]) for m in levels]
    new = np.zeros(nnz, dtype=bool)  # a node of the current level starts here
    if nnz:
        new[0] = True
    starts = []  # each internal level's node starts, as leaf positions
    for column in sorted_idx[:-1]:
        new[1:] |= column[1:] != column[:-1]
        starts.append(np.flatnonzero(new))
    starts.append(np.arange(nnz))  # the leaves: every nonzero
    ids = tuple(column[s].astype(np.int32) for column, s in zip(sorted_idx, starts))
    ptr = tuple(np.append(np.searchsorted(below, above), below.size).astype(pointer)
                for above, below in zip(starts[:-1], starts[1:]))
    present = np.zeros(tensor.dims[mode], dtype=bool)
    present[ids[0]] = True
    first_leaf = np.append(starts[1], nnz).astype(np.int64)
    return CsfTree(levels, ids, ptr, np.ascontiguousarray(tensor.values[order]), first_leaf,
                   np.flatnonzero(~present).astype(np.int32), tensor.dims[mode])


def chunk_bounds(first_leaf: np.ndarray, chunks: int) -> np.ndarray:
    """Level-1 node ranges of about nnz / chunks leaves each (``chunks + 1`` bounds, repeats allowed)."""
    nnz = int(first_leaf[-1])
    targets = np.linspace(0, nnz, chunks + 1)
    bounds = np.searchsorted(first_leaf, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, first_leaf.size - 1
    return bounds


@intrinsic
def _prefetch_row(typingctx, matrix, row):
    """Ask the CPU to start loading row ``row`` of a C-contiguous matrix (its first and last
    entries: a row of 16 float64 spans two or three cache lines)."""
    def codegen(context, builder, signature, args):
        matrix_type, row_type = signature.args
        array = context.make_array(matrix_type)(context, builder, args[0])
        index = context.cast(builder, args[1], row_type, types.intp)
        last = builder.sub(builder.extract_value(array.shape, 1), context.get_constant(types.intp, 1))
        i8_pointer, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        prefetch = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8_pointer, i32, i32, i32]), "llvm.prefetch.p0")
        for column in (context.get_constant(types.intp, 0), last):
            pointer = cgutils.get_item_pointer(context, builder, matrix_type, array, [index, column])
            builder.call(prefetch, [builder.bitcast(pointer, i8_pointer), i32(0), i32(3), i32(1)])  # read, keep, data
        return context.get_dummy_value()

    return types.void(matrix, row), codegen


@numba.njit(inline="always", cache=True)
def _leaf_fiber(values, leaf_ids, u_leaf, start, stop, tmp):
    """tmp = sum over leaves start..stop-1 of x U_leaf(k, :), prefetching the rows PREFETCH_AHEAD leaves on."""
    rank = tmp.size
    for r in range(rank):
        tmp[r] = 0.0
    ahead = min(stop + PREFETCH_AHEAD, leaf_ids.size)
    for j in range(start, stop):
        if j + PREFETCH_AHEAD < ahead:
            _prefetch_row(u_leaf, leaf_ids[j + PREFETCH_AHEAD])
        x = values[j]
        k = leaf_ids[j]
        for r in range(rank):
            tmp[r] += x * u_leaf[k, r]


@numba.njit(inline="always", cache=True)
def _add_product(acc, tmp, u, k):
    """acc += tmp * U(k, :): a node's children's sum times its own factor row, into its parent."""
    for r in range(acc.size):
        acc[r] += tmp[r] * u[k, r]


@numba.njit(inline="always", cache=True)
def _subtrees(order, ids, ptr, values, factors, lo, hi, acc):
    """acc[0] = the sum of the values of level-1 nodes lo..hi-1 (acc[l]: a level-l node's
    children's sum; acc[order - 1]: a leaf fiber's). One loop nest per order."""
    acc[0, :] = 0.0
    leaf = order - 1
    tmp = acc[leaf]
    for n1 in range(lo, hi):
        if order == 3:
            _leaf_fiber(values, ids[2], factors[2], ptr[1][n1], ptr[1][n1 + 1], tmp)
            _add_product(acc[0], tmp, factors[1], ids[1][n1])
            continue
        acc[1, :] = 0.0
        for n2 in range(ptr[1][n1], ptr[1][n1 + 1]):
            if order == 4:
                _leaf_fiber(values, ids[3], factors[3], ptr[2][n2], ptr[2][n2 + 1], tmp)
                _add_product(acc[1], tmp, factors[2], ids[2][n2])
                continue
            acc[2, :] = 0.0
            for n3 in range(ptr[2][n2], ptr[2][n2 + 1]):
                _leaf_fiber(values, ids[4], factors[4], ptr[3][n3], ptr[3][n3 + 1], tmp)
                _add_product(acc[2], tmp, factors[3], ids[3][n3])
            _add_product(acc[1], acc[2], factors[2], ids[2][n2])
        _add_product(acc[0], acc[1], factors[1], ids[1][n1])


@numba.njit(parallel=True, cache=True)
def _csf(order, ids, ptr, values, factors, bounds, first_slice, empty_rows, out, edge_rows, edge_sums):
    rank = out.shape[1]
    root_ptr = ptr[0]
    slices = root_ptr.size - 1
    for e in numba.prange(empty_rows.size):
        out[empty_rows[e], :] = 0.0
    for c in numba.prange(bounds.size - 1):
        a, b = bounds[c], bounds[c + 1]
        edge_rows[c, 0] = -1
        edge_rows[c, 1] = -1
        acc = np.empty((order, rank))
        s = first_slice[c]
        while a < b and s < slices and root_ptr[s] < b:
            _subtrees(order, ids, ptr, values, factors, max(root_ptr[s], a), min(root_ptr[s + 1], b), acc)
            row = ids[0][s]
            if root_ptr[s] >= a and root_ptr[s + 1] <= b:
                out[row, :] = acc[0]  # a slice wholly inside this chunk: no other thread writes its row
            else:  # shared with a neighbour: its first (or only) slice, else its last
                e = 0 if root_ptr[s] < a else 1
                edge_rows[c, e] = row
                edge_sums[c, e, :] = acc[0]
            s += 1
    for c in range(edge_rows.shape[0]):  # shared rows start from zero, then take every chunk's part
        for e in range(2):
            if edge_rows[c, e] >= 0:
                out[edge_rows[c, e], :] = 0.0


class NumbaCsf(MttkrpVariant):
    name = "numba-csf"
    family = "portable"
    device = "cpu"
    description = "Numba prange over chunks of a CSF tree rooted at the output mode, fiber-factored, edge slices merged"

    @classmethod
    def unavailable(cls) -> str | None:
        return None

    def arrange(self, tensor: TensorArrays, mode: int, rank: int) -> CsfTree:
        return build_tree(tensor, mode)

    def bind(self, arranged: CsfTree, factors: list[np.ndarray], out: np.ndarray) -> Callable[[], Any]:
        tree = arranged
        chunks = max(1, CHUNKS_PER_THREAD * numba.get_num_threads())
        bounds = chunk_bounds(tree.first_leaf, chunks)
        first_slice = (np.searchsorted(tree.ptr[0], bounds[:-1], side="right") - 1).astype(np.int64)
        edge_rows = np.empty((chunks, 2), dtype=np.int64)
        edge_sums = np.empty((chunks, 2, out.shape[1]))
        # Every order runs one compiled kernel: tuples padded to order 5 (the walk never reads the padding).
        pad = MAX_ORDER - len(tree.levels)
        ids = tree.ids + (tree.ids[-1],) * pad
        ptr = tree.ptr + (tree.ptr[-1],) * pad
        level_factors = tuple(factors[m] for m in tree.levels) + (factors[0],) * pad
        args = (len(tree.levels), ids, ptr, tree.values, level_factors, bounds, first_slice, tree.empty_rows, out,
                edge_rows, edge_sums)

        def call() -> None:
            _csf(*args)
            merge_edges(out, edge_rows, edge_sums)

        return call
