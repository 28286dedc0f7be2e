"""CuPy access for GPU variants: imported lazily, so a CPU-only install never needs it."""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from .backends import CUPY
from .model import PortabenchError, Problem, smaller_size_hint

# Loads of arrays a kernel reads once, for CUDA sources: evict-first, and each miss brings the 256
# bytes around it into L2, so that a stream's next short reads find their bytes there (PTX
# ``ld.global.cs.L2::256B``, sm_80 and later); plain loads on ROCm and older GPUs. Faster where each
# step of a warp reads few contiguous bytes of a stream (CSR16's streams, MTTKRP's indices), slower in
# the BCSR block kernels (implementations/bcsr/EXPERIMENTS.md, implementations/mttkrp/EXPERIMENTS.md).
# PB_PTX_SM80 is 1 where a source may use sm_80's PTX (CUDA, sm_80 and later).
STREAMED_LOADS = r"""
#if !(defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)) && __CUDA_ARCH__ >= 800
#define PB_PTX_SM80 1
#else
#define PB_PTX_SM80 0
#endif
#if !PB_PTX_SM80
template <typename T> __device__ __forceinline__ T pb_load_streamed(const T* p) { return *p; }
#else
__device__ __forceinline__ double pb_load_streamed(const double* p) {
    double v;
    asm("ld.global.cs.L2::256B.f64 %0, [%1];" : "=d"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ int pb_load_streamed(const int* p) {
    int v;
    asm("ld.global.cs.L2::256B.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ unsigned short pb_load_streamed(const unsigned short* p) {
    unsigned short v;
    asm("ld.global.cs.L2::256B.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ int2 pb_load_streamed(const int2* p) {
    int2 t;
    asm("ld.global.cs.L2::256B.v2.s32 {%0, %1}, [%2];" : "=r"(t.x), "=r"(t.y) : "l"(p));
    return t;
}
__device__ __forceinline__ int4 pb_load_streamed(const int4* p) {
    int4 t;
    asm("ld.global.cs.L2::256B.v4.s32 {%0, %1, %2, %3}, [%4];" : "=r"(t.x), "=r"(t.y), "=r"(t.z), "=r"(t.w) : "l"(p));
    return t;
}
__device__ __forceinline__ float2 pb_load_streamed(const float2* p) {
    float2 t;
    asm("ld.global.cs.L2::256B.v2.f32 {%0, %1}, [%2];" : "=f"(t.x), "=f"(t.y) : "l"(p));
    return t;
}
__device__ __forceinline__ float4 pb_load_streamed(const float4* p) {
    float4 t;
    asm("ld.global.cs.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(t.x), "=f"(t.y), "=f"(t.z), "=f"(t.w) : "l"(p));
    return t;
}
__device__ __forceinline__ double2 pb_load_streamed(const double2* p) {
    double2 t;
    asm("ld.global.cs.L2::256B.v2.f64 {%0, %1}, [%2];" : "=d"(t.x), "=d"(t.y) : "l"(p));
    return t;
}
#endif
"""

# A shuffle down within groups of ``width`` lanes (a power of two, at most the warp), for CUDA and
# HIP sources: HIP spells it without the mask of active lanes.
WARP_SHUFFLE = r"""
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#define PB_SHFL_DOWN(v, d, width) __shfl_down((v), (d), (width))
#else
#define PB_SHFL_DOWN(v, d, width) __shfl_down_sync(0xffffffffu, (v), (d), (width))
#endif
"""


@functools.cache
def cupy_unavailable() -> str | None:
    """Why CuPy cannot run GPU code here, or None."""
    try:
        import cupy
    except ImportError as exc:
        return f"CuPy is not installed (pip install 'portabench[gpu-cuda12]' or '[gpu-cuda13]'): {exc}"
    except Exception as exc:  # a broken CUDA install raises other errors at import
        return f"CuPy failed to import: {exc}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"no GPU visible to CuPy: {exc}"
    if count < 1:
        return "no GPU visible to CuPy"
    return None


