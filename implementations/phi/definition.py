"""Φ, CP-APR's multiplicative-update kernel (paper [000]): the problem, its work models, the check.

For a sparse COO tensor X of order N, a mode n, B (I_n x R) and the per-nonzero
Khatri-Rao rows Π (nnz x R, ``reference.pi.pi_rows``), one run computes

    for each nonzero j with row i = i_n:  s_j = x_j / max(<B(i, :), Π(j, :)>, ε),
                                          Φ(i, :) += s_j Π(j, :)                (I_n x R)

Π is an input, in the tensor's nonzero order: CP-APR computes it once per mode and outer
iteration (the ``pi`` kernel) and then evaluates Φ in every inner iteration with a new B.

The *case* is a FROSTT stand-in (``tensor_inputs``) or a given tensor (case ``file``), the
*size* its nonzeros. Options: the rank R (10 by default, as in the seed) and the mode.
Inputs follow CP-APR's model: factor entries uniform in [0.5, 1.5) (a Poisson model is
nonnegative; never zero or constant), B = A_n, the stand-in's count values, ε = 1e-10.

**Work models** (written once, here; variants store int32 indices):

- ``Work.flops``: the paper's W = nnz (4R + 2).
- ``Work.bytes_counted``: the paper's Q = nnz (5R + 2) words of 8 bytes: every nonzero reads
  B(i, :), Π(j, :) twice (dot, then update) and x, and updates Φ(i, :). Caches serve many
  of those re-reads, so rates under Q can pass 100 % of peak.
- ``Work.bytes``: the compulsory bytes: Π, x and the mode-n indices read once, B read
  once, Φ written once: ``nnz (8R + 8 + 4) + 16 R I_n``.
- The paper's refined count for the CPU's segmented algorithm with V nonzeros per thread
  (W = nnz (4R + R/V + 3), Q = nnz (6R + 2R/V + 3) words) is ``segmented_work``.

**Check.** Componentwise: |Φ - Φ_ref| / Σ_j |s_j| |Π(j, :)|, the largest entry. The dot
errs by at most R u relatively (nonnegative terms), s by (R + 1) u, and a row's sum of L
terms by L u more, so oracle and variant differ by at most 2 (L + R + 2) u of the bound;
a dropped nonzero moves an entry by about 1 / L of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from portabench.reference.phi import phi
from portabench.reference.pi import pi_rows

from ..model import COMPONENTWISE, Check, Device, PortabenchError, Problem, Study, Work, componentwise_error
from ..tensor_inputs import INDEX_BYTES, MODES, UNIT_ROUNDOFF, VALUE_BYTES
from ..tensor_kernel import TensorModeKernel, TensorProblem

RANKS: tuple[str, ...] = ("10",)
PERTURBATIONS: tuple[str, ...] = ("no-atomics", "reuse", "both")  # the paper's Experiment 1
POLICY_CASES: tuple[str, ...] = ("chicago-crime-comm", "lbnl-network")  # the paper's Experiment 4 tensors
EPSILON = 1e-10  # CP-APR's smallest divisor (pyttb's and SparTen's default)
MIN_TOLERANCE = 1e-13
WORD = 8


def work_model(dims: tuple[int, ...], nnz: int, rank: int, mode: int) -> Work:
    """The paper's flops W and words Q (as ``bytes_counted``), and the compulsory bytes."""
    compulsory = nnz * (WORD * rank + VALUE_BYTES + INDEX_BYTES) + 2 * WORD * rank * dims[mode]
    return Work(bytes=float(compulsory), flops=float(nnz * (4 * rank + 2)),
                bytes_counted=float(WORD * nnz * (5 * rank + 2)))


def segmented_work(nnz: int, rank: int, per_thread: int) -> Work:
    """The paper's refined W and Q (eqs. 6-7) of the CPU segmented algorithm, V = ``per_thread``."""
    v = max(1, per_thread)
    return Work(bytes=float("nan"), flops=nnz * (4 * rank + rank / v + 3),
                bytes_counted=WORD * nnz * (6 * rank + 2 * rank / v + 3))


