"""CPU vendor: LAPACK's LU (NumPy's batched ``linalg.solve``) on the densified systems.

Densifying is preparation (untimed), as a code holding dense Jacobians would have them. Memory:
N n^2 doubles, plus LAPACK's copy; refused with the reason when it does not fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from portabench.datasets import memory

from ..backends import HOST
from .definition import GmresProblem
from .variant import GmresVariant


def densify(problem: GmresProblem, xp: Any = np) -> Any:
    s = problem.systems
    rows = np.repeat(np.arange(s.n), np.diff(s.row_ptr))
    dense = xp.zeros((s.num_systems, s.n, s.n))
    dense[:, xp.asarray(rows), xp.asarray(s.col_idx)] = xp.asarray(s.values)
    return dense


def dense_bytes(problem: GmresProblem) -> int:
    s = problem.systems
    return 8 * s.num_systems * s.n * s.n


class NumpyDenseSolve(GmresVariant):
    name = "numpy-dense-solve"
    family = "vendor"
    backend = HOST
    description = "numpy.linalg.solve (LAPACK getrf/getrs, batched) on the densified systems"

    def supports(self, problem: GmresProblem) -> str | None:
        need = 3 * dense_bytes(problem)  # the dense systems, LAPACK's copy, slack
        free = memory.available_host_memory_bytes()
        if free is not None and need > free:
            return f"the densified systems need {need / 2**30:.1f} GiB of host memory, {free / 2**30:.1f} GiB is available"
        return None

    def prepare_solver(self, problem: GmresProblem) -> None:
        self._dense = densify(problem)
        self._rhs = problem.systems.rhs[:, :, None].copy()
        np.linalg.solve(self._dense[:1], self._rhs[:1])

    def solve(self) -> tuple[Any, Any]:
        return np.linalg.solve(self._dense, self._rhs)[:, :, 0], None
