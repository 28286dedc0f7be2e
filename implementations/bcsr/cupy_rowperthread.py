"""GPU portable: the seed's row-per-thread algorithm, x staged in shared memory.

A thread owns one row of a block row and walks the row's blocks: per block, the group's
threads first stage the bs entries of x the block multiplies in shared memory, then each
sums its row over the block's columns (val reads: the group reads each column, bs
contiguous doubles, together). The seed gives each block row a whole warp (lanes past bs
idle); here a block row gets a group of ``g = bs`` rounded up to a power of two lanes, so a
warp serves 32 / g block rows at small bs (at bs > 16 it is the seed's warp per block row).
For loads in flight, a thread reads its block row before the group's barrier and its x entry
of the next block one block ahead.
"""

from __future__ import annotations

from .variant import CUDA_COMMON, CupyKernelVariant

SOURCE = CUDA_COMMON + r"""
template <int BS>
__global__ void bcsr_row_per_thread(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                                    const double* __restrict__ val, const double* __restrict__ x,
                                    double* __restrict__ y, const int block_rows) {
    constexpr int G = pb_pow2_ceil(BS);  // threads per block row, a divisor of 32
    __shared__ double staged[1024];      // a slot per thread of the block (blockDim <= 1024)
    const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / G;  // block row
    const int r = threadIdx.x % G;       // the row of the block this thread sums
    if (i >= block_rows) return;         // whole groups leave together
    const int base = threadIdx.x - r;    // the group's first slot
    const int lane = threadIdx.x % PB_LANES;
    const unsigned mask = G == PB_LANES ? 0xffffffffu : ((1u << (G % PB_LANES)) - 1u) << (lane - r);
    const bool mine = r < BS;            // threads past bs only keep the group's barriers
    const int first = row_ptr[i], last = row_ptr[i + 1];
    double acc = 0.0;
    // This thread's x entry of the next block, read one block ahead: its latency overlaps a block's work.
    double x_next = (mine && first < last) ? x[(long long)col_idx[first] * BS + r] : 0.0;
    for (int k = first; k < last; ++k) {
        double v[BS];                    // the block's row r, read before the barrier
        if (mine) {
#pragma unroll
            for (int c = 0; c < BS; ++c) v[c] = val[((long long)k * BS + c) * BS + r];
        }
        const double x_here = x_next;
        if (mine && k + 1 < last) x_next = x[(long long)col_idx[k + 1] * BS + r];
        if (mine) staged[threadIdx.x] = x_here;
        PB_SYNC_GROUP(mask);
        if (mine) {
#pragma unroll
            for (int c = 0; c < BS; ++c) acc += staged[base + c] * v[c];
        }
        PB_SYNC_GROUP(mask);             // the slots are overwritten by the next block
    }
    if (mine) y[i * BS + r] = acc;
}
"""


def group_lanes(bs: int) -> int:
    """Threads per block row: bs rounded up to a power of two."""
    g = 1
    while g < bs:
        g *= 2
    return g


class CupyRowPerThread(CupyKernelVariant):
    name = "cupy-rowperthread"
    description = "CuPy RawModule: seed's row-per-thread, x staged in shared memory, pow2(bs) threads per block row"
    source = SOURCE
    function = "bcsr_row_per_thread"

    def lanes(self, bs: int) -> int:
        return group_lanes(bs)
