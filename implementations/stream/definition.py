"""STREAM (BabelStream's set): copy, scale, add, triad, dot and nstream in float64.

Each operation reads and writes whole arrays of ``n`` elements; the byte weights
below (arrays read + arrays written, times 8 B times n) are BabelStream's, and the
flop counts are the paper [000]'s Table 3 (scale 1, add 1, triad 2 per element).

    copy     c = a              2 arrays, 0 flops
    scale    b = s * c          2 arrays, 1 flop
    add      c = a + b          3 arrays, 1 flop
    triad    a = b + s * c      3 arrays, 2 flops
    dot      sum(a * b)         2 arrays, 2 flops
    nstream  a += b + s * c     4 arrays, 3 flops

Inputs are uniform random in [1, 2) (never zeros or constants); the array an
operation writes starts as NaN so an element a variant forgot to write fails the
check. The benchmark size is at least 4x the last-level cache (CPU) or L2 (GPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from portabench.datasets import random
from portabench.datasets import memory

from .. import hardware
from portabench.reference.stream import stream_oracle

from ..model import (SCALING_SETTING, STRONG, WEAK, Check, Device, Kernel, Part, Partition, PortabenchError, Problem,
                     Study, Work, beyond_cache_bytes, max_relative_error)

SCALAR = 0.4  # BabelStream's startScalar
ELEMENT_BYTES = 8  # float64


@dataclass(frozen=True)
class StreamOp:
    reads: tuple[str, ...]
    writes: str | None  # None: a reduction to one scalar
    flops_per_element: int

    @property
    def arrays_moved(self) -> int:
        return len(self.reads) + (self.writes is not None)


# The one table of byte weights and flops.
OPS: dict[str, StreamOp] = {
    "copy": StreamOp(reads=("a",), writes="c", flops_per_element=0),
    "scale": StreamOp(reads=("c",), writes="b", flops_per_element=1),
    "add": StreamOp(reads=("a", "b"), writes="c", flops_per_element=1),
    "triad": StreamOp(reads=("b", "c"), writes="a", flops_per_element=2),
    "dot": StreamOp(reads=("a", "b"), writes=None, flops_per_element=2),
    "nstream": StreamOp(reads=("a", "b", "c"), writes="a", flops_per_element=3),
}

# Elementwise results are exact up to one FMA rounding; a dot product over n
# positive terms drifts like sqrt(n) * eps, ~1e-12 at 2^28, while one element
# dropped or doubled moves it by >= 1/n (4e-9 at 2^28).
ELEMENTWISE_TOLERANCE = 1e-12
DOT_TOLERANCE = 1e-10

SIZE_HINT = "--size stream=N"  # how a user chooses another size


@dataclass(frozen=True)
class StreamProblem(Problem):
    kernel: ClassVar[str] = "stream"
    case: str  # the operation
    size: int  # elements per array
    seed: int = 0
    block: int = 0  # a share of a problem split across devices: 1, 2, ... (its own inputs); 0: not split
    scalar: float = SCALAR
    _arrays: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def spec(self) -> StreamOp:
        return OPS[self.case]

    def host_bytes(self) -> int:
        """Host memory a verified run needs: the arrays, a variant's copies of them, the
        oracle's result and the variant's output brought back."""
        return (2 * self.spec.arrays_moved + 2) * ELEMENT_BYTES * self.size

    def inputs(self) -> dict[str, np.ndarray]:
        """The operation's arrays: random inputs, and its output array poisoned with NaN."""
        if not self._arrays:
            available = memory.available_host_memory_bytes()
            if available is not None and self.host_bytes() > available:
                raise PortabenchError(
                    f"STREAM {self.case} at n = {self.size} needs {self.host_bytes() / 2**30:.1f} GiB of host memory, "
                    f"{available / 2**30:.1f} GiB is available: choose a smaller size ({SIZE_HINT})"
                )
            spec = self.spec
            entropy = [self.seed, self.block] if self.block else self.seed
            seeds = dict(zip("abc", np.random.SeedSequence(entropy).spawn(3)))
            for name in sorted(set(spec.reads) | ({spec.writes} - {None})):
                if name in spec.reads:
                    self._arrays[name] = random.uniform(self.size, seeds[name], 1.0, 2.0)
                else:
                    self._arrays[name] = np.full(self.size, np.nan)
        return self._arrays

    def device_footprint(self) -> tuple[str, float]:
        """The operation's arrays."""
        return "the arrays", float(sum(v.nbytes for v in self.inputs().values()))


