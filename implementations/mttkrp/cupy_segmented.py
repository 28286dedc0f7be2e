"""GPU portable: the permuted, segmented algorithm: sorted nonzeros, sums in registers, few atomics.

Nonzeros are sorted by output row (and second mode, ``sorting.py``) once per mode, in
``arrange``. A *group* of R consecutive threads (thread r: column r) walks a contiguous
run of ``per_group`` nonzeros, summing into a register while the output row stays the
same and flushing the sum with one atomic add when it changes (or at the run's end):
atomics fall from one per (nonzero, r) to about one per (row piece, r). Each thread loads
the indices and factor entries of ``BATCH`` nonzeros before summing them, so that many
gathers are in flight at once (one at a time leaves the kernel latency-bound). The sort's
second key makes runs of equal second-mode index, whose factor entry L1 then serves. R, the
order N and the batch are template parameters (no dynamic allocation); the block size and
``per_group`` are the variant's launch parameters.
"""

from __future__ import annotations

from typing import Any, Callable

from ..gpu import cupy, launchable, templated_kernel
from ..tensor_inputs import factor_arguments
from .sorting import sorted_tensor
from .variant import CupyMttkrpVariant, TensorArrays

SOURCE = r"""
template <int N, int R, int B>
__global__ void mttkrp_segmented(const int* __restrict__ idx, const double* __restrict__ values,
                                 const double* __restrict__ u0, const double* __restrict__ u1,
                                 const double* __restrict__ u2, const double* __restrict__ u3,
                                 const double* __restrict__ u4, double* __restrict__ out,
                                 const long long nnz, const int mode, const int per_group)
{
    const double* u[5] = {u0, u1, u2, u3, u4};
    const long long group = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / R;
    const int r = threadIdx.x % R;
    const long long start = group * per_group;
    if (start >= nnz) return;
    const long long stop = min(start + per_group, nnz);
    const int* rows = idx + mode * nnz;
    int row = rows[start];
    double acc = 0.0;
    for (long long j0 = start; j0 < stop; j0 += B) {
        // Load B nonzeros' indices, values and factor entries before using any: B independent
        // gathers in flight per thread instead of one.
        int i[B];
        double p[B];
#pragma unroll
        for (int b = 0; b < B; ++b) {
            const long long j = j0 + b;
            i[b] = j < stop ? rows[j] : row;
            p[b] = j < stop ? values[j] : 0.0;
        }
#pragma unroll
        for (int m = 0; m < N; ++m) {
            if (m == mode) continue;
#pragma unroll
            for (int b = 0; b < B; ++b) {
                const long long j = j0 + b;
                if (j < stop) p[b] *= u[m][(long long)idx[m * nnz + j] * R + r];
            }
        }
#pragma unroll
        for (int b = 0; b < B; ++b) {
            if (i[b] != row) {
                atomicAdd(&out[(long long)row * R + r], acc);
                acc = 0.0;
                row = i[b];
            }
            acc += p[b];
        }
    }
    atomicAdd(&out[(long long)row * R + r], acc);
}
"""

# Measured on the H100, nell-2 stand-in at full size (76.9 M nonzeros), R = 16, modes 0 / 1 / 2,
# best of 10: per_group 32: 2.75 / 3.06 / 2.52 ms; 64: 2.18 / 2.24 / 2.27; 128: 2.09 / 2.12 / 2.24;
# 256: 2.10 / 2.13 / 2.24 (fewer groups per row, fewer same-address atomics); 16: 4.8 / 5.5 / 3.6.
# batch 1 / 4 / 8 at per_group 32: 2.77 / 2.75 / 3.28 ms (mode 0). Tiles of 256-2048 indices
# (``sorting.py``) did not help: 2.15-2.33 ms at per_group 64 (the L2, not DRAM, limits);
# nor did tiles of the third mode alone (mode 0 2.12-2.15 ms, mode 2 2.14 vs 2.25 ms), or a
# group loading 16 nonzeros' indices at once and passing them by shuffles (2.75 / 3.05 ms).
THREADS = 256
PER_GROUP = 128
BATCH = 4


class CupySegmented(CupyMttkrpVariant):
    name = "cupy-segmented"
    family = "portable"
    description = "CuPy RawModule: R threads per run of row-sorted nonzeros, register sums, one atomic per row piece"

    def __init__(self, threads: int = THREADS, per_group: int = PER_GROUP, batch: int = BATCH, tile: int = 0) -> None:
        self.threads, self.per_group, self.batch, self.tile = int(threads), int(per_group), int(batch), int(tile)

    def arrange(self, tensor: TensorArrays, mode: int, rank: int) -> tuple[TensorArrays, int]:
        ordered, _ = sorted_tensor(cupy(), tensor, mode, self.tile)
        return ordered, mode

    def bind(self, arranged: tuple[TensorArrays, int], factors: list[Any], out: Any) -> Callable[[], Any]:
        cp = cupy()
        tensor, mode = arranged
        rank = out.shape[1]
        kernel = templated_kernel(SOURCE, "mttkrp_segmented", tensor.order, rank, self.batch)
        threads = launchable(kernel, max(rank, self.threads // rank * rank), self.name)  # whole groups per block
        groups = -(-tensor.nnz // self.per_group)
        grid = (max(1, -(-groups * rank // threads)),)
        args = (tensor.idx, tensor.values, *factor_arguments("mttkrp", factors), out, cp.int64(tensor.nnz),
                cp.int32(mode), cp.int32(self.per_group))

        def call() -> None:
            out.fill(0.0)
            kernel(grid, (threads,), args)

        return call
