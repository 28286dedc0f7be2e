"""GPU portable: MU on the project's CuPy kernels: Π written in each mode's row order (``pi``'s
``cupy-rows-sorted``) and Φ reading it streamed (``phi``'s segmented warp kernel, as
``cupy-segmented-presorted``), with the KKT check and the update as CuPy kernels.

Π is computed once per mode and read by l_max Φ calls, so writing it in the row order Φ wants
pays l_max times (the sorted write costs about one Φ's gather through the permutation:
``implementations/pi/EXPERIMENTS.md``). Both use the same permutation, built once
per mode (``arrange``, untimed).
"""

from __future__ import annotations

import functools
from typing import Any

from ..gpu import cupy
from ..phi.cupy_segmented import PhiCupySegmented
from ..pi.cupy_rows_sorted import CupyRowsSorted
from ..tensor_inputs import TensorArrays, UpToMaxOrder
from .variant import Calls, CupyMuVariant


class _PresortedPhi(PhiCupySegmented):
    """The segmented Φ reading Π already in row order: the solver's Π kernel writes it so."""

    def __init__(self) -> None:
        super().__init__(pi_order="sorted")

    def _row_ordered(self, pi: Any, perm: Any) -> Any:
        return pi


class CupyMu(UpToMaxOrder, CupyMuVariant):  # its Π is pi's cupy-rows-sorted
    name = "cupy"
    family = "portable"
    description = "CuPy kernels: Π written in row order, segmented warp Φ reading it streamed, KKT and update kernels"

    def build(self, tensors: list[TensorArrays], factors: list[Any], pis: list[Any], phis: list[Any],
              epsilon: float) -> Calls:
        pi_variant, phi_variant = CupyRowsSorted(), _PresortedPhi()
        calls = []
        for n, (tensor, pi) in enumerate(zip(tensors, pis)):
            arranged = phi_variant.arrange(tensor, n)  # (P, rows and values in row order)
            calls.append((pi_variant.bind((tensor, n, arranged[0]), factors, pi),
                          phi_variant.bind(arranged, factors[n], pi, epsilon, phis[n], "none")))
        return calls

    def kkt_update(self, b: Any, phi: Any, stoptol: float) -> float:
        violation, update = _kernels()
        worst = float(violation(b, phi))
        if worst >= stoptol:
            update(phi, b)
        return worst


@functools.cache
def _kernels() -> tuple[Any, Any]:
    """The KKT violation (a reduction) and the update (elementwise), compiled once."""
    cp = cupy()
    return (cp.ReductionKernel("float64 x, float64 phi", "float64 worst", "fabs(fmin(x, 1.0 - phi))",
                               "fmax(a, b)", "worst = a", "0.0", "mu_kkt_violation"),
            cp.ElementwiseKernel("float64 phi", "float64 b", "b *= phi", "mu_update"))
