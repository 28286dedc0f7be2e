"""GPU vendor: MU as a CuPy user writes it: Π by ``cupy.take`` (``pi``'s ``cupy-take``), Φ by
gathered row dots and a cuSPARSE scatter product (``phi``'s ``cusparse-scatter``), the KKT check
and the update as CuPy built-ins."""

from __future__ import annotations

from typing import Any

from ..phi.cusparse_scatter import PhiCusparseScatter
from ..pi.cupy_take import CupyTake
from ..tensor_inputs import TensorArrays
from .variant import Calls, CupyMuVariant, bound_calls, library_kkt_update


class CusparseMu(CupyMuVariant):
    name = "cusparse"
    family = "vendor"
    description = "cupy.take Π, Φ by CuPy row dots and a cuSPARSE CSR scatter product, CuPy built-in KKT and update"

    def build(self, tensors: list[TensorArrays], factors: list[Any], pis: list[Any], phis: list[Any],
              epsilon: float) -> Calls:
        return bound_calls(CupyTake(), PhiCusparseScatter(), tensors, factors, pis, phis, epsilon)

    def kkt_update(self, b: Any, phi: Any, stoptol: float) -> float:
        return library_kkt_update(self.xp, b, phi, stoptol)
