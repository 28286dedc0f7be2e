"""Φ, CP-APR's multiplicative-update kernel (paper [000]): the kernel (``definition``) and its
variants, one module each.

Adding a variant: write its module, then add its class to ``KERNEL`` below.
"""

from .cupy_atomic import PhiCupyAtomic
from .cupy_segmented import PhiCupySegmented
from .cupy_segmented_presorted import CupySegmentedPresorted
from .cusparse_scatter import PhiCusparseScatter
from ..tensor_inputs import CASES
from .definition import PhiKernel, PhiProblem
from .mkl_scatter import PhiMklScatter
from .numba_privatized import PhiNumbaPrivatized
from .numba_segmented import PhiNumbaSegmented
from .scipy_scatter import PhiScipyScatter

KERNEL = PhiKernel(variants=(PhiNumbaSegmented, PhiNumbaPrivatized, PhiScipyScatter, PhiMklScatter,
                             PhiCupySegmented, CupySegmentedPresorted, PhiCupyAtomic, PhiCusparseScatter))

__all__ = ["CASES", "KERNEL", "PhiKernel", "PhiProblem"]
