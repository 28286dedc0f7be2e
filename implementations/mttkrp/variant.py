"""What every MTTKRP variant shares: the tensor in, an arrangement step, one bound call, V out.

A variant sees the tensor as ``TensorArrays`` (``tensor_inputs``) and float64 factors,
wherever ``to_device`` put them. It implements

- ``arrange(tensor, mode, rank)``: the preparation a real code does once per mode (sorting the
  nonzeros, permuting them, building a scatter matrix). Untimed in the kernel benchmark;
  timed on its own by the preparation benchmark (the paper [003]'s sorting-cost table).
- ``bind(arranged, factors, out)``: a zero-argument call that writes V into ``out``
  (I_n x R, poisoned with NaN before the check run, so a row a variant forgets fails).

The library formulation of the vendor variants (gather the Khatri-Rao rows of a chunk of
nonzeros, then one sparse-times-dense product with a scatter matrix) shares its chunking
here (``kr_chunks``); the gather of the Khatri-Rao rows is ``tensor_inputs.gather_kr``.
"""

from __future__ import annotations

from abc import abstractmethod
from types import ModuleType
from typing import Any, Callable, ClassVar

import numpy as np

from .. import tensor_inputs
from ..gpu import CupyArrays
from ..model import BoundVariant
from ..tensor_inputs import TensorArrays
from .definition import MttkrpProblem

WARM_UP_NONZEROS = 64  # enough to compile and launch every code path
KR_CHUNK_ELEMENTS = 1 << 24  # the library formulation gathers this many Khatri-Rao entries at a time (128 MB)


def kr_chunks(nnz: int, rank: int) -> list[tuple[int, int]]:
    """Nonzero ranges whose Khatri-Rao rows fit in KR_CHUNK_ELEMENTS entries."""
    step = max(1, KR_CHUNK_ELEMENTS // rank)
    return [(s, min(s + step, nnz)) for s in range(0, nnz, step)] or [(0, 0)]


def scatter_csr(sparse: ModuleType, xp: ModuleType, tensor: TensorArrays, mode: int, start: int, stop: int) -> Any:
    """The I_n x (stop - start) scatter matrix of nonzeros start..stop-1: entry (i_n, j) = x_j
    (``sparse``: scipy.sparse or cupyx.scipy.sparse; ``xp`` its array library)."""
    rows = tensor.idx[mode, start:stop]
    cols = xp.arange(stop - start, dtype=xp.int32)
    return sparse.coo_matrix((tensor.values[start:stop], (rows, cols)),
                             shape=(tensor.dims[mode], stop - start)).tocsr()


class MttkrpVariant(BoundVariant):
    """A variant implements ``arrange`` and ``bind``; arrays live wherever ``to_device`` puts them."""

    kernel = "mttkrp"
    arranges: ClassVar[bool] = True  # False: ``arrange`` does nothing (the preparation benchmark skips it)

    @abstractmethod
    def arrange(self, tensor: TensorArrays, mode: int, rank: int) -> Any:
        """The once-per-mode preparation (sorting, permuting, scatter matrices): returns what ``bind`` needs."""

    @abstractmethod
    def bind(self, arranged: Any, factors: list[Any], out: Any) -> Callable[[], Any]:
        """A zero-argument call writing V (I_n x R) into ``out``; compilation happens here."""

    def empty_output(self, shape: tuple[int, int]) -> Any:
        return self.full(shape, np.nan)

    def device_tensor(self, problem: MttkrpProblem, count: int | None = None) -> TensorArrays:
        """The problem's tensor (its first ``count`` nonzeros) on this variant's device."""
        host = tensor_inputs.host_arrays("mttkrp", problem.tensor, count)
        return TensorArrays(self.to_device(host.idx), self.to_device(host.values), host.dims)

    def prepare(self, problem: MttkrpProblem) -> None:
        self._mode, self._rank = problem.mode, problem.rank
        factors = [self.to_device(np.array(u)) for u in problem.factors]
        shape = (problem.tensor.dims[problem.mode], problem.rank)
        # Compile, load and launch once on a few nonzeros, so no first-call cost is timed.
        small = self.device_tensor(problem, min(WARM_UP_NONZEROS, problem.tensor.nnz))
        self.bind(self.arrange(small, problem.mode, problem.rank), factors, self.empty_output(shape))()
        self.synchronize()
        self._tensor = self.device_tensor(problem)
        self._arranged = self.arrange(self._tensor, problem.mode, problem.rank)
        self._out = self.empty_output(shape)
        self._call = self.bind(self._arranged, factors, self._out)
        self.synchronize()

    def rearrange(self) -> None:
        """One more ``arrange`` of the prepared tensor (what the preparation benchmark times)."""
        self.arrange(self._tensor, self._mode, self._rank)
        self.synchronize()

    def output(self) -> np.ndarray:
        return self.to_host(self._out)

    def output_buffer(self) -> Any:
        return self._out


class CupyMttkrpVariant(CupyArrays, MttkrpVariant):
    """A GPU variant through CuPy: arrays in device memory, runs synchronised."""
