"""What every Φ variant shares: the tensor, B and Π in, an arrangement step, one bound call, Φ out.

A variant sees the tensor as ``TensorArrays`` (``tensor_inputs``), B (I_n x R) and Π
(nnz x R, in the tensor's nonzero order) wherever ``to_device`` put them. It implements

- ``arrange(tensor, mode)``: the once-per-mode preparation of a real code (sorting the
  nonzeros by row into a permutation, building a scatter matrix); untimed.
- ``bind(arranged, b, pi, epsilon, out, perturbation)``: a zero-argument call writing Φ
  into ``out`` (poisoned with NaN before the check run, so a forgotten row fails).

**Pressure points** (the paper's Experiment 1): a portable variant may be built with a
perturbation that deliberately breaks its answer to measure what a resource costs:
``no-atomics`` (atomic adds, or the CPU's race-free private sums, become plain adds),
``reuse`` ("perfect reuse": every read of B and Π goes to row 0, so the caches hold every
matrix access; Φ's rows, the output, stay) or ``both``. Such a variant is verified
through its unperturbed twin (same arrays, same launch) and swaps in the perturbed call
only once that matched the oracle (``verified``): its times are labelled by the setting
and kept out of the correctness and speedup figures.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable, ClassVar

import numpy as np

from .. import tensor_inputs
from ..gpu import CupyArrays
from ..model import BoundVariant, PortabenchError
from ..tensor_inputs import TensorArrays
from .definition import PhiProblem

WARM_UP_NONZEROS = 64  # enough to compile and launch every code path
PERTURBATIONS: tuple[str, ...] = ("none", "no-atomics", "reuse", "both")
# Launch policies of the portable variants (the paper's Experiments 3-6): ``t<threads>-v<nonzeros
# per thread>[-b<blocks>]``; threads per block on the GPU, threads on the CPU (0: all); 0 for
# v or b: the variant's default rule. The first of each device is the default setting.
LAUNCH_POLICIES: dict[str, tuple[str, ...]] = {
    "cpu": ("t0-v0", "t1-v0", "t0-v256", "t0-v4096", "t0-v65536"),
    "gpu": ("t256-v0", "t128-v0", "t1024-v0", "t256-v1", "t256-v2", "t256-v32", "t256-v0-b264", "t256-v0-b1056"),
}
KR_CHUNK_ELEMENTS = 1 << 24  # the library formulation gathers this many B entries at a time (128 MB)


def row_order(xp: Any, rows: Any) -> Any:
    """The permutation sorting nonzeros by output row (stable: file order within a row), int32 or int64."""
    order = xp.argsort(rows, kind="stable") if xp is np else xp.argsort(rows)
    return order.astype(xp.int32 if rows.size <= tensor_inputs.INT32_MAX else xp.int64)


def policy_settings(policy: str) -> dict[str, int]:
    """``t256-v8-b1056`` -> the variant settings threads, per_thread and blocks (0s: left to the default)."""
    names = {"t": "threads", "v": "per_thread", "b": "blocks"}
    try:
        settings = {names[part[0]]: int(part[1:]) for part in policy.split("-")}
    except (KeyError, IndexError, ValueError):
        raise PortabenchError(f"phi: launch policy {policy!r} is not t<threads>-v<per thread>[-b<blocks>]") from None
    return {k: v for k, v in settings.items() if v}


@contextmanager
def thread_count(threads: int) -> Iterator[None]:
    """Numba's thread count set to ``threads`` for the block (a CPU launch parameter), then restored."""
    import numba

    previous = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        yield
    finally:
        numba.set_num_threads(previous)


