"""GPU portable: the paper's row-per-thread algorithm.

A thread owns one row of a block row and walks the row's blocks, summing its row of each
block against the block's x slice. The seed gives each block row a whole warp (lanes past bs
idle) and stages x in shared memory; here a block row gets a group of ``g = bs`` rounded up to
a power of two lanes (a warp serves 32 / g block rows at small bs; at bs > 16 it is the paper's
warp per block row), each thread loads one entry of the x slice, and the group passes them
round with shuffles: no shared memory, no barriers. The group reads a block's column (bs
contiguous doubles) together. Three changes keep more bytes in flight: the loads of U blocks
(8 to bs 4, 4 to bs 8, 2 to 16, then 1: what registers allow) are issued before the first
multiply; a block row's last step is as wide, masked past the row's end, rather than a block at
a time (the sweep's 15 blocks a block row took six waits for loads at bs 4, three steps of four
and three single blocks; now two); and the values are read once, evict-first, so they do not
push x out of the caches (they lose on matrices that stay in L2, where by-block runs). Measured
against the shared-memory version: this folder's EXPERIMENTS.md.

**Layout** (``layout``: "auto", "row" or "column"). Over row-major blocks a thread's row of a
block is bs contiguous doubles, read in 16-byte loads (even bs): half the load instructions.
"auto" takes row-major blocks at the block sizes where that measured faster (bs 4 and 8; the
measurements: this folder's EXPERIMENTS.md) and the paper's column-major ones elsewhere.

**Block columns** (``columns``: "auto", "offset16" or "int32"). As CSR16 does for CSR's columns,
"offset16" keeps each block's column as a 2-byte offset from its block row's first block column
(block rows within 65536 block columns; "auto" takes it where they all are): 2 bytes a block
fewer, 1.5 % of the bytes of a dense bs-4 block.
"""

from __future__ import annotations

import numpy as np

from portabench.datasets.matrices import BlockMatrix

from ..model import PortabenchError
from .definition import MAX_SPAN, BcsrProblem, column_span
from .variant import CUDA_COMMON, THREADS_PER_BLOCK, CupyKernelVariant, block_arrays, offsets16

SOURCE = CUDA_COMMON + r"""
// Blocks per step: their loads are all issued before the first multiply (more bytes in flight),
// as many as registers allow (U BS doubles per thread).
__host__ __device__ constexpr int pb_rpt_step(int bs) { return bs <= 4 ? 8 : bs <= 8 ? 4 : bs <= 16 ? 2 : 1; }

// ROW_MAJOR: blocks stored row by row (val[block][row][col], bs even), the thread's row in 16-byte loads.
// OFFSET16: block k's column is first_col[i] + cols[k] (unsigned 16-bit, block row i); else cols[k] (int),
// first_col unused.
template <int BS, int ROW_MAJOR, int OFFSET16>
__global__ void bcsr_row_per_thread(const int* __restrict__ row_ptr, const int* __restrict__ first_col,
                                    const void* __restrict__ cols, const double* __restrict__ val,
                                    const double* __restrict__ x, double* __restrict__ y, const int block_rows) {
    constexpr int G = pb_pow2_ceil(BS);  // threads per block row, a divisor of 32
    constexpr int U = pb_rpt_step(BS);
    static_assert(!ROW_MAJOR || BS % 2 == 0, "row-major blocks are read in pairs of doubles");
    const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / G;  // block row
    const int r = threadIdx.x % G;       // the row of the block this thread sums
    if (i >= block_rows) return;         // whole groups leave together: their shuffles see every lane
    const int lane = threadIdx.x % PB_LANES, base = lane - r;
    const unsigned mask = G == PB_LANES ? 0xffffffffu : ((1u << G) - 1u) << base;
    const int rr = r < BS ? r : BS - 1;  // threads past bs repeat row bs-1's loads (the same sectors)
    const int first = row_ptr[i], last = row_ptr[i + 1];
    const long long base_col = OFFSET16 ? first_col[i] : 0;
    const auto block_col = [&](int k) -> long long {
        return OFFSET16 ? base_col + static_cast<const unsigned short*>(cols)[k] : static_cast<const int*>(cols)[k];
    };
    double acc = 0.0;
    // Every step takes U blocks, the last one masked: blocks past the row's end load nothing and
    // add zeros. A one-block-at-a-time remainder waited on its loads once per block.
    for (int k = first; k < last; k += U) {
        double xs[U], v[U][BS];          // x entry rr of each block (the group's x slice), the blocks' row rr
#pragma unroll
        for (int u = 0; u < U; ++u) xs[u] = k + u < last ? x[block_col(k + u) * BS + rr] : 0.0;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const bool in_row = k + u < last;
            if (ROW_MAJOR) {
                const double* row = val + ((long long)(k + u) * BS + rr) * BS;
#pragma unroll
                for (int c = 0; c < BS; c += 2) {
                    const double2 pair = in_row ? PB_LOAD2_ONCE(row + c) : make_double2(0.0, 0.0);
                    v[u][c] = pair.x;
                    v[u][c + 1] = pair.y;
                }
            } else {
#pragma unroll
                for (int c = 0; c < BS; ++c)
                    v[u][c] = in_row ? PB_LOAD_ONCE(val + ((long long)(k + u) * BS + c) * BS + rr) : 0.0;
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int c = 0; c < BS; ++c) acc += v[u][c] * PB_SHFL_FROM(mask, xs[u], base + c);
    }
    if (r < BS) y[i * BS + r] = acc;
}
"""


