"""What every BCSR SpMV variant shares: the matrix in, one bound call, y out.

A variant implements ``bind(matrix, x, y)``: it converts the ``BlockMatrix`` to its own
storage (block order within blocks, padding, CSR, a library handle) and moves it to its
device, all untimed, and returns a zero-argument call that computes A x and returns the
array holding it (``y``, which it overwrites, or a new array; at least n entries). ``x``
is the padded x (zeros past n) and ``y`` the padded output, both on the variant's device;
``y`` is poisoned with NaN before the check run, so an entry a variant forgets fails.

``prepare`` binds, runs once (compilation, first launch and first touch are never timed),
then poisons ``y`` again.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Callable, ClassVar

import numpy as np

from portabench.datasets.matrices import BlockMatrix

from ..gpu import WARP_SHUFFLE, CupyArrays, templated_kernel
from ..model import BoundVariant, PortabenchError
from .definition import INT32_MAX, MAX_BS, MAX_SPAN, BcsrProblem, column_span, fits_csr16


def block_arrays(matrix: BlockMatrix, order: str = "row") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row_ptr, col_idx) as int32 and the blocks (nnzb x bs x bs) as new contiguous arrays;
    ``order="column"`` stores each block column by column (``val[k, c, r]``, the paper's layout)."""
    bsr = matrix.bsr
    blocks = bsr.data[: matrix.nnzb]
    if order == "column":
        blocks = blocks.transpose(0, 2, 1)
    elif order != "row":
        raise ValueError(f"order must be 'row' or 'column', not {order!r}")
    return (bsr.indptr.astype(np.int32), bsr.indices[: matrix.nnzb].astype(np.int32),
            np.array(blocks, dtype=np.float64, order="C"))


