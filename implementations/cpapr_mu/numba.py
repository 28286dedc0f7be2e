"""CPU portable: MU on the project's Numba Π (``pi``'s ``numba-prange``) and Numba Φ: ``phi``'s
``numba-privatized`` (nonzeros in file order, a private Φ per thread; on CPUs it beats the
segmented Algorithm 4, whose gathers through the permutation cost 2-5x, ``phi/README.md``), or
``numba-segmented`` for a mode whose rows are too many for private copies; the KKT check and the
update in one Numba loop."""

from __future__ import annotations

import numba
import numpy as np

from ..phi.numba_privatized import NumbaPrivatized
from ..phi.numba_segmented import NumbaSegmented
from ..pi.numba_prange import NumbaPrange
from ..tensor_inputs import TensorArrays
from .variant import Calls, MuVariant, bound_calls

# The private copies (threads x I_n x R, zeroed and summed every call) must stay a small share of
# Φ's reads (nnz x R): beyond 1/8, the mode's Φ is the segmented one (lbnl's 51 k-row mode at 100 k
# nonzeros).
PRIVATE_SHARE = 8


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
    device = "cpu"
    description = "Numba Π (prange) and Φ (a private Φ per thread, or segmented for modes of many rows), fused KKT and update"

    def build(self, tensor: TensorArrays, factors: list[np.ndarray], pi: np.ndarray, phis: list[np.ndarray],
              epsilon: float) -> Calls:
        threads = numba.get_num_threads()
        phi_variants = [NumbaPrivatized() if threads * dim * PRIVATE_SHARE <= tensor.nnz else NumbaSegmented()
                        for dim in tensor.dims]
        return bound_calls(NumbaPrange(), phi_variants, tensor, factors, pi, phis, epsilon)

    def kkt_update(self, b: np.ndarray, phi: np.ndarray, stoptol: float) -> float:
        return _kkt_update(b, phi, stoptol)
