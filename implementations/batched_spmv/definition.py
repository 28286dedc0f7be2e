"""Batched SpMV (paper [004], Kokkos Kernels' team-batched SpMV): the problem, work model and check.

N independent small systems share one CSR pattern (``row_ptr``, ``col_idx``: n rows, nnz
entries) and differ in their values; one run computes, for every system k,

    y_k = alpha_k A_k x_k + beta_k y_k

with a scalar ``alpha_k`` and ``beta_k`` per system. The *case* is a ``batched`` dataset
(``gri30``, ``isooctane``, ``kk-batched``), the *size* is N, and the option ``layout``
says how the per-system arrays are stored, the paper's point being that the best
index mapping depends on it:

- ``system-major`` (Kokkos ``LayoutRight``): values (N, nnz), x and y (N, n);
- ``entry-major`` (Kokkos ``LayoutLeft``): values (nnz, N), x and y (n, N), so entry l of
  consecutive systems is contiguous.

Whatever the layout, a variant's ``output()`` is y as a system-major (N, n) float64 array.
Variants write the result into a separate output array (``y_out = alpha A x + beta y``),
so every timed run starts from the same initial y.

**Work model** (compulsory traffic, each array touched once):

    bytes = N (8 nnz + 8 n + 2 * 8 n + 16) + 4 (n + 1 + nnz)
            values, x, y read and written, alpha and beta per system; the shared pattern once
    flops = N (2 nnz + 3 n)
            a multiply-add per entry; per row, alpha * sum, beta * y and their sum

**Check.** Componentwise: ``|y - y_ref| / (|alpha| |A| |x| + |beta| |y0|)``, the largest over
all entries. A relative error per element would fail wrongly where the sum cancels (the
chemistry Jacobians' values span ten decades); this scale is what rounding errors are
proportional to, whatever the summation order.

Inputs: the systems are the dataset's at the problem's seed (or given ones, case
``file``); x and y are uniform in [0.5, 1.5) with random signs and alpha, beta uniform in
[0.5, 2) with random signs, never zero or constant.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from portabench.datasets.batched import BatchedSystems
from portabench.datasets import memory
from portabench.reference.batched_spmv import batched_spmv, componentwise_bound

from ..batched_inputs import CASES, DEFAULT_SIZE, SMALL_SIZE, BENCHMARK_CASES, batched_systems, check_count
from ..model import (COMPONENTWISE, MAIN, Check, Device, Kernel, PortabenchError, Problem, Study, UnknownNameError,
                     Work, componentwise_error)

LAYOUTS: tuple[str, ...] = ("system-major", "entry-major")
FILE_CASE = "file"  # the case of a problem built from given systems (``portabench verify --matrices``)
VALUE_BYTES = 8  # float64
INDEX_BYTES = 4  # int32 pattern

# Each entry of alpha A x + beta y is a sum of L products (L = the row's entries) then two
# roundings more: in any summation order its rounding error is at most (L + 2) u times the
# componentwise bound (u = 2^-53, first order). Oracle and variant each err that much, so
# they differ by at most 2 (L + 2) u: 1.1e-14 for gri30 (L <= 54), 4.5e-14 for L = 200.
# 1e-13 covers every row of up to 448 entries with margin; longer rows get the bound itself.
# A dropped or doubled product, or a missing beta y term, moves an entry by far more.
TOLERANCE = 1e-13
UNIT_ROUNDOFF = 2.0**-53


def work_model(n: int, nnz: int, count: int) -> Work:
    """Bytes and flops of one run on ``count`` systems of size n with nnz entries each."""
    per_system = nnz * VALUE_BYTES + n * VALUE_BYTES + 2 * n * VALUE_BYTES + 2 * VALUE_BYTES
    pattern = (n + 1 + nnz) * INDEX_BYTES
    return Work(bytes=float(count * per_system + pattern), flops=float(count * (2 * nnz + 3 * n)))


def tolerance_for(max_row_entries: int) -> float:
    """The check's tolerance for rows of at most ``max_row_entries`` entries (see TOLERANCE)."""
    return max(TOLERANCE, 2.0 * (max_row_entries + 2) * UNIT_ROUNDOFF)


