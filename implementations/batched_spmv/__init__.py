"""Batched SpMV (paper [004]): the kernel (``definition``) and its variants, one module each.

Adding a variant: write its module, then add its class to ``KERNEL`` below.
"""

from .cupy_base import CupyBase
from .cupy_staged import CupyStaged
from .cupy_team import BatchedSpmvCupyTeam
from .cusparse_blockdiag import CusparseBlockDiag
from .definition import LAYOUTS, BatchedSpmvKernel, BatchedSpmvProblem
from .numba_team import NumbaTeam
from .scipy_blockdiag import ScipyBlockDiag

KERNEL = BatchedSpmvKernel(variants=(NumbaTeam, ScipyBlockDiag, BatchedSpmvCupyTeam, CupyBase, CupyStaged,
                                       CusparseBlockDiag))

__all__ = ["KERNEL", "LAYOUTS", "BatchedSpmvKernel", "BatchedSpmvProblem"]
