"""One variant on a problem split across ranks: prepared, checked against the oracle, then timed.

Every rank takes its share (``Kernel.split``) and runs the registered single-device variant on it: the
portable and the vendor variants get the same partition, so their ratio stays a fair pair at every device
count. The timed region of a sample runs from a barrier until every rank has run its share and joined the
outputs (a sum across the ranks where the split asks for one); partitioning, transfers and compilation are
preparation, timed apart. Nothing is timed before the joined output of a first run matched the oracle: the
gate of ``implementations/verification.py``, its steps taken on every rank together (a variant is skipped
where it cannot run on some rank; each rank's output is checked as its share asks, and every rank gets the
same verdict).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from portabench.implementations.model import Check, Kernel, Part, Problem, Variant
from portabench.implementations.verification import (first_run, oracle_key, passed, stored_reference, timed_call,
                                                     timed_samples, unavailable_reason)
from .ranks import Ranks


@dataclass
class Measured:
    """What one split run gave, the same on every rank: the samples (s), the check, or why it was skipped."""

    samples: list[float] = field(default_factory=list)
    check: Check | None = None
    skipped: str | None = None
    preparation_s: float = float("nan")  # the slowest rank's transfer, arrangement and compilation
    shares: list[list[float]] = field(default_factory=list)  # per sample, each rank's time in its own share

    def balance(self) -> tuple[float, float]:
        """Where a split run's time goes, medians over the samples: the slowest rank's share (s), and how much
        longer it took than the ranks' mean share (a fraction: the load imbalance). The rest of a sample is
        the join and the barriers. A solver that joins inside its run (CP-APR MU) counts its joins as share."""
        if not self.shares:
            return float("nan"), float("nan")
        slowest = [max(s) for s in self.shares]
        excess = [max(s) / (sum(s) / len(s)) - 1 for s in self.shares]
        return float(np.median(slowest)), float(np.median(excess))


class SplitRows:
    """A solver's rows split across ``ranks`` (``cpapr_mu.variant.ModeRows``'s other form): the worst KKT
    violation over the ranks (an all-reduce of one number a sweep), and each mode's updated rows gathered
    from their owners (an all-gather of unequal parts: a broadcast from each rank, grouped, through NCCL on
    GPUs; ``Allgatherv`` through MPI on CPUs)."""

    def __init__(self, ranks: Ranks, bounds: tuple[tuple[int, int], ...]) -> None:
        self.ranks, self.bounds = ranks, list(bounds)
        self._owners = [ranks.comm.allgather(b) for b in bounds]  # per mode, every rank's rows

    @property
    def split(self) -> bool:
        return self.ranks.size > 1

    def worst(self, violation: float) -> float:
        return self.ranks.slowest(violation)

    def gather(self, b: Any, mode: int) -> None:
        self.ranks.gather_rows(b, self._owners[mode])


def host(value: Any) -> np.ndarray:
    """A variant's output buffer (a CuPy or NumPy array, a scalar) as a host float64 array."""
    return np.asarray(value.get() if hasattr(value, "get") else value, dtype=np.float64)


def measure(ranks: Ranks, kernel: Kernel, problem: Problem, key: dict, part: Part, variant_name: str,
            samples: int, warmup: int = 2) -> Measured:
    """``variant_name`` on ``part``, ``ranks.rank``'s share of ``problem`` (``key``: its stored oracle's key),
    through the gate (``implementations/verification.py``) on every rank, then timed."""
    variant: Variant = kernel.variant(variant_name)()
    waited, reason = timed_call(lambda: _unavailable_on_some_rank(ranks, variant, part))
    if reason is not None:
        return Measured(skipped=reason)
    preparation = ranks.slowest(waited + first_run(variant, part.problem))

    def join() -> Any:
        return ranks.sum(variant.output_buffer()) if part.combine == "sum" else None

    def run() -> float:  # this rank's share, joined: the time of the share alone
        share, _ = timed_call(variant.run)
        join()
        return share

    check = _checked(ranks, kernel, problem, key, part, variant, join())
    if not passed(variant, check):
        return Measured(check=check, preparation_s=preparation)
    timed = timed_samples(lambda: ranks.timed(run), samples, warmup)
    return Measured(samples=[t for t, _ in timed], check=check, preparation_s=preparation,
                    shares=[s for _, s in timed])


def _unavailable_on_some_rank(ranks: Ranks, variant: Variant, part: Part) -> str | None:
    """The gate's first step on every rank: why ``variant`` cannot run its share on some rank (the first such
    rank's reason, the same on every rank: all skip it), or None. A solver's share of the rows gets its
    ``SplitRows`` here."""
    reason = unavailable_reason(variant, part.problem)
    if part.mode_rows is not None:
        share_rows = getattr(variant, "share_rows", None)  # a solver that can update a share of the rows
        if share_rows is None:
            reason = reason or "solves on one device only"
        else:
            share_rows(SplitRows(ranks, part.mode_rows))
    reasons = [r for r in ranks.comm.allgather(reason) if r]
    return reasons[0] if reasons else None


def _checked(ranks: Ranks, kernel: Kernel, problem: Problem, key: dict, part: Part, variant: Variant,
             summed: Any) -> Check:
    """The joined output of the first run against the oracle, the same verdict on every rank: the whole
    problem's oracle on rank 0 (``Part.whole``), else each share's oracle on its rank, and the worst error."""
    output = host(summed) if part.combine == "sum" else variant.output()
    if not part.whole:
        reference = kernel.oracle(part.problem)
        if part.combine == "sum":
            reference = ranks.sum(np.array(reference, dtype=np.float64).reshape(-1)).reshape(np.shape(reference))
        check = kernel.check(part.problem, output, reference)
        worst = ranks.comm.allgather(check)
        return max(worst, key=lambda c: (not c.passed, c.max_rel_error))
    if part.rows is not None:
        low, high = part.rows
        pieces = ranks.comm.gather((low, high, output[low:high]), root=0)
        if ranks.rank == 0:
            output = np.array(output)
            for low, high, rows in pieces:
                output[low:high] = rows
    check = kernel.check(problem, output, stored_reference(kernel, problem, key)) if ranks.rank == 0 else None
    return ranks.comm.bcast(check, root=0)


def problem_and_key(kernel: Kernel, case: str, size: int, options: dict[str, str], seed: int = 0) -> tuple[Problem, dict]:
    """The whole problem of (case, size, options) and the key of its stored oracle."""
    return kernel.problem(case, size, seed, **options), oracle_key(case, size, seed, options)
