"""GPU portable: blocks stored as a bit mask of their nonzeros and the nonzeros' values only.

Where blocks hold many stored zeros (fill, stored entries per nonzero, 1.5-2.1 on bmw7st_1,
pwtk and rm07r), BCSR reads the zeros and CSR reads a 4-byte column index per nonzero. This
format keeps the blocks' column indices and, per block, a 64-bit mask of which of its bs^2
entries are nonzero (bit ``r bs + c`` for row r, column c; bs <= 8), and stores only those
entries' values, block after block, row by row within a block (``bitmask_arrays``, built once,
untimed, as the CSR variants build their CSR): 8 bytes a nonzero plus 12 a block, about 8.5
bytes a nonzero on those matrices against CSR's 12 and BCSR's 8 fill + 4 / bs^2. Up to bs 6
the block's column rides in the mask's word, above its bs^2 bits (28 bits and more left):
8 bytes a block instead of 12, and one load for both.

The kernel is row-per-thread's arrangement, packed: a group of bs lanes per block row, lane r
summing row r of each block, 32 // bs groups to a warp (at bs 6, five block rows on 30 lanes,
where groups of a power of two lanes left a quarter of each warp idle), 128 threads a block. A
lane finds its values in a block by counting the mask's bits before its row, and issues the
predicated loads of U blocks' rows (values read once, evict-first; its x entries from the caches)
before the first multiply; from bs 6 it reads its block column's x entries whole (x in pairs at
even bs), a zero value where the mask is off. Measured against CSR and cuSPARSE: this folder's
EXPERIMENTS.md.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from portabench.datasets.matrices import BlockMatrix

from ..model import PortabenchError
from .definition import MAX_MASK_BS, MAX_PACKED_BS
from .variant import CUDA_COMMON, CupyKernelVariant

SOURCE = CUDA_COMMON + r"""
// Blocks per step, their loads issued before the first multiply: as many as registers allow.
__host__ __device__ constexpr int pb_mask_step(int bs) { return bs <= 4 ? 4 : 2; }

// From bs 6 a lane reads its block column's x entries whole, not only those its row's mask has on:
// fewer load requests (pairs where bs is even, x + col bs then 16-byte aligned), and no wait on the
// mask before the loads issue. At bs 5 reading x whole was slower (EXPERIMENTS.md).
__host__ __device__ constexpr bool pb_x_whole(int bs) { return bs >= 6; }

template <int BS>
__device__ __forceinline__ void pb_load_x_whole(const double* __restrict__ xb, double* b) {
    if (BS % 2 == 0) {
#pragma unroll
        for (int c = 0; c < BS / 2 * 2; c += 2) {
            const double2 pair = *reinterpret_cast<const double2*>(xb + c);
            b[c] = pair.x;
            b[c + 1] = pair.y;
        }
    } else {
#pragma unroll
        for (int c = 0; c < BS; ++c) b[c] = xb[c];
    }
}

