"""GPU portable: the paper's by-column algorithm (a warp per block row, a lane per column entry).

A warp takes 32 / bs block columns per pass through its block row (column t of the row:
block t / bs, column t % bs), lane ``row + bs q`` multiplying row ``row`` of column q of
the pass: val reads are coalesced for every bs up to 32. Partial sums of each row are
summed with shuffles. Each pass recomputes the block and column of its lane (cheap with
bs a compile-time constant). As in by-block, the warp stages up to 32 of its row's block
columns in shared memory first and the loop is unrolled 4 deep, for more loads in flight.
"""

from __future__ import annotations

from .variant import CUDA_COMMON, CupyKernelVariant

SOURCE = CUDA_COMMON + r"""
template <int BS>
__global__ void bcsr_by_column(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                               const double* __restrict__ val, const double* __restrict__ x,
                               double* __restrict__ y, const int block_rows) {
    constexpr int PER = PB_LANES / BS;   // block columns per pass
    constexpr int ACTIVE = PER * BS;
    __shared__ int cols[1024 / PB_LANES][PB_LANES];  // a warp's next 32 block columns
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / PB_LANES;
    const int lane = threadIdx.x % PB_LANES, w = threadIdx.x / PB_LANES;
    if (warp >= block_rows) return;     // whole warps leave together
    const int first = row_ptr[warp], last = row_ptr[warp + 1];
    const int row = lane % BS;
    double acc = 0.0;
    for (int chunk = first; chunk < last; chunk += PB_LANES) {  // the same trip count on every lane
        const int blocks = min(PB_LANES, last - chunk);
        PB_SYNC_GROUP(0xffffffffu);      // the last chunk's columns are read
        if (lane < blocks) cols[w][lane] = col_idx[chunk + lane];
        PB_SYNC_GROUP(0xffffffffu);
        if (lane < ACTIVE) {
            const double* v = val + (long long)chunk * (BS * BS) + row;
#pragma unroll 4
            for (int t = lane / BS; t < blocks * BS; t += PER) {  // column t of the chunk: block t / BS
                const int q = t / BS;
                const int c = t - q * BS;
                acc += v[t * BS] * x[(long long)cols[w][q] * BS + c];
            }
        }
    }
    acc = pb_sum_rows<BS, PER>(acc, lane);
    if (lane < BS) y[warp * BS + lane] = acc;
}
"""


class CupyByColumn(CupyKernelVariant):
    name = "cupy-bycolumn"
    description = "CuPy RawModule: paper [001]'s by-column, a warp per block row, a lane per block-column entry"
    source = SOURCE
    function = "bcsr_by_column"
