"""GPU vendor comparison point: cupyx's ``gmres``, one system at a time, at small N only.

As for SciPy, each system is scaled by its inverse diagonal inside the timed solve so
that the stopping test is the kernel's. Every system costs several kernel launches and
host synchronisations per iteration: a comparison point, capped at small N.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..gpu import CupyArrays, cupy, synchronize
from .definition import GmresProblem
from .scipy_gmres_loop import tolerance_keyword
from .variant import GmresVariant

MAX_SYSTEMS = 1024


class CupyxGmresLoop(CupyArrays, GmresVariant):
    name = "cupyx-gmres-loop"
    family = "vendor"
    description = f"cupyx.scipy.sparse.linalg.gmres per system (Jacobi-scaled), N <= {MAX_SYSTEMS}"

    max_size = MAX_SYSTEMS

    def prepare_solver(self, problem: GmresProblem) -> None:
        cp = cupy()
        from cupyx.scipy.sparse import csr_matrix
        from cupyx.scipy.sparse.linalg import gmres

        s = problem.systems
        self._gmres, self._csr = gmres, csr_matrix
        self._values = cp.asarray(s.values)
        self._rhs = cp.asarray(s.rhs)
        self._rows = cp.asarray(np.repeat(np.arange(s.n), np.diff(s.row_ptr)))
        self._row_ptr = cp.asarray(s.row_ptr)
        self._col_idx = cp.asarray(s.col_idx)
        self._diag = cp.asarray(s.diagonal_positions)
        cycle = min(problem.restart, s.n, problem.max_iter)  # maxiter counts cycles: cap the steps in all
        self._kw: dict[str, Any] = {tolerance_keyword(gmres): problem.tol, "atol": 0.0,
                                    "restart": cycle, "maxiter": -(-problem.max_iter // cycle)}
        self._solve_range(1)
        synchronize()

    def _solve_range(self, count: int) -> tuple[Any, Any]:
        cp = cupy()
        s = self._problem.systems
        x = cp.empty((count, s.n))
        for k in range(count):
            dinv = 1.0 / self._values[k, self._diag]
            A = self._csr((self._values[k] * dinv[self._rows], self._col_idx, self._row_ptr), shape=(s.n, s.n))
            x[k], _info = self._gmres(A, dinv * self._rhs[k], **self._kw)
        # cupyx reports no inner iteration count (its callback runs once per restart cycle)
        return x, None

    def solve(self) -> tuple[Any, Any]:
        x, iterations = self._solve_range(self._problem.size)
        synchronize()
        return x, iterations