@dataclass(frozen=True)
class PhiProblem(TensorProblem):
    """A tensor problem (``tensor_kernel``) with ε and a seeded nonnegative model; B and Π derived."""

    kernel: ClassVar[str] = "phi"
    epsilon: float = EPSILON

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (np.isfinite(self.epsilon) and self.epsilon > 0):
            raise PortabenchError(f"{self.kernel}: ε must be a positive number, got {self.epsilon!r}")

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

    def device_footprint(self) -> tuple[str, float]:
        """The tensor as a device holds it (int32 coordinates), Π, and B with the output Φ beside it."""
        t = self.tensor
        need = t.nnz * (4 * t.order + 8 + 8 * self.rank) + 16 * t.dims[self.mode] * self.rank
        return "the tensor, Π and B", float(need)

    def work(self) -> Work:
        return work_model(self.tensor.dims, self.tensor.nnz, self.rank, self.mode)

    def error_scale(self) -> np.ndarray:
        """Σ_j |s_j| |Π(j, :)|: the check's denominators (I_n x R)."""
        if "bound" not in self._cache:
            self._cache["bound"] = phi(self.rows, self.tensor.values, self.b, self.pi, self.epsilon, absolute=True)
        return self._cache["bound"]

    @property
    def tolerance(self) -> float:
        return max(MIN_TOLERANCE, 2.0 * (self.longest_row + self.rank + 2) * UNIT_ROUNDOFF)


class PhiKernel(TensorModeKernel):
    name = "phi"
    description = "CP-APR Φ (paper [000]): Φ(i,:) += x_j / max(<B(i,:), Π(j,:)>, ε) Π(j,:), sparse COO X"
    options = {"rank": RANKS, "mode": MODES}
    problem_class = PhiProblem
    has_roofline = True  # the paper's Figures 3-4: W over the compulsory bytes and over Q

    def default_launch_policy(self, device: Device) -> str | None:
        from .variant import LAUNCH_POLICIES

        return LAUNCH_POLICIES.get(device, (None,))[0]  # the first of each device's is the default setting

    def studies(self, device: Device) -> list[Study]:
        from . import KERNEL
        from .variant import LAUNCH_POLICIES

        main = self.main_study(device)
        portable = tuple(v.name for v in KERNEL.variants if v.runs_on(device) and v.family == "portable")
        return [
            main, *self.variants_study(main), self.datasets_study(device),
            self.study("pressure", device, suffix="Pressure", cases=main.cases, variants=portable, options=main.options,
                       settings={"perturbation": PERTURBATIONS},
                       title="each portable variant perturbed (no atomics, reuse), against itself unperturbed"),
            self.study("launch", device, suffix="Launch", cases=POLICY_CASES, variants=portable,
                       settings={"policy": LAUNCH_POLICIES[device]}, title="launch policies against the default one"),
        ]

    def variant_settings(self, settings: dict[str, str]) -> dict[str, object]:
        from .variant import policy_settings

        out = dict(settings)
        policy = out.pop("policy", None)
        return {**super().variant_settings(out), **(policy_settings(policy) if policy is not None else {})}

    def work_model(self, dims: tuple[int, ...], nnz: int, rank: int, mode: int) -> Work:
        return work_model(dims, nnz, rank, mode)

    def oracle(self, problem: Problem) -> np.ndarray:
        assert isinstance(problem, PhiProblem)
        return phi(problem.rows, problem.tensor.values, problem.b, problem.pi, problem.epsilon)

    def check(self, problem: Problem, output: np.ndarray, reference: np.ndarray) -> Check:
        assert isinstance(problem, PhiProblem)
        error = componentwise_error(output, reference, problem.error_scale())
        return Check(max_rel_error=error, tolerance=problem.tolerance, what=COMPONENTWISE)
