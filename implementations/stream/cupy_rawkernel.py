"""GPU portable: hand-written CUDA/HIP kernels through CuPy ``RawModule``.

One C++ source for NVIDIA and AMD (no warp intrinsics, no CUDA-only headers).
Elementwise operations move vectors of ``vector_width`` doubles (``double2``: 16-byte
loads and stores), ``unroll`` of them per thread with every load issued before the
first store; the dot product reduces in shared memory per block and adds each
block's sum with one atomicAdd.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..gpu import cupy, multiprocessors
from .variant import CupyStreamVariant

_SOURCE = r"""
// Overloads instead of vector-type operators: HIP defines those, CUDA does not.
__device__ inline double pb_axpy(double s, double x, double y) { return s * x + y; }
__device__ inline double2 pb_axpy(double s, double2 x, double2 y) { return make_double2(s * x.x + y.x, s * x.y + y.y); }
__device__ inline double pb_scale(double s, double x) { return s * x; }
__device__ inline double2 pb_scale(double s, double2 x) { return make_double2(s * x.x, s * x.y); }
__device__ inline double pb_add(double x, double y) { return x + y; }
__device__ inline double2 pb_add(double2 x, double2 y) { return make_double2(x.x + y.x, x.y + y.y); }
__device__ inline double pb_dot(double x, double y) { return x * y; }
__device__ inline double pb_dot(double2 x, double2 y) { return x.x * y.x + x.y * y.y; }

// Streaming (evict-first) loads and stores: every byte is touched once, so caching it only
// evicts something else. HIP spells these as nontemporal builtins.
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
template <typename T> __device__ inline T pb_load(const T* p, bool streaming) { return streaming ? __builtin_nontemporal_load(p) : *p; }
template <typename T> __device__ inline void pb_store(T* p, T v, bool streaming) { if (streaming) __builtin_nontemporal_store(v, p); else *p = v; }
#else
template <typename T> __device__ inline T pb_load(const T* p, bool streaming) { return streaming ? __ldcs(p) : *p; }
template <typename T> __device__ inline void pb_store(T* p, T v, bool streaming) { if (streaming) __stcs(p, v); else *p = v; }
#endif

// out = f(x, y, out): which operands an operation reads is a compile-time fact.
struct Copy    { enum { reads_y = 0, reads_out = 0 }; template <typename T> __device__ static T f(double, T x, T, T) { return x; } };
struct Scale   { enum { reads_y = 0, reads_out = 0 }; template <typename T> __device__ static T f(double s, T x, T, T) { return pb_scale(s, x); } };
struct Add     { enum { reads_y = 1, reads_out = 0 }; template <typename T> __device__ static T f(double, T x, T y, T) { return pb_add(x, y); } };
struct Triad   { enum { reads_y = 1, reads_out = 0 }; template <typename T> __device__ static T f(double s, T x, T y, T) { return pb_axpy(s, x, y); } };
struct Nstream { enum { reads_y = 1, reads_out = 1 }; template <typename T> __device__ static T f(double s, T x, T y, T o) { return pb_add(o, pb_axpy(s, x, y)); } };

// Each thread handles U vectors blockDim.x apart: all U loads are issued before the
// first store, so more bytes are in flight per thread (memory-level parallelism).
template <class Op, typename T, int U, bool S>
__global__ void stream_elementwise(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out,
                                   double s, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x * U;
  for (long long base = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; base < n; base += stride) {
    T vx[U], vy[U], vo[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const long long i = base + (long long)k * blockDim.x;
      if (i < n) {
        vx[k] = pb_load(x + i, S);
        if (Op::reads_y) vy[k] = pb_load(y + i, S);
        if (Op::reads_out) vo[k] = pb_load(out + i, S);
      }
    }
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const long long i = base + (long long)k * blockDim.x;
      if (i < n) pb_store(out + i, Op::f(s, vx[k], vy[k], vo[k]), S);
    }
  }
}

