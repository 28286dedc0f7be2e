"""Φ, CP-APR's multiplicative-update kernel (seed 000): the problem, its work models, the check.

For a sparse COO tensor X of order N, a mode n, B (I_n x R) and the per-nonzero
Khatri-Rao rows Π (nnz x R, ``reference.phi.pi_rows``), one run computes

    for each nonzero j with row i = i_n:  s_j = x_j / max(<B(i, :), Π(j, :)>, ε),
                                          Φ(i, :) += s_j Π(j, :)                (I_n x R)

Π is an input, in the tensor's nonzero order: CP-APR computes it once per mode and outer
iteration (the ``pi`` kernel) and then evaluates Φ in every inner iteration with a new B.

The *case* is a FROSTT stand-in (``tensor_inputs``) or a given tensor (case ``file``), the
*size* its nonzeros. Options: the rank R (10 by default, as in the seed) and the mode.
Inputs follow CP-APR's model: factor entries uniform in [0.5, 1.5) (a Poisson model is
nonnegative; never zero or constant), B = A_n, the stand-in's count values, ε = 1e-10.

**Work models** (written once, here; variants store int32 indices):

- ``Work.flops``: the seed's W = nnz (4R + 2).
- ``Work.bytes_counted``: the seed's Q = nnz (5R + 2) words of 8 bytes: every nonzero reads
  B(i, :), Π(j, :) twice (dot, then update) and x, and updates Φ(i, :). Caches serve many
  of those re-reads, so rates under Q can pass 100 % of peak.
- ``Work.bytes``: the compulsory bytes: Π, x and the mode-n indices read once, B read
  once, Φ written once: ``nnz (8R + 8 + 4) + 16 R I_n``.
- The seed's refined count for the CPU's segmented algorithm with V nonzeros per thread
  (W = nnz (4R + R/V + 3), Q = nnz (6R + 2R/V + 3) words) is ``segmented_work``.

**Check.** Componentwise: |Φ - Φ_ref| / Σ_j |s_j| |Π(j, :)|, the largest entry. The dot
errs by at most R u relatively (nonnegative terms), s by (R + 1) u, and a row's sum of L
terms by L u more, so oracle and variant differ by at most 2 (L + R + 2) u of the bound;
a dropped nonzero moves an entry by about 1 / L of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from portabench.datasets.tensors import SparseTensor
from portabench.datasets.tensors.standin import scaled_shape
from portabench.reference.phi import phi, pi_rows

from .. import tensor_inputs
from ..model import Check, Device, Kernel, PortabenchError, Problem, UnknownNameError, Work, componentwise_error
from ..tensor_inputs import (CASES, DEFAULT_NNZ, FILE_CASE, INDEX_BYTES, MODES, UNIT_ROUNDOFF, VALUE_BYTES,
                             benchmark_sizes, order_of, scale_for, standin)

RANKS: tuple[str, ...] = ("10",)
MAX_RANK = 256
EPSILON = 1e-10  # CP-APR's smallest divisor (pyttb's and SparTen's default)
MIN_TOLERANCE = 1e-13
WORD = 8


def work_model(dims: tuple[int, ...], nnz: int, rank: int, mode: int) -> Work:
    """The seed's flops W and words Q (as ``bytes_counted``), and the compulsory bytes."""
    compulsory = nnz * (WORD * rank + VALUE_BYTES + INDEX_BYTES) + 2 * WORD * rank * dims[mode]
    return Work(bytes=float(compulsory), flops=float(nnz * (4 * rank + 2)),
                bytes_counted=float(WORD * nnz * (5 * rank + 2)))


def segmented_work(nnz: int, rank: int, per_thread: int) -> Work:
    """The seed's refined W and Q (eqs. 6-7) of the CPU segmented algorithm, V = ``per_thread``."""
    v = max(1, per_thread)
    return Work(bytes=float("nan"), flops=nnz * (4 * rank + rank / v + 3),
                bytes_counted=WORD * nnz * (6 * rank + 2 * rank / v + 3))


def check_rank(rank: int | str) -> int:
    return tensor_inputs.check_rank("phi", rank, MAX_RANK)


def check_mode(mode: int | str, order: int) -> int:
    return tensor_inputs.check_mode("phi", mode, order)


