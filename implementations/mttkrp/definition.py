"""MTTKRP (papers [000] and [003]): the problem, its two work models and the check.

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

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from portabench.reference.mttkrp import mttkrp_with_bound

from ..model import COMPONENTWISE, Check, Device, Problem, Study, Work, componentwise_error
from ..tensor_inputs import INDEX_BYTES, MAIN_MODES, MODES, UNIT_ROUNDOFF, VALUE_BYTES
from ..tensor_kernel import TensorModeKernel, TensorProblem

RANKS: tuple[str, ...] = ("16", "32", "64")
RANK_SWEEP_CASE = "nell-2"  # the R sweep and the GPU launch settings run on the papers' largest 3-way tensor
MIN_TOLERANCE = 1e-13


def work_model(dims: tuple[int, ...], nnz: int, rank: int) -> Work:
    """Bytes (PASTA's compulsory count, and GenTen's in ``bytes_counted``) and flops of one run."""
    order = len(dims)
    compulsory = (order * INDEX_BYTES + VALUE_BYTES) * nnz + VALUE_BYTES * rank * sum(dims)
    counted = nnz * ((order * rank + 3) * VALUE_BYTES + order * INDEX_BYTES)
    return Work(bytes=float(compulsory), flops=float(order * rank * nnz), bytes_counted=float(counted))


@dataclass(frozen=True)
class MttkrpProblem(TensorProblem):
    """A tensor problem (``tensor_kernel``) with seeded factors of random signs."""

    kernel: ClassVar[str] = "mttkrp"

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

    def device_footprint(self) -> tuple[str, float]:
        """The tensor as a device holds it (int32 coordinates) and the factors."""
        t = self.tensor
        need = t.nnz * (4 * t.order + 8) + sum(8 * d * self.rank for d in t.dims)
        return "the tensor and factors", float(need)

    def work(self) -> Work:
        return work_model(self.tensor.dims, self.tensor.nnz, self.rank)

    def reference(self) -> np.ndarray:
        """The oracle's V (I_n x R), read-only; computed once, in one pass with the bound."""
        if "reference" not in self._cache:
            t = self.tensor
            reference, bound = mttkrp_with_bound(t.coords, t.values, self.factors, self.mode)
            for a in (reference, bound):
                a.setflags(write=False)
            self._cache["reference"], self._cache["bound"] = reference, bound
        return self._cache["reference"]

    def error_scale(self) -> np.ndarray:
        """sum |x| prod |U_m|: the check's denominators (I_n x R)."""
        self.reference()
        return self._cache["bound"]

    def restore_check_arrays(self, arrays: dict[str, np.ndarray], reference: np.ndarray) -> None:
        self._cache["reference"], self._cache["bound"] = reference, arrays["bound"]

    @property
    def tolerance(self) -> float:
        return max(MIN_TOLERANCE, 2.0 * (self.longest_row + self.tensor.order) * UNIT_ROUNDOFF)


class MttkrpKernel(TensorModeKernel):
    name = "mttkrp"
    description = "MTTKRP (papers [000], [003]): V = X_(n) (Khatri-Rao of the other factors), sparse COO X"
    options = {"rank": RANKS, "mode": MODES}
    problem_class = MttkrpProblem

    def studies(self, device: Device) -> list[Study]:
        from . import KERNEL  # the registered variants, for which of them arrange

        main = self.main_study(device)
        arranging = tuple(v.name for v in KERNEL.variants if v.runs_on(device) and v.arranges)
        studies = [
            main, *self.variants_study(main), self.datasets_study(device),
            self.study("rank", device, suffix="Rank", cases=(RANK_SWEEP_CASE,),
                       options={"rank": RANKS[1:], "mode": MAIN_MODES}, title=f"R = {', '.join(RANKS[1:])}"),
            self.study("preparation", device, suffix="Preparation", cases=main.cases, variants=arranging,
                       options=main.options, measure="preparation",
                       title="sorting and scatter matrices, as a multiple of one run"),
        ]
        if device == "gpu":
            studies.append(self.study(
                "launch", device, suffix="Launch", cases=(RANK_SWEEP_CASE,), variants=("cupy-segmented",),
                options={"mode": ("0", "2")}, settings={"per_warp": ("256", "1024", "4096"), "stage": ("none", "always")},
                title="the segmented kernel's nonzeros per warp and staging"))
        return studies

    def work_model(self, dims: tuple[int, ...], nnz: int, rank: int, mode: int) -> Work:
        return work_model(dims, nnz, rank)

    def oracle(self, problem: Problem) -> np.ndarray:
        assert isinstance(problem, MttkrpProblem)
        return problem.reference()

    def check(self, problem: Problem, output: np.ndarray, reference: np.ndarray) -> Check:
        assert isinstance(problem, MttkrpProblem)
        error = componentwise_error(output, reference, problem.error_scale())
        return Check(max_rel_error=error, tolerance=problem.tolerance, what=COMPONENTWISE)
