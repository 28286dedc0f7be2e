"""What every batched GMRES variant shares: the problem in, a solve per run, x and iteration counts out."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from ..model import BoundVariant
from .definition import GmresProblem

# Variants that solve groups of systems together take the group size m (the paper's 1 <= m <= 50).
MIN_GROUP, MAX_GROUP = 1, 50


def check_group(name: str, m: int) -> int:
    from ..model import PortabenchError

    if isinstance(m, bool) or int(m) != m or not MIN_GROUP <= int(m) <= MAX_GROUP:
        raise PortabenchError(f"{name}: group size m must be an integer in {MIN_GROUP}..{MAX_GROUP}, got {m!r}")
    return int(m)


class GmresVariant(BoundVariant):
    """A variant implements ``prepare_solver`` (untimed) and ``solve`` (timed, returns when done)."""

    kernel = "gmres"

    def supports(self, problem: GmresProblem) -> str | None:
        if self.max_size is not None and problem.size > self.max_size:
            return f"a comparison point at small N only (N <= {self.max_size}; {problem.size} asked)"
        return None

    def prepare(self, problem: GmresProblem) -> None:
        self._problem = problem
        self.prepare_solver(problem)
        self._x: Any = None
        self._iterations: Any = None

    @abstractmethod
    def prepare_solver(self, problem: GmresProblem) -> None:
        """Untimed: layouts, transfers, compilation and a warm-up solve."""

    @abstractmethod
    def solve(self) -> tuple[Any, Any]:
        """Timed: solve every system; (x as (N, n), iterations as (N,) or None for a direct solver)."""

    def run(self) -> None:
        self._x, self._iterations = self.solve()

    def output(self) -> np.ndarray:
        return np.asarray(self.to_host(self._x), dtype=np.float64)

    def iterations(self) -> np.ndarray | None:
        """Iterations per system of the last run (None: a direct solver)."""
        return None if self._iterations is None else np.asarray(self.to_host(self._iterations), dtype=np.int64)
