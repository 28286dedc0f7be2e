"""GPU portable: CSR SpMV on the matrix's true nonzeros (the zeros stored in blocks left out).

The variant converts the blocks to CSR once, untimed, as ``cusparse-csr`` does: where blocks
hold many stored zeros (fill, stored entries per nonzero, above about 1.47: bmw7st_1, pwtk,
rm07r), CSR's 12 bytes per nonzero are fewer than BCSR's bytes, and a kernel that reads fewer
bytes wins once the matrix is beyond the caches. A group of ``g`` lanes (a power of two, 4 to
32 from the mean row length) shares a row; each lane keeps ``UNROLL`` entries' loads in flight,
reads values and column indices once, evict-first (x keeps its place in the caches), and the
group's sums meet by shuffles. Measured against cuSPARSE's CSR and the block kernels: this
folder's EXPERIMENTS.md.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from portabench.datasets.matrices import BlockMatrix

from ..gpu import STREAMED_LOADS, templated_kernel
from ..model import PortabenchError
from .variant import CUDA_COMMON, THREADS_PER_BLOCK, CupyBcsrVariant, block_threads, csr_arrays, csr_index_limit

SOURCE = CUDA_COMMON + STREAMED_LOADS + r"""
// A column index of IB bytes: 4, the column itself; 2, its offset from the row's first column
// (base[i]: ``cupy-csr16``). The 4-byte kernel never reads base.
template <int IB> struct pb_column { typedef int type; };
template <> struct pb_column<2> { typedef unsigned short type; };

// CSR16's streams read through pb_load_streamed (faster there; CSR's own streams were not:
// EXPERIMENTS.md).
template <int IB, typename T>
__device__ __forceinline__ T pb_csr_load(const T* p) { return IB == 2 ? pb_load_streamed(p) : PB_LOAD_ONCE(p); }

template <int G, int U, int IB>
__global__ void csr_group_per_row(const int* __restrict__ row_ptr, const int* __restrict__ base,
                                  const typename pb_column<IB>::type* __restrict__ col,
                                  const double* __restrict__ val, const double* __restrict__ x,
                                  double* __restrict__ y, const int rows) {
    const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / G;
    const int r = threadIdx.x % G;
    double acc = 0.0;
    if (i < rows) {  // no early return: every lane of the warp takes part in the shuffles below
        const double* xr = IB == 4 ? x : x + base[i];
        const int last = row_ptr[i + 1];
        int k = row_ptr[i] + r;
        for (; k + (U - 1) * G < last; k += U * G) {
            int c[U];
            double v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                c[u] = pb_csr_load<IB>(col + k + u * G);
                v[u] = pb_csr_load<IB>(val + k + u * G);
            }
#pragma unroll
            for (int u = 0; u < U; ++u) acc += v[u] * xr[c[u]];
        }
        for (; k < last; k += G) acc += pb_csr_load<IB>(val + k) * xr[pb_csr_load<IB>(col + k)];
    }
#pragma unroll
    for (int s = G / 2; s >= 1; s /= 2) acc += PB_SHFL_DOWN(acc, s, PB_LANES);  // lane r = 0 gathers its group's sum
    if (i < rows && r == 0) y[i] = acc;
}
"""

UNROLL = 2  # entries in flight per lane (4 was no faster: EXPERIMENTS.md)
GROUP_CHOICES = (4, 8, 16, 32)


def group_lanes(entries_per_row: float) -> int:
    """Lanes per row: the largest power of two up to a third of the mean row length, 4 to 32 (the
    rule measured in this folder's EXPERIMENTS.md)."""
    g = 4
    while g < 32 and 2 * g <= entries_per_row / 3:
        g *= 2
    return g


class CupyCsr(CupyBcsrVariant):
    name = "cupy-csr"
    family = "portable"
    description = ("CuPy RawModule: CSR of the true nonzeros (blocks' zeros left out), a group of 4-32 lanes per row, "
                   "loads in flight, values read once")

    def __init__(self, threads: int = THREADS_PER_BLOCK, lanes: int = 0) -> None:
        if lanes not in (0, *GROUP_CHOICES):
            raise PortabenchError(f"{self.name}: lanes must be 0 (from the row length) or one of {GROUP_CHOICES}")
        self.threads, self.lanes = block_threads(self.name, threads), int(lanes)

    def supports(self, problem) -> str | None:
        return csr_index_limit(problem) or super().supports(problem)

    def kernel_arrays(self, matrix: BlockMatrix) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
        """(row_ptr, each row's base column or None, column indices, values): the kernel's matrix."""
        row_ptr, col, val = csr_arrays(matrix)
        return row_ptr, None, col, val

    def bind(self, matrix: BlockMatrix, x: Any, y: Any) -> Callable[[], Any]:
        n = matrix.n
        host = self.kernel_arrays(matrix)
        row_ptr, base, col, val = (None if a is None else self.to_device(a) for a in host)
        g = self.lanes or group_lanes(host[3].size / max(1, n))
        kernel = templated_kernel(SOURCE, "csr_group_per_row", g, UNROLL, host[2].itemsize)
        grid, block = (max(1, -(-n * g // self.threads)),), (self.threads,)
        args = (row_ptr, row_ptr if base is None else base, col, val, x, y, np.int32(n))

        def call() -> Any:
            kernel(grid, block, args)
            return y

        return call
