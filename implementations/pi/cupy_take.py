"""GPU vendor: Π by CuPy built-ins: ``cupy.take`` of each other factor's rows, multiplied."""

from __future__ import annotations

from typing import Any, Callable

from ..gpu import cupy
from ..tensor_inputs import TensorArrays
from .numpy_take import take_call
from .variant import CupyPiVariant


class CupyTake(CupyPiVariant):
    name = "cupy-take"
    family = "vendor"
    description = "cupy.take of each other factor's rows by index, multiplied in place"

    def bind(self, arranged: tuple[TensorArrays, int], factors: list[Any], out: Any) -> Callable[[], Any]:
        tensor, mode = arranged
        return take_call(cupy(), tensor, mode, factors, out)
