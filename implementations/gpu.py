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


def templated_kernel(source: str, kernel: str, *template: int) -> Any:
    """``kernel<template...>`` from CUDA ``source``, compiled once per instance: with sizes such
    as a tensor's order and rank compile-time constants, the loops over them unroll into registers."""
    return _compiled(source, f"{kernel}<{', '.join(str(int(t)) for t in template)}>")


@functools.cache
def _compiled(source: str, expression: str) -> Any:
    module = cupy().RawModule(code=source, options=("-std=c++14",), name_expressions=[expression])
    return module.get_function(expression)