@dataclass(frozen=True)
class PhiProblem(Problem):
    """A tensor (a stand-in of ``dataset`` at ``nnz`` nonzeros, or ``given``), rank, mode, ε, seeded model."""

    kernel: ClassVar[str] = "phi"
    dataset: str
    nnz: int
    rank: int
    mode: int
    seed: int = 0
    epsilon: float = EPSILON
    given: SparseTensor | None = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.given is None and self.dataset not in CASES:
            raise UnknownNameError(f"unknown case {self.dataset!r} of kernel {self.kernel!r}; known: {', '.join(CASES)}")
        if self.given is not None and not isinstance(self.given, SparseTensor):
            raise PortabenchError(f"{self.kernel} needs a SparseTensor, got {type(self.given).__name__}")
        if self.nnz < 1:
            raise PortabenchError(f"{self.kernel}: the number of nonzeros must be positive, got {self.nnz}")
        if not (np.isfinite(self.epsilon) and self.epsilon > 0):
            raise PortabenchError(f"{self.kernel}: ε must be a positive number, got {self.epsilon!r}")
        tensor_inputs.check_rank(self.kernel, self.rank, MAX_RANK)
        tensor_inputs.check_mode(self.kernel, self.mode, self.given.order if self.given is not None else order_of(self.dataset))

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
        """The model's A_1..A_N (I_m x R), entries uniform in [0.5, 1.5), read-only."""
        if "factors" not in self._cache:
            rng = np.random.default_rng([self.seed, 2])  # stream 2: the tensor uses the seed itself
            factors = []
            for dim in self.tensor.dims:
                u = rng.uniform(0.5, 1.5, (dim, self.rank))
                u.setflags(write=False)
                factors.append(u)
            self._cache["factors"] = factors
        return self._cache["factors"]

    @property
    def b(self) -> np.ndarray:
        """B (I_n x R): the mode's factor (with the weights λ absorbed, as CP-APR keeps it)."""
        return self.factors[self.mode]

    @property
    def pi(self) -> np.ndarray:
        """Π (nnz x R) in the tensor's nonzero order, read-only."""
        if "pi" not in self._cache:
            pi = pi_rows(self.tensor.coords, self.factors, self.mode)
            pi.setflags(write=False)
            self._cache["pi"] = pi
        return self._cache["pi"]

    @property
    def rows(self) -> np.ndarray:
        """Each nonzero's output row: its mode-n index."""
        return self.tensor.coords[:, self.mode]

    def inputs(self) -> dict[str, np.ndarray]:
        """coords (nnz x N), values, b, pi and epsilon."""
        t = self.tensor
        return {"coords": t.coords, "values": t.values, "b": self.b, "pi": self.pi,
                "epsilon": np.array(self.epsilon)}

    def work(self) -> Work:
        return work_model(self.tensor.dims, self.tensor.nnz, self.rank, self.mode)

    def error_scale(self) -> np.ndarray:
        """Σ_j |s_j| |Π(j, :)|: the check's denominators (I_n x R)."""
        if "bound" not in self._cache:
            self._cache["bound"] = phi(self.rows, self.tensor.values, self.b, self.pi, self.epsilon, absolute=True)
        return self._cache["bound"]

    @property
    def tolerance(self) -> float:
        longest = int(self.tensor.slice_counts(self.mode).max()) if self.tensor.nnz else 0
        return max(MIN_TOLERANCE, 2.0 * (longest + self.rank + 2) * UNIT_ROUNDOFF)


class TensorModeKernel(Kernel):
    """A kernel on a sparse tensor, a rank and a mode (Φ, Π): cases, options, problems."""

    cases = CASES
    case_param = "dataset"
    size_param = "nnz"
    options = {"rank": RANKS, "mode": MODES}
    verify_size = 100_000
    problem_class: ClassVar[type[PhiProblem]] = PhiProblem

    def default_size(self, device: Device) -> int:
        return DEFAULT_NNZ[device]

    def problem_options(self, params: dict[str, str]) -> dict[str, str]:
        """rank and mode (defaults where absent): any rank in 1..MAX_RANK, not only the benchmarked
        ones; the mode is checked against each tensor's order when the problem is made."""
        rank = str(tensor_inputs.check_rank(self.name, params.get("rank", RANKS[0]), MAX_RANK))
        mode = str(params.get("mode", MODES[0])).strip()
        if not mode.isdigit():
            raise PortabenchError(f"{self.name}: mode must be a non-negative integer, got {mode!r}")
        return {"rank": rank, "mode": mode}

    def benchmark_sizes(self, device: Device) -> list[int]:
        return benchmark_sizes(device)

    def problem(self, case: str, size: int, seed: int = 0, rank: str = RANKS[0], mode: str = MODES[0]) -> PhiProblem:
        case = self.check_case(case)
        return self.problem_class(dataset=case, nnz=int(size), rank=tensor_inputs.check_rank(self.name, rank, MAX_RANK),
                                  mode=tensor_inputs.check_mode(self.name, mode, order_of(case)), seed=int(seed))

    def problem_from_tensor(self, tensor: SparseTensor, seed: int = 0, rank: str = RANKS[0],
                            mode: str = MODES[0]) -> PhiProblem:
        """A problem on a given tensor (case ``file``), with the model from ``seed``."""
        if not isinstance(tensor, SparseTensor):
            raise PortabenchError(f"{self.name} needs a SparseTensor, got {type(tensor).__name__}")
        return self.problem_class(dataset=FILE_CASE, nnz=max(tensor.nnz, 1),
                                  rank=tensor_inputs.check_rank(self.name, rank, MAX_RANK),
                                  mode=tensor_inputs.check_mode(self.name, mode, tensor.order), seed=int(seed),
                                  given=tensor)

    def verify_problems(self, cases: list[str], size: int, seed: int, options: dict[str, str],
                        tensor: SparseTensor | None = None) -> list[PhiProblem]:
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


class PhiKernel(TensorModeKernel):
    name = "phi"
    description = "CP-APR Φ (seed 000): Φ(i,:) += x_j / max(<B(i,:), Π(j,:)>, ε) Π(j,:), sparse COO X"

    def work(self, case: str, size: int, rank: str = RANKS[0], mode: str = MODES[0], **options: str) -> Work:
        dims, nnz = scaled_shape(self.check_case(case), scale_for(case, int(size)))
        return work_model(dims, nnz, check_rank(rank), check_mode(mode, len(dims)))

    def oracle(self, problem: Problem) -> np.ndarray:
        assert isinstance(problem, PhiProblem)
        return phi(problem.rows, problem.tensor.values, problem.b, problem.pi, problem.epsilon)

    def check(self, problem: Problem, output: np.ndarray, reference: np.ndarray) -> Check:
        assert isinstance(problem, PhiProblem)
        error = componentwise_error(output, reference, problem.error_scale())
        return Check(max_rel_error=error, tolerance=problem.tolerance, what="max componentwise error")
