"""What the sparse tensor kernels (MTTKRP, Φ, Π) share above their inputs: a problem on a
tensor, a rank and a mode, and a kernel whose cases are the FROSTT stand-ins
(``tensor_inputs``), whose options are the rank and the mode, and whose ``verify`` checks
every mode of a case or of a given ``.tns`` tensor. Each kernel adds its model (factors),
work model, oracle and check.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from portabench.datasets import memory
from portabench.datasets.tensors import SparseTensor
from portabench.datasets.tensors.standin import scaled_shape

import numpy as np

from .model import MAIN, Device, Kernel, Part, Partition, PortabenchError, Problem, Study, UnknownNameError, Work
from .tensor_inputs import (CASES, DEFAULT_NNZ, FILE_CASE, MAIN_CASES, MAIN_MODES, MODES, OTHER_CASES, check_mode,
                            check_nnz, check_order, check_rank, order_of, scale_for, standin)

MAX_RANK = 256
VALUE_BYTES = 8


def check_factor_memory(kernel: str, tensor: SparseTensor, rank: int) -> None:
    """Refuse a given tensor whose factor matrices at ``rank`` cannot fit in host memory,
    naming its largest mode, before any factor is allocated (the reader only checks that one
    value per index fits: it knows no rank)."""

    available = memory.available_host_memory_bytes()
    # The N factors, then the mode's output, oracle and error bound: up to 3 more of the largest.
    need = VALUE_BYTES * rank * (sum(tensor.dims) + 3 * max(tensor.dims))
    if available is not None and need > available:
        mode = max(range(tensor.order), key=lambda m: tensor.dims[m])
        raise PortabenchError(
            f"{kernel}: the tensor's mode {mode} (dimension {tensor.dims[mode]}) is too large for this machine's "
            f"memory at rank {rank}: its factor matrices need {need / 2**30:.1f} GiB, {available / 2**30:.1f} GiB "
            "is available: choose a smaller rank (--rank)")


@dataclass(frozen=True)
class TensorInput(Problem):
    """A tensor (a stand-in of ``case`` at ``size`` nonzeros, or ``given``), a rank and a seed: what
    the tensor kernels' problems and the CP-APR solvers' share."""

    case: str
    size: int  # nonzeros
    rank: int
    seed: int = 0
    given: SparseTensor | None = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, compare=False, repr=False)
    max_rank: ClassVar[int] = MAX_RANK
    known_cases: ClassVar[tuple[str, ...]] = CASES

    def __post_init__(self) -> None:
        if self.given is None and self.case not in self.known_cases:
            raise UnknownNameError(f"unknown case {self.case!r} of kernel {self.kernel!r}; "
                                   f"known: {', '.join(self.known_cases)}")
        if self.given is not None and not isinstance(self.given, SparseTensor):
            raise PortabenchError(f"{self.kernel} needs a SparseTensor, got {type(self.given).__name__}")
        if self.given is not None:
            check_order(self.kernel, self.given.order)
        if self.size < 1:
            raise PortabenchError(f"{self.kernel}: the number of nonzeros must be positive, got {self.size}")
        object.__setattr__(self, "rank", check_rank(self.kernel, self.rank, self.max_rank))  # "16" -> 16

    @property
    def tensor(self) -> SparseTensor:
        if self.given is not None:
            return self.given
        return standin(self.case, self.size, self.seed)

    @property
    def order(self) -> int:
        """The tensor's number of modes, known without building a stand-in."""
        return self.given.order if self.given is not None else order_of(self.case)


@dataclass(frozen=True)
class TensorProblem(TensorInput):
    """A tensor input and a mode."""

    mode: int = field(kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "mode", check_mode(self.kernel, self.mode, self.order))  # "2" -> 2

    @property
    def label(self) -> str:
        """The case and mode, as ``portabench verify`` lists and saves it."""
        return f"{self.case}-mode{self.mode}"

    @property
    def longest_row(self) -> int:
        """Nonzeros in the fullest slice of the mode: rounding bounds of row sums grow with it."""
        return int(self.tensor.slice_counts(self.mode).max()) if self.tensor.nnz else 0


def balanced_bounds(counts: np.ndarray, parts: int) -> np.ndarray:
    """``parts + 1`` row bounds splitting rows of ``counts`` nonzeros each into contiguous ranges of about
    equal nonzeros (each at most one row's count above an equal share): [bounds[k], bounds[k + 1])."""
    ends = np.cumsum(counts)
    targets = ends[-1] * np.arange(1, parts) / parts if len(ends) else np.zeros(parts - 1)
    inner = np.searchsorted(ends, targets, side="left") + 1
    return np.concatenate([[0], np.minimum(inner, len(counts)), [len(counts)]]).astype(np.int64)


