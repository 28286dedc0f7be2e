"""Kernels and their variants, listed and fetched through one API.

    >>> from portabench.implementations import get_kernel, list_variants
    >>> [v.name for v in list_variants("stream", device="cpu")]
    ['numba-prange', 'numpy']

Adding a kernel: a subpackage with its definition and variant modules, plus its name
in ``KERNEL_PACKAGES`` below. Kernels are imported on first use; their inputs come from
``portabench.datasets``, the floor below, which also holds the error types (``datasets/errors.py``,
re-exported by ``model``).
"""

from __future__ import annotations

import functools
import importlib

from .model import (
    Check,
    Device,
    Family,
    Kernel,
    PortabenchError,
    Problem,
    UnknownNameError,
    Variant,
    Work,
    WrongAnswerError,
)

KERNEL_PACKAGES = ("stream", "batched_spmv", "gmres", "mttkrp", "phi", "pi", "bcsr", "cpapr_mu", "cpapr_pdnr")


@functools.cache
def _kernel(package: str) -> Kernel:
    # One kernel's package at a time: an asv process benchmarks one kernel, and importing every
    # kernel's variants would add a large share of its start-up.
    kernel = importlib.import_module(f"{__name__}.{package}").KERNEL
    if kernel.name != package:
        raise ValueError(f"kernel package {package} registers a kernel named {kernel.name!r}")
    return kernel


def list_kernels() -> list[str]:
    """Names of all kernels (each is its package's name)."""
    return list(KERNEL_PACKAGES)


def get_kernel(name: str) -> Kernel:
    """The kernel called ``name``."""
    if name not in KERNEL_PACKAGES:
        raise UnknownNameError(f"unknown kernel {name!r}; known: {', '.join(KERNEL_PACKAGES)}")
    return _kernel(name)


def list_variants(kernel: str | None = None, device: Device | None = None, family: Family | None = None) -> list[type[Variant]]:
    """Variants, optionally of one kernel, device (those running on it) or family (available or not)."""
    kernels = [get_kernel(kernel)] if kernel else [get_kernel(k) for k in KERNEL_PACKAGES]
    return [
        v
        for k in kernels
        for v in k.variants
        if (device is None or v.runs_on(device)) and (family is None or v.family == family)
    ]


def get_variant(kernel: str, name: str) -> type[Variant]:
    """The variant class ``name`` of ``kernel``."""
    return get_kernel(kernel).variant(name)


__all__ = [
    "Check", "Device", "Family", "Kernel", "PortabenchError", "Problem", "UnknownNameError",
    "Variant", "Work", "WrongAnswerError", "get_kernel", "get_variant", "list_kernels", "list_variants",
]
