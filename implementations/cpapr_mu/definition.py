"""CP-APR MU (paper 000, Algorithm 1; Chi and Kolda's Algorithm 3): the problem, its work model, the check.

One run is ``outer`` outer iterations (1 in the benchmarks: times are per outer iteration) of the
multiplicative-update solver from the problem's seeded starting model (``cpapr_inputs``), as the
oracle ``reference.cpapr_mu`` defines them: per mode, the complementary-slackness offset (κ, κ_tol),
Π, then up to l_max inner iterations of Φ, the KKT check (τ) and the update, then λ. Every variant
builds it from the project's own Π and Φ variants (``implementations/pi``, ``implementations/phi``),
so a better Φ shows up in the solver's time. The output is the model (λ, A_1..A_N) with its
components in decreasing λ, flattened: λ, then each factor row by row.

**Work model** (per run, written once here): each outer iteration runs, for each mode n, one Π and
l_max Φ (the start is far from a KKT point, so no mode stops early in the first iterations), whose
bytes and flops are those kernels' (``pi.definition.work_model``, ``phi.definition.work_model``);
the O(I_n R) steps (KKT check, update, λ) are left out: under 1 % of the bytes at the stand-ins'
sizes. ``bytes_counted`` adds Φ's counted words (the paper's Q) to Π's bytes.

**Check.** MU is deterministic given the start: variants differ from the oracle only by the
order of their sums. Those differences are amplified through the iterations, by an amount that
depends on the data: per inner iteration, a relative perturbation δ of B's row becomes
(I - M) δ with M row-stochastic (M = D_Φ^-1 G D_B, G = Σ_j x_j Π_j Π_j^T / <B, Π_j>^2), whose
eigenvalues lie in [0, 1] but which is far from normal where a row's entries span many orders of
magnitude (MU drives entries towards zero): a priori only ‖I - M‖∞ ≤ 2 holds, a useless 2^(l_max N k).
So the bound is measured on the problem itself: the oracle is run a second time with the nonzeros
in reverse order, which changes the order of every sum and nothing else, and the check allows
``MARGIN`` times that spread (``model_error``: relative per entry, factor entries below 2^-40 of
their column's largest compared at that scale), at least ``MARGIN (R + N + 2) u``. Measured at
30 k nonzeros on the six stand-ins, pyttb's MU from the same start differs from the oracle by
0.4-11x the spread (k = 1, and k = 3 with the offset off); a dropped nonzero or a missed inner
iteration moves entries by far more (``tests/test_cpapr_mu.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from portabench.reference.cpapr_mu import MuParameters, cp_apr_mu, model_error

from ..cpapr_inputs import MAIN_CASES, MAX_RANK, OTHER_CASES, CpaprKernel, CpaprProblem
from ..model import Check, Device, Part, Partition, PortabenchError, Problem, Study, Work
from ..phi.definition import work_model as phi_work
from ..pi.definition import work_model as pi_work
from ..tensor_inputs import FILE_CASE, INDEX_BYTES, UNIT_ROUNDOFF, check_rank, scale_for
from ..tensor_kernel import balanced_bounds

RANKS: tuple[str, ...] = ("10",)  # the paper's rank
MARGIN = 64.0  # the check's allowance over the oracle's own spread (pyttb: up to 11x measured)
# CPU: 200 k nonzeros keeps the main comparison (3 cases, 7+ samples of each variant, the oracle
# twice) short on a small machine (EXPERIMENTS.md); Π (16 MB at R = 10) and the tensor fit an L3, so
# it times the solver, not a
# bandwidth figure. GPU: 8 M nonzeros (chicago and lbnl at full size, nell-2 at a tenth): the oracle
# runs twice on the host, so full-size nell-2 is a study's size
# (``--size cpapr_mu=76879419``), not the default run's.
DEFAULT_NNZ: dict[Device, int] = {"cpu": 200_000, "gpu": 8_000_000}
# pyttb's MU takes seconds per outer iteration at 100 k nonzeros (its Φ sums R columns in Python
# loops): a comparison point at small sizes only (``--size cpapr_mu=100000``) and in EXPERIMENTS.md.
PYTTB_MAX_NNZ = 100_000
WORD = 8


def flatten(weights: np.ndarray, factors: list[np.ndarray]) -> np.ndarray:
    """λ, then each factor row by row, as one float64 array."""
    return np.concatenate([np.ravel(weights)] + [np.ravel(a) for a in factors]).astype(np.float64, copy=False)


def unflatten(flat: np.ndarray, dims: tuple[int, ...], rank: int) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """``flatten``'s inverse, or None if ``flat`` has the wrong length."""
    flat = np.asarray(flat, dtype=np.float64).ravel()
    if flat.size != rank * (1 + sum(dims)):
        return None
    factors, start = [], rank
    for dim in dims:
        factors.append(flat[start:start + dim * rank].reshape(dim, rank))
        start += dim * rank
    return flat[:rank], factors


