"""What every batched SpMV variant shares: inputs in, one bound call, the output back.

A variant implements ``bind``: given its own copies of the inputs (in the problem's
layout, wherever ``to_device`` put them) plus an output array ``y_out``, it returns a
zero-argument call that writes ``alpha A x + beta y`` into ``y_out``. Writing into a
separate array, never into y, makes ``run()`` idempotent: every timed run starts from
the same initial y (restoring y between runs would have to be timed or skipped). ``y_out``
starts as NaN, so an entry a variant forgets to write fails the check.

``block_diagonal_pattern`` is the one construction of the vendor variants' matrix: the
N systems as the diagonal blocks of one (N n) x (N n) CSR matrix.
"""

from __future__ import annotations

from abc import abstractmethod
from types import ModuleType
from typing import Any, Callable

import numpy as np

from ..gpu import CupyArrays
from ..model import BoundVariant
from .definition import BatchedSpmvProblem

WARM_UP_SYSTEMS = 3  # enough to compile and launch every code path, not to move memory
PER_SYSTEM = ("values", "x", "y", "alpha", "beta", "y_out")  # arrays with one slice per system
INT32_MAX = np.iinfo(np.int32).max


def first_systems(arrays: dict[str, np.ndarray], layout: str, count: int) -> dict[str, np.ndarray]:
    """The arrays of the first ``count`` systems (copies), in the same layout."""
    def take(name: str, a: np.ndarray) -> np.ndarray:
        if name not in PER_SYSTEM:
            return a.copy()
        if a.ndim == 1 or layout == "system-major":
            return a[:count].copy()
        return np.ascontiguousarray(a[:, :count])  # entry-major: systems are the columns

    return {name: take(name, a) for name, a in arrays.items()}


def with_output(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``arrays`` plus ``y_out``, y's shape, poisoned with NaN."""
    return {**arrays, "y_out": np.full(arrays["y"].shape, np.nan)}


def block_index_dtype(count: int, n: int, nnz: int) -> type:
    """int32 where the block-diagonal matrix's indices fit it (vendor libraries' fast path), else int64."""
    return np.int32 if max(count * nnz, count * n) <= INT32_MAX else np.int64


def block_diagonal_pattern(xp: ModuleType, row_ptr: Any, col_idx: Any, count: int, n: int,
                           index_dtype: type) -> tuple[Any, Any]:
    """(indptr, indices) of the CSR matrix holding ``count`` copies of the pattern as diagonal
    blocks, system k's rows and columns at k n ... k n + n - 1 (``xp``: numpy or cupy).

    Its data array is the system-major values flattened: system k's entries follow system k-1's.
    """
    nnz = int(col_idx.size)
    row_ptr = xp.asarray(row_ptr, dtype=index_dtype)
    col_idx = xp.asarray(col_idx, dtype=index_dtype)
    k = xp.arange(count, dtype=index_dtype)[:, None]
    indptr = xp.empty(count * n + 1, dtype=index_dtype)
    indptr[:-1] = (k * nnz + row_ptr[None, :-1]).reshape(-1)
    indptr[-1] = count * nnz
    indices = (k * n + col_idx[None, :]).reshape(-1)
    return indptr, indices


class BatchedSpmvVariant(BoundVariant):
    """A variant implements ``bind``; arrays live wherever ``to_device`` puts them."""

    kernel = "batched_spmv"

    @abstractmethod
    def bind(self, arrays: dict[str, Any], layout: str) -> Callable[[], Any]:
        """A zero-argument call writing ``alpha A x + beta y`` into ``arrays["y_out"]``.

        ``arrays``: row_ptr, col_idx, values, x, y, alpha, beta, y_out in ``layout``.
        Everything that must not be timed (matrix assembly, compilation) happens here.
        """

    def to_device(self, array: np.ndarray) -> Any:
        # Writable C-contiguous copies: the same array types (hence the same compiled
        # Numba specialisations) for the warm-up slice and the real inputs.
        return np.array(array, copy=True, order="C")

    def to_devices(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        return {k: self.to_device(v) for k, v in arrays.items()}

    def prepare(self, problem: BatchedSpmvProblem) -> None:
        self._layout = problem.layout
        inputs = problem.inputs()
        # Compile, load and launch once on a few systems, so no first-call cost is timed.
        small = first_systems(inputs, problem.layout, min(WARM_UP_SYSTEMS, problem.size))
        self.bind(self.to_devices(with_output(small)), problem.layout)()
        self.synchronize()
        self._arrays = self.to_devices(with_output(inputs))
        self._call = self.bind(self._arrays, problem.layout)
        self.synchronize()

    def output(self) -> np.ndarray:
        y = self.to_host(self._arrays["y_out"])
        return np.ascontiguousarray(y.T) if self._layout == "entry-major" else y


class CupyBatchedSpmvVariant(CupyArrays, BatchedSpmvVariant):
    """A GPU variant through CuPy: arrays in device memory, runs synchronised."""
