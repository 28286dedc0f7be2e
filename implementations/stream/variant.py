"""What every STREAM variant shares: inputs in, one bound call per operation, output back."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Callable

import numpy as np

from ..gpu import cupy, cupy_unavailable, synchronize
from ..model import PortabenchError, Variant
from .definition import SIZE_HINT, StreamProblem

WARM_UP_N = 1024  # enough to compile and launch every code path, not to move memory


class StreamVariant(Variant):
    """A variant implements ``bind``; arrays live wherever ``to_device`` puts them."""

    kernel = "stream"

    @abstractmethod
    def bind(self, op: str, arrays: dict[str, Any], scalar: float) -> Callable[[], Any]:
        """A zero-argument call that runs ``op`` on ``arrays`` (returning the dot's sum)."""

    def to_device(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        return {k: v.copy() for k, v in arrays.items()}

    def to_host(self, array: Any) -> np.ndarray:
        return np.asarray(array, dtype=np.float64)

    def synchronize(self) -> None:
        """Wait until the device is idle (a no-op on the CPU)."""

    def prepare(self, problem: StreamProblem) -> None:
        self._problem = problem
        inputs = problem.inputs()
        # Compile, load and launch once on small arrays, so no first-call cost is timed.
        small = {k: v[:WARM_UP_N].copy() for k, v in inputs.items()}
        self.bind(problem.op, self.to_device(small), problem.scalar)()
        self._arrays = self.to_device(inputs)
        self._call = self.bind(problem.op, self._arrays, problem.scalar)
        self._result = None
        self.synchronize()

    def run(self) -> None:
        self._result = self._call()
        self.synchronize()

    def output(self) -> np.ndarray:
        written = self._problem.spec.writes
        if written is None:
            return self.to_host(self._result)
        return self.to_host(self._arrays[written])


class CupyStreamVariant(StreamVariant):
    """A GPU variant through CuPy: arrays in device memory, runs synchronised."""

    device = "gpu"

    @classmethod
    def unavailable(cls) -> str | None:
        return cupy_unavailable()

    def to_device(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        cp = cupy()
        try:
            return {k: cp.asarray(v) for k, v in arrays.items()}
        except cp.cuda.memory.OutOfMemoryError:
            need = sum(v.nbytes for v in arrays.values())
            free = cp.cuda.Device().mem_info[0]
            raise PortabenchError(
                f"{self.name}: {need / 2**30:.1f} GiB of arrays do not fit in GPU memory "
                f"({free / 2**30:.1f} GiB free): choose a smaller size ({SIZE_HINT})"
            ) from None

    def to_host(self, array: Any) -> np.ndarray:
        return np.asarray(cupy().asnumpy(array), dtype=np.float64)

    def synchronize(self) -> None:
        synchronize()
