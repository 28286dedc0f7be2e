"""CPU vendor: Π as a NumPy user writes it: ``np.take`` of each other factor's rows, multiplied
(``tensor_inputs.gather_kr``), straight into Π; one thread."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..backends import HOST
from ..tensor_inputs import TensorArrays, gather_kr
from .variant import PiVariant

CHUNK_ROWS = 1 << 20  # the scratch array's rows (80 MB at R = 10)


def take_call(xp: Any, tensor: TensorArrays, mode: int, factors: list[Any], out: Any) -> Callable[[], Any]:
    """Π by the array library ``xp``'s gathers and multiplies, in chunks of nonzeros."""
    step = max(1, min(CHUNK_ROWS, tensor.nnz))
    tmp = xp.empty((step, out.shape[1]))

    def call() -> None:
        for start in range(0, tensor.nnz, step):
            stop = min(start + step, tensor.nnz)
            gather_kr(xp, factors, tensor.idx, mode, start, stop, out[start:stop], tmp)

    return call


class NumpyTake(PiVariant):
    name = "numpy-take"
    family = "vendor"
    backend = HOST
    description = "np.take of each other factor's rows by index, multiplied in place"

    def bind(self, arranged: tuple[TensorArrays, int], factors: list[np.ndarray], out: np.ndarray) -> Callable[[], Any]:
        tensor, mode = arranged
        return take_call(np, tensor, mode, factors, out)
