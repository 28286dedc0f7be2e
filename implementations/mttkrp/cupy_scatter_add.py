"""GPU vendor: the Khatri-Rao rows scaled by the values, summed into V by ``cupy.add.at``.

The other formulation a CuPy user writes: gather (``cp.take``), scale each row by its
nonzero's value, and let CuPy's built-in atomic scatter add the rows into V (``cupy.add.at``,
unbuffered as NumPy's: repeated indices all count; it replaces ``cupyx.scatter_add``, the same
operation, deprecated in CuPy 14). Chunked as ``cusparse_scatter``. Both library formulations are kept: the report compares the
portable variants with the faster one.
"""

from __future__ import annotations

from typing import Any, Callable

from ..gpu import cupy
from ..tensor_inputs import gather_kr
from .variant import CupyMttkrpVariant, TensorArrays, kr_chunks


class CupyScatterAdd(CupyMttkrpVariant):
    name = "cupy-scatter-add"
    family = "vendor"
    description = "cp.take gather of the Khatri-Rao rows times values, cupy.add.at into V, chunked"
    arranges = False

    def arrange(self, tensor: TensorArrays, mode: int, rank: int) -> tuple[TensorArrays, int]:
        return tensor, mode

    def bind(self, arranged: tuple[TensorArrays, int], factors: list[Any], out: Any) -> Callable[[], Any]:
        cp = cupy()
        tensor, mode = arranged
        rank = out.shape[1]
        chunks = kr_chunks(tensor.nnz, rank)
        longest = max(e - s for s, e in chunks)
        kr, tmp = cp.empty((longest, rank)), cp.empty((longest, rank))

        def call() -> None:
            out.fill(0.0)
            for start, stop in chunks:
                rows = gather_kr(cp, factors, tensor.idx, mode, start, stop, kr, tmp)
                rows *= tensor.values[start:stop, None]
                cp.add.at(out, tensor.idx[mode, start:stop], rows)

        return call
