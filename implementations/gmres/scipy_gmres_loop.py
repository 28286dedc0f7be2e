"""CPU vendor comparison point: SciPy's ``gmres``, one system at a time, at small N only.

SciPy's GMRES has no Jacobi option that matches the paper's left preconditioning, so each
system is scaled by its inverse diagonal inside the timed solve (``D^{-1} A x = D^{-1} b``):
SciPy's stopping test ``||D^{-1}(b - A x)|| <= rtol ||D^{-1} b||`` is then the kernel's.
Each iteration pays Python's overhead (``reference/NOTES.md``): a loop over thousands of systems
takes seconds, hence the cap on N.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..backends import HOST
from .definition import GmresProblem
from .variant import GmresVariant

MAX_SYSTEMS = 4096


def tolerance_keyword(function: Any) -> str:
    """``rtol`` (SciPy >= 1.12, CuPy >= 14) or the older ``tol``."""
    return "rtol" if "rtol" in inspect.signature(function).parameters else "tol"


class ScipyGmresLoop(GmresVariant):
    name = "scipy-gmres-loop"
    family = "vendor"
    backend = HOST
    description = f"scipy.sparse.linalg.gmres per system (Jacobi-scaled), N <= {MAX_SYSTEMS}"

    max_size = MAX_SYSTEMS

    def prepare_solver(self, problem: GmresProblem) -> None:
        s = problem.systems
        self._s = s
        self._rows = np.repeat(np.arange(s.n), np.diff(s.row_ptr))
        cycle = min(problem.restart, s.n, problem.max_iter)  # maxiter counts cycles: cap the steps in all
        self._kw = {tolerance_keyword(spla.gmres): problem.tol, "atol": 0.0,
                    "restart": cycle, "maxiter": -(-problem.max_iter // cycle)}

    def solve(self) -> tuple[Any, Any]:
        s = self._s
        x = np.empty((s.num_systems, s.n))
        iterations = np.zeros(s.num_systems, dtype=np.int64)
        for k in range(s.num_systems):
            dinv = 1.0 / s.values[k, s.diagonal_positions]
            A = sp.csr_array((s.values[k] * dinv[self._rows], s.col_idx, s.row_ptr), shape=(s.n, s.n))
            count = [0]

            def step(_residual: float, count: list[int] = count) -> None:
                count[0] += 1

            x[k], _info = spla.gmres(A, dinv * s.rhs[k], callback=step, callback_type="pr_norm", **self._kw)
            iterations[k] = count[0]
        return x, iterations
