"""GPU vendor: Φ as a CuPy user writes it: gathered row dots (CuPy), a division, one cuSPARSE product.

``LibraryFormulation`` (``variant.py``) with CuPy: the gather, multiply-sum and division
run as CuPy built-ins and the I_n x nnz scatter matrix S(s) times Π as cuSPARSE's SpMM
(``cupyx.scipy.sparse``).
"""

from __future__ import annotations

from typing import Any, Callable

from ..gpu import cupy
from ..tensor_inputs import TensorArrays
from .variant import CupyPhiVariant, LibraryFormulation


class PhiCusparseScatter(CupyPhiVariant):
    name = "cusparse-scatter"
    family = "vendor"
    description = "CuPy gathered row dots and division, then cuSPARSE CSR scatter matrix S(s) @ Π"

    def arrange(self, tensor: TensorArrays, mode: int) -> LibraryFormulation:
        import cupyx.scipy.sparse as sparse

        return LibraryFormulation(cupy(), sparse, tensor, mode)

    def bind(self, arranged: LibraryFormulation, b: Any, pi: Any, epsilon: float, out: Any,
             perturbation: str) -> Callable[[], Any]:
        return arranged.bind(b, pi, epsilon, out, self.product)

    @staticmethod
    def product(scatter: Any, pi: Any, out: Any) -> None:
        """out = scatter @ pi (cuSPARSE SpMM)."""
        out[...] = scatter @ pi
