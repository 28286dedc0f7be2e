"""Running a variant against its kernel's oracle: used by ``portabench verify`` and, before any timing,
by the asv suite and a run split across devices (a wrong answer is never timed).

The gate, one rule wherever a variant is timed: ``unavailable_reason`` (it cannot run here: skipped), then
``first_run`` (prepared and run once, untimed), then the output against the oracle, then ``passed`` (only a
variant whose first run matched is ``verified()`` and timed). ``prepare_verified`` is the gate of one
process; ``harness/distributed/split_run.py`` takes the same steps on every rank. ``timed_call`` and
``timed_samples`` are the clock and the loop of the measurements made outside asv.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import numpy as np

from portabench.datasets.stored import package_sources, stored_arrays

from .model import Check, Kernel, PortabenchError, Problem, Variant, WrongAnswerError


class VariantUnavailable(PortabenchError):
    """The variant cannot run here (no GPU, no MKL, unsupported problem): the reason says why."""


T = TypeVar("T")


@dataclass
class Verified:
    variant: Variant
    problem: Problem
    output: np.ndarray
    reference: np.ndarray
    check: Check


def run_once(kernel: Kernel, variant: str | Variant, problem: Problem,
             reference: np.ndarray | Callable[[], np.ndarray] | None = None) -> Verified:
    """Prepare a variant (by name, or an instance with its own settings) for ``problem``,
    run it once and compare with the oracle (``reference``: its output, or a call giving it
    once the variant could run; default ``kernel.oracle``).

    Raises VariantUnavailable with the reason when it cannot run here.
    """
    if isinstance(variant, str):
        variant = kernel.variant(variant)()
    reason = unavailable_reason(variant, problem)
    if reason is not None:
        raise VariantUnavailable(f"{kernel.name}/{variant.name}: {reason}")
    first_run(variant, problem)
    output = variant.output()
    if reference is None:
        reference = kernel.oracle(problem)
    elif callable(reference):
        reference = reference()
    return Verified(variant, problem, output, reference, kernel.check(problem, output, reference))


def unavailable_reason(variant: Variant, problem: Problem) -> str | None:
    """The gate's first step: why ``variant`` cannot run ``problem`` here (the machine, then the problem), or None."""
    reason = variant.unavailable()
    return reason if reason is not None else variant.supports(problem)


def first_run(variant: Variant, problem: Problem) -> float:
    """The gate's run, untimed: ``variant`` prepared for ``problem`` (allocation, transfer, compilation) and run
    once; its output is then compared with the oracle. Returns the seconds the preparation took."""
    seconds, _ = timed_call(lambda: variant.prepare(problem))
    variant.run()
    return seconds


def passed(variant: Variant, check: Check) -> bool:
    """The gate's verdict: whether ``variant``'s first run matched the oracle; if so it is ``verified()`` and may
    be timed from now on (a pressure-point variant swaps in its perturbed call there)."""
    if check.passed:
        variant.verified()
    return check.passed


def timed_call(call: Callable[[], T]) -> tuple[float, T]:
    """The seconds one ``call`` took, start to return (``time.perf_counter``), and what it returned."""
    start = time.perf_counter()
    value = call()
    return time.perf_counter() - start, value


def timed_samples(sample: Callable[[], T], count: int, warmup: int = 0) -> list[T]:
    """``count`` samples of ``sample`` (a timed run) taken back to back after ``warmup`` ones thrown away: the loop
    of the measurements outside asv (``portabench peaks --measure``, a run split across devices)."""
    return [sample() for _ in range(warmup + count)][warmup:]


def stored_reference(kernel: Kernel, problem: Problem, key: dict) -> np.ndarray:
    """The oracle's output for ``problem`` (and what its check derives from the inputs), from the
    disk store when another process already computed them for the same ``key`` and oracle code."""
    if not kernel.oracle_stored:
        return kernel.oracle(problem)
    import portabench.datasets as datasets
    import portabench.reference as reference

    from . import batched_inputs, model, tensor_inputs, tensor_kernel

    sources = package_sources(reference, datasets) + tuple(
        Path(m.__file__) for m in (sys.modules[type(kernel).__module__], model, tensor_inputs, tensor_kernel,
                                   batched_inputs))
    arrays = stored_arrays("oracle", {"kernel": kernel.name, **key}, sources,
                           lambda: {"reference": kernel.oracle(problem), **problem.check_arrays()})
    problem.restore_check_arrays(arrays, arrays["reference"])
    return arrays["reference"]


