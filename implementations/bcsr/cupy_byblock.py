"""GPU portable: the paper's by-block algorithm (a warp per block row, a lane per block entry).

A warp takes 32 / bs^2 whole blocks per pass through its block row, one entry per lane
(entry e: column e / bs, row e % bs of the column-major block): val reads are coalesced,
x reads partly so. Each lane keeps one partial sum; the lanes of each row are summed with
shuffles (the seed uses shared memory). Lanes past the last whole block idle, so only
bs <= 5 fit (the paper's limit). Two changes for loads in flight: the warp first stages up
to 32 of its row's block columns in shared memory (one coalesced load, so an x read waits
for one load, not two), and the loop over blocks is unrolled 4 deep.
"""

from __future__ import annotations

from typing import ClassVar

from .variant import CUDA_COMMON, CupyKernelVariant

SOURCE = CUDA_COMMON + r"""
template <int BS>
__global__ void bcsr_by_block(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                              const double* __restrict__ val, const double* __restrict__ x,
                              double* __restrict__ y, const int block_rows) {
    constexpr int BB = BS * BS;
    constexpr int PER = PB_LANES / BB;   // whole blocks per pass
    constexpr int ACTIVE = PER * BB;     // lanes holding an entry
    __shared__ int cols[1024 / PB_LANES][PB_LANES];  // a warp's next 32 block columns
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / PB_LANES;
    const int lane = threadIdx.x % PB_LANES, w = threadIdx.x / PB_LANES;
    if (warp >= block_rows) return;     // whole warps leave together: the shuffles see all lanes
    const int first = row_ptr[warp], last = row_ptr[warp + 1];
    const int e = lane % BB;             // entry of the block: column e / BS, row e % BS
    const int col = e / BS;
    double acc = 0.0;
    for (int chunk = first; chunk < last; chunk += PB_LANES) {  // the same trip count on every lane
        const int blocks = min(PB_LANES, last - chunk);
        PB_SYNC_GROUP(0xffffffffu);      // the last chunk's columns are read
        if (lane < blocks) cols[w][lane] = col_idx[chunk + lane];
        PB_SYNC_GROUP(0xffffffffu);
        if (lane < ACTIVE) {
#pragma unroll 4
            for (int q = lane / BB; q < blocks; q += PER)
                acc += val[(long long)(chunk + q) * BB + e] * x[(long long)cols[w][q] * BS + col];
        }
    }
    acc = pb_sum_rows<BS, ACTIVE / BS>(acc, lane);
    if (lane < BS) y[warp * BS + lane] = acc;
}
"""


class CupyByBlock(CupyKernelVariant):
    name = "cupy-byblock"
    description = "CuPy RawModule: paper [001]'s by-block, a warp per block row, a lane per block entry (bs <= 5)"
    max_bs: ClassVar[int] = 5
    source = SOURCE
    function = "bcsr_by_block"
