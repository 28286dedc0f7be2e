"""GPU portable: Π by a CuPy kernel: a thread per entry (j, r), rows written whole by R threads.

R consecutive threads share a nonzero: they read its N - 1 indices (one transaction, L1
broadcast) and one factor entry each (R consecutive doubles), and write Π's row as one
coalesced run. N and R are template parameters.

``cupy-rows-sorted`` writes Π in row order of mode n (nonzero z of the sorted order reads
the indices of nonzero P[z]): the layout ``phi``'s ``cupy-segmented-presorted`` reads. Its
output is mapped back to the tensor's order (untimed) for the check.
"""

from __future__ import annotations

from typing import Any, Callable


from ..gpu import cupy, templated_kernel
from ..phi.variant import row_order
from ..tensor_inputs import TensorArrays, UpToMaxOrder, factor_arguments
from .variant import CupyPiVariant

SOURCE = r"""
template <int N, int R, int SORTED>
__global__ void pi_rows(const int* __restrict__ idx, const int* __restrict__ perm,
                        const double* __restrict__ u0, const double* __restrict__ u1,
                        const double* __restrict__ u2, const double* __restrict__ u3,
                        const double* __restrict__ u4, double* __restrict__ out,
                        const long long nnz, const int mode)
{
    const double* u[5] = {u0, u1, u2, u3, u4};
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < nnz * R; t += stride) {
        const long long z = t / R;
        const int r = t - z * R;
        const long long j = SORTED ? (long long)perm[z] : z;
        double p = 1.0;
#pragma unroll
        for (int m = 0; m < N; ++m) {
            if (m != mode) p *= u[m][(long long)idx[m * nnz + j] * R + r];
        }
        out[t] = p;
    }
}
"""

THREADS = 256


class CupyRows(UpToMaxOrder, CupyPiVariant):
    name = "cupy-rows"
    family = "portable"
    description = "CuPy RawModule: a thread per Π entry, R threads per nonzero, coalesced row writes"
    sorted_rows = False

    def arrange(self, tensor: TensorArrays, mode: int) -> tuple[TensorArrays, int, Any]:
        perm = row_order(cupy(), tensor.idx[mode]) if self.sorted_rows else cupy().zeros(1, dtype=cupy().int32)
        return tensor, mode, perm

    def bind(self, arranged: tuple[TensorArrays, int, Any], factors: list[Any], out: Any) -> Callable[[], Any]:
        cp = cupy()
        tensor, mode, perm = arranged
        rank = out.shape[1]
        kernel = templated_kernel(SOURCE, "pi_rows", tensor.order, rank, int(self.sorted_rows))
        grid = (max(1, min(-(-tensor.nnz * rank // THREADS), 1 << 20)),)
        args = (tensor.idx, perm, *factor_arguments("pi", factors), out, cp.int64(tensor.nnz), cp.int32(mode))
        return lambda: kernel(grid, (THREADS,), args)