@functools.cache
def dataset_shape(case: str) -> tuple[int, int]:
    """(n, nnz) of dataset ``case``, without generating N systems (one system's pattern)."""
    one = batched_systems(case, 1)
    return one.n, one.nnz


def _signed_uniform(rng: np.random.Generator, shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
    """Magnitudes uniform in [low, high), each with a random sign."""
    return rng.uniform(low, high, shape) * rng.choice(np.array([-1.0, 1.0]), shape)


def check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise UnknownNameError(f"unknown layout {layout!r} of kernel 'batched_spmv'; known: {', '.join(LAYOUTS)}")
    return layout


@dataclass(frozen=True)
class BatchedSpmvProblem(Problem):
    """N systems (a dataset's at ``seed``, or ``given`` ones) with seeded x, y, alpha, beta."""

    kernel: ClassVar[str] = "batched_spmv"
    case: str  # the dataset
    size: int  # N, the number of systems
    layout: str = LAYOUTS[0]
    seed: int = 0
    given: BatchedSystems | None = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_layout(self.layout)
        object.__setattr__(self, "size", check_count(self.size))
        if self.given is None and self.case not in CASES:
            raise UnknownNameError(f"unknown case {self.case!r} of kernel 'batched_spmv'; known: {', '.join(CASES)}")
        if self.given is not None and self.given.num_systems != self.size:
            raise PortabenchError(f"batched_spmv: {self.given.num_systems} systems given, the problem says {self.size}")

    @property
    def systems(self) -> BatchedSystems:
        """The N systems (read-only, shared with the dataset cache)."""
        if "systems" not in self._cache:
            if self.given is None:
                self._check_host_memory()
                self._cache["systems"] = batched_systems(self.case, self.size, self.seed)
            else:
                self._cache["systems"] = self.given
        return self._cache["systems"]

    def work(self) -> Work:
        """The work model for this problem's systems (also for given ones)."""
        s = self.systems
        return work_model(s.n, s.nnz, self.size)

    @property
    def tolerance(self) -> float:
        return tolerance_for(int(np.diff(self.systems.row_ptr).max()))

    def host_bytes(self, n: int, nnz: int) -> int:
        """Host memory a verified run needs: the values (the dataset's, the entry-major copy,
        a variant's copy) and about ten (N, n) arrays (x, y, outputs, oracle, bound, copies)."""
        copies = 3 if self.layout == "entry-major" else 2
        return self.size * (copies * nnz + 10 * n) * VALUE_BYTES

    def _check_host_memory(self) -> None:
        need = self.host_bytes(*dataset_shape(self.case))
        available = memory.available_host_memory_bytes()
        if available is not None and need > available:
            raise PortabenchError(
                f"batched_spmv on {self.case} at N = {self.size} needs {need / 2**30:.1f} GiB of host memory, "
                f"{available / 2**30:.1f} GiB is available: choose a smaller N (--size batched_spmv=N)"
            )

    def system_major(self) -> dict[str, np.ndarray]:
        """The inputs in system-major layout (what the oracle takes), generated once."""
        if "system_major" not in self._cache:
            s = self.systems
            x_seed, y_seed, alpha_seed, beta_seed = np.random.SeedSequence(self.seed).spawn(4)
            shape = (self.size, s.n)
            self._cache["system_major"] = {
                "row_ptr": s.row_ptr,
                "col_idx": s.col_idx,
                "values": s.values,
                "x": _signed_uniform(np.random.default_rng(x_seed), shape, 0.5, 1.5),
                "y": _signed_uniform(np.random.default_rng(y_seed), shape, 0.5, 1.5),
                "alpha": _signed_uniform(np.random.default_rng(alpha_seed), (self.size,), 0.5, 2.0),
                "beta": _signed_uniform(np.random.default_rng(beta_seed), (self.size,), 0.5, 2.0),
            }
            for name in ("x", "y", "alpha", "beta"):  # ours; the systems' arrays are their owner's
                self._cache["system_major"][name].setflags(write=False)
        return self._cache["system_major"]

    def inputs(self) -> dict[str, np.ndarray]:
        """row_ptr, col_idx, values, x, y (the initial y), alpha, beta in the problem's layout."""
        if "inputs" not in self._cache:
            sm = self.system_major()
            if self.layout == "system-major":
                arrays = dict(sm)
            else:  # entry-major: the per-system arrays transposed, C-contiguous
                arrays = {k: (np.ascontiguousarray(v.T) if k in ("values", "x", "y") else v) for k, v in sm.items()}
                for name in ("values", "x", "y"):
                    arrays[name].setflags(write=False)
            self._cache["inputs"] = arrays
        return self._cache["inputs"]

    def device_footprint(self) -> tuple[str, float]:
        """The inputs and an output as large as y."""
        inputs = self.inputs()
        return "the inputs and output", float(sum(a.nbytes for a in inputs.values()) + inputs["y"].nbytes)

    def error_scale(self) -> np.ndarray:
        """|alpha| |A| |x| + |beta| |y|, system-major (N, n): the check's denominators."""
        if "bound" not in self._cache:
            self._cache["bound"] = componentwise_bound(**self.system_major())
        return self._cache["bound"]


class BatchedSpmvKernel(Kernel):
    name = "batched_spmv"
    description = "Batched SpMV (paper [004]): y_k = alpha_k A_k x_k + beta_k y_k, N systems on one CSR pattern"
    cases = CASES
    case_param = "dataset"
    size_param = "N"
    size_unit = "systems"
    options = {"layout": LAYOUTS}
    verify_size = 1000  # systems: a second's check on a laptop, yet every group and chunk path
    file_kind = "matrices"

    def default_size(self, device: Device) -> int:
        return DEFAULT_SIZE[device]

    def check_size(self, size: int) -> int:
        return check_count(size)

    def studies(self, device: Device) -> list[Study]:
        main = self.study(MAIN, device, cases=BENCHMARK_CASES, options={"layout": LAYOUTS},
                          title="the paper's two mechanisms at N systems, both value layouts")
        return [main, self.study("batch-size", device, suffix="BatchSize", cases=BENCHMARK_CASES, sizes=(SMALL_SIZE,),
                                 options={"layout": LAYOUTS}, title=f"N = {SMALL_SIZE} beside the main N")]

    def problems_from_file(self, path: Path, seed: int, options: dict[str, str], rhs: Path | None = None,
                           **extra: Any) -> list[Problem]:
        """The systems of Kokkos Kernels' batched CRS files (``rhs``: default the B sibling)."""
        from portabench.datasets.batched import read_kokkos

        return [self.problem_from_systems(read_kokkos(path, rhs), seed, **options)]

    def problem(self, case: str, size: int, seed: int = 0, layout: str = LAYOUTS[0]) -> BatchedSpmvProblem:
        return BatchedSpmvProblem(case=case, size=size, layout=layout, seed=int(seed))  # checked there

    def problem_from_systems(self, systems: BatchedSystems, seed: int = 0,
                             layout: str = LAYOUTS[0]) -> BatchedSpmvProblem:
        """A problem on given systems (case ``file``), with x, y, alpha, beta from ``seed``."""
        if not isinstance(systems, BatchedSystems):
            raise PortabenchError(f"batched_spmv needs BatchedSystems, got {type(systems).__name__}")
        return BatchedSpmvProblem(case=FILE_CASE, size=systems.num_systems, layout=check_layout(layout),
                                  seed=int(seed), given=systems)

    def work(self, case: str, size: int, **options: str) -> Work:
        n, nnz = dataset_shape(self.check_case(case))
        return work_model(n, nnz, check_count(size))

    def oracle(self, problem: Problem) -> np.ndarray:
        assert isinstance(problem, BatchedSpmvProblem)
        return batched_spmv(**problem.system_major())

    def check(self, problem: Problem, output: np.ndarray, reference: np.ndarray) -> Check:
        assert isinstance(problem, BatchedSpmvProblem)
        error = componentwise_error(output, reference, problem.error_scale())
        return Check(max_rel_error=error, tolerance=problem.tolerance, what=COMPONENTWISE)
