"""CPU portable: Numba ``prange`` over systems, with the paper's layout-dependent index mapping.

- system-major: one system per ``prange`` iteration, rows then the row's entries; each
  system's values and x are contiguous, so a thread streams through one system at a time
  (four partial sums per row hide the FMA latency).
- entry-major: one *chunk* of consecutive systems per ``prange`` iteration. For each row
  and entry, the innermost loop runs over the chunk's systems, whose values and x are
  contiguous in this layout: unit-stride loads LLVM vectorises (AVX2: four systems per
  instruction), with the chunk's partial sums in a small local array (L1), four entries
  per sweep. It is the CPU form of the GPU team mapping for this layout (consecutive
  lanes on consecutive systems).

No atomics are needed (Numba has none on the CPU): every output entry has one writer.
"""

from __future__ import annotations

from typing import Any, Callable

import numba
import numpy as np
from numba import njit, prange

from ..backends import HOST
from ..model import PortabenchError
from .variant import BatchedSpmvVariant

# cache=True: a warm process loads the compiled kernels in milliseconds. "contract" lets
# LLVM fuse the multiply-adds (fewer roundings: within the check's error bound).
_JIT: dict[str, Any] = dict(parallel=True, cache=True, nogil=True, fastmath={"contract"})


@njit(**_JIT)
def spmv_system_major(row_ptr, col_idx, values, x, y, alpha, beta, out):
    count = values.shape[0]
    n = row_ptr.shape[0] - 1
    for k in prange(count):
        v = values[k]
        xk = x[k]
        a = alpha[k]
        b = beta[k]
        for i in range(n):
            # Four partial sums: one dependent chain of FMAs would wait on its latency.
            l = row_ptr[i]
            end = row_ptr[i + 1]
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            while l + 4 <= end:
                s0 += v[l] * xk[col_idx[l]]
                s1 += v[l + 1] * xk[col_idx[l + 1]]
                s2 += v[l + 2] * xk[col_idx[l + 2]]
                s3 += v[l + 3] * xk[col_idx[l + 3]]
                l += 4
            while l < end:
                s0 += v[l] * xk[col_idx[l]]
                l += 1
            out[k, i] = a * ((s0 + s1) + (s2 + s3)) + b * y[k, i]


@njit(**_JIT)
def spmv_entry_major(row_ptr, col_idx, values, x, y, alpha, beta, out, chunk):
    count = x.shape[1]
    n = row_ptr.shape[0] - 1
    chunks = (count + chunk - 1) // chunk
    for c in prange(chunks):
        k0 = c * chunk
        k1 = min(k0 + chunk, count)
        w = k1 - k0
        acc = np.empty(w)
        for i in range(n):
            for s in range(w):
                acc[s] = 0.0
            # Four entries per sweep over the chunk: a quarter of the loads and stores of acc.
            l = row_ptr[i]
            end = row_ptr[i + 1]
            while l + 4 <= end:
                v0 = values[l, k0:k1]
                v1 = values[l + 1, k0:k1]
                v2 = values[l + 2, k0:k1]
                v3 = values[l + 3, k0:k1]
                x0 = x[col_idx[l], k0:k1]
                x1 = x[col_idx[l + 1], k0:k1]
                x2 = x[col_idx[l + 2], k0:k1]
                x3 = x[col_idx[l + 3], k0:k1]
                for s in range(w):
                    acc[s] += (v0[s] * x0[s] + v1[s] * x1[s]) + (v2[s] * x2[s] + v3[s] * x3[s])
                l += 4
            while l < end:
                v0 = values[l, k0:k1]
                x0 = x[col_idx[l], k0:k1]
                for s in range(w):
                    acc[s] += v0[s] * x0[s]
                l += 1
            a = alpha[k0:k1]
            b = beta[k0:k1]
            yi = y[i, k0:k1]
            oi = out[i, k0:k1]
            for s in range(w):
                oi[s] = a[s] * acc[s] + b[s] * yi[s]


class NumbaTeam(BatchedSpmvVariant):
    name = "numba-team"
    family = "portable"
    backend = HOST
    description = "Numba prange over systems (system-major) or over chunks of systems, vectorised across them (entry-major)"

    def __init__(self, chunk: int = 512) -> None:
        """``chunk``: at most this many systems per entry-major ``prange`` iteration.

        Each entry's values of a chunk are one contiguous run (4 KiB at 512): long runs
        keep the prefetchers and the TLB fed, while the chunk's x (8 n chunk bytes) stays
        in L2 across its rows. Chunks shrink when N is small, so that every thread gets
        several (load balance)."""
        if isinstance(chunk, bool) or int(chunk) != chunk or not 1 <= int(chunk) <= 1 << 16:
            raise PortabenchError(f"numba-team: chunk must be an integer in 1..65536, got {chunk!r}")
        self.chunk = int(chunk)

    def chunk_for(self, count: int) -> int:
        """Systems per entry-major chunk for N = ``count``: at most ``chunk``, at least
        16 (two cache lines), else about four chunks per thread."""
        per_thread = -(-count // (4 * numba.get_num_threads()))
        return max(1, min(self.chunk, max(16, per_thread)))

    def bind(self, arrays: dict[str, np.ndarray], layout: str) -> Callable[[], Any]:
        a = arrays
        # Column indices are never negative: unsigned ones spare Numba's negative-index
        # wraparound test on every gather (EXPERIMENTS.md).
        col_idx = a["col_idx"].astype(np.uint32)
        args = (a["row_ptr"], col_idx, a["values"], a["x"], a["y"], a["alpha"], a["beta"], a["y_out"])
        if layout == "system-major":
            return lambda: spmv_system_major(*args)
        chunk = np.int64(self.chunk_for(a["alpha"].size))
        return lambda: spmv_entry_major(*args, chunk)
