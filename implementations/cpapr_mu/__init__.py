"""CP-APR MU, the multiplicative-update solver (seed 000; Chi and Kolda): the kernel (``definition``)
and its variants, one module each, built on the project's Π and Φ variants.

Adding a variant: write its module, then add its class to ``KERNEL`` below.
"""

from .cupy_mu import CupyMu
from .cusparse_mu import CusparseMu
from .definition import MuKernel, MuProblem
from .mkl_mu import MklMu
from .numba_mu import NumbaMu
from .pyttb_mu import PyttbMu
from .scipy_mu import ScipyMu

KERNEL = MuKernel(variants=(NumbaMu, ScipyMu, MklMu, PyttbMu, CupyMu, CusparseMu))

__all__ = ["KERNEL", "MuKernel", "MuProblem"]
