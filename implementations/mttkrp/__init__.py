"""MTTKRP (papers [000], [003]): the kernel (``definition``) and its variants, one module each.

Adding a variant: write its module, then add its class to ``KERNEL`` below.
"""

from .cupy_atomic import MttkrpCupyAtomic
from .cupy_scatter_add import CupyScatterAdd
from .cupy_segmented import MttkrpCupySegmented
from .cusparse_scatter import MttkrpCusparseScatter
from ..tensor_inputs import CASES
from .definition import MttkrpKernel, MttkrpProblem
from .mkl_scatter import MttkrpMklScatter
from .numba_csf import NumbaCsf
from .numba_privatized import MttkrpNumbaPrivatized
from .numba_segmented import MttkrpNumbaSegmented
from .scipy_scatter import MttkrpScipyScatter

KERNEL = MttkrpKernel(variants=(MttkrpNumbaSegmented, MttkrpNumbaPrivatized, NumbaCsf, MttkrpScipyScatter, MttkrpMklScatter,
                                MttkrpCupySegmented, MttkrpCupyAtomic, MttkrpCusparseScatter, CupyScatterAdd))

__all__ = ["CASES", "KERNEL", "MttkrpKernel", "MttkrpProblem"]
