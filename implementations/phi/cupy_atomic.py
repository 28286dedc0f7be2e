"""GPU portable: the paper [000]'s Algorithm 3 (SparTen's GPU Φ): one nonzero per thread, atomic adds.

Each thread takes a nonzero in file order (no sorting), forms <B(i, :), Π(j, :)> with Π's
row in registers, divides, and adds s Π(j, :) into Φ(i, :) with R atomic adds. R and the
perturbation flags are template parameters. Launch parameters (the paper's Experiments
3-4): threads per block, blocks (0: enough for ``per_thread`` nonzeros per thread) and
nonzeros per thread (a grid-stride loop). Pressure points: ``no-atomics`` (plain adds),
``reuse`` (B and Π read at row 0 only), ``both``.
"""

from __future__ import annotations

from typing import Any, Callable

from ..gpu import cupy, launchable, templated_kernel
from ..tensor_inputs import TensorArrays
from .variant import CupyPhiVariant

SOURCE = r"""
template <int R, int ATOMIC, int REUSE>
__global__ void phi_atomic(const int* __restrict__ rows, const double* __restrict__ values,
                           const double* __restrict__ b, const double* __restrict__ pi,
                           double* __restrict__ out, const long long nnz, const double epsilon)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < nnz; j += stride) {
        const int i = rows[j];
        const double* bi = b + (REUSE ? 0LL : (long long)i * R);
        const double* pj = pi + (REUSE ? 0LL : j * R);
        double p[R];
        double dot = 0.0;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            p[r] = pj[r];
            dot += bi[r] * p[r];
        }
        const double s = values[j] / fmax(dot, epsilon);
        double* o = out + (long long)i * R;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if (ATOMIC) atomicAdd(o + r, s * p[r]);
            else o[r] += s * p[r];
        }
    }
}
"""

THREADS = 256
PER_THREAD = 1  # Algorithm 3: one nonzero per thread


class PhiCupyAtomic(CupyPhiVariant):
    name = "cupy-atomic"
    family = "portable"
    alternative = True  # the segmented variants are the main comparison's portable Φ
    description = "Algorithm 3: CuPy RawModule, one nonzero per thread in file order, R atomic adds into Φ"
    perturbations = ("none", "no-atomics", "reuse", "both")

    def __init__(self, perturbation: str = "none", threads: int = THREADS, blocks: int = 0,
                 per_thread: int = PER_THREAD) -> None:
        super().__init__(perturbation)
        self.threads, self.blocks, self.per_thread = int(threads), int(blocks), max(1, int(per_thread))

    def arrange(self, tensor: TensorArrays, mode: int) -> tuple[Any, Any]:
        return tensor.idx[mode], tensor.values

    def bind(self, arranged: tuple[Any, Any], b: Any, pi: Any, epsilon: float, out: Any,
             perturbation: str) -> Callable[[], Any]:
        cp = cupy()
        rows, values = arranged
        nnz, rank = pi.shape
        kernel = templated_kernel(SOURCE, "phi_atomic", rank, perturbation not in ("no-atomics", "both"),
                                  perturbation in ("reuse", "both"))
        launchable(kernel, self.threads, self.name)
        grid = (self.blocks or max(1, -(-nnz // (self.threads * self.per_thread))),)
        args = (rows, values, b, pi, out, cp.int64(nnz), cp.float64(epsilon))

        def call() -> None:
            out.fill(0.0)
            kernel(grid, (self.threads,), args)

        return call
