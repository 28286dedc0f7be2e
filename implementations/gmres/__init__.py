"""Batched GMRES: the problem and work model (``definition``), one module per variant."""

from .cupy_dense import CupyDenseSolve
from .cupy_team import CupyTeam
from .cupyx_loop import CupyxGmresLoop
from .definition import GmresKernel
from .numba_batched import NumbaBatched
from .numpy_dense import NumpyDenseSolve
from .scipy_loop import ScipyGmresLoop

KERNEL = GmresKernel((NumbaBatched, NumpyDenseSolve, ScipyGmresLoop, CupyTeam, CupyDenseSolve, CupyxGmresLoop))

__all__ = ["KERNEL"]
