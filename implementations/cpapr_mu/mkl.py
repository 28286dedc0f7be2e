"""CPU vendor: as ``scipy``, with Φ's scatter product in MKL (``phi``'s ``mkl-scatter``, multi-threaded)."""

from __future__ import annotations

from ..backends import MKL
from ..phi.mkl_scatter import PhiMklScatter
from .scipy import ScipyMu


class MklMu(ScipyMu):
    name = "mkl"
    backend = MKL
    description = "as scipy, with Φ's CSR scatter product S(s) @ Π in MKL (sparse_dot_mkl)"
    phi_variant = PhiMklScatter
