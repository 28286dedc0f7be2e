"""MTTKRP (seeds 000 and 003): the problem, its two work models and the check.

For a sparse COO tensor X of order N (3, 4 or 5), factor matrices U_1..U_N (I_m x R) and
a mode n, one run computes the matricized tensor times Khatri-Rao product

    V(i_n, :) = sum over nonzeros x(i_1..i_N) * prod_{m != n} U_m(i_m, :)       (I_n x R)

The *case* is a FROSTT tensor's seeded stand-in (or a given tensor, case ``file``), the
*size* is the number of nonzeros asked for: the stand-in at scale size / nnz (a tensor
with fewer nonzeros than that runs at full size, scale 1). Options: the rank R and the
mode n (a mode the tensor does not have is not a problem: the suite skips it).

**Work models** (written once, here; variants store int32 indices):

- PASTA's compulsory bytes (``Work.bytes``): every index and value read once, every factor
  matrix (the output included) touched once: ``(N idx + 8) nnz + 8 R sum_m I_m``.
- GenTen's count (``Work.bytes_counted``): every nonzero reads N factor rows, its indices
  and value and writes its output row, ``nnz ((N R + 3) 8 + N idx)``. Caches serve most
  factor-row re-reads, so rates under it can pass 100 % of peak.
- flops ``N R nnz``: per nonzero and column, N - 1 multiplies and one add (GenTen counts
  ``(N + 1) R nnz``).

**Check.** Componentwise: ``|V - V_ref| / (|X| x Khatri-Rao(|U|))``, the largest entry. Any
summation order errs by at most (L + N) u times that bound (L: the longest output row's
nonzeros, u = 2^-53), so oracle and variant differ by at most twice that; a dropped or
doubled nonzero moves an entry by about 1 / L of its bound at least, far above it.

Inputs: the stand-in's count values (or the given tensor's values), factor entries
uniform in [0.5, 1.5) with random signs (never zero or constant).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from portabench.datasets.tensors import SparseTensor
from portabench.datasets.tensors.standin import scaled_shape
from portabench.reference.mttkrp import mttkrp

from .. import tensor_inputs
from ..model import Check, Device, Kernel, PortabenchError, Problem, UnknownNameError, Work, componentwise_error
from ..tensor_inputs import (CASES, DEFAULT_NNZ, FILE_CASE, INDEX_BYTES, MODES, UNIT_ROUNDOFF,
                             VALUE_BYTES, benchmark_sizes, order_of, scale_for, standin)

RANKS: tuple[str, ...] = ("16", "32", "64")
MIN_TOLERANCE = 1e-13
MAX_RANK = 256


def work_model(dims: tuple[int, ...], nnz: int, rank: int) -> Work:
    """Bytes (PASTA's compulsory count, and GenTen's in ``bytes_counted``) and flops of one run."""
    order = len(dims)
    compulsory = (order * INDEX_BYTES + VALUE_BYTES) * nnz + VALUE_BYTES * rank * sum(dims)
    counted = nnz * ((order * rank + 3) * VALUE_BYTES + order * INDEX_BYTES)
    return Work(bytes=float(compulsory), flops=float(order * rank * nnz), bytes_counted=float(counted))


def check_rank(rank: int | str) -> int:
    return tensor_inputs.check_rank("mttkrp", rank, MAX_RANK)


def check_mode(mode: int | str, order: int) -> int:
    return tensor_inputs.check_mode("mttkrp", mode, order)


@dataclass(frozen=True)
class MttkrpProblem(Problem):
    """A tensor (a stand-in of ``dataset`` at ``nnz`` nonzeros, or ``given``), rank, mode, seeded factors."""

    kernel: ClassVar[str] = "mttkrp"
    dataset: str
    nnz: int
    rank: int
    mode: int
    seed: int = 0
    given: SparseTensor | None = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.given is None and self.dataset not in CASES:
            raise UnknownNameError(f"unknown case {self.dataset!r} of kernel 'mttkrp'; known: {', '.join(CASES)}")
        if self.given is not None and not isinstance(self.given, SparseTensor):
            raise PortabenchError(f"mttkrp needs a SparseTensor, got {type(self.given).__name__}")
        if self.nnz < 1:
            raise PortabenchError(f"mttkrp: the number of nonzeros must be positive, got {self.nnz}")
        check_rank(self.rank)
        check_mode(self.mode, self.given.order if self.given is not None else order_of(self.dataset))

    @property
    def case(self) -> str:
        return self.dataset

    @property
    def size(self) -> int:
        return self.nnz

    @property
    def label(self) -> str:
        """The case and mode, as ``portabench verify`` lists and saves it."""
        return f"{self.dataset}-mode{self.mode}"

    @property
    def tensor(self) -> SparseTensor:
        if self.given is not None:
            return self.given
        return standin(self.dataset, self.nnz, self.seed)

    @property
    def factors(self) -> list[np.ndarray]:
        """U_1..U_N (I_m x R), magnitudes uniform in [0.5, 1.5) with random signs, read-only."""
        if "factors" not in self._cache:
            rng = np.random.default_rng([self.seed, 1])  # stream 1: the tensor uses the seed itself
            factors = []
            for dim in self.tensor.dims:
                u = rng.uniform(0.5, 1.5, (dim, self.rank)) * rng.choice(np.array([-1.0, 1.0]), (dim, self.rank))
                u.setflags(write=False)
                factors.append(u)
            self._cache["factors"] = factors
        return self._cache["factors"]

    def inputs(self) -> dict[str, np.ndarray]:
        """coords (nnz x N, int64), values, and factor_0 .. factor_{N-1}."""
        t = self.tensor
        return {"coords": t.coords, "values": t.values, **{f"factor_{m}": u for m, u in enumerate(self.factors)}}

    def work(self) -> Work:
        return work_model(self.tensor.dims, self.tensor.nnz, self.rank)

    def error_scale(self) -> np.ndarray:
        """sum |x| prod |U_m|: the check's denominators (I_n x R)."""
        if "bound" not in self._cache:
            t = self.tensor
            self._cache["bound"] = mttkrp(t.coords, t.values, self.factors, self.mode, absolute=True)
        return self._cache["bound"]

    @property
    def tolerance(self) -> float:
        longest = int(self.tensor.slice_counts(self.mode).max()) if self.tensor.nnz else 0
        return max(MIN_TOLERANCE, 2.0 * (longest + self.tensor.order) * UNIT_ROUNDOFF)


