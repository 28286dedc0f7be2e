"""GPU vendor: the library formulation through cuSPARSE: gather Khatri-Rao rows, one sparse product.

As ``scipy_scatter`` on the GPU: ``cp.take`` gathers the factor rows of a chunk of
nonzeros into the Khatri-Rao rows, then cupyx's CSR ``S @ KR`` (cuSPARSE SpMM) scatters
them into V. Chunks bound the gathered rows at 128 MB (at nell-2's size and R = 64 the
unchunked rows would take 39 GB, twice).
"""

from __future__ import annotations

from typing import Any, Callable

from ..gpu import cupy
from .scipy_scatter import scatter_matrices
from ..tensor_inputs import gather_kr
from .variant import CupyMttkrpVariant, TensorArrays


class MttkrpCusparseScatter(CupyMttkrpVariant):
    name = "cusparse-scatter"
    family = "vendor"
    description = "cp.take gather of the Khatri-Rao rows, then cuSPARSE CSR scatter matrix @ rows, chunked"

    def arrange(self, tensor: TensorArrays, mode: int, rank: int) -> tuple[TensorArrays, int, list]:
        import cupyx.scipy.sparse as cusp

        return tensor, mode, scatter_matrices(cusp, cupy(), tensor, mode, rank)

    def bind(self, arranged: tuple[TensorArrays, int, list], factors: list[Any], out: Any) -> Callable[[], Any]:
        cp = cupy()
        tensor, mode, chunks = arranged
        rank = out.shape[1]
        longest = max(e - s for s, e, _ in chunks)
        kr, tmp = cp.empty((longest, rank)), cp.empty((longest, rank))

        def call() -> None:
            for k, (start, stop, scatter) in enumerate(chunks):
                rows = gather_kr(cp, factors, tensor.idx, mode, start, stop, kr, tmp)
                if k == 0:
                    out[...] = scatter @ rows
                else:
                    cp.add(out, scatter @ rows, out=out)

        return call
