"""What every Π variant shares: the tensor and the factors in, one bound call, Π (nnz x R) out.

A variant implements ``arrange(tensor, mode)`` (untimed, once per mode) and
``bind(arranged, factors, out)``, a zero-argument call writing Π into ``out`` (poisoned with
NaN before the check run). A variant that writes Π in another row order (the order its Φ
reads) maps its output back to the tensor's order in ``output`` (untimed, for the check).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Callable

import numpy as np

from .. import tensor_inputs
from ..gpu import CupyArrays
from ..model import BoundVariant
from ..tensor_inputs import TensorArrays
from .definition import PiProblem

WARM_UP_NONZEROS = 64


class PiVariant(BoundVariant):
    kernel = "pi"

    def arrange(self, tensor: TensorArrays, mode: int) -> Any:
        """The once-per-mode preparation; by default the tensor and mode as they are."""
        return tensor, mode

    @abstractmethod
    def bind(self, arranged: Any, factors: list[Any], out: Any) -> Callable[[], Any]:
        """A zero-argument call writing Π (nnz x R) into ``out``; compilation happens here."""

    def _bind(self, problem: PiProblem, count: int | None) -> tuple[Callable[[], Any], Any, Any]:
        host = tensor_inputs.host_arrays("pi", problem.tensor, count)
        tensor = TensorArrays(self.to_device(host.idx), self.to_device(host.values), host.dims)
        out = self.full((tensor.nnz, problem.rank), np.nan)
        arranged = self.arrange(tensor, problem.mode)
        return self.bind(arranged, [self.to_device(np.array(u)) for u in problem.factors], out), out, arranged

    def prepare(self, problem: PiProblem) -> None:
        self._bind(problem, min(WARM_UP_NONZEROS, problem.tensor.nnz))[0]()  # compile and launch once
        self.synchronize()
        self._call, self._out, self._arranged = self._bind(problem, None)
        self.synchronize()

    def output(self) -> np.ndarray:
        return self.to_host(self._out)


class CupyPiVariant(CupyArrays, PiVariant):
    """A GPU variant through CuPy: arrays in device memory, runs synchronised."""
