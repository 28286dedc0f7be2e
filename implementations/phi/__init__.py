"""Φ, CP-APR's multiplicative-update kernel (seed 000): the kernel (``definition``) and its
variants, one module each.

Adding a variant: write its module, then add its class to ``KERNEL`` below.
"""

from .cupy_atomic import CupyAtomic
from .cupy_segmented import CupySegmented
from .cupy_segmented_presorted import CupySegmentedPresorted
from .cusparse_scatter import CusparseScatter
from ..tensor_inputs import CASES
from .definition import PhiKernel, PhiProblem
from .mkl_scatter import MklScatter
from .numba_privatized import NumbaPrivatized
from .numba_segmented import NumbaSegmented
from .scipy_scatter import ScipyScatter

KERNEL = PhiKernel(variants=(NumbaSegmented, NumbaPrivatized, ScipyScatter, MklScatter,
                             CupySegmented, CupySegmentedPresorted, CupyAtomic, CusparseScatter))

__all__ = ["CASES", "KERNEL", "PhiKernel", "PhiProblem"]
