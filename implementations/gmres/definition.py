"""Batched GMRES (paper [004]): N independent systems ``A_k x_k = b_k`` on one sparsity pattern.

Every variant solves every system to ``||M^{-1}(b - A x)|| < tol ||M^{-1} b||`` (left
Jacobi preconditioning ``M = diag(A)``, ``x_0 = 0``, tol 1e-8) and a converged system
stops being updated; the iterative variants follow the float64 oracle
(``portabench.reference.gmres``: modified Gram-Schmidt, Givens rotations, cycles of at
most ``RESTART`` steps, ``MAX_ITER`` steps in all). Direct solvers (dense LU) are
checked the same way.

**Check.** The residual above is recomputed on the host from each variant's x, for
every system; the largest must stay within ``RESIDUAL_SLACK x tol``: the GMRES estimate
that stopped the iteration was below tol, and the recomputed residual differs from it
by rounding only. One system above that fails the variant, which then records no time.

**Order** (problem option ``order``): ``given`` keeps the systems as the dataset lists
them; ``sorted`` sorts them by their oracle iteration count (stable), so that a group of
m systems solved together needs about the same number of iterations: the paper's
ordering experiment (a time-stepping code knows the counts of its previous step).

**Work model** (per run, written once here; ``k`` = a system's oracle iterations, ``nnz``
and ``n`` per system, summed over the N systems):

- flops: Jacobi setup and r0 (``2n``) and its norm (``2n``); per iteration ``j``
  (0-based in its cycle): SpMV ``2 nnz``, preconditioner ``n``, modified Gram-Schmidt
  ``4n (j + 1)``, norm and scaling ``3n``, Givens ``6 (j + 1)``; per cycle of ``c``
  steps: back substitution ``c^2`` and the update of x ``2 n c``; per restart a
  residual (``2 nnz + 4n``).
- bytes: what must come from memory: the values once per SpMV (``8 nnz``: at benchmark
  N the matrices do not stay in cache between iterations), b once and x once (``16 n``),
  plus the pattern once. The Krylov basis is working storage (cache-resident per group)
  and not counted; dense direct solvers are measured against the same work (a rate of
  GMRES work per second), as RAJAPerf does for variants of one kernel.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from portabench.datasets.batched import BatchedSystems
from portabench.reference.gmres import DEFAULT_TOL, solve_batched, true_residuals

from .. import batched_inputs
from ..batched_inputs import BENCHMARK_CASES, CASES, DEFAULT_SIZE, SMALL_SIZE
from ..model import MAIN, Check, Device, Kernel, PortabenchError, Problem, Study, Sweep, Work

RESTART = 30  # Arnoldi steps per cycle: the stand-ins (<= 17) and kk-batched (<= 21) need one cycle
MAX_ITER = 300  # steps in all: a system not converged by then fails the check
RESIDUAL_SLACK = 1.05  # recomputed residual vs the estimate that stopped GMRES: rounding only
ORDERS = ("given", "sorted")
# The variants with a group size m (systems solved in lockstep), and the sizes swept (the seed: 1 <= m <= 50).
GROUPED: dict[Device, str] = {"cpu": "numba-batched", "gpu": "cupy-team"}
# N of the main comparison, and of the batch-size study. On the CPU, batched SpMV's 10240 would make
# the main job wait minutes on the dense-solve comparison point (isooctane: 10240 LU factorisations of 144 x 144
# per run); 2048 keeps every variant's solve short (EXPERIMENTS.md).
DEFAULT_N: dict[Device, int] = {"cpu": 2048, "gpu": DEFAULT_SIZE["gpu"]}
STUDY_N: dict[Device, tuple[int, ...]] = {"cpu": (SMALL_SIZE, DEFAULT_SIZE["cpu"]), "gpu": (SMALL_SIZE,)}
GROUP_SIZES: dict[Device, tuple[str, ...]] = {"cpu": ("1", "8", "32"), "gpu": ("1", "4", "8", "16", "32", "50")}


@dataclass(frozen=True, eq=False)
class GmresProblem(Problem):
    """``systems`` in the problem's order; ``case`` is a dataset name or "file"."""

    kernel: ClassVar[str] = "gmres"
    case: str
    systems: BatchedSystems
    order: str = "given"
    tol: float = DEFAULT_TOL
    restart: int = RESTART
    max_iter: int = MAX_ITER
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def size(self) -> int:
        return self.systems.num_systems

    def inputs(self) -> dict[str, np.ndarray]:
        s = self.systems
        return {"row_ptr": s.row_ptr, "col_idx": s.col_idx, "values": s.values, "rhs": s.rhs}

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        """The oracle's (x, iterations), computed once."""
        if "reference" not in self._cache:
            self._cache["reference"] = solve_batched(self.systems, tol=self.tol, max_iter=self.max_iter,
                                                     restart=self.restart, require_convergence=False)
        return self._cache["reference"]


