"""GPU vendor: PDNR with CuPy building blocks: ``numpy_batched``'s array formulation run on CuPy
arrays (``cupy.add.at`` segment sums, ``cupy.linalg.solve`` batched over the rows' R x R systems,
cuBLAS/cuSOLVER underneath); Π by ``cupy.take`` (the ``pi`` kernel's ``cupy-take``)."""

from __future__ import annotations

from typing import Any

from ..gpu import cupy
from ..pi.numpy_take import take_call
from ..tensor_inputs import TensorArrays
from .numpy_batched import solve_mode_batched
from .variant import CupyPdnrVariant


class CupyBatched(CupyPdnrVariant):
    name = "cupy-batched"
    family = "vendor"
    description = "CuPy: every row at once (cupy.add.at segment sums, cupy.linalg.solve batched over rows); Π by cupy.take"

    def prepare_solver(self, problem) -> None:
        self._pi_out = cupy().empty((problem.tensor.nnz, problem.rank))

    def khatri_rao(self, mode: int, factors: list[Any]) -> Any:
        arranged = self._modes[mode]
        take_call(cupy(), TensorArrays(arranged.idx, arranged.values, self._problem.tensor.dims), mode, factors,
                  self._pi_out)()
        return self._pi_out

    def solve_mode(self, mode: int, b: Any, steps: Any) -> None:
        arranged = self._modes[mode]
        solve_mode_batched(cupy(), self._pi, arranged.values, arranged.row_of, b, steps, self._problem.settings)
