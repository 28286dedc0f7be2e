"""GPU portable: system-major batched SpMV with every global load coalesced, through shared memory.

In system-major storage a system's values are one contiguous run of nnz doubles and its x one run
of n, but a thread (``cupy-team``) or a warp (``cupy-base``) per row reads them row by row: a
thread's next value is its own row's, so the loads of a warp spread over as many cache lines as it
has rows, or a warp's 32 lanes idle past a row's few dozen entries. Here a thread block takes one
system and

1. copies its x into shared memory (coalesced);
2. forms the products ``v_l x[col_l]`` of a run of whole rows, thread t taking entries t, t + T, ...
   (the values coalesced; x gathered from shared memory), into shared memory;
3. sums each row's products there, a group of G lanes per row with a shuffle reduction, and
   writes ``alpha A x + beta y`` for those rows.

Rows are cut into runs of at most ``max_entries`` entries (``row_runs``, once in ``bind``) so that
the products fit in shared memory; G is about a quarter of the mean row length (a power of two up
to 32). The pattern (row pointers, column indices) is shared by all systems and stays in cache.
Entry-major inputs are ``cupy-team``'s: there a system's entries lie N apart and no block of one
system can read them coalesced. Shuffles are CUDA's ``__shfl_down_sync`` or HIP's ``__shfl_down``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..gpu import WARP_SHUFFLE, allow_shared_memory, cupy, launchable
from ..model import PortabenchError
from .definition import BatchedSpmvProblem
from .variant import CupyBatchedSpmvVariant

_SOURCE = WARP_SHUFFLE + r"""
template <int G>
__global__ void batched_spmv_staged(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                                    const double* __restrict__ values, const double* __restrict__ x,
                                    const double* __restrict__ y, const double* __restrict__ alpha,
                                    const double* __restrict__ beta, double* __restrict__ out,
                                    const int* __restrict__ runs, int run_count, int n, int nnz, long long count) {
  extern __shared__ double shared[];
  double* xs = shared;         // the system's x
  double* products = shared + n;  // one run of rows' products
  const int group = threadIdx.x / G, lane = threadIdx.x % G, groups = blockDim.x / G;
  for (long long s = blockIdx.x; s < count; s += gridDim.x) {
    const double* v = values + s * nnz;
    for (int i = threadIdx.x; i < n; i += blockDim.x) xs[i] = x[s * n + i];
    __syncthreads();
    const double a = alpha[s], b = beta[s];
    for (int k = 0; k < run_count; ++k) {
      const int first = runs[k], stop = runs[k + 1];
      const int e0 = row_ptr[first], e1 = row_ptr[stop];
      for (int l = e0 + threadIdx.x; l < e1; l += blockDim.x) products[l - e0] = v[l] * xs[col_idx[l]];
      __syncthreads();
      // Every thread goes through the same rounds, so whole warps reach each shuffle.
      for (int row0 = first; row0 < stop; row0 += groups) {
        const int j = row0 + group;
        double acc = 0.0;
        if (j < stop) {
          for (int l = row_ptr[j] + lane; l < row_ptr[j + 1]; l += G) acc += products[l - e0];
        }
        for (int d = G / 2; d > 0; d /= 2) acc += PB_SHFL_DOWN(acc, d, G);
        if (lane == 0 && j < stop) {
          const long long o = s * n + j;
          out[o] = a * acc + b * y[o];
        }
      }
      __syncthreads();  // the next run (or system) overwrites the products and x
    }
  }
}
"""

GROUPS = (1, 2, 4, 8, 16, 32)
_NAMES = [f"batched_spmv_staged<{g}>" for g in GROUPS]
MAX_ROWS = 4096  # x in shared memory: 32 KiB
MAX_ENTRIES = 4096  # one run's products: 32 KiB
MAX_GRID = 2**31 - 1


@functools.cache
def _module() -> Any:
    """Compiled once per process (every group size)."""
    return cupy().RawModule(code=_SOURCE, options=("-std=c++14",), name_expressions=_NAMES)


def row_runs(row_ptr: np.ndarray, max_entries: int) -> np.ndarray:
    """Boundaries of runs of whole rows of at most about equal entry counts, none over ``max_entries``:
    run k is rows runs[k] .. runs[k + 1] - 1. Every row must have at most ``max_entries`` entries."""
    row_ptr = np.asarray(row_ptr, dtype=np.int64)
    n, nnz = row_ptr.size - 1, int(row_ptr[-1])
    longest = int(np.diff(row_ptr).max(initial=0))
    if longest > max_entries:
        raise PortabenchError(f"a row of {longest} entries is longer than a run ({max_entries})")
    runs = max(1, -(-nnz // max_entries))
    limit = max(longest, -(-nnz // runs), 1)  # runs of about equal entries, none shorter than the longest row
    bounds, start = [0], 0
    while start < n:
        stop = int(np.searchsorted(row_ptr, row_ptr[start] + limit, side="right")) - 1  # rows that fit
        start = max(stop, start + 1)
        bounds.append(start)
    return np.array(bounds, dtype=np.int32)


def group_size(row_ptr: np.ndarray) -> int:
    """Lanes per row in the sums: the power of two nearest under a quarter of the mean row length."""
    n = max(1, int(np.asarray(row_ptr).size) - 1)
    quarter = int(row_ptr[-1]) / n / 4
    return max(g for g in GROUPS if g <= max(1.0, quarter))


class CupyStaged(CupyBatchedSpmvVariant):
    name = "cupy-staged"
    family = "portable"
    description = ("CuPy RawModule: a block per system (system-major), x and each run of rows' products in shared "
                   "memory, every global load coalesced")

    def __init__(self, threads_per_block: int = 256, max_entries: int = MAX_ENTRIES) -> None:
        if isinstance(threads_per_block, bool) or threads_per_block % 32 or not 32 <= threads_per_block <= 1024:
            raise PortabenchError("cupy-staged: threads_per_block must be a multiple of 32 (a warp) in [32, 1024]")
        if isinstance(max_entries, bool) or int(max_entries) != max_entries or not 1 <= max_entries <= MAX_ENTRIES:
            raise PortabenchError(f"cupy-staged: max_entries must be an integer in 1..{MAX_ENTRIES}")
        self.threads_per_block, self.max_entries = int(threads_per_block), int(max_entries)

    def supports(self, problem: BatchedSpmvProblem) -> str | None:
        if problem.layout != "system-major":
            return "system-major only: entry-major systems' entries lie N apart (cupy-team reads that layout coalesced)"
        systems = problem.systems
        if systems.n > MAX_ROWS:
            return f"n = {systems.n} rows: x in shared memory holds at most {MAX_ROWS}"
        longest = int(np.diff(systems.row_ptr).max(initial=0))
        if longest > self.max_entries:
            return f"a row of {longest} entries: a run of rows' products holds at most {self.max_entries}"
        return None

    def bind(self, arrays: dict[str, Any], layout: str) -> Callable[[], Any]:
        cp, a = cupy(), arrays
        row_ptr = cp.asnumpy(a["row_ptr"])
        n, nnz, count = row_ptr.size - 1, int(a["col_idx"].size), int(a["alpha"].size)
        runs = row_runs(row_ptr, self.max_entries)
        shared = 8 * (n + int(np.diff(row_ptr[runs]).max(initial=0)))
        group = group_size(row_ptr)
        kernel = _module().get_function(f"batched_spmv_staged<{group}>")
        launchable(kernel, self.threads_per_block, self.name)
        allow_shared_memory(kernel, shared)
        grid, block = (min(count, MAX_GRID),), (self.threads_per_block,)
        args = (a["row_ptr"], a["col_idx"], a["values"], a["x"], a["y"], a["alpha"], a["beta"], a["y_out"],
                cp.asarray(runs), np.int32(runs.size - 1), np.int32(n), np.int32(nnz), np.int64(count))
        return lambda: kernel(grid, block, args, shared_mem=shared)
