"""GPU portable: hand-written CUDA/HIP kernels through CuPy ``RawModule``.

One C++ source for NVIDIA and AMD (no warp intrinsics, no CUDA-only headers).
Elementwise operations run one vector of ``vector_width`` doubles per thread
(``double2``: 16-byte loads and stores) with a grid-stride loop; the dot product
reduces in shared memory per block and adds each block's sum with one atomicAdd.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..gpu import cupy, cupy_unavailable, synchronize
from .variant import StreamVariant

_SOURCE = r"""
// Overloads instead of vector-type operators: HIP defines those, CUDA does not.
__device__ inline double pb_axpy(double s, double x, double y) { return s * x + y; }
__device__ inline double2 pb_axpy(double s, double2 x, double2 y) { return make_double2(s * x.x + y.x, s * x.y + y.y); }
__device__ inline double pb_scale(double s, double x) { return s * x; }
__device__ inline double2 pb_scale(double s, double2 x) { return make_double2(s * x.x, s * x.y); }
__device__ inline double pb_add(double x, double y) { return x + y; }
__device__ inline double2 pb_add(double2 x, double2 y) { return make_double2(x.x + y.x, x.y + y.y); }

#define PB_FOR(i, n) \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (long long)gridDim.x * blockDim.x)

template <typename T>
__global__ void stream_copy(const T* __restrict__ a, T* __restrict__ c, long long n) {
  PB_FOR(i, n) c[i] = a[i];
}
template <typename T>
__global__ void stream_scale(const T* __restrict__ c, T* __restrict__ b, double s, long long n) {
  PB_FOR(i, n) b[i] = pb_scale(s, c[i]);
}
template <typename T>
__global__ void stream_add(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, long long n) {
  PB_FOR(i, n) c[i] = pb_add(a[i], b[i]);
}
template <typename T>
__global__ void stream_triad(const T* __restrict__ b, const T* __restrict__ c, T* __restrict__ a, double s, long long n) {
  PB_FOR(i, n) a[i] = pb_axpy(s, c[i], b[i]);
}
template <typename T>
__global__ void stream_nstream(T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ c, double s, long long n) {
  PB_FOR(i, n) a[i] = pb_add(a[i], pb_axpy(s, c[i], b[i]));
}

// blockDim.x must be a power of two <= 1024.
extern "C" __global__ void stream_dot(const double* __restrict__ a, const double* __restrict__ b,
                                      double* __restrict__ sum, long long n) {
  __shared__ double partial[1024];
  double acc = 0.0;
  PB_FOR(i, n) acc += a[i] * b[i];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum, partial[0]);
}
"""

_ELEMENTWISE = ("copy", "scale", "add", "triad", "nstream")
_VECTOR_TYPES = {1: "double", 2: "double2"}


@functools.cache
def _module() -> Any:
    cp = cupy()
    names = [f"stream_{op}<{t}>" for op in _ELEMENTWISE for t in _VECTOR_TYPES.values()]
    return cp.RawModule(code=_SOURCE, options=("-std=c++14",), name_expressions=names)


class CupyRawKernel(StreamVariant):
    name = "cupy-rawkernel"
    family = "portable"
    device = "gpu"
    description = "CuPy RawModule kernels (CUDA/HIP source), double2 accesses, grid-stride loop"

    def __init__(self, threads_per_block: int = 256, blocks_per_sm: int = 0, vector_width: int = 2) -> None:
        """``blocks_per_sm=0``: one loop iteration per thread (grid covers the array)."""
        if vector_width not in _VECTOR_TYPES:
            raise ValueError(f"vector_width must be one of {sorted(_VECTOR_TYPES)}")
        if threads_per_block & (threads_per_block - 1) or not 32 <= threads_per_block <= 1024:
            raise ValueError("threads_per_block must be a power of two in [32, 1024]")
        self.threads_per_block = threads_per_block
        self.blocks_per_sm = blocks_per_sm
        self.vector_width = vector_width

    @classmethod
    def unavailable(cls) -> str | None:
        return cupy_unavailable()

    def to_device(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        return {k: cupy().asarray(v) for k, v in arrays.items()}

    def to_host(self, array: Any) -> np.ndarray:
        return np.asarray(cupy().asnumpy(array), dtype=np.float64)

    def synchronize(self) -> None:
        synchronize()

    def _grid(self, work_items: int) -> int:
        if self.blocks_per_sm > 0:
            sms = cupy().cuda.Device().attributes["MultiProcessorCount"]
            return max(1, min(self.blocks_per_sm * sms, -(-work_items // self.threads_per_block)))
        return max(1, -(-work_items // self.threads_per_block))

    def bind(self, op: str, x: dict[str, Any], s: float) -> Callable[[], Any]:
        cp = cupy()
        n = int(next(iter(x.values())).size)
        block = (self.threads_per_block,)
        if op == "dot":
            total = cp.zeros((), dtype=cp.float64)
            kernel = _module().get_function("stream_dot")
            grid = (self._grid(n) if self.blocks_per_sm else 4 * cp.cuda.Device().attributes["MultiProcessorCount"],)

            def dot() -> Any:
                total.fill(0.0)
                kernel(grid, block, (x["a"], x["b"], total, np.int64(n)))
                return total

            return dot
        # double2 needs an even n; otherwise the scalar instantiation runs.
        w = self.vector_width if n % self.vector_width == 0 else 1
        kernel = _module().get_function(f"stream_{op}<{_VECTOR_TYPES[w]}>")
        s64, nv = np.float64(s), np.int64(n // w)
        args = {
            "copy": (x.get("a"), x.get("c"), nv),
            "scale": (x.get("c"), x.get("b"), s64, nv),
            "add": (x.get("a"), x.get("b"), x.get("c"), nv),
            "triad": (x.get("b"), x.get("c"), x.get("a"), s64, nv),
            "nstream": (x.get("a"), x.get("b"), x.get("c"), s64, nv),
        }[op]
        grid = (self._grid(n // w),)
        return lambda: kernel(grid, block, args)
