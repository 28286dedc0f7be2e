"""What the CP-APR solvers (``cpapr_mu``, paper 000; ``cpapr_pdnr``, paper 002) share: a
count tensor, a rank, a seeded starting model and a number of outer iterations, and a kernel
whose cases are the FROSTT stand-ins (``tensor_inputs``) and whose size is the nonzeros.

A solver's run is ``outer`` outer iterations from the starting model (``reference.cpapr.
initial_model``): each run starts from the same model, so every timed run does the same work
and its output (the model after those iterations) is checked every time. Each solver adds its
algorithm's parameters, work model, oracle and check.

CP-APR models counts: a tensor with a negative or non-finite value, or an all-zero slice (a
factor row with nothing to fit), is refused with a one-line error before anything is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from portabench.datasets.tensors import SparseTensor
from portabench.reference.cpapr import initial_model

from .model import Device, Kernel, PortabenchError
from .tensor_inputs import CASES, FILE_CASE, check_nnz
from .tensor_kernel import TensorInput, check_factor_memory

MAX_RANK = 64  # R x R row systems (PDNR) and the model's N factors stay small beside the tensor
# The tensor kernels' stand-ins and paper 002's fourth Table I tensor, delicious (140 M nonzeros, a
# 17 M-row mode: at full size its factors alone outgrow a GPU at R = 10), at the solvers' sizes.
CPAPR_CASES: tuple[str, ...] = (*CASES, "delicious-4d")
# Paper 002's Table I tensors among the stand-ins that fit at full size: the main comparison. The
# others (delicious among them) form a study.
MAIN_CASES: tuple[str, ...] = ("chicago-crime-comm", "lbnl-network", "nell-2")
OTHER_CASES: tuple[str, ...] = tuple(c for c in CPAPR_CASES if c not in MAIN_CASES)


def pyttb_unavailable() -> str | None:
    """Why pyttb (the library variants' ``cp_apr``) cannot be imported here, or None."""
    try:
        import pyttb  # noqa: F401
    except ImportError as exc:
        return f"pyttb is not installed (pip install pyttb): {exc}"
    return None


def check_counts(kernel: str, tensor: SparseTensor) -> None:
    """Refuse what is no count tensor for CP-APR, naming the first fault."""
    values = tensor.values
    if not np.all(np.isfinite(values)):
        raise PortabenchError(f"{kernel}: the tensor has {int(np.count_nonzero(~np.isfinite(values)))} non-finite "
                              "values: CP-APR models counts")
    if values.size and float(values.min()) < 0:
        raise PortabenchError(f"{kernel}: the tensor has negative values (smallest {float(values.min()):g}): "
                              "CP-APR models counts")
    for mode in range(tensor.order):
        empty = np.flatnonzero(tensor.slice_counts(mode) == 0)
        if empty.size:
            raise PortabenchError(f"{kernel}: the tensor's mode-{mode} slice {int(empty[0])} is all zero "
                                  f"({empty.size} such slices): CP-APR has nothing to fit there; drop them")
    if tensor.nnz and not np.any(values > 0):
        raise PortabenchError(f"{kernel}: the tensor's values are all zero")


@dataclass(frozen=True)
class CpaprProblem(TensorInput):
    """A count tensor input (``tensor_kernel.TensorInput``: the seed also seeds the starting model) and
    the number of outer iterations of one run."""

    kernel: ClassVar[str]
    outer: int = 1
    max_rank: ClassVar[int] = MAX_RANK
    known_cases: ClassVar[tuple[str, ...]] = CPAPR_CASES

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.outer, int) and self.outer >= 1):
            raise PortabenchError(f"{self.kernel}: the outer iterations must be a positive integer, got {self.outer!r}")
        if self.given is not None:
            check_counts(self.kernel, self.given)
            check_factor_memory(self.kernel, self.given, self.rank)

    @property
    def start(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """The starting model (λ, [A_1..A_N]), read-only."""
        if "start" not in self._cache:
            weights, factors = initial_model(self.tensor.dims, self.rank, self.seed)
            for a in (weights, *factors):
                a.setflags(write=False)
            self._cache["start"] = (weights, factors)
        return self._cache["start"]


class CpaprKernel(Kernel):
    """A CP-APR solver on the tensor stand-ins; subclasses set ``name``, ``description``,
    ``options`` (the rank first), ``problem_class``, the default sizes, and give ``problem``,
    ``work``, ``oracle`` and ``check``."""

    cases = CPAPR_CASES
    case_param = "dataset"
    size_param = "nnz"
    size_unit = "nonzeros"
    verify_size = 100_000
    file_kind = "tensor"
    problem_class: ClassVar[type[CpaprProblem]]

    def problem_from_tensor(self, tensor: SparseTensor, seed: int = 0, **options: str) -> CpaprProblem:
        """A problem on a given count tensor (case ``file``)."""
        if not isinstance(tensor, SparseTensor):
            raise PortabenchError(f"{self.name} needs a SparseTensor, got {type(tensor).__name__}")
        return self.problem(FILE_CASE, max(tensor.nnz, 1), seed, given=tensor, **options)

    def problems_from_file(self, path, seed: int, options: dict[str, str], **extra) -> list[CpaprProblem]:
        from portabench.datasets.tensors.tns import read_tns

        return [self.problem_from_tensor(read_tns(path), seed, **self.problem_options(options))]

    def check_case(self, case: str) -> str:
        return case if case == FILE_CASE else super().check_case(case)

    def default_size(self, device: Device) -> int:
        raise NotImplementedError  # each solver states its sizes

    def check_size(self, size: int) -> int:
        return check_nnz(self.name, super().check_size(size), self.cases)
