"""CP-APR PDNR (paper [002]): the kernel (``definition``) and its variants, one module each.

Adding a variant: write its module, then add its class to ``KERNEL`` below.
"""

from .cupy_batched import CupyBatched
from .cupy_multi import CupyMulti
from .cupy_single import CupySingle
from .definition import PdnrKernel, PdnrProblem
from .numba_multi import NumbaMulti
from .numba_single import NumbaSingle
from .numpy_batched import NumpyBatched
from .pyttb import PyttbPdnr

KERNEL = PdnrKernel(variants=(NumbaSingle, NumbaMulti, NumpyBatched, PyttbPdnr, CupySingle, CupyMulti, CupyBatched))

__all__ = ["KERNEL", "PdnrKernel", "PdnrProblem"]