// headers[k]: block k's mask, with its block column in the bits above the mask where bs^2 <= 36
// (col_idx then unused); else the mask alone and the column in col_idx[k].
template <int BS>
__global__ void bcsr_bitmask(const int* __restrict__ row_ptr, const long long* __restrict__ start,
                             const unsigned long long* __restrict__ headers, const int* __restrict__ col_idx,
                             const double* __restrict__ val, const double* __restrict__ x,
                             double* __restrict__ y, const int block_rows) {
    constexpr int PER_WARP = 32 / BS;  // block rows a warp serves, BS lanes each
    constexpr int U = pb_mask_step(BS);
    constexpr unsigned ROW = (1u << BS) - 1u;
    static_assert(BS * BS <= 64, "a block's mask is 64 bits");
    constexpr bool PACKED = BS * BS <= 36;
    constexpr int SHIFT = PACKED ? BS * BS : 0;
    constexpr unsigned long long LOW = (1ull << SHIFT) - 1ull;
    const int lane = threadIdx.x % 32, group = lane / BS;
    const int r = lane % BS;  // the row of the block this lane sums
    const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32 * PER_WARP + group;  // block row
    if (group >= PER_WARP || i >= block_rows) return;  // no shuffles: a lane may leave alone
    const unsigned long long before = (1ull << (r * BS)) - 1ull;  // the mask's bits of rows above r
    const double* v = val + start[i];  // the block row's first value
    const int last = row_ptr[i + 1];
    double acc = 0.0;
    int k = row_ptr[i];
    for (; k + U <= last; k += U) {
        double a[U][BS], b[U][BS];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const unsigned long long h = headers[k + u];
            const unsigned long long m = PACKED ? h & LOW : h;
            const unsigned bits = (unsigned)(m >> (r * BS)) & ROW;
            const double* q = v + __popcll(m & before);
            const double* xb = x + (PACKED ? (long long)(h >> SHIFT) : (long long)col_idx[k + u]) * BS;
#pragma unroll
            for (int c = 0; c < BS; ++c) {
                const bool on = (bits >> c) & 1u;
                a[u][c] = on ? PB_LOAD_ONCE(q + __popc(bits & ((1u << c) - 1u))) : 0.0;
                if (!pb_x_whole(BS)) b[u][c] = on ? xb[c] : 0.0;
            }
            if (pb_x_whole(BS)) pb_load_x_whole<BS>(xb, b[u]);
            v += __popcll(m);
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int c = 0; c < BS; ++c) acc += a[u][c] * b[u][c];
    }
    for (; k < last; ++k) {
        const unsigned long long h = headers[k];
        const unsigned long long m = PACKED ? h & LOW : h;
        const unsigned bits = (unsigned)(m >> (r * BS)) & ROW;
        const double* q = v + __popcll(m & before);
        const double* xb = x + (PACKED ? (long long)(h >> SHIFT) : (long long)col_idx[k]) * BS;
#pragma unroll
        for (int c = 0; c < BS; ++c)
            if ((bits >> c) & 1u) acc += PB_LOAD_ONCE(q + __popc(bits & ((1u << c) - 1u))) * xb[c];
        v += __popcll(m);
    }
    y[i * BS + r] = acc;
}
"""

BITMASK_THREADS = 128  # threads a block (chosen by measurement: EXPERIMENTS.md)


def bitmask_arrays(matrix: BlockMatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(row_ptr int32, each block row's first value int64, headers uint64, col_idx int32, values float64):
    the blocks' nonzero entries, row by row within each block, and which they are. A header is its
    block's mask, bit ``r bs + c`` for entry (r, c); up to bs 6 the block column sits above those
    bits and col_idx is one unused entry, from bs 7 it is col_idx's."""
    bs, nnzb = matrix.bs, matrix.nnzb
    if bs > MAX_MASK_BS:
        raise PortabenchError(f"bit-mask blocks need bs <= {MAX_MASK_BS}, not {bs}")
    packed = bs <= MAX_PACKED_BS
    if packed and matrix.block_rows > 1 << (64 - bs * bs):  # square: as many block columns
        raise PortabenchError(f"bit-mask blocks of bs {bs} hold up to 2^{64 - bs * bs} block columns, "
                              f"not {matrix.block_rows}")
    bsr = matrix.bsr
    entries = bsr.data[:nnzb].reshape(nnzb, bs * bs)
    nonzero = entries != 0
    masks = np.zeros(nnzb, dtype=np.uint64)
    for bit in range(bs * bs):
        masks |= nonzero[:, bit].astype(np.uint64) << np.uint64(bit)
    offsets = np.zeros(nnzb + 1, dtype=np.int64)
    np.cumsum(np.count_nonzero(nonzero, axis=1), out=offsets[1:])
    row_ptr = bsr.indptr.astype(np.int32)
    col_idx = bsr.indices[:nnzb].astype(np.int32)
    if packed:
        masks |= col_idx.astype(np.uint64) << np.uint64(bs * bs)
        col_idx = np.zeros(1, dtype=np.int32)
    return row_ptr, offsets[row_ptr], masks, col_idx, np.ascontiguousarray(entries[nonzero], dtype=np.float64)


class CupyBitmask(CupyKernelVariant):
    name = "cupy-bitmask"
    description = ("CuPy RawModule: blocks as a 64-bit mask of their nonzeros and the nonzeros' values (bs <= 8), "
                   "a row of a block per lane, 32 // bs block rows a warp, loads in flight, values read once")
    max_bs: ClassVar[int] = MAX_MASK_BS
    source = SOURCE
    function = "bcsr_bitmask"

    def __init__(self, threads: int = BITMASK_THREADS) -> None:
        super().__init__(threads)

    def lanes(self, bs: int) -> int:
        return bs

    def kernel_arrays(self, matrix: BlockMatrix) -> tuple[np.ndarray, ...]:
        return bitmask_arrays(matrix)