def cupy() -> ModuleType:
    """The cupy module; call only after ``cupy_unavailable()`` returned None."""
    import cupy as cp

    return cp


def synchronize() -> None:
    """Wait for all work on the current device."""
    cupy().cuda.Device().synchronize()


def multiprocessors() -> int:
    """The current GPU's streaming multiprocessors (compute units on ROCm), read once a device:
    grids sized to fill the GPU and no more are a multiple of it."""
    return _multiprocessors(int(cupy().cuda.Device().id))


@functools.cache
def _multiprocessors(device: int) -> int:
    return int(cupy().cuda.Device(device).attributes["MultiProcessorCount"])


def launchable(kernel: Any, threads: int, who: str) -> int:
    """``threads`` per block, or VariantUnavailable when ``kernel`` cannot launch that many here:
    a launch setting beyond what its registers allow is a skipped setting, not a failed run."""
    from .verification import VariantUnavailable

    limit = int(kernel.max_threads_per_block)
    if threads > limit:
        raise VariantUnavailable(f"{who}: {threads} threads per block exceed this kernel's limit here "
                                 f"({limit}: {kernel.num_regs} registers per thread)")
    return threads


def allow_shared_memory(kernel: Any, nbytes: int) -> None:
    """Let ``kernel`` launch with ``nbytes`` of dynamic shared memory (beyond 48 KiB needs an opt-in).
    Compiled kernels are shared between variants: the limit is only raised, never lowered under what
    another variant's launches of the same kernel ask."""
    if nbytes > 48 * 1024 and nbytes > int(kernel.max_dynamic_shared_size_bytes):
        kernel.max_dynamic_shared_size_bytes = nbytes


def templated_kernel(source: str, kernel: str, *template: int) -> Any:
    """``kernel<template...>`` from CUDA ``source``, compiled once per instance: with sizes such
    as a tensor's order and rank compile-time constants, the loops over them unroll into registers."""
    return _compiled(source, f"{kernel}<{', '.join(str(int(t)) for t in template)}>")


@functools.cache
def _compiled(source: str, expression: str) -> Any:
    module = cupy().RawModule(code=source, options=("-std=c++14",), name_expressions=[expression])
    return module.get_function(expression)


# Arrays from this size on are copied in blocks through two reused page-locked buffers. asv forks a
# fresh process per benchmark, and there CuPy's own copies of gigabytes are slow (the pages of every
# transfer get locked; locking a whole array first does not help): results/EXPERIMENTS.md.
STAGED_FROM_BYTES = 64 << 20
STAGE_BYTES = 64 << 20
HOST_TO_DEVICE, DEVICE_TO_HOST = 1, 2  # cudaMemcpyKind
COPY_THREADS = 8


@functools.cache
def _stages() -> tuple[Any, Any]:
    import numpy as np

    cp = cupy()
    return tuple(np.frombuffer(cp.cuda.alloc_pinned_memory(STAGE_BYTES), np.uint8) for _ in range(2))


