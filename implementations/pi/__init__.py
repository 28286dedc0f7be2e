"""Π, CP-APR's per-nonzero Khatri-Rao rows (paper [000]): the kernel (``definition``) and its
variants, one module each. Φ (``phi``) consumes its output.

Adding a variant: write its module, then add its class to ``KERNEL`` below.
"""

from .cupy_rows import CupyRows
from .cupy_rows_sorted import CupyRowsSorted
from .cupy_take import CupyTake
from .definition import PiKernel, PiProblem
from .numba_prange import PiNumbaPrange
from .numpy_take import NumpyTake

KERNEL = PiKernel(variants=(PiNumbaPrange, NumpyTake, CupyRows, CupyRowsSorted, CupyTake))

__all__ = ["KERNEL", "PiKernel", "PiProblem"]
