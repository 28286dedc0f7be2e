"""Π, CP-APR's Khatri-Rao rows (paper [000]): the problem, its work model and the check.

For a sparse tensor of order N, a mode n and the model's factors A_1..A_N (I_m x R), one
run computes Π(j, :) = prod_{m != n} A_m(i_m, :) for every nonzero j (nnz x R), once per
mode and outer iteration of CP-APR MU; Φ then reads it in every inner iteration. Cases,
sizes, options and the seeded model are Φ's (``phi.definition``), so the two kernels
benchmark the same CP-APR step on the same inputs.

**Work model** (written once, here): the other modes' indices read once, Π written once,
the other factors read once: ``nnz ((N - 1) 4 + 8 R) + 8 R sum_{m != n} I_m`` bytes;
``(N - 2) R nnz`` flops (multiplies).

**Oracle**: ``reference.pi.pi_rows``, plain NumPy over the definition, sharing no code with
the variants. **Check.** Relative, entry by entry: each entry is a product of N - 1 positive
numbers, so any multiplication order errs by at most (N - 2) u; two orders differ by twice
that. The tolerance, 4 N u, leaves room; a wrong index or factor moves an entry by O(1).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..model import Check, Problem, Work, max_relative_error
from ..phi.definition import RANKS, PhiProblem
from ..tensor_inputs import INDEX_BYTES, MODES, UNIT_ROUNDOFF, VALUE_BYTES
from ..tensor_kernel import TensorModeKernel


def work_model(dims: tuple[int, ...], nnz: int, rank: int, mode: int) -> Work:
    """Bytes (indices and factors read once, Π written once) and flops of one run."""
    order = len(dims)
    others = sum(d for m, d in enumerate(dims) if m != mode)
    compulsory = nnz * ((order - 1) * INDEX_BYTES + VALUE_BYTES * rank) + VALUE_BYTES * rank * others
    return Work(bytes=float(compulsory), flops=float(max(order - 2, 0) * rank * nnz))


class PiProblem(PhiProblem):
    """Φ's problem (tensor, rank, mode, seeded model); the output is Π itself."""

    kernel: ClassVar[str] = "pi"

    def inputs(self) -> dict[str, np.ndarray]:
        """coords (nnz x N) and factor_0 .. factor_{N-1}."""
        return {"coords": self.tensor.coords, **{f"factor_{m}": u for m, u in enumerate(self.factors)}}

    def device_footprint(self) -> tuple[str, float]:
        """The tensor's int32 coordinates, the factors and the output Π."""
        t = self.tensor
        need = t.nnz * (4 * t.order + 8 * self.rank) + 8 * self.rank * sum(t.dims)
        return "the tensor, the factors and Π", float(need)

    def work(self) -> Work:
        return work_model(self.tensor.dims, self.tensor.nnz, self.rank, self.mode)

    @property
    def tolerance(self) -> float:
        return 4.0 * self.tensor.order * UNIT_ROUNDOFF


class PiKernel(TensorModeKernel):
    name = "pi"
    description = "CP-APR Π (paper [000]): Π(j,:) = prod_{m != n} A_m(i_m,:) for every nonzero, sparse COO X"
    options = {"rank": RANKS, "mode": MODES}
    problem_class = PiProblem
    partitions = ()  # Π's rows are the nonzeros: not split by the tensor kernels' output rows
    oracle_stored = False  # nnz x R rows: reading them back is no faster than the gathers

    def work_model(self, dims: tuple[int, ...], nnz: int, rank: int, mode: int) -> Work:
        return work_model(dims, nnz, rank, mode)

    def oracle(self, problem: Problem) -> np.ndarray:
        """``reference.pi.pi_rows`` of the problem's tensor, factors and mode: ``problem.pi``, the
        same array Φ's problem reads as its input, built once."""
        assert isinstance(problem, PiProblem)
        return problem.pi

    def check(self, problem: Problem, output: np.ndarray, reference: np.ndarray) -> Check:
        assert isinstance(problem, PiProblem)
        return Check(max_rel_error=max_relative_error(output, reference), tolerance=problem.tolerance)