class MttkrpKernel(Kernel):
    name = "mttkrp"
    description = "MTTKRP (seeds 000, 003): V = X_(n) (Khatri-Rao of the other factors), sparse COO X"
    cases = CASES
    case_param = "dataset"
    size_param = "nnz"
    options = {"rank": RANKS, "mode": MODES}
    verify_size = 100_000

    def default_size(self, device: Device) -> int:
        return DEFAULT_NNZ[device]

    def problem_options(self, params: dict[str, str]) -> dict[str, str]:
        """rank and mode (defaults where absent): any rank in 1..MAX_RANK, not only the benchmarked ones;
        the mode is checked against each tensor's order when the problem is made."""
        rank = str(check_rank(params.get("rank", RANKS[0])))
        mode = str(params.get("mode", MODES[0])).strip()
        if not mode.isdigit():
            raise PortabenchError(f"mttkrp: mode must be a non-negative integer, got {mode!r}")
        return {"rank": rank, "mode": mode}

    def benchmark_sizes(self, device: Device) -> list[int]:
        return benchmark_sizes(device)

    def problem(self, case: str, size: int, seed: int = 0, rank: str = RANKS[0], mode: str = MODES[0]) -> MttkrpProblem:
        return MttkrpProblem(dataset=self.check_case(case), nnz=int(size), rank=check_rank(rank),
                             mode=check_mode(mode, order_of(case)), seed=int(seed))

    def problem_from_tensor(self, tensor: SparseTensor, seed: int = 0, rank: str = RANKS[0],
                            mode: str = MODES[0]) -> MttkrpProblem:
        """A problem on a given tensor (case ``file``), with factors from ``seed``."""
        if not isinstance(tensor, SparseTensor):
            raise PortabenchError(f"mttkrp needs a SparseTensor, got {type(tensor).__name__}")
        return MttkrpProblem(dataset=FILE_CASE, nnz=max(tensor.nnz, 1), rank=check_rank(rank),
                             mode=check_mode(mode, tensor.order), seed=int(seed), given=tensor)

    def verify_problems(self, cases: list[str], size: int, seed: int, options: dict[str, str],
                        tensor: SparseTensor | None = None) -> list[MttkrpProblem]:
        """Every mode of each case (of ``tensor`` if given) unless ``options`` names one."""
        rank = options.get("rank", RANKS[0])
        if tensor is not None:
            modes = [options["mode"]] if "mode" in options else [str(m) for m in range(tensor.order)]
            return [self.problem_from_tensor(tensor, seed, rank, m) for m in modes]
        problems = []
        for case in cases:
            order = order_of(self.check_case(case))
            modes = [options["mode"]] if "mode" in options else [str(m) for m in range(order)]
            problems += [self.problem(case, size, seed, rank, m) for m in modes]
        return problems

    def work(self, case: str, size: int, rank: str = RANKS[0], **options: str) -> Work:
        dims, nnz = scaled_shape(self.check_case(case), scale_for(case, int(size)))
        return work_model(dims, nnz, check_rank(rank))

    def oracle(self, problem: Problem) -> np.ndarray:
        assert isinstance(problem, MttkrpProblem)
        t = problem.tensor
        return mttkrp(t.coords, t.values, problem.factors, problem.mode)

    def check(self, problem: Problem, output: np.ndarray, reference: np.ndarray) -> Check:
        assert isinstance(problem, MttkrpProblem)
        error = componentwise_error(output, reference, problem.error_scale())
        return Check(max_rel_error=error, tolerance=problem.tolerance, what="max componentwise error")
