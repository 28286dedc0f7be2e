"""Running a variant against its kernel's oracle: used by ``portabench verify`` and,
before any timing, by the asv suite (a wrong answer is never timed)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import Check, Kernel, PortabenchError, Problem, Variant, WrongAnswerError


class VariantUnavailable(PortabenchError):
    """The variant cannot run here (no GPU, no MKL, unsupported problem): the reason says why."""


@dataclass
class Verified:
    variant: Variant
    problem: Problem
    output: np.ndarray
    reference: np.ndarray
    check: Check


def run_once(kernel: Kernel, variant_name: str, problem: Problem, reference: np.ndarray | None = None) -> Verified:
    """Prepare ``variant_name`` for ``problem``, run it once and compare with the oracle.

    Raises VariantUnavailable with the reason when it cannot run here.
    """
    cls = kernel.variant(variant_name)
    reason = cls.unavailable()
    variant = cls()
    if reason is None:
        reason = variant.supports(problem)
    if reason is not None:
        raise VariantUnavailable(f"{kernel.name}/{variant_name}: {reason}")
    variant.prepare(problem)
    variant.run()
    output = variant.output()
    if reference is None:
        reference = kernel.oracle(problem)
    return Verified(variant, problem, output, reference, kernel.check(problem, output, reference))


def prepare_verified(kernel: Kernel, variant_name: str, case: str, size: int, seed: int = 0) -> Variant:
    """A variant prepared for (case, size) whose first run matched the oracle; else WrongAnswerError."""
    result = run_once(kernel, variant_name, kernel.problem(case, size, seed))
    if not result.check.passed:
        raise WrongAnswerError(
            f"{kernel.name}/{variant_name} on {case}, size {size}: max relative error "
            f"{result.check.max_rel_error:.3g} > tolerance {result.check.tolerance:.1g}; not timed"
        )
    return result.variant