// Any blockDim.x <= 1024: the first halvings fold whatever lies beyond a power of two.
template <typename T>
__global__ void stream_dot(const T* __restrict__ a, const T* __restrict__ b, double* __restrict__ sum, long long n) {
  __shared__ double partial[1024];
  double acc = 0.0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    acc += pb_dot(a[i], b[i]);
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned int half = 512; half > 0; half /= 2) {
    if (threadIdx.x < half && threadIdx.x + half < blockDim.x) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum, partial[0]);
}
"""

# op -> (functor, x, y, out) in the STREAM naming (a, b, c).
_ELEMENTWISE = {
    "copy": ("Copy", "a", None, "c"),
    "scale": ("Scale", "c", None, "b"),
    "add": ("Add", "a", "b", "c"),
    "triad": ("Triad", "c", "b", "a"),
    "nstream": ("Nstream", "c", "b", "a"),
}
_VECTOR_TYPES = {1: "double", 2: "double2"}
_UNROLLS = (1, 2, 4)


def _elementwise_name(op: str, width: int, unroll: int, streaming: bool) -> str:
    return f"stream_elementwise<{_ELEMENTWISE[op][0]}, {_VECTOR_TYPES[width]}, {unroll}, {str(streaming).lower()}>"


@functools.cache
def _module() -> Any:
    names = [_elementwise_name(op, w, u, st) for op in _ELEMENTWISE for w in _VECTOR_TYPES for u in _UNROLLS
             for st in (False, True)]
    names += [f"stream_dot<{t}>" for t in _VECTOR_TYPES.values()]
    return cupy().RawModule(code=_SOURCE, options=("-std=c++14",), name_expressions=names)


class CupyRawKernel(CupyStreamVariant):
    name = "cupy-rawkernel"
    family = "portable"
    description = "CuPy RawModule kernels (CUDA/HIP source): double2 accesses, loads batched per thread"

    def __init__(
        self,
        threads_per_block: int = 640,
        blocks_per_sm: int = 0,
        vector_width: int = 2,
        unroll: int = 1,
        dot_blocks_per_sm: int = 8,
        streaming: bool = False,
    ) -> None:
        """``blocks_per_sm=0``: the grid covers the array (no grid-stride iterations).

        The defaults are the best of ``python -m portabench.implementations.stream.sweep``
        (this folder's EXPERIMENTS.md); the dot product always runs a grid-stride loop.
        """
        if vector_width not in _VECTOR_TYPES:
            raise ValueError(f"vector_width must be one of {sorted(_VECTOR_TYPES)}")
        if unroll not in _UNROLLS:
            raise ValueError(f"unroll must be one of {_UNROLLS}")
        if threads_per_block % 32 or not 32 <= threads_per_block <= 1024:
            raise ValueError("threads_per_block must be a multiple of 32 (a warp) in [32, 1024]")
        if blocks_per_sm < 0 or dot_blocks_per_sm < 1:
            raise ValueError("blocks_per_sm must be >= 0 and dot_blocks_per_sm >= 1")
        self.threads_per_block = threads_per_block
        self.blocks_per_sm = blocks_per_sm
        self.vector_width = vector_width
        self.unroll = unroll
        self.dot_blocks_per_sm = dot_blocks_per_sm
        self.streaming = streaming

    @property
    def config(self) -> str:
        return (f"t{self.threads_per_block} b{self.blocks_per_sm} w{self.vector_width} "
                f"u{self.unroll} db{self.dot_blocks_per_sm}{' streaming' if self.streaming else ''}")

    def bind(self, op: str, x: dict[str, Any], s: float) -> Callable[[], Any]:
        cp = cupy()
        n = int(next(iter(x.values())).size)
        # double2 needs an even n; otherwise the scalar instantiation runs.
        w = self.vector_width if n % self.vector_width == 0 else 1
        nv = np.int64(n // w)
        block = (self.threads_per_block,)
        if op == "dot":
            total = cp.zeros((), dtype=cp.float64)
            kernel = _module().get_function(f"stream_dot<{_VECTOR_TYPES[w]}>")
            grid = (max(1, min(self.dot_blocks_per_sm * multiprocessors(), -(-int(nv) // self.threads_per_block))),)

            def dot() -> Any:
                total.fill(0.0)
                kernel(grid, block, (x["a"], x["b"], total, nv))
                return total

            return dot
        kernel = _module().get_function(_elementwise_name(op, w, self.unroll, self.streaming))
        if self.threads_per_block > kernel.max_threads_per_block:
            raise ValueError(
                f"{op} with unroll {self.unroll} fits at most {kernel.max_threads_per_block} threads per block "
                f"on this GPU, not {self.threads_per_block}"
            )
        _, xn, yn, outn = _ELEMENTWISE[op]
        args = (x[xn], x[yn] if yn else x[xn], x[outn], np.float64(s), nv)
        tiles = -(-int(nv) // (self.threads_per_block * self.unroll))
        grid = (max(1, min(self.blocks_per_sm * multiprocessors(), tiles) if self.blocks_per_sm else tiles),)
        return lambda: kernel(grid, block, args)