def oracle_key(case: str, size: int, seed: int, options: dict[str, str] | None) -> dict:
    """What a problem's stored oracle answer is filed under (with the kernel's name and code)."""
    return {"case": case, "size": int(size), "seed": int(seed), "options": dict(sorted((options or {}).items()))}


def prepare_verified(kernel: Kernel, variant: str | Variant, case: str, size: int, seed: int = 0,
                     options: dict[str, str] | None = None) -> Variant:
    """A variant (by name, or an instance with its own settings) prepared for (case, size,
    options) whose first run matched the oracle; else WrongAnswerError. The oracle's output comes
    from the disk store when an earlier process computed it (``stored_reference``)."""
    problem = kernel.problem(case, size, seed, **(options or {}))
    key = oracle_key(case, size, seed, options)
    result = run_once(kernel, variant, problem, lambda: stored_reference(kernel, problem, key))
    if not passed(result.variant, result.check):
        where = ", ".join([case, f"size {size}", *(f"{k} {v}" for k, v in (options or {}).items())])
        raise WrongAnswerError(
            f"{kernel.name}/{result.variant.name} on {where}: {result.check.describe()}; not timed"
        )
    return result.variant


@dataclass(frozen=True)
class VerifyRow:
    kernel: str
    case: str
    variant: str
    device: str
    family: str
    max_rel_error: float | None
    tolerance: float | None
    status: str  # "pass", "FAIL" or "skipped: <reason>"
    measure: str = ""  # what the error is (``Check.what``): relative, or relative to a componentwise bound

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"


def verify_kernel(
    kernel: Kernel,
    size: int,
    seed: int,
    variants: list[str] | None = None,
    cases: list[str] | None = None,
    save: Path | None = None,
    options: dict[str, str] | None = None,
    problems: list[Problem] | None = None,
    full: bool = True,
) -> Iterator[VerifyRow]:
    """Run every (case, variant) once on fresh seeded inputs and compare with the oracle
    (or on the given ``problems``, e.g. read from files). Without ``full`` (the quick check),
    a variant is skipped where ``Kernel.verify_skips`` says so.

    With ``save``, writes ``save/<kernel>/<problem label>/`` ``inputs.npz`` (every
    array the kernel consumed), ``reference.npy`` and ``<variant>.npy`` for each variant run.
    """
    names = variants or [v.name for v in kernel.variants]
    for name in names:
        kernel.variant(name)  # unknown names fail before any work
    if problems is None:
        problems = kernel.verify_problems(list(cases or kernel.cases), size, seed, options or {})
    for problem in problems:
        case = problem.label
        folder = None
        if save is not None:
            folder = Path(save) / kernel.name / case
            folder.mkdir(parents=True, exist_ok=True)
            np.savez(folder / "inputs.npz", **problem.inputs())
        reference = kernel.oracle(problem)
        if folder is not None:
            np.save(folder / "reference.npy", reference)
        for name in names:
            cls = kernel.variant(name)
            devices = ", ".join(cls.devices())  # those the variant runs on
            left_out = kernel.verify_skips(cls, problem, full)
            if left_out is not None:
                yield VerifyRow(kernel.name, case, name, devices, cls.family, None, None, f"skipped: {left_out}")
                continue
            try:
                result = run_once(kernel, name, problem, reference)
            except VariantUnavailable as exc:
                reason = str(exc).split(": ", 1)[-1]
                yield VerifyRow(kernel.name, case, name, devices, cls.family, None, None, f"skipped: {reason}")
                continue
            if folder is not None:
                np.save(folder / f"{name}.npy", result.output)
            check = result.check
            yield VerifyRow(
                kernel.name, case, name, devices, cls.family, check.max_rel_error, check.tolerance,
                "pass" if check.passed else "FAIL", check.what,
            )
