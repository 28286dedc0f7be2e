"""CP-APR MU, the multiplicative-update solver (paper [000]; Chi and Kolda): the kernel (``definition``)
and its variants, one module each, built on the project's Π and Φ variants.

Adding a variant: write its module, then add its class to ``KERNEL`` below.
"""

from .cupy import CupyMu
from .cusparse import CusparseMu
from .definition import MuKernel, MuProblem
from .mkl import MklMu
from .numba import NumbaMu
from .pyttb import PyttbMu
from .scipy import ScipyMu

KERNEL = MuKernel(variants=(NumbaMu, ScipyMu, MklMu, PyttbMu, CupyMu, CusparseMu))

__all__ = ["KERNEL", "MuKernel", "MuProblem"]
