"""GPU portable: the paper's base batched SpMV, for comparison with the team mapping.

A plain CSR SpMV applied system by system, as one launch: one warp (32 lanes) per
(system, row), warps numbered system by system and row by row. The lanes stride
through the row's entries and the partial sums are reduced across the warp with
shuffles; lane 0 writes the row's result. It ignores the layout except in its
addressing: in entry-major, the lanes of a warp read entries N apart (one cache line
each), which is what the team mapping fixes.

Shuffles are the one vendor-specific piece: CUDA's ``__shfl_down_sync`` and HIP's
``__shfl_down``, both over 32-lane groups (on 64-wide AMD wavefronts, each half reduces
its own row).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..gpu import WARP_SHUFFLE, cupy
from ..model import PortabenchError
from .variant import CupyBatchedSpmvVariant

LANES = 32

_SOURCE = WARP_SHUFFLE + r"""
#define PB_LANES 32

template <bool ENTRY_MAJOR>
__global__ void batched_spmv_base(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                                  const double* __restrict__ values, const double* __restrict__ x,
                                  const double* __restrict__ y, const double* __restrict__ alpha,
                                  const double* __restrict__ beta, double* __restrict__ out,
                                  int n, int nnz, long long count) {
  const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / PB_LANES;
  const int lane = threadIdx.x % PB_LANES;
  if (warp >= count * n) return;  // whole warps leave together: the shuffles below see all 32 lanes
  const long long s = warp / n;    // system
  const int j = (int)(warp % n);   // row
  const int begin = row_ptr[j], end = row_ptr[j + 1];
  double acc = 0.0;
  for (int l = begin + lane; l < end; l += PB_LANES) {
    if (ENTRY_MAJOR) acc += values[(long long)l * count + s] * x[(long long)col_idx[l] * count + s];
    else             acc += values[s * nnz + l] * x[s * n + col_idx[l]];
  }
  for (int d = PB_LANES / 2; d > 0; d /= 2) acc += PB_SHFL_DOWN(acc, d, PB_LANES);
  if (lane == 0) {
    const long long o = ENTRY_MAJOR ? (long long)j * count + s : s * n + j;
    out[o] = alpha[s] * acc + beta[s] * y[o];
  }
}
"""

_NAMES = {"system-major": "batched_spmv_base<false>", "entry-major": "batched_spmv_base<true>"}


@functools.cache
def _module() -> Any:
    """Compiled once per process (both layouts)."""
    return cupy().RawModule(code=_SOURCE, options=("-std=c++14",), name_expressions=list(_NAMES.values()))


class CupyBase(CupyBatchedSpmvVariant):
    name = "cupy-base"
    family = "portable"
    description = "CuPy RawModule: one warp per (system, row), shuffle reduction of the row's entries"

    def __init__(self, threads_per_block: int = 256) -> None:
        if isinstance(threads_per_block, bool) or threads_per_block % LANES or not LANES <= threads_per_block <= 1024:
            raise PortabenchError("cupy-base: threads_per_block must be a multiple of 32 (a warp) in [32, 1024]")
        self.threads_per_block = int(threads_per_block)

    def bind(self, arrays: dict[str, Any], layout: str) -> Callable[[], Any]:
        a = arrays
        n, nnz = a["row_ptr"].size - 1, a["col_idx"].size
        count = a["alpha"].size
        kernel = _module().get_function(_NAMES[layout])
        warps_per_block = self.threads_per_block // LANES
        blocks = -(-(count * n) // warps_per_block)
        if blocks > 2**31 - 1:
            raise PortabenchError(f"cupy-base: {count * n} (system, row) warps exceed one grid; choose a smaller N")
        args = (a["row_ptr"], a["col_idx"], a["values"], a["x"], a["y"], a["alpha"], a["beta"], a["y_out"],
                np.int32(n), np.int32(nnz), np.int64(count))
        grid, block = (blocks,), (self.threads_per_block,)
        return lambda: kernel(grid, block, args)
