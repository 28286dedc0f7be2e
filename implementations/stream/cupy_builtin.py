"""GPU vendor: CuPy built-ins and cuBLAS, as a library user would write STREAM.

copy is ``cupy.copyto`` (a device-to-device memcpy), scale and add are ufuncs with
``out=``, dot is cuBLAS ``ddot``. No library call fuses triad or nstream: triad is a
multiply then an in-place add (5 array passes, not 3), nstream two cuBLAS ``daxpy``
(6, not 4). The work model counts the compulsory bytes, as for every variant.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..gpu import cupy
from .variant import CupyStreamVariant


class CupyBuiltin(CupyStreamVariant):
    name = "cupy-builtin"
    family = "vendor"
    description = "CuPy built-ins (copyto, multiply/add with out=) and cuBLAS (dot, axpy)"

    def bind(self, op: str, x: dict[str, Any], s: float) -> Callable[[], Any]:
        cp = cupy()
        from cupy import cublas

        a, b, c = x.get("a"), x.get("b"), x.get("c")
        if op == "copy":
            return lambda: cp.copyto(c, a)
        if op == "scale":
            return lambda: cp.multiply(c, s, out=b)
        if op == "add":
            return lambda: cp.add(a, b, out=c)
        if op == "triad":
            return lambda: cp.add(b, cp.multiply(c, s, out=a), out=a)
        if op == "dot":
            return lambda: cublas.dot(a, b)
        if op == "nstream":
            one, scalar = np.float64(1.0), np.float64(s)

            def nstream() -> None:
                cublas.axpy(one, b, a)
                cublas.axpy(scalar, c, a)

            return nstream
        raise KeyError(op)
