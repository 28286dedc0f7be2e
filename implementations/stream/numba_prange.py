"""CPU portable: one Numba ``prange`` loop per operation (an OpenMP-style static split)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numba import njit, prange

from ..backends import HOST
from .variant import StreamVariant

# cache=True: a warm process loads the compiled kernels in milliseconds. "contract"
# lets LLVM fuse s*c + b into one FMA (within one rounding of the oracle).
_JIT: dict[str, Any] = dict(parallel=True, cache=True, nogil=True, fastmath={"contract"})
# Without reassociation the dot's sum is one dependent add chain per thread: latency
# bound at a third of the bandwidth. "reassoc" lets LLVM keep several vector partial
# sums, as an OpenMP ``simd reduction`` would.
_JIT_REDUCTION: dict[str, Any] = dict(_JIT, fastmath={"contract", "reassoc"})


@njit(**_JIT)
def _copy(a, c):
    for i in prange(a.shape[0]):
        c[i] = a[i]


@njit(**_JIT)
def _scale(c, b, s):
    for i in prange(c.shape[0]):
        b[i] = s * c[i]


@njit(**_JIT)
def _add(a, b, c):
    for i in prange(a.shape[0]):
        c[i] = a[i] + b[i]


@njit(**_JIT)
def _triad(b, c, a, s):
    for i in prange(b.shape[0]):
        a[i] = b[i] + s * c[i]


@njit(**_JIT_REDUCTION)
def _dot(a, b):
    total = 0.0
    for i in prange(a.shape[0]):
        total += a[i] * b[i]
    return total


@njit(**_JIT)
def _nstream(a, b, c, s):
    for i in prange(a.shape[0]):
        a[i] += b[i] + s * c[i]


class StreamNumbaPrange(StreamVariant):
    name = "numba-prange"
    family = "portable"
    backend = HOST
    description = "Numba @njit(parallel=True): one prange loop per operation"

    def bind(self, op: str, x: dict[str, np.ndarray], s: float) -> Callable[[], Any]:
        return {
            "copy": lambda: _copy(x["a"], x["c"]),
            "scale": lambda: _scale(x["c"], x["b"], s),
            "add": lambda: _add(x["a"], x["b"], x["c"]),
            "triad": lambda: _triad(x["b"], x["c"], x["a"], s),
            "dot": lambda: _dot(x["a"], x["b"]),
            "nstream": lambda: _nstream(x["a"], x["b"], x["c"], s),
        }[op]
