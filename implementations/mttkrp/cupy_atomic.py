"""GPU portable: one thread per (nonzero, column r), atomic adds into V (GenTen's default on recent GPUs).

No preparation: nonzeros are read in file order. Thread t handles nonzero t / R and column
t % R, so R consecutive threads read one factor row each (coalesced) and the R atomic
adds of a nonzero go to one row of V. R and the order N are template parameters: the
product loop is unrolled. Grid-stride loop; the block size and the blocks per SM are
the variant's launch parameters.
"""

from __future__ import annotations

from typing import Any, Callable

from ..gpu import cupy, launchable, multiprocessors, templated_kernel
from ..tensor_inputs import UpToMaxOrder, factor_arguments
from .variant import CupyMttkrpVariant, TensorArrays

SOURCE = r"""
template <int N, int R>
__global__ void mttkrp_atomic(const int* __restrict__ idx, const double* __restrict__ values,
                              const double* __restrict__ u0, const double* __restrict__ u1,
                              const double* __restrict__ u2, const double* __restrict__ u3,
                              const double* __restrict__ u4, double* __restrict__ out,
                              const long long nnz, const int mode)
{
    const double* u[5] = {u0, u1, u2, u3, u4};
    const long long total = nnz * R;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const long long j = t / R;
        const int r = (int)(t - j * R);
        double p = values[j];
#pragma unroll
        for (int m = 0; m < N; ++m)
            if (m != mode) p *= u[m][(long long)idx[m * nnz + j] * R + r];
        atomicAdd(&out[(long long)idx[mode * nnz + j] * R + r], p);
    }
}
"""

THREADS = 256
BLOCKS_PER_SM = 16  # with the grid-stride loop: enough resident warps to hide latency


class MttkrpCupyAtomic(UpToMaxOrder, CupyMttkrpVariant):
    name = "cupy-atomic"
    family = "portable"
    alternative = True  # cupy-segmented is the main comparison's portable MTTKRP
    description = "CuPy RawModule: one thread per (nonzero, r), atomicAdd into V, file order"
    arranges = False

    def __init__(self, threads: int = THREADS, blocks_per_sm: int = BLOCKS_PER_SM) -> None:
        self.threads, self.blocks_per_sm = int(threads), int(blocks_per_sm)

    def arrange(self, tensor: TensorArrays, mode: int, rank: int) -> tuple[TensorArrays, int]:
        return tensor, mode

    def bind(self, arranged: tuple[TensorArrays, int], factors: list[Any], out: Any) -> Callable[[], Any]:
        cp = cupy()
        tensor, mode = arranged
        rank = out.shape[1]
        kernel = templated_kernel(SOURCE, "mttkrp_atomic", tensor.order, rank)
        launchable(kernel, self.threads, self.name)
        needed = -(-tensor.nnz * rank // self.threads)
        grid = (max(1, min(needed, multiprocessors() * self.blocks_per_sm)),)
        args = (tensor.idx, tensor.values, *factor_arguments("mttkrp", factors), out, cp.int64(tensor.nnz), cp.int32(mode))

        def call() -> None:
            out.fill(0.0)
            kernel(grid, (self.threads,), args)

        return call
