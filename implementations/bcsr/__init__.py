"""BCSR SpMV (paper [001]): the kernel (``definition``) and its variants, one module each.

Adding a variant: write its module, then add its class to ``KERNEL`` below.
"""

from .cupy_auto import CupyAuto
from .cupy_bitmask import CupyBitmask
from .cupy_byblock import CupyByBlock
from .cupy_bycolumn import CupyByColumn
from .cupy_csr import CupyCsr
from .cupy_csr16 import CupyCsr16
from .cupy_rowperthread import CupyRowPerThread
from .cusparse_bsrmv import CusparseBsrmv
from .cusparse_csr import CusparseCsr
from .definition import CASES, BcsrKernel, BcsrProblem
from .mkl_bsr import MklBsr
from .mkl_csr import MklCsr
from .numba_blockrow import NumbaBlockRow
from .numba_csr import NumbaCsr
from .numba_csr16 import NumbaCsr16
from .numba_padded import NumbaPadded
from .scipy_bsr import ScipyBsr

KERNEL = BcsrKernel(variants=(NumbaBlockRow, NumbaCsr, NumbaCsr16, NumbaPadded, ScipyBsr, MklBsr, MklCsr,
                              CupyAuto, CupyBitmask, CupyByBlock, CupyByColumn, CupyCsr, CupyCsr16, CupyRowPerThread,
                              CusparseBsrmv, CusparseCsr))

__all__ = ["CASES", "KERNEL", "BcsrKernel", "BcsrProblem"]
