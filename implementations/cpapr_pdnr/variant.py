"""What every PDNR variant shares: the tensor sorted by row once per mode (untimed), then per run
``outer`` outer iterations from the starting model: per mode the weights shifted into B = A_n diag(λ),
Π, every row subproblem solved (``solve_mode``), λ = column sums of B, A_n = B diag(λ)^-1.

A variant implements ``solve_mode(mode, b, steps)``: B's rows updated in place, each row's Newton
steps written into ``steps``. The run's output is the packed model and the last mode's steps
(``definition.pack``); ``iterations()`` gives every row's steps in the last outer iteration.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from portabench.reference.cpapr_pdnr import PdnrSettings

from ..backends import HOST
from ..gpu import CupyArrays
from ..model import BoundVariant
from ..tensor_inputs import INT32_MAX
from .definition import PdnrProblem, pack

DEFAULT_THRESHOLD = 1 << 14  # paper [002]'s Figure 3 switch threshold (nonzeros per row)


def settings_vector(s: PdnrSettings) -> np.ndarray:
    """The settings as the compiled kernels read them (order: ``row_numba``'s indices)."""
    return np.array([s.max_inner, s.max_backtrack, s.row_tol, s.eps_div, s.eps_active, s.mu0, s.step_reduction,
                     s.sufficient_decrease, s.min_descent, s.small_step], dtype=np.float64)


@dataclass
class ModeArrays:
    """One mode's nonzeros sorted by row: indices (N x nnz int32), values, row starts (I_n + 1),
    the rows in order, and each nonzero's row."""

    idx: Any
    values: Any
    starts: Any
    all_rows: Any
    row_of: Any

    def lengths(self) -> np.ndarray:
        return np.diff(np.asarray(self.starts))


def sorted_modes(problem: PdnrProblem) -> list[ModeArrays]:
    """Every mode's row-sorted arrays on the host (stable sort: file order within a row)."""
    t = problem.tensor
    coords = np.ascontiguousarray(t.coords.T, dtype=np.int32)
    out = []
    for mode, dim in enumerate(t.dims):
        order = np.argsort(coords[mode], kind="stable")
        idx = np.ascontiguousarray(coords[:, order])
        starts = np.searchsorted(idx[mode], np.arange(dim + 1)).astype(np.int64)
        out.append(ModeArrays(idx, np.ascontiguousarray(t.values[order], dtype=np.float64), starts,
                              np.arange(dim, dtype=np.int64), idx[mode].astype(np.int64)))
    return out


class PdnrVariant(BoundVariant):
    """A PDNR implementation: ``solve_mode`` on arrays that live wherever ``to_device`` puts them."""

    kernel = "cpapr_pdnr"
    xp: Any = np

    def __init__(self, threshold: int = DEFAULT_THRESHOLD) -> None:
        self.threshold = int(threshold)

    def prepare_solver(self, problem: PdnrProblem) -> None:
        """Untimed, after the modes are sorted: per-variant arrays and compilation."""

    @abstractmethod
    def solve_mode(self, mode: int, b: Any, steps: Any) -> None:
        """Every row subproblem of ``mode``: B (I_n x R) updated in place, Newton steps into ``steps``."""

    def khatri_rao(self, mode: int, factors: list[Any]) -> Any:
        """Π of ``mode`` in its row-sorted nonzero order (nnz x R)."""
        raise NotImplementedError

    def supports(self, problem: PdnrProblem) -> str | None:
        if problem.size > INT32_MAX:
            return f"up to {INT32_MAX} nonzeros (int32 row offsets in the kernels), this tensor has {problem.size}"
        return None

    def prepare(self, problem: PdnrProblem) -> None:
        self._problem = problem
        self._settings_obj = problem.settings
        host = sorted_modes(problem)
        self._modes = [ModeArrays(*(self.to_device(a) for a in (m.idx, m.values, m.starts, m.all_rows, m.row_of)))
                       for m in host]
        self._host_modes = host
        self._start = [self.to_device(np.array(a)) for a in (problem.start[0], *problem.start[1])]
        self.prepare_solver(problem)
        self.run()  # compile and warm up: the timed runs repeat exactly this
        self.synchronize()

    def run(self) -> None:
        xp = self.xp
        weights = self._start[0].copy()
        factors = [a.copy() for a in self._start[1:]]
        steps: list[Any] = []
        for _ in range(self._problem.outer):
            steps = []
            for mode in range(len(factors)):
                b = factors[mode] * weights
                self._pi = self.khatri_rao(mode, factors)
                mode_steps = xp.zeros(b.shape[0], dtype=xp.int64)
                self.solve_mode(mode, b, mode_steps)
                weights = b.sum(axis=0)
                factors[mode] = b / xp.where(weights > 0, weights, 1.0)  # a zero component stays zero
                steps.append(mode_steps)
        self.synchronize()
        self._weights, self._factors, self._steps = weights, factors, steps

    def output(self) -> np.ndarray:
        return pack(self.to_host(self._weights), [self.to_host(a) for a in self._factors], self.to_host(self._steps[-1]))

    def iterations(self) -> np.ndarray:
        """Every row's Newton steps (all modes) in the last outer iteration."""
        return np.concatenate([np.asarray(self.to_host(s), dtype=np.int64) for s in self._steps])


class NumbaPdnrVariant(PdnrVariant):
    """A CPU variant through Numba: Π by the ``pi`` kernel's Numba rows on the row-sorted indices."""

    backend = HOST

    def prepare_solver(self, problem: PdnrProblem) -> None:
        self._settings = settings_vector(problem.settings)
        self._pi_out = np.empty((problem.tensor.nnz, problem.rank))

    def khatri_rao(self, mode: int, factors: list[np.ndarray]) -> np.ndarray:
        from ..pi.numba_prange import _rows

        _rows(self._modes[mode].idx, tuple(factors), mode, self._pi_out)
        return self._pi_out


class CupyPdnrVariant(CupyArrays, PdnrVariant):
    """A GPU variant through CuPy: arrays in device memory, runs synchronised."""

    @property
    def xp(self) -> Any:  # type: ignore[override]
        from ..gpu import cupy

        return cupy()