def csr_arrays(matrix: BlockMatrix, ptr_dtype: type = np.int32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The true nonzeros (``BlockMatrix.to_csr``) as (row_ptr, col_idx int32, values float64), new
    contiguous arrays; ``ptr_dtype`` int64 where the nonzeros may pass 2^31."""
    csr = matrix.to_csr()
    return (csr.indptr.astype(ptr_dtype), csr.indices.astype(np.int32),
            np.ascontiguousarray(csr.data, dtype=np.float64))


def csr16_arrays(matrix: BlockMatrix, ptr_dtype: type = np.int32) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """CSR16, CSR with 2-byte column offsets: (row_ptr ``ptr_dtype``, each row's first column int32,
    the offsets from it uint16, values float64). 10 bytes a nonzero and 4 a row, against CSR's 12 a
    nonzero: the index compression of Kourtis, Goumas and Koziris, "Optimizing sparse matrix-vector
    multiplication using index and value compression" (ACM Computing Frontiers 2008), without their
    delta coding. It takes rows within 65536 columns (meshes numbered by neighbourhood: all six
    stand-ins)."""
    row_ptr, col, val = csr_arrays(matrix, ptr_dtype)
    return (row_ptr, *offsets16(row_ptr, col), val)


def offsets16(row_ptr: np.ndarray, col: np.ndarray, unit: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Each row's first column (int32; 0 for an empty row) and every entry's offset from it (uint16),
    for the rows of ``row_ptr`` over ``col``; ``unit`` ("block ") names what a row and column are in
    the error of a row wider than 65536 columns."""
    lengths = np.diff(row_ptr)
    base = np.zeros(lengths.size, dtype=np.int32)
    filled = lengths > 0
    if col.size:
        base[filled] = np.minimum.reduceat(col, row_ptr[:-1][filled])
    offsets = col - np.repeat(base, lengths)
    if offsets.size and int(offsets.max()) >= MAX_SPAN:
        raise PortabenchError(f"a {unit}row covers {int(offsets.max()) + 1} {unit}columns; "
                              f"2-byte offsets take {MAX_SPAN}")
    return base, offsets.astype(np.uint16)


def csr16_limit(problem: BcsrProblem) -> str | None:
    """Why CSR16 cannot take this matrix (a block row wider than its offsets reach), or None."""
    span = column_span(problem.matrix)
    return None if fits_csr16(span) else f"rows within {MAX_SPAN} columns (2-byte offsets); a block row here covers {span}"


def balanced_bounds(row_ptr: np.ndarray, parts: int) -> np.ndarray:
    """Block-row boundaries (int64, first 0, last the block rows) cutting the blocks into
    at most ``parts`` pieces of about equal count: threads then get equal bytes, not equal
    block rows (block rows differ in length). The tensor kernels' split of rows by their
    nonzeros (``tensor_kernel.balanced_bounds``), without empty pieces: a matrix without
    blocks is one piece (none without block rows)."""
    from ..tensor_kernel import balanced_bounds as even_shares  # here: the tensor inputs load with it

    block_rows = row_ptr.size - 1
    if not row_ptr[-1]:
        return np.unique(np.array([0, block_rows], dtype=np.int64))
    return np.unique(even_shares(np.diff(row_ptr), max(1, parts)))


def csr_index_limit(problem: BcsrProblem) -> str | None:
    """Why a GPU CSR variant (32-bit indices, as cupyx's) cannot take this matrix, or None: it
    counts the blocks' stored entries, an upper bound on the true nonzeros."""
    entries = problem.matrix.nnzb * problem.bs**2
    if entries > INT32_MAX:
        return f"up to {INT32_MAX} CSR entries (32-bit indices); the blocks hold {entries}"
    return None


class BcsrVariant(BoundVariant):
    """A variant implements ``bind``; arrays live wherever ``to_device`` puts them."""

    kernel = "bcsr"
    max_bs: ClassVar[int] = MAX_BS  # the largest block size the algorithm handles

    def supports(self, problem: BcsrProblem) -> str | None:
        if problem.bs > self.max_bs:
            return f"block sizes up to {self.max_bs} only (this matrix has {problem.bs})"
        return None

    @abstractmethod
    def bind(self, matrix: BlockMatrix, x: Any, y: Any) -> Callable[[], Any]:
        """A zero-argument call computing A x into ``y`` (or a new array) and returning it."""

    def prepare(self, problem: BcsrProblem) -> None:
        matrix = problem.matrix
        self._n = matrix.n
        x = self.to_device(problem.x_padded)
        y = self.full(matrix.n_padded, np.nan)
        self._call = self.bind(matrix, x, y)
        self._call()  # compile, load, launch and touch once: no first-call cost is timed
        self.synchronize()
        y.fill(np.nan)
        self._result = y
        self.synchronize()

    def output(self) -> np.ndarray:
        return self.to_host(self._result)[: self._n]


class CupyBcsrVariant(CupyArrays, BcsrVariant):
    """A GPU variant through CuPy: arrays in device memory, runs synchronised."""


# Shared by the CuPy kernels: 32-lane shuffles and read-once loads (CUDA's and HIP's
# spellings) and the sum of each block row's partial sums across a warp.
CUDA_COMMON = WARP_SHUFFLE + r"""
#define PB_LANES 32
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#define PB_SHFL_FROM(mask, v, lane) __shfl((v), (lane), PB_LANES)
#define PB_SYNC_GROUP(mask) __builtin_amdgcn_wave_barrier()
#define PB_LOAD_ONCE(p) __builtin_nontemporal_load(p)
#define PB_LOAD2_ONCE(p) make_double2(__builtin_nontemporal_load(p), __builtin_nontemporal_load((p) + 1))
#else
#define PB_SHFL_FROM(mask, v, lane) __shfl_sync((mask), (v), (lane), PB_LANES)
#define PB_SYNC_GROUP(mask) __syncwarp(mask)
#define PB_LOAD_ONCE(p) __ldcs(p)  // streamed: evict-first, so x keeps its place in the caches
#define PB_LOAD2_ONCE(p) __ldcs(reinterpret_cast<const double2*>(p))  // two doubles, p 16-byte aligned
#endif

// The smallest power of two >= k.
__host__ __device__ constexpr int pb_pow2_ceil(int k) { return k <= 1 ? 1 : 2 * pb_pow2_ceil((k + 1) / 2); }

// Lane row + q BS (q < K) holds a partial sum of row `row`; afterwards lane row (< BS) holds
// the row's total. A tree over q; every lane of the warp must call it.
template <int BS, int K>
__device__ __forceinline__ double pb_sum_rows(double v, int lane) {
#pragma unroll
    for (int s = pb_pow2_ceil(K) / 2; s >= 1; s /= 2) {
        const double other = PB_SHFL_DOWN(v, s * BS, PB_LANES);
        if (lane + s * BS < K * BS) v += other;
    }
    return v;
}
"""

THREADS_PER_BLOCK = 256


def block_threads(name: str, threads: Any) -> int:
    """``threads`` per block of a CUDA kernel, checked: a multiple of 32 (a warp) in [32, 1024]."""
    if isinstance(threads, bool) or threads % 32 or not 32 <= threads <= 1024:
        raise PortabenchError(f"{name}: threads must be a multiple of 32 (a warp) in [32, 1024]")
    return int(threads)


class CupyKernelVariant(CupyBcsrVariant):
    """A portable GPU variant: one templated CUDA kernel over column-major blocks (the paper's
    ``val[block][col][row]``; ``block_order``), launched with ``lanes(bs)`` threads per block row."""

    family = "portable"
    source: ClassVar[str]
    function: ClassVar[str]

    def __init__(self, threads: int = THREADS_PER_BLOCK) -> None:
        self.threads = block_threads(self.name, threads)

    def lanes(self, bs: int) -> int:
        """Threads per block row: a multiple of 32, or fewer, a warp then serving ``32 // lanes``
        block rows (its last ``32 % lanes`` lanes idle)."""
        return 32

    def block_order(self, bs: int) -> str:
        """How the kernel wants each block stored: "column" (column by column) or "row"."""
        return "column"

    def template(self, matrix: BlockMatrix) -> tuple[int, ...]:
        """The kernel's template arguments: bs compile-time, so the block loops unroll."""
        return (matrix.bs,)

    def kernel_arrays(self, matrix: BlockMatrix) -> tuple[np.ndarray, ...]:
        """The matrix as the kernel's arguments before x, y and the block rows: by default
        (row_ptr, col_idx, blocks) in ``block_order``."""
        return block_arrays(matrix, order=self.block_order(matrix.bs))

    def bind(self, matrix: BlockMatrix, x: Any, y: Any) -> Callable[[], Any]:
        arrays = tuple(self.to_device(a) for a in self.kernel_arrays(matrix))
        kernel = templated_kernel(self.source, self.function, *self.template(matrix))
        lanes = self.lanes(matrix.bs)
        threads = matrix.block_rows * lanes if lanes >= 32 else -(-matrix.block_rows // (32 // lanes)) * 32
        blocks = -(-threads // self.threads)
        if blocks > 2**31 - 1:
            raise PortabenchError(f"{self.name}: {matrix.block_rows} block rows exceed one grid")
        grid, block = (max(1, blocks),), (self.threads,)
        args = (*arrays, x, y, np.int32(matrix.block_rows))

        def call() -> Any:
            kernel(grid, block, args)
            return y

        return call