def _ordered(systems: BatchedSystems, order: str, tol: float, restart: int, max_iter: int) -> BatchedSystems:
    if order == "given":
        return systems
    if order != "sorted":
        raise PortabenchError(f"unknown order {order!r}; known: {', '.join(ORDERS)}")
    _, iterations = solve_batched(systems, tol=tol, max_iter=max_iter, restart=restart, require_convergence=False)
    perm = np.argsort(iterations, kind="stable")
    pool = None if systems.pool_index is None else systems.pool_index[perm]
    return BatchedSystems(n=systems.n, row_ptr=systems.row_ptr, col_idx=systems.col_idx,
                          values=systems.values[perm], rhs=systems.rhs[perm], pool_index=pool)


def gmres_work(n: int, nnz: int, iterations: np.ndarray, restart: int) -> Work:
    """The work model above for systems with the given oracle iteration counts."""
    flops = 0.0
    spmvs = 0
    for k, count in zip(*np.unique(np.asarray(iterations), return_counts=True)):
        k = int(k)
        cycles = [restart] * (k // restart) + ([k % restart] if k % restart else [])
        per = 4.0 * n
        for c in cycles:
            j = np.arange(c)
            per += float(np.sum(2 * nnz + n + 4 * n * (j + 1) + 3 * n + 6 * (j + 1))) + c * c + 2 * n * c
        restarts = max(len(cycles) - 1, 0)
        per += restarts * (2 * nnz + 4 * n)
        flops += per * int(count)
        spmvs += (k + restarts) * int(count)
    count = int(np.asarray(iterations).size)
    bytes_ = 8.0 * nnz * spmvs + 16.0 * n * count + 4.0 * (n + 1 + nnz)
    return Work(bytes=bytes_, flops=flops)


@functools.lru_cache(maxsize=4)
def _pool_iterations(case: str) -> tuple[int, int, np.ndarray]:
    systems = batched_inputs.batched_systems(case, batched_inputs.pool_size(case))
    _, iterations = solve_batched(systems, tol=DEFAULT_TOL, max_iter=MAX_ITER, restart=RESTART,
                                  require_convergence=False)
    return systems.n, systems.nnz, iterations


def _pool_work(case: str, count: int) -> Work:
    # The oracle's counts depend on the systems, not their order, and system k of any N is pool
    # system k mod the pool's size: the pool's counts repeated (not N systems built and solved).
    n, nnz, iterations = _pool_iterations(case)
    return gmres_work(n, nnz, np.resize(iterations, count), RESTART)


class GmresKernel(Kernel):
    name = "gmres"
    description = "batched Jacobi-preconditioned GMRES on many small systems sharing one pattern (float64)"
    cases = CASES
    case_param = "dataset"
    size_param = "N"
    size_unit = "systems"
    options = {"order": ORDERS}
    verify_size = 300
    file_kind = "matrices"
    # The report draws systems solved per second against N, per dataset and order.
    sweeps = (Sweep("gmres_throughput", "Batched GMRES throughput against N",
                    "Systems solved per second against the number of systems N (the paper [004]'s throughput "
                    "figures), per variant and order; speedup over the fastest vendor variant at the same N.",
                    figure="throughput"),)

    def default_size(self, device: Device) -> int:
        return DEFAULT_N[device]

    def check_size(self, size: int) -> int:
        return batched_inputs.check_count(size)

    def studies(self, device: Device) -> list[Study]:
        cases, both = BENCHMARK_CASES, {"order": ORDERS}
        grouped = GROUPED[device]
        # The per-system library loops are comparison points at small N (``max_size``): the batch-size study's.
        batched = tuple(v.name for v in self.variants if v.runs_on(device) and v.max_size is None)
        every = tuple(v.name for v in self.variants if v.runs_on(device))
        return [
            self.study(MAIN, device, cases=cases, variants=batched,
                       title="the paper's two mechanisms at N systems, given order"),
            self.study("order", device, suffix="Order", cases=cases, variants=batched, options={"order": ("sorted",)},
                       title="systems sorted by iteration count (the paper's ordering experiment)"),
            self.study("batch-size", device, suffix="BatchSize", cases=cases, sizes=STUDY_N[device], options=both,
                       variants=every, title="other N beside the main one (the library loops up to their N)"),
            self.study("group-size", device, suffix="GroupSize", cases=cases, variants=(grouped,), options=both,
                       settings={"m": GROUP_SIZES[device]}, title="the group size m of the batched solver"),
            self.study("iterations", device, suffix="Iterations", cases=cases, variants=batched, options=both,
                       measure="iterations",
                       title="iterations per system (mean and max) of each variant"),
        ]

    def problems_from_file(self, path: Path, seed: int, options: dict[str, str], rhs: Path | None = None,
                           **extra: Any) -> list[Problem]:
        """The systems of Kokkos Kernels' batched CRS files (``rhs``: default the B sibling)."""
        from portabench.datasets.batched import read_kokkos

        return [self.problem_from_systems(read_kokkos(path, rhs), seed, **options)]

    def problem(self, case: str, size: int, seed: int = 0, **options: str) -> GmresProblem:
        self.check_case(case)
        systems = batched_inputs.batched_systems(case, size, seed)
        return self.problem_from_systems(systems, seed, case=case, **options)

    def problem_from_systems(self, systems: BatchedSystems, seed: int = 0, case: str = "file",
                             order: str = "given", tol: float = DEFAULT_TOL, restart: int = RESTART,
                             max_iter: int = MAX_ITER) -> GmresProblem:
        """A problem on given systems (e.g. Kokkos Kernels files read by ``portabench verify``)."""
        if not tol > 0 or restart < 1 or max_iter < 1:
            raise PortabenchError(f"GMRES needs tol > 0, restart >= 1 and max_iter >= 1; got {tol}, {restart}, {max_iter}")
        ordered = _ordered(systems, order, tol, restart, max_iter)
        return GmresProblem(case=case, systems=ordered, order=order, tol=tol, restart=restart, max_iter=max_iter)

    def work(self, case: str, size: int, **options: str) -> Work:
        self.check_case(case)
        return _pool_work(case, batched_inputs.check_count(size))

    def oracle(self, problem: Problem) -> np.ndarray:
        assert isinstance(problem, GmresProblem)
        return problem.reference()[0]

    def check(self, problem: Problem, output: np.ndarray, reference: np.ndarray) -> Check:
        assert isinstance(problem, GmresProblem)
        s = problem.systems
        if output.shape != (s.num_systems, s.n) or not np.isfinite(output).all():
            worst = float("nan")
        else:
            worst = float(true_residuals(s, output).max())
        return Check(max_rel_error=worst, tolerance=RESIDUAL_SLACK * problem.tol,
                     what="largest relative preconditioned residual")
