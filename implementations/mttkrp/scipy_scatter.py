"""CPU vendor: the library formulation through SciPy: gather Khatri-Rao rows, one sparse product.

What a library user writes: for a chunk of nonzeros, gather the factor rows of every
other mode with ``np.take`` and multiply them into the Khatri-Rao rows (chunk x R), then
``V += S @ KR`` with the I_n x chunk scatter matrix S (entry (i_n, j) = x_j, CSR, built
once per mode in ``arrange``). Chunks keep the gathered rows at 128 MB whatever nnz and R.
SciPy's sparse product runs on one thread.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ..backends import HOST
from ..tensor_inputs import gather_kr
from .variant import MttkrpVariant, TensorArrays, kr_chunks, scatter_csr


def scatter_matrices(sparse: Any, xp: Any, tensor: TensorArrays, mode: int, rank: int) -> list[tuple[int, int, Any]]:
    """(start, stop, scatter matrix) per chunk of nonzeros (``sparse``/``xp``: SciPy/NumPy or cupyx/CuPy)."""
    return [(s, e, scatter_csr(sparse, xp, tensor, mode, s, e)) for s, e in kr_chunks(tensor.nnz, rank)]


class MttkrpScipyScatter(MttkrpVariant):
    name = "scipy-scatter"
    family = "vendor"
    backend = HOST
    description = "np.take gather of the Khatri-Rao rows, then SciPy CSR scatter matrix @ rows, chunked"

    def arrange(self, tensor: TensorArrays, mode: int, rank: int) -> tuple[TensorArrays, int, list]:
        return tensor, mode, scatter_matrices(sp, np, tensor, mode, rank)

    def bind(self, arranged: tuple[TensorArrays, int, list], factors: list[np.ndarray],
             out: np.ndarray) -> Callable[[], Any]:
        tensor, mode, chunks = arranged
        rank = out.shape[1]
        longest = max(e - s for s, e, _ in chunks)
        kr, tmp = np.empty((longest, rank)), np.empty((longest, rank))

        def call() -> None:
            for k, (start, stop, scatter) in enumerate(chunks):
                rows = gather_kr(np, factors, tensor.idx, mode, start, stop, kr, tmp)
                self.accumulate(scatter, rows, out, first=k == 0)

        return call

    def accumulate(self, scatter: Any, rows: np.ndarray, out: np.ndarray, first: bool) -> None:
        """``out (+)= scatter @ rows``: overwrite on the first chunk, add on the others."""
        if first:
            out[...] = scatter @ rows
        else:
            np.add(out, scatter @ rows, out=out)