@dataclass(frozen=True)
class MuProblem(CpaprProblem):
    """A CP-APR problem (``cpapr_inputs``) with MU's parameters (the published defaults)."""

    kernel: ClassVar[str] = "cpapr_mu"
    inner: int = 10
    stoptol: float = 1e-4
    epsilon: float = 1e-10
    kappa: float = 1e-2
    kappatol: float = 1e-10

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.inner, int) and self.inner >= 1):
            raise PortabenchError(f"{self.kernel}: the inner iterations l_max must be a positive integer, got {self.inner!r}")
        for name in ("stoptol", "epsilon", "kappa", "kappatol"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0) or (name == "epsilon" and value == 0):
                raise PortabenchError(f"{self.kernel}: {name} must be a {'positive' if name == 'epsilon' else 'nonnegative'} "
                                      f"number, got {value!r}")

    @property
    def parameters(self) -> MuParameters:
        return MuParameters(inner=self.inner, stoptol=self.stoptol, epsilon=self.epsilon, kappa=self.kappa,
                            kappatol=self.kappatol)

    def inputs(self) -> dict[str, np.ndarray]:
        """coords (nnz x N), values, the starting weights and factor_0 .. factor_{N-1}."""
        weights, factors = self.start
        return {"coords": self.tensor.coords, "values": self.tensor.values, "weights": weights,
                **{f"factor_{m}": a for m, a in enumerate(factors)}}

    def device_footprint(self) -> tuple[str, float]:
        """The tensor as a device holds it (int32 coordinates), Π, and the model's factors three times over
        (the starting factors, the factors and Φ)."""
        t = self.tensor
        need = t.nnz * (4 * t.order + 8 + 8 * self.rank) + 8 * self.rank * 3 * sum(t.dims)
        return "the tensor, Π and the model", float(need)

    def work(self) -> Work:
        t = self.tensor
        return work_model(t.dims, t.nnz, self.rank, self.outer, self.inner)

    def solve(self, reverse: bool = False) -> np.ndarray:
        """The oracle's output (flattened), with the nonzeros in reverse order if ``reverse``."""
        t = self.tensor
        coords, values = (t.coords[::-1], t.values[::-1]) if reverse else (t.coords, t.values)
        weights, factors, _ = cp_apr_mu(coords, values, *self.start, self.outer, self.parameters)
        return flatten(weights, factors)

    def error_scale(self) -> np.ndarray:
        """The oracle's output with the nonzeros in reverse order: its distance from the oracle's is
        the spread the check scales its tolerance by."""
        if "bound" not in self._cache:
            self._cache["bound"] = self.solve(reverse=True)
        return self._cache["bound"]

    def model_error(self, output: np.ndarray, reference: np.ndarray) -> float:
        """``reference.cpapr_mu.model_error`` of two flattened models."""
        out, ref = unflatten(output, self.tensor.dims, self.rank), unflatten(reference, self.tensor.dims, self.rank)
        if out is None or ref is None:
            return float("nan")
        return model_error(*out, *ref)

    def tolerance(self, reference: np.ndarray) -> float:
        spread = self.model_error(self.error_scale(), reference)
        return MARGIN * max(spread, (self.rank + self.tensor.order + 2) * UNIT_ROUNDOFF)


def work_model(dims: tuple[int, ...], nnz: int, rank: int, outer: int = 1, inner: int = 10) -> Work:
    """Per run: ``outer`` times, for each mode, one Π and ``inner`` Φ (their kernels' work models)."""
    flops = moved = counted = 0.0
    for mode in range(len(dims)):
        pi, phi = pi_work(dims, nnz, rank, mode), phi_work(dims, nnz, rank, mode)
        flops += pi.flops + inner * phi.flops
        moved += pi.bytes + inner * phi.bytes
        counted += pi.bytes + inner * (phi.bytes_counted or phi.bytes)
    # Passes over the same data: the tensor (indices, values), Π and the factors.
    working_set = nnz * (INDEX_BYTES * len(dims) + WORD + WORD * rank) + WORD * rank * sum(dims)
    return Work(bytes=outer * moved, flops=outer * flops, bytes_counted=outer * counted, working_set=float(working_set))


