"""CuPy access for GPU variants: imported lazily, so a CPU-only install never needs it."""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any


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


def launchable(kernel: Any, threads: int, who: str) -> int:
    """``threads`` per block, or VariantUnavailable when ``kernel`` cannot launch that many here:
    a launch setting beyond what its registers allow is a skipped setting, not a failed run."""
    from .verification import VariantUnavailable

    limit = int(kernel.max_threads_per_block)
    if threads > limit:
        raise VariantUnavailable(f"{who}: {threads} threads per block exceed this kernel's limit here "
                                 f"({limit}: {kernel.num_regs} registers per thread)")
    return threads


def templated_kernel(source: str, kernel: str, *template: int) -> Any:
    """``kernel<template...>`` from CUDA ``source``, compiled once per instance: with sizes such
    as a tensor's order and rank compile-time constants, the loops over them unroll into registers."""
    return _compiled(source, f"{kernel}<{', '.join(str(int(t)) for t in template)}>")


@functools.cache
def _compiled(source: str, expression: str) -> Any:
    module = cupy().RawModule(code=source, options=("-std=c++14",), name_expressions=[expression])
    return module.get_function(expression)


# Arrays from this size on go through page-locked host memory: a pageable copy of a fresh process's
# first gigabytes ran at 1.2-2.6 GB/s on the H100 machine, a page-locked one at 54 GB/s (README.md).
PINNED_FROM_BYTES = 64 << 20
COPY_BLOCK_BYTES = 32 << 20


def _pinned_like(shape: tuple[int, ...], dtype: Any) -> Any:
    import numpy as np

    count = int(np.prod(shape, dtype=np.int64))
    memory = cupy().cuda.alloc_pinned_memory(max(1, count * np.dtype(dtype).itemsize))
    return np.frombuffer(memory, dtype, count).reshape(shape)  # keeps ``memory`` alive


def _copy_on_every_core(dst: Any, src: Any) -> None:
    """``dst[...] = src`` (both C-contiguous) in blocks on every core: NumPy's copy releases the GIL."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    flat_dst, flat_src = dst.reshape(-1), src.reshape(-1)
    step = max(1, COPY_BLOCK_BYTES // max(1, src.itemsize))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(lambda i: flat_dst.__setitem__(slice(i, i + step), flat_src[i:i + step]),
                      range(0, flat_src.size, step)))


def to_device(array: Any) -> Any:
    """A device copy of host ``array``; large ones staged through page-locked memory."""
    import numpy as np

    cp = cupy()
    if isinstance(array, cp.ndarray):
        return array
    array = np.asarray(array)
    if array.nbytes < PINNED_FROM_BYTES:
        return cp.asarray(array)
    staged = _pinned_like(array.shape, array.dtype)
    _copy_on_every_core(staged, np.ascontiguousarray(array))
    out = cp.empty(array.shape, array.dtype)
    out.set(staged)
    return out


def to_host(array: Any) -> Any:
    """A host copy of device ``array``; large ones land in page-locked memory."""
    cp = cupy()
    if not isinstance(array, cp.ndarray):
        import numpy as np

        return np.asarray(array)
    if array.nbytes < PINNED_FROM_BYTES:
        return cp.asnumpy(array)
    out = _pinned_like(array.shape, array.dtype)
    cp.ascontiguousarray(array).get(out=out)
    return out


class CupyArrays:
    """Mixin for a GPU variant whose arrays live in device memory (put it before the kernel's
    variant base): available where CuPy sees a GPU, host <-> device copies, runs synchronised,
    and an out-of-memory error in ``prepare`` turned into one line naming what did not fit
    (``gpu_footprint``). The prepared state (attributes starting with ``_``) is dropped first,
    so the memory pool can give the memory back."""

    device = "gpu"
    name: str

    @classmethod
    def unavailable(cls) -> str | None:
        return cupy_unavailable()

    def to_device(self, array: Any) -> Any:
        return to_device(array)

    def full(self, shape: Any, value: float) -> Any:
        return cupy().full(shape, value, dtype=cupy().float64)

    def to_host(self, array: Any) -> Any:
        import numpy as np

        return np.asarray(to_host(array), dtype=np.float64)

    def synchronize(self) -> None:
        synchronize()

    def gpu_footprint(self, problem: Any) -> tuple[str, float, str]:
        """(what the inputs are, their bytes, how to choose a smaller problem) for the out-of-memory message."""
        return "the inputs", float("nan"), "choose a smaller size (--size)"

    def prepare(self, problem: Any) -> None:
        from .model import PortabenchError

        cp = cupy()
        try:
            super().prepare(problem)  # type: ignore[misc]
        except cp.cuda.memory.OutOfMemoryError:
            for key in [k for k in vars(self) if k.startswith("_")]:
                delattr(self, key)
            cp.get_default_memory_pool().free_all_blocks()
            what, need, hint = self.gpu_footprint(problem)
            free = cp.cuda.Device().mem_info[0]
            raise PortabenchError(
                f"{self.name}: {what} ({need / 2**30:.1f} GiB, plus the variant's own arrays) do not fit in "
                f"GPU memory ({free / 2**30:.1f} GiB free): {hint}"
            ) from None
