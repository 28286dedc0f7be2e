"""CPU vendor: Φ as a SciPy user writes it: gathered row dots, a division, one sparse product.

``LibraryFormulation`` (``variant.py``): NumPy gathers B's rows and forms the row dots,
divides, and SciPy multiplies the I_n x nnz scatter matrix S(s) by Π. SciPy's sparse
product runs on one thread.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ..backends import HOST
from ..tensor_inputs import TensorArrays
from .variant import LibraryFormulation, PhiVariant


class PhiScipyScatter(PhiVariant):
    name = "scipy-scatter"
    family = "vendor"
    backend = HOST
    description = "NumPy gathered row dots and division, then SciPy CSR scatter matrix S(s) @ Π"

    def arrange(self, tensor: TensorArrays, mode: int) -> LibraryFormulation:
        return LibraryFormulation(np, sp, tensor, mode)

    def bind(self, arranged: LibraryFormulation, b: np.ndarray, pi: np.ndarray, epsilon: float,
             out: np.ndarray, perturbation: str) -> Callable[[], Any]:
        return arranged.bind(b, pi, epsilon, out, self.product)

    @staticmethod
    def product(scatter: Any, pi: np.ndarray, out: np.ndarray) -> None:
        """out = scatter @ pi."""
        out[...] = scatter @ pi