def group_lanes(bs: int) -> int:
    """Threads per block row: bs rounded up to a power of two."""
    g = 1
    while g < bs:
        g *= 2
    return g


LAYOUTS = ("auto", "row", "column")
ROW_MAJOR_AT = (4, 8)  # the block sizes where "auto" stores blocks row by row (measured: module docstring)
COLUMNS = ("auto", "offset16", "int32")


def block_span(matrix: BlockMatrix) -> int:
    """The block columns the widest block row covers."""
    return -(-column_span(matrix) // matrix.bs)


def offset16_arrays(matrix: BlockMatrix, order: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(row_ptr int32, each block row's first block column int32, each block's offset from it uint16,
    the blocks in ``order``): ``block_arrays`` with 2-byte block columns."""
    row_ptr, col, blocks = block_arrays(matrix, order=order)
    return (row_ptr, *offsets16(row_ptr, col, unit="block "), blocks)


class CupyRowPerThread(CupyKernelVariant):
    name = "cupy-rowperthread"
    description = ("CuPy RawModule: paper [001]'s row-per-thread, pow2(bs) threads per block row, x passed by shuffles, "
                   "up to 8 blocks in flight; row-major blocks in 16-byte loads at bs 4 and 8")
    source = SOURCE
    function = "bcsr_row_per_thread"

    def __init__(self, threads: int = THREADS_PER_BLOCK, layout: str = "auto", columns: str = "auto") -> None:
        super().__init__(threads)
        if layout not in LAYOUTS:
            raise PortabenchError(f"{self.name}: layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        if columns not in COLUMNS:
            raise PortabenchError(f"{self.name}: columns must be one of {', '.join(COLUMNS)}, got {columns!r}")
        self.layout, self.columns = layout, columns

    def supports(self, problem: BcsrProblem) -> str | None:
        if self.layout == "row" and problem.bs % 2:
            return f"row-major blocks need an even block size (this matrix has {problem.bs})"
        if self.columns == "offset16" and block_span(problem.matrix) > MAX_SPAN:
            return (f"2-byte block column offsets need block rows within {MAX_SPAN} block columns; "
                    f"one here covers {block_span(problem.matrix)}")
        return super().supports(problem)

    def offset16(self, matrix: BlockMatrix) -> bool:
        return self.columns == "offset16" or (self.columns == "auto" and block_span(matrix) <= MAX_SPAN)

    def row_major(self, bs: int) -> bool:
        return self.layout == "row" or (self.layout == "auto" and bs in ROW_MAJOR_AT)

    def block_order(self, bs: int) -> str:
        return "row" if self.row_major(bs) else "column"

    def template(self, matrix: BlockMatrix) -> tuple[int, ...]:
        return (matrix.bs, int(self.row_major(matrix.bs)), int(self.offset16(matrix)))

    def kernel_arrays(self, matrix: BlockMatrix) -> tuple[np.ndarray, ...]:
        order = self.block_order(matrix.bs)
        if self.offset16(matrix):
            return offset16_arrays(matrix, order)
        row_ptr, col_idx, blocks = block_arrays(matrix, order=order)
        return row_ptr, np.zeros(1, dtype=np.int32), col_idx, blocks  # base: unused with int columns

    def lanes(self, bs: int) -> int:
        return group_lanes(bs)
