"""CPU vendor: NumPy ufuncs writing in place (``out=``); BLAS where one call does the op.

NumPy has no fused multiply-add ufunc, so triad takes two passes (it really moves
40 B per element, not 24); nstream is two in-place BLAS ``daxpy`` calls (48 B, not
32); dot is BLAS ``ddot``. The work model counts the compulsory bytes, so the
vendor variant pays for its extra passes, as a library user's code would.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from scipy.linalg import blas

from ..backends import HOST
from .variant import StreamVariant


class NumpyUfunc(StreamVariant):
    name = "numpy"
    family = "vendor"
    backend = HOST
    description = "NumPy ufuncs with out= (copyto, multiply, add); BLAS ddot for dot, daxpy for nstream"

    def bind(self, op: str, x: dict[str, np.ndarray], s: float) -> Callable[[], Any]:
        a, b, c = x.get("a"), x.get("b"), x.get("c")
        if op == "copy":
            return lambda: np.copyto(c, a)
        if op == "scale":
            return lambda: np.multiply(c, s, out=b)
        if op == "add":
            return lambda: np.add(a, b, out=c)
        if op == "triad":
            return lambda: np.add(b, np.multiply(c, s, out=a), out=a)
        if op == "dot":
            return lambda: np.dot(a, b)
        if op == "nstream":
            def nstream() -> None:
                # daxpy overwrites its y argument in place for a contiguous float64 y.
                blas.daxpy(b, a, a=1.0)
                blas.daxpy(c, a, a=s)

            return nstream
        raise KeyError(op)
