"""CPU portable: MU on the project's Numba Π (``pi``'s ``numba-prange``) and Numba Φ (``phi``'s
``numba-segmented``, the paper [000]'s Algorithm 4), both on the nonzeros in each mode's row order, as
the GPU variant ``cupy`` does: the tensor is sorted by the mode's rows once per mode (untimed), Π is
written in that order, and Φ reads Π, the rows and the values streamed (its permutation is the
identity) instead of gathering Π rows through a permutation on every one of the l_max calls. The
KKT check and the update in one Numba loop."""

from __future__ import annotations

import numba
import numpy as np

from ..backends import HOST
from ..phi.numba_segmented import PhiNumbaSegmented
from ..phi.variant import row_order
from ..pi.numba_prange import PiNumbaPrange
from ..tensor_inputs import TensorArrays
from .variant import Calls, MuVariant


@numba.njit(cache=True)  # serial: I_n x R is small beside Φ, and a parallel launch costs more than it saves
def _kkt_update(b, phi, stoptol):
    rows, rank = b.shape
    worst = 0.0
    for i in range(rows):
        for r in range(rank):
            worst = max(worst, abs(min(b[i, r], 1.0 - phi[i, r])))
    if worst >= stoptol:
        for i in range(rows):
            for r in range(rank):
                b[i, r] *= phi[i, r]
    return worst


class NumbaMu(MuVariant):
    name = "numba"
    family = "portable"
    backend = HOST
    description = "Numba Π (prange) and segmented Φ on the nonzeros in each mode's row order, fused KKT and update"

    def build(self, tensors: list[TensorArrays], factors: list[np.ndarray], pis: list[np.ndarray],
              phis: list[np.ndarray], epsilon: float) -> Calls:
        pi_variant, phi_variant = PiNumbaPrange(), PhiNumbaSegmented()
        calls = []
        for n, (tensor, pi) in enumerate(zip(tensors, pis)):
            perm = row_order(np, tensor.idx[n])
            ordered = TensorArrays(np.ascontiguousarray(tensor.idx[:, perm]), np.ascontiguousarray(tensor.values[perm]),
                                   tensor.dims)
            identity = np.arange(tensor.nnz, dtype=perm.dtype)
            calls.append((pi_variant.bind((ordered, n), factors, pi),
                          phi_variant.bind((identity, ordered.idx[n], ordered.values), factors[n], pi, epsilon,
                                           phis[n], "none")))
        return calls

    def kkt_update(self, b: np.ndarray, phi: np.ndarray, stoptol: float) -> float:
        return _kkt_update(b, phi, stoptol)
