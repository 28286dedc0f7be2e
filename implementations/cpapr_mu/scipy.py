"""CPU vendor: MU as a SciPy user writes it: Π by NumPy gathers (``pi``'s ``numpy-take``), Φ by
gathered row dots and a SciPy scatter product (``phi``'s ``scipy-scatter``), the KKT check and
the update in NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends import HOST
from ..phi.scipy_scatter import PhiScipyScatter
from ..pi.numpy_take import NumpyTake
from ..tensor_inputs import TensorArrays
from .variant import Calls, MuVariant, bound_calls, library_kkt_update


class ScipyMu(MuVariant):
    name = "scipy"
    family = "vendor"
    backend = HOST
    description = "NumPy Π (np.take), Φ by NumPy row dots and a SciPy CSR scatter product, NumPy KKT and update"
    phi_variant: Any = PhiScipyScatter

    @classmethod
    def unavailable(cls) -> str | None:
        return cls.phi_variant.unavailable()

    def build(self, tensors: list[TensorArrays], factors: list[np.ndarray], pis: list[np.ndarray],
              phis: list[np.ndarray], epsilon: float) -> Calls:
        return bound_calls(NumpyTake(), self.phi_variant(), tensors, factors, pis, phis, epsilon)

    def kkt_update(self, b: np.ndarray, phi: np.ndarray, stoptol: float) -> float:
        return library_kkt_update(np, b, phi, stoptol)
