"""MTTKRP (seeds 000, 003): the kernel (``definition``) and its variants, one module each.

Adding a variant: write its module, then add its class to ``KERNEL`` below.
"""

from .cupy_atomic import CupyAtomic
from .cupy_scatter_add import CupyScatterAdd
from .cupy_segmented import CupySegmented
from .cusparse_scatter import CusparseScatter
from ..tensor_inputs import CASES
from .definition import MttkrpKernel, MttkrpProblem
from .mkl_scatter import MklScatter
from .numba_csf import NumbaCsf
from .numba_privatized import NumbaPrivatized
from .numba_segmented import NumbaSegmented
from .scipy_scatter import ScipyScatter

KERNEL = MttkrpKernel(variants=(NumbaSegmented, NumbaPrivatized, NumbaCsf, ScipyScatter, MklScatter,
                                CupySegmented, CupyAtomic, CusparseScatter, CupyScatterAdd))

__all__ = ["CASES", "KERNEL", "MttkrpKernel", "MttkrpProblem"]
