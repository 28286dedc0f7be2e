"""Batched GMRES: the problem and work model (``definition``), one module per variant."""

from .cupy_dense_solve import CupyDenseSolve
from .cupy_team import GmresCupyTeam
from .cupyx_gmres_loop import CupyxGmresLoop
from .definition import GmresKernel
from .numba_batched import NumbaBatched
from .numpy_dense_solve import NumpyDenseSolve
from .scipy_gmres_loop import ScipyGmresLoop

KERNEL = GmresKernel((NumbaBatched, NumpyDenseSolve, ScipyGmresLoop, GmresCupyTeam, CupyDenseSolve, CupyxGmresLoop))

__all__ = ["KERNEL"]