class MuKernel(CpaprKernel):
    name = "cpapr_mu"
    description = "CP-APR MU (paper [000], Chi-Kolda): one outer iteration (Π, 10 x (Φ, KKT, update), λ per mode), R = 10"
    options = {"rank": RANKS}
    problem_class = MuProblem
    # The quick check: one tensor of each order (Π is compiled per order); chicago (4-way) and lbnl (5-way),
    # at the full verify size, have rows longer than Φ's segments (a row across several threads' chunks);
    # nell-2 (3-way), smaller, is where pyttb runs (pyttb on every case at the full size is the full set's
    # longest part).
    quick_verify = {"chicago-crime-comm": CpaprKernel.verify_size, "lbnl-network": CpaprKernel.verify_size,
                    "nell-2": 20_000}

    partitions = ("rows",)

    def default_size(self, device: Device) -> int:
        return DEFAULT_NNZ[device]

    def split(self, problem: Problem, part: int, parts: int, partition: Partition) -> Part:
        """Each mode's factor rows in ``parts`` ranges of about equal nonzeros: a share updates its rows from
        their nonzeros (Π and Φ of those only) and the shares' rows are gathered once per mode, before λ."""
        assert isinstance(problem, MuProblem)
        if partition not in self.partitions:
            raise PortabenchError(f"{self.name}: no partition {partition!r}; known: {', '.join(self.partitions)}")
        if parts == 1:
            return Part(problem, "none")
        tensor = problem.tensor
        bounds = [balanced_bounds(tensor.slice_counts(n), parts)[part:part + 2] for n in range(tensor.order)]
        return Part(problem, "none", mode_rows=tuple((int(low), int(high)) for low, high in bounds))

    def studies(self, device: Device) -> list[Study]:
        main = self.study("main", device, cases=MAIN_CASES,
                          title=f"{', '.join(MAIN_CASES)} (paper 002's Table I), one outer iteration, R = 10")
        return [main, self.study("datasets", device, suffix="Datasets", cases=OTHER_CASES,
                                 title=f"the other stand-ins ({', '.join(OTHER_CASES)}), one outer iteration")]

    def problem_options(self, params: dict[str, str]) -> dict[str, str]:
        """The rank (default 10): any rank in 1..MAX_RANK, not only the benchmarked one."""
        return {"rank": str(check_rank(self.name, params.get("rank", RANKS[0]), MAX_RANK))}

    def problem(self, case: str, size: int, seed: int = 0, rank: str | None = None, outer: int = 1,
                given=None, **parameters) -> MuProblem:
        if given is None:
            case = self.check_case(case)
        elif case != FILE_CASE:
            raise PortabenchError(f"{self.name}: a given tensor is case {FILE_CASE!r}, got {case!r}")
        rank_ = check_rank(self.name, rank or RANKS[0], MAX_RANK)
        problem = MuProblem(case=case, size=int(size), rank=rank_, outer=int(outer), seed=int(seed), given=given,
                            **parameters)
        check_memory(problem)
        return problem

    def work(self, case: str, size: int, rank: str | None = None, **options: str) -> Work:
        from portabench.datasets.tensors.standin import scaled_shape

        dims, nnz = scaled_shape(self.check_case(case), scale_for(case, int(size)))
        return work_model(dims, nnz, check_rank(self.name, rank or RANKS[0], MAX_RANK))

    def oracle(self, problem: Problem) -> np.ndarray:
        assert isinstance(problem, MuProblem)
        return problem.solve()

    def check(self, problem: Problem, output: np.ndarray, reference: np.ndarray) -> Check:
        assert isinstance(problem, MuProblem)
        return Check(max_rel_error=problem.model_error(output, reference), tolerance=problem.tolerance(reference),
                     what=f"max model entry error (tolerance {MARGIN:g}x the oracle's reverse-order spread)")


def check_memory(problem: MuProblem) -> None:
    """Refuse a problem whose Π (nnz x R) and tensor cannot fit in host memory, before anything is built."""
    from portabench.datasets import memory

    available = memory.available_host_memory_bytes()
    if problem.given is not None:
        nnz, order = problem.given.nnz, problem.given.order
    else:
        from ..tensor_inputs import full_shape

        dims, full = full_shape(problem.case)
        nnz, order = min(problem.size, full), len(dims)
    # Π and the oracle's gathered rows (2 nnz R words), the tensor twice (file order, the variant's layout).
    need = WORD * nnz * 2 * problem.rank + 2 * nnz * (WORD + 8 * order)
    if available is not None and need > available:
        raise PortabenchError(f"{problem.kernel}: the tensor ({nnz} nonzeros) and its Π rows at rank {problem.rank} need "
                              f"{need / 2**30:.1f} GiB, {available / 2**30:.1f} GiB is available: choose fewer nonzeros "
                              f"(--size {problem.kernel}=NNZ)")