class PhiVariant(BoundVariant):
    """A variant implements ``arrange`` and ``bind``; arrays live wherever ``to_device`` puts them."""

    kernel = "phi"
    perturbations: ClassVar[tuple[str, ...]] = ("none",)  # the pressure points this variant can take

    def __init__(self, perturbation: str = "none") -> None:
        if perturbation not in PERTURBATIONS:
            raise PortabenchError(f"phi: unknown perturbation {perturbation!r}; known: {', '.join(PERTURBATIONS)}")
        self.perturbation = perturbation

    def supports(self, problem: Any) -> str | None:
        if self.perturbation not in self.perturbations:
            return f"no {self.perturbation!r} perturbation (this variant has: {', '.join(self.perturbations)})"
        return None

    @abstractmethod
    def arrange(self, tensor: TensorArrays, mode: int) -> Any:
        """The once-per-mode preparation (sorting, scatter matrices): returns what ``bind`` needs."""

    @abstractmethod
    def bind(self, arranged: Any, b: Any, pi: Any, epsilon: float, out: Any, perturbation: str) -> Callable[[], Any]:
        """A zero-argument call writing Φ (I_n x R) into ``out``; compilation happens here."""

    def _arguments(self, problem: PhiProblem, count: int | None) -> tuple[Any, Any, Any, float, Any]:
        """bind's arguments but the perturbation, for the problem's first ``count`` nonzeros (all: None)."""
        host = tensor_inputs.host_arrays("phi", problem.tensor, count)
        pi = problem.pi if count is None else problem.pi[:count]
        tensor = TensorArrays(self.to_device(host.idx), self.to_device(host.values), host.dims)
        out = self.full(problem.b.shape, np.nan)
        # Π is read-only and nnz x R (6 GB at full size): handed over as it is, not copied.
        return (self.arrange(tensor, problem.mode), self.to_device(np.array(problem.b)),
                self.to_device(pi), problem.epsilon, out)

    def prepare(self, problem: PhiProblem) -> None:
        # Compile, load and launch once on a few nonzeros, so no first-call cost is timed.
        small = self._arguments(problem, min(WARM_UP_NONZEROS, problem.tensor.nnz))
        for perturbation in dict.fromkeys(("none", self.perturbation)):
            self.bind(*small, perturbation)()
        self.synchronize()
        arguments = self._arguments(problem, None)
        self._out = arguments[-1]
        self._call = self._perturbed = self.bind(*arguments, "none")
        if self.perturbation != "none":  # same arrays, same launch: only the kernel differs
            self._perturbed = self.bind(*arguments, self.perturbation)
        self.synchronize()

    def verified(self) -> None:
        """The unperturbed call matched the oracle: from now on the (perturbed) call is timed."""
        self._call = self._perturbed

    def output(self) -> np.ndarray:
        return self.to_host(self._out)

    def output_buffer(self) -> Any:
        return self._out


class CupyPhiVariant(CupyArrays, PhiVariant):
    """A GPU variant through CuPy: arrays in device memory, runs synchronised."""


class LibraryFormulation:
    """The vendor variants' Φ, as a library user writes it (``xp``: NumPy or CuPy):

    1. dots = rowwise <B(rows, :), Π> by a gather (``take``) and a multiply-sum, in chunks
       of nonzeros that keep the gathered rows at 128 MB;
    2. s = x / max(dots, ε), written into the data of the I_n x nnz scatter matrix S
       (entry (i_n, j) = s_j, CSR, pattern built once in ``arrange``, data in CSR order);
    3. Φ = S @ Π: one sparse-times-dense product (``product``: the library's).
    """

    def __init__(self, xp: Any, sparse: Any, tensor: TensorArrays, mode: int) -> None:
        self.xp, self.mode, self.tensor = xp, mode, tensor
        rows = tensor.idx[mode]
        self.order = row_order(xp, rows)  # CSR order of the nonzeros
        counts = xp.bincount(rows, minlength=tensor.dims[mode])
        indptr = xp.concatenate([xp.zeros(1, dtype=self.order.dtype), xp.cumsum(counts).astype(self.order.dtype)])
        self.scatter = sparse.csr_matrix((xp.zeros(tensor.nnz), self.order, indptr),
                                         shape=(tensor.dims[mode], tensor.nnz))

    def bind(self, b: Any, pi: Any, epsilon: float, out: Any, product: Callable[[Any, Any, Any], None]) -> Callable[[], Any]:
        xp, rows, values = self.xp, self.tensor.idx[self.mode], self.tensor.values
        nnz, rank = pi.shape
        step = max(1, KR_CHUNK_ELEMENTS // max(rank, 1))
        gathered = xp.empty((min(step, max(nnz, 1)), rank))
        dots = xp.empty(nnz)

        def call() -> None:
            for start in range(0, nnz, step):
                stop = min(start + step, nnz)
                g = gathered[: stop - start]
                xp.take(b, rows[start:stop], axis=0, out=g)
                xp.multiply(g, pi[start:stop], out=g)
                xp.sum(g, axis=1, out=dots[start:stop])
            xp.maximum(dots, epsilon, out=dots)
            xp.divide(values, dots, out=dots)
            xp.take(dots, self.order, out=self.scatter.data)
            product(self.scatter, pi, out)

        return call