CPU_SIZE_STEP = 2**20  # elements: 4x the LLC rounded up to 8 MiB per array, not to a power of two
# (a 300 MB LLC would then take 2 GiB arrays where 1.2 GiB are beyond it)


def _cpu_default_n() -> int:
    """Elements per array: each array beyond the last-level cache by the in-cache rule (``beyond_cache_bytes``)."""
    llc = hardware.cpu_last_level_cache_bytes()
    return -(-beyond_cache_bytes(llc) // (ELEMENT_BYTES * CPU_SIZE_STEP)) * CPU_SIZE_STEP


# 2^28 doubles (2 GiB per array, as BabelStream's GPU runs use) amortise launch and tail effects
# and are far beyond any GPU's L2 (50 MB on an H100). Fixed, not read from the device: the grids
# are built in the process asv forks every benchmark from, which must not start CUDA; a GPU too
# small for three such arrays skips with the reason (``--size stream=N`` picks another).
GPU_DEFAULT_N = 2**28


class StreamKernel(Kernel):
    name = "stream"
    description = "STREAM memory bandwidth: copy, scale, add, triad, dot, nstream (float64)"
    cases = tuple(OPS)
    case_param = "op"
    size_param = "n"
    size_unit = "elements per array"
    oracle_stored = False
    partitions = ("blocks",)

    def default_size(self, device: Device) -> int:
        return GPU_DEFAULT_N if device == "gpu" else _cpu_default_n()

    def problem(self, case: str, size: int, seed: int = 0, **options: str) -> StreamProblem:
        self.check_case(case)
        if int(size) < 1:
            raise PortabenchError(f"STREAM size must be a positive element count, got {size}")
        return StreamProblem(case=case, size=int(size), seed=seed)

    def split(self, problem: Problem, part: int, parts: int, partition: Partition) -> Part:
        """Contiguous blocks of the arrays, each with inputs of its own; the dot's partial sums add up."""
        assert isinstance(problem, StreamProblem)
        if partition not in self.partitions:
            raise PortabenchError(f"stream: no partition {partition!r}; known: {', '.join(self.partitions)}")
        combine = "sum" if problem.spec.writes is None else "none"
        if parts == 1:
            return Part(problem, combine)
        low, high = (problem.size * part) // parts, (problem.size * (part + 1)) // parts
        return Part(replace(problem, size=high - low, block=part + 1, _arrays={}), combine, whole=False)

    def devices_study(self, device: Device, counts: tuple[int, ...]) -> Study | None:
        """Triad, and dot with its all-reduce, at one size over all devices (strong) and one size per device (weak)."""
        study = super().devices_study(device, counts)
        assert study is not None
        return replace(study, cases=("triad", "dot"), settings={**study.settings, SCALING_SETTING: (STRONG, WEAK)})

    def work(self, case: str, size: int, **options: str) -> Work:
        spec = OPS[self.check_case(case)]
        return Work(bytes=float(spec.arrays_moved * ELEMENT_BYTES * size), flops=float(spec.flops_per_element * size))

    def oracle(self, problem: Problem) -> np.ndarray:
        assert isinstance(problem, StreamProblem)
        return stream_oracle(problem.case, problem.inputs(), problem.scalar)

    def check(self, problem: Problem, output: np.ndarray, reference: np.ndarray) -> Check:
        assert isinstance(problem, StreamProblem)
        tol = DOT_TOLERANCE if problem.case == "dot" else ELEMENTWISE_TOLERANCE
        return Check(max_rel_error=max_relative_error(output, reference), tolerance=tol)
