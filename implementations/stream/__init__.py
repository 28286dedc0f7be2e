"""STREAM: the kernel (``definition``) and its variants, one module each.

Adding a variant: write its module, then add its class to ``KERNEL`` below.
"""

from .cupy_builtin import CupyBuiltin
from .cupy_rawkernel import CupyRawKernel
from .definition import OPS, StreamKernel, StreamProblem
from .numba_prange import StreamNumbaPrange
from .numpy import NumpyUfunc

KERNEL = StreamKernel(variants=(StreamNumbaPrange, NumpyUfunc, CupyRawKernel, CupyBuiltin))

__all__ = ["KERNEL", "OPS", "StreamKernel", "StreamProblem"]