def _copy(pool: Any, dst: Any, src: Any) -> None:
    """``dst[:] = src`` (1-D bytes) in pieces on the ``pool``'s threads: NumPy's copy releases the GIL,
    and a fresh destination's page faults are shared out too."""
    piece = -(-src.size // COPY_THREADS)
    list(pool.map(lambda i: dst.__setitem__(slice(i, i + piece), src[i:i + piece]), range(0, src.size, piece)))


def _copy_threads() -> Any:
    """A thread pool for one transfer (none outlives it: the oracles fork worker processes)."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=min(COPY_THREADS, os.cpu_count() or 1))


def _as_bytes(array: Any) -> Any:
    return array.reshape(-1).view("uint8") if array.size else array.reshape(-1)


def to_device(array: Any) -> Any:
    """A device copy of host ``array`` (large ones staged: the copy into one buffer overlaps the
    transfer from the other)."""
    import numpy as np

    cp = cupy()
    if isinstance(array, cp.ndarray):
        return array
    array = np.ascontiguousarray(array)
    if array.nbytes < STAGED_FROM_BYTES:
        return cp.asarray(array)
    out = cp.empty(array.shape, array.dtype)
    src, dst, stream = _as_bytes(array), _as_bytes(out), cp.cuda.get_current_stream()
    done: list[Any] = [None, None]
    with _copy_threads() as pool:
        for k, start in enumerate(range(0, src.size, STAGE_BYTES)):
            stage, count = _stages()[k % 2], min(STAGE_BYTES, src.size - start)
            if done[k % 2] is not None:
                done[k % 2].synchronize()  # its last transfer has left the buffer
            _copy(pool, stage[:count], src[start:start + count])
            cp.cuda.runtime.memcpyAsync(dst.data.ptr + start, stage.ctypes.data, count, HOST_TO_DEVICE, stream.ptr)
            done[k % 2] = stream.record()
    stream.synchronize()
    return out


def to_host(array: Any) -> Any:
    """A host copy of device ``array`` (large ones staged: the next block's transfer overlaps the
    copy out of the last)."""
    import numpy as np

    cp = cupy()
    if not isinstance(array, cp.ndarray):
        return np.asarray(array)
    if array.nbytes < STAGED_FROM_BYTES:
        return cp.asnumpy(array)
    array = cp.ascontiguousarray(array)
    out = np.empty(array.shape, array.dtype)
    src, dst, stream = _as_bytes(array), _as_bytes(out), cp.cuda.get_current_stream()
    starts = list(range(0, src.size, STAGE_BYTES))
    done: list[Any] = []

    def fetch(k: int) -> None:
        count = min(STAGE_BYTES, src.size - starts[k])
        cp.cuda.runtime.memcpyAsync(_stages()[k % 2].ctypes.data, src.data.ptr + starts[k], count, DEVICE_TO_HOST,
                                    stream.ptr)
        done.append(stream.record())

    fetch(0)
    with _copy_threads() as pool:
        for k, start in enumerate(starts):
            if k + 1 < len(starts):
                fetch(k + 1)
            done[k].synchronize()
            count = min(STAGE_BYTES, src.size - start)
            _copy(pool, dst[start:start + count], _stages()[k % 2][:count])
    return out


class CupyArrays:
    """Mixin for a GPU variant whose arrays live in device memory (put it before the kernel's
    variant base): the CuPy backend (available where CuPy sees a GPU), host <-> device copies,
    runs synchronised, and an out-of-memory error in ``prepare`` turned into one line naming what
    did not fit (the problem's ``device_footprint``) and how to choose a smaller problem. The
    prepared state (attributes starting with ``_``) is dropped first, so the memory pool can give
    the memory back."""

    backend = CUPY
    name: str

    def to_device(self, array: Any) -> Any:
        return to_device(array)

    def full(self, shape: Any, value: float) -> Any:
        return cupy().full(shape, value, dtype=cupy().float64)

    def to_host(self, array: Any) -> Any:
        import numpy as np

        return np.asarray(to_host(array), dtype=np.float64)

    def synchronize(self) -> None:
        synchronize()

    def prepare(self, problem: Problem) -> None:
        from . import get_kernel

        cp = cupy()
        try:
            super().prepare(problem)  # type: ignore[misc]
        except cp.cuda.memory.OutOfMemoryError:
            for key in [k for k in vars(self) if k.startswith("_")]:
                delattr(self, key)
            cp.get_default_memory_pool().free_all_blocks()
            what, need = problem.device_footprint()
            free = cp.cuda.Device().mem_info[0]
            raise PortabenchError(
                f"{self.name}: {what} ({need / 2**30:.1f} GiB, plus the variant's own arrays) do not fit in "
                f"GPU memory ({free / 2**30:.1f} GiB free): {smaller_size_hint(get_kernel(problem.kernel))}"
            ) from None
