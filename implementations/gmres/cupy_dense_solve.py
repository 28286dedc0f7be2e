"""GPU vendor: CuPy's batched dense solve (cuBLAS batched LU) on the densified systems.

Densifying happens on the GPU in prepare_solver (untimed); ``reference/NOTES.md`` has its times.
"""

from __future__ import annotations

from typing import Any


from ..gpu import CupyArrays, cupy, synchronize
from .definition import GmresProblem
from .numpy_dense_solve import dense_bytes, densify
from .variant import GmresVariant


class CupyDenseSolve(CupyArrays, GmresVariant):
    name = "cupy-dense-solve"
    family = "vendor"
    description = "cupy.linalg.solve (cuBLAS batched getrf/getrs) on the densified systems"

    def supports(self, problem: GmresProblem) -> str | None:
        need = 3 * dense_bytes(problem)  # the dense systems, the solver's copy, slack
        free = cupy().cuda.Device().mem_info[0]
        if need > free:
            return f"the densified systems need {need / 2**30:.1f} GiB of GPU memory, {free / 2**30:.1f} GiB is free"
        return None

    def prepare_solver(self, problem: GmresProblem) -> None:
        cp = cupy()
        self._dense = densify(problem, cp)
        self._rhs = cp.asarray(problem.systems.rhs[:, :, None])
        cp.linalg.solve(self._dense[:2], self._rhs[:2])
        synchronize()

    def solve(self) -> tuple[Any, Any]:
        x = cupy().linalg.solve(self._dense, self._rhs)[:, :, 0]
        synchronize()
        return x, None