class TensorModeKernel(Kernel):
    """A kernel on a sparse tensor, a rank and a mode: cases, options, problems, verify's problems.
    Subclasses set ``options`` (the benchmarked ranks first) and ``problem_class`` and give ``work_model``."""

    cases = CASES
    case_param = "dataset"
    size_param = "nnz"
    size_unit = "nonzeros"
    verify_size = 100_000
    file_kind = "tensor"
    partitions = ("rows", "nonzeros")
    problem_class: ClassVar[type[TensorProblem]]

    @property
    def default_rank(self) -> str:
        return self.options["rank"][0]

    def default_size(self, device: Device) -> int:
        return DEFAULT_NNZ[device]

    def check_size(self, size: int) -> int:
        return check_nnz(self.name, super().check_size(size), self.cases)

    def problem_options(self, params: dict[str, str]) -> dict[str, str]:
        """rank and mode (defaults where absent): any rank in 1..MAX_RANK, not only the benchmarked
        ones; the mode is checked against each tensor's order when the problem is made."""
        rank = str(check_rank(self.name, params.get("rank", self.default_rank), MAX_RANK))
        mode = str(params.get("mode", MODES[0])).strip()
        if not mode.isdigit():
            raise PortabenchError(f"{self.name}: mode must be a non-negative integer, got {mode!r}")
        return {"rank": rank, "mode": mode}

    def main_study(self, device: Device) -> Study:
        return self.study(MAIN, device, cases=MAIN_CASES, options={"mode": MAIN_MODES},
                          title=f"{', '.join(MAIN_CASES)}, every mode, R = {self.default_rank}")

    def datasets_study(self, device: Device) -> Study:
        return self.study("datasets", device, suffix="Datasets", cases=OTHER_CASES,
                          options={"mode": MODES[:max(order_of(c) for c in OTHER_CASES)]},
                          title=f"the other stand-ins ({', '.join(OTHER_CASES)}), every mode")

    def studies(self, device: Device) -> list[Study]:
        main = self.main_study(device)
        return [main, *self.variants_study(main), self.datasets_study(device)]

    def unsupported(self, case: str, size: int, options: dict[str, str]) -> str | None:
        order = order_of(case)
        if int(options.get("mode", 0)) >= order:
            return f"{case} has {order} modes, not mode {options['mode']}"
        return None

    def problems_from_file(self, path, seed: int, options: dict[str, str], **extra) -> list[TensorProblem]:
        """Every mode of a ``.tns`` tensor unless ``options`` names one."""
        from portabench.datasets.tensors.tns import read_tns

        return self.verify_problems([], 0, seed, options, tensor=read_tns(path))

    def problem(self, case: str, size: int, seed: int = 0, rank: str | None = None,
                mode: str = MODES[0]) -> TensorProblem:
        return self.problem_class(case=case, size=int(size), rank=rank or self.default_rank, mode=mode,
                                  seed=int(seed))  # the problem checks its case, rank and mode

    def problem_from_tensor(self, tensor: SparseTensor, seed: int = 0, rank: str | None = None,
                            mode: str = MODES[0]) -> TensorProblem:
        """A problem on a given tensor (case ``file``), with the model from ``seed``."""
        if not isinstance(tensor, SparseTensor):
            raise PortabenchError(f"{self.name} needs a SparseTensor, got {type(tensor).__name__}")
        return self.problem_class(case=FILE_CASE, size=max(tensor.nnz, 1),
                                  rank=rank or self.default_rank, mode=mode, seed=int(seed), given=tensor)

    def verify_problems(self, cases: list[str], size: int, seed: int, options: dict[str, str],
                        tensor: SparseTensor | None = None) -> list[TensorProblem]:
        """Every mode of each case (of ``tensor`` if given) unless ``options`` names one."""
        rank = options.get("rank", self.default_rank)
        if tensor is not None:
            check_factor_memory(self.name, tensor, check_rank(self.name, rank, MAX_RANK))
            modes = [options["mode"]] if "mode" in options else [str(m) for m in range(tensor.order)]
            return [self.problem_from_tensor(tensor, seed, rank, m) for m in modes]
        problems = []
        for case in cases:
            order = order_of(self.check_case(case))
            modes = [options["mode"]] if "mode" in options else [str(m) for m in range(order)]
            problems += [self.problem(case, size, seed, rank, m) for m in modes]
        return problems

    def split(self, problem: Problem, part: int, parts: int, partition: Partition) -> Part:
        """"rows": the output rows in ``parts`` contiguous ranges of about equal nonzeros, each share the
        nonzeros of its rows (no reduction: its rows of the output are whole); "nonzeros": the nonzeros in
        ``parts`` contiguous runs of equal length, each share writing a partial output of every row (summed
        across the shares). The factors are replicated: every share is a problem on the whole tensor's
        dimensions with the same seed (its own nonzeros, case ``file``)."""
        assert isinstance(problem, TensorProblem)
        tensor, mode = problem.tensor, problem.mode
        if parts == 1:
            return Part(problem, "none", (0, tensor.dims[mode]))
        if partition == "rows":
            bounds = balanced_bounds(tensor.slice_counts(mode), parts)
            low, high = int(bounds[part]), int(bounds[part + 1])
            index = tensor.coords[:, mode]
            keep = np.flatnonzero((index >= low) & (index < high))
            share, combine, rows = (tensor.coords[keep], tensor.values[keep]), "none", (low, high)
        elif partition == "nonzeros":
            start, stop = (tensor.nnz * part) // parts, (tensor.nnz * (part + 1)) // parts
            share, combine, rows = (tensor.coords[start:stop], tensor.values[start:stop]), "sum", None
        else:
            raise PortabenchError(f"{self.name}: no partition {partition!r}; known: {', '.join(self.partitions)}")
        sub = SparseTensor(tensor.dims, *share)
        return Part(self.problem_from_tensor(sub, problem.seed, str(problem.rank), str(mode)), combine, rows)

    @abstractmethod
    def work_model(self, dims: tuple[int, ...], nnz: int, rank: int, mode: int) -> Work:
        """Bytes and flops of one run on a tensor of ``dims`` and ``nnz`` nonzeros."""

    def work(self, case: str, size: int, rank: str | None = None, mode: str = MODES[0], **options: str) -> Work:
        dims, nnz = scaled_shape(self.check_case(case), scale_for(case, int(size)))
        return self.work_model(dims, nnz, check_rank(self.name, rank or self.default_rank, MAX_RANK),
                               check_mode(self.name, mode, len(dims)))
