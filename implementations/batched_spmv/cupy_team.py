"""GPU portable: Kokkos Kernels' team-batched SpMV as a CuPy ``RawModule`` kernel.

One thread block (the Kokkos *team*) per group of m consecutive systems. The block's
threads loop over the group's m n (row, system) pairs and each computes one row's dot
product serially, so every output entry has exactly one writer (no atomics, no
reductions). Which pair a thread takes is the paper's layout-dependent mapping:

- entry-major: pair i is row j = i / m of system k = i % m, so consecutive threads read
  consecutive systems' values and x, which are contiguous in this layout: a warp's loads
  coalesce into whole 256-byte lines when m >= 32;
- system-major: pair i is system k = i / n, row j = i % n, so consecutive threads work on
  consecutive rows of one system (each thread's own entries are the contiguous ones).

A last group of fewer than m systems (N not a multiple of m) uses its own count in the
mapping. The source is plain CUDA C++ that HIP also compiles (no warp intrinsics).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..gpu import cupy
from ..model import PortabenchError
from .variant import CupyBatchedSpmvVariant

_SOURCE = r"""
template <bool ENTRY_MAJOR>
__global__ void batched_spmv_team(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                                  const double* __restrict__ values, const double* __restrict__ x,
                                  const double* __restrict__ y, const double* __restrict__ alpha,
                                  const double* __restrict__ beta, double* __restrict__ out,
                                  int n, int nnz, long long count, int m) {
  const long long first = (long long)blockIdx.x * m;  // the group's first system
  const long long left = count - first;
  const int members = left < m ? (int)left : m;  // the last group may be short
  const int pairs = members * n;
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    int j, k;
    if (ENTRY_MAJOR) { j = i / members; k = i % members; }  // consecutive threads: consecutive systems
    else             { k = i / n;       j = i % n; }        // consecutive threads: consecutive rows
    const long long s = first + k;
    const int begin = row_ptr[j], end = row_ptr[j + 1];
    double acc = 0.0;
    if (ENTRY_MAJOR) {
      for (int l = begin; l < end; ++l) acc += values[(long long)l * count + s] * x[(long long)col_idx[l] * count + s];
      const long long o = (long long)j * count + s;
      out[o] = alpha[s] * acc + beta[s] * y[o];
    } else {
      const double* v = values + s * nnz;
      const double* xs = x + s * n;
      for (int l = begin; l < end; ++l) acc += v[l] * xs[col_idx[l]];
      const long long o = s * n + j;
      out[o] = alpha[s] * acc + beta[s] * y[o];
    }
  }
}
"""

_NAMES = {"system-major": "batched_spmv_team<false>", "entry-major": "batched_spmv_team<true>"}
MAX_GROUP = 50


@functools.cache
def _module() -> Any:
    """Compiled once per process (both layouts)."""
    return cupy().RawModule(code=_SOURCE, options=("-std=c++14",), name_expressions=list(_NAMES.values()))


class BatchedSpmvCupyTeam(CupyBatchedSpmvVariant):
    name = "cupy-team"
    family = "portable"
    description = "CuPy RawModule: one block per group of m systems, one thread per (row, system), layout-aware mapping"

    def __init__(self, m: int = 32, threads_per_block: int = 256) -> None:
        """``m``: systems per thread block, in the paper's range 1..50. The default 32 fills
        a warp with consecutive systems (entry-major: one coalesced 256-byte line per load)."""
        if isinstance(m, bool) or int(m) != m or not 1 <= int(m) <= MAX_GROUP:
            raise PortabenchError(f"cupy-team: m (systems per thread block) must be an integer in 1..{MAX_GROUP}, got {m!r}")
        if isinstance(threads_per_block, bool) or threads_per_block % 32 or not 32 <= threads_per_block <= 1024:
            raise PortabenchError("cupy-team: threads_per_block must be a multiple of 32 (a warp) in [32, 1024]")
        self.m = int(m)
        self.threads_per_block = int(threads_per_block)

    @property
    def config(self) -> str:
        return f"m{self.m} t{self.threads_per_block}"

    def bind(self, arrays: dict[str, Any], layout: str) -> Callable[[], Any]:
        a = arrays
        n, nnz = a["row_ptr"].size - 1, a["col_idx"].size
        count = a["alpha"].size
        kernel = _module().get_function(_NAMES[layout])
        # A group's pairs fit an int: m n <= 50 n, with n a few thousand at most.
        if self.m * n > np.iinfo(np.int32).max:
            raise PortabenchError(f"cupy-team: m n = {self.m * n} (row, system) pairs per block overflow int")
        grid = (-(-count // self.m),)
        block = (self.threads_per_block,)
        args = (a["row_ptr"], a["col_idx"], a["values"], a["x"], a["y"], a["alpha"], a["beta"], a["y_out"],
                np.int32(n), np.int32(nnz), np.int64(count), np.int32(self.m))
        return lambda: kernel(grid, block, args)
