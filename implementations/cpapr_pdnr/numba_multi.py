"""CPU portable: PDNR multi-kernel (seed 002's all-node kernel): rows with more nonzeros than the
threshold are solved one at a time, every core summing a share of the row's nonzeros (gradient,
Hessian, objective); the other rows as in ``numba_single``, one task per row.

A heavy row's Newton loop runs on the host (``solve_heavy_row``, shared with ``cupy_multi``), its
R-sized steps (direction, trial point, damping) ``numba_single``'s compiled ones; each sum over the
row's nonzeros is one parallel call: per-chunk partial sums, then added in chunk order.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import numba
import numpy as np

from .numba_single import (EPS_ACTIVE, EPS_DIV, MAX_BACKTRACK, MAX_INNER, MIN_DESCENT, MU0, ROW_TOL, SMALL_STEP,
                           STEP_RED, SUFF_DECR, damping, direction, kkt_and_gradient, partials, row_sum, solve_rows,
                           trial_point)
from .variant import DEFAULT_THRESHOLD, NumbaPdnrVariant

CHUNKS_PER_THREAD = 4


@numba.njit(parallel=True, cache=True)
def partials_parallel(pi, x, lo, hi, b, eps, chunks, phi_parts, hess_parts, phi, hess):
    size = (hi - lo + chunks - 1) // chunks
    for c in numba.prange(chunks):
        # each chunk sums into its own local arrays (numba_single.partials), then stores them once
        phi_c = np.empty(b.shape[0])
        hess_c = np.empty((b.shape[0], b.shape[0]))
        partials(pi, x, min(hi, lo + c * size), min(hi, lo + (c + 1) * size), b, eps, phi_c, hess_c)
        phi_parts[c] = phi_c
        hess_parts[c] = hess_c
    phi[:] = 0.0
    hess[:, :] = 0.0
    for c in range(chunks):
        phi += phi_parts[c]
        hess += hess_parts[c]


@numba.njit(parallel=True, cache=True)
def log_sum_parallel(pi, x, lo, hi, b, chunks, parts):
    rank = b.shape[0]
    size = (hi - lo + chunks - 1) // chunks
    for c in numba.prange(chunks):
        total = 0.0
        for j in range(lo + c * size, min(hi, lo + (c + 1) * size)):
            v = 0.0
            for r in range(rank):
                v += b[r] * pi[j, r]
            total += x[j] * math.log(v) if v > 0.0 else -np.inf
        parts[c] = total
    total = 0.0
    for c in range(chunks):
        total += parts[c]
    return total


def solve_heavy_row(b: np.ndarray, s: np.ndarray, sums: Callable, log_sum: Callable) -> int:
    """``numba_single.solve_row`` driven from the host, each sum over the row's nonzeros a parallel call:
    ``sums(b)`` gives (φ, H's upper triangle), ``log_sum(b)`` Σ x_j log(b·π_j). ``cupy_multi`` passes
    device-wide kernels. Updates ``b``; returns the Newton steps taken."""
    rank = b.shape[0]
    g, d, trial = np.empty(rank), np.empty(rank), np.empty(rank)
    free, chol = np.empty(rank, dtype=np.bool_), np.empty((rank, rank))
    mu = s[MU0]
    for step in range(int(s[MAX_INNER])):
        phi, hess = sums(b)
        if kkt_and_gradient(b, phi, g) < s[ROW_TOL]:
            return step
        predicted = direction(b, g, hess, mu, s[EPS_ACTIVE], d, free, chol)
        f_old = row_sum(b) - log_sum(b)
        alpha, f_unit, f_new, count, total = 1.0, np.inf, np.inf, 1, 0.0
        while count <= s[MAX_BACKTRACK]:
            descent, total = trial_point(b, d, alpha, g, trial)
            f_new = np.inf if descent > 0.0 or total < s[MIN_DESCENT] else total - log_sum(trial)
            if count == 1:
                f_unit = f_new
            if f_new <= f_old + s[SUFF_DECR] * descent:
                break
            alpha *= s[STEP_RED]
            count += 1
        if f_unit == np.inf:
            f_unit = f_old
        if (count >= s[MAX_BACKTRACK] and f_new > f_old) or total < s[SMALL_STEP]:
            trial = np.maximum(b * phi, 0.0)  # the multiplicative step
            f_unit = f_old
        b[:] = trial
        mu = damping(mu, predicted, f_old, f_unit)
    return int(s[MAX_INNER])


class NumbaMulti(NumbaPdnrVariant):
    name = "numba-multi"
    family = "portable"
    description = "Numba: rows over the threshold one at a time on every core, the rest one per thread (seed 002's multi-kernel)"

    def __init__(self, threshold: int = DEFAULT_THRESHOLD) -> None:
        super().__init__(threshold)
        self.kernel_seconds = {"all-node": 0.0, "team": 0.0}

    def setup(self, problem) -> None:
        super().setup(problem)
        self._split = []
        for m in self._host_modes:
            heavy = m.lengths() > self.threshold
            self._split.append((np.flatnonzero(heavy).astype(np.int64), np.flatnonzero(~heavy).astype(np.int64)))
        self._chunks = CHUNKS_PER_THREAD * numba.get_num_threads()

    def _solve_heavy(self, mode: int, heavy: np.ndarray, b: np.ndarray, steps: np.ndarray) -> None:
        arranged, s, chunks = self._modes[mode], self._settings, self._chunks
        rank = b.shape[1]
        phi_parts, hess_parts, parts = np.empty((chunks, rank)), np.empty((chunks, rank, rank)), np.empty(chunks)
        phi, hess = np.empty(rank), np.empty((rank, rank))
        for i in heavy:
            lo, hi = arranged.starts[i], arranged.starts[i + 1]

            def sums(point: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                partials_parallel(self._pi, arranged.values, lo, hi, point, s[EPS_DIV], chunks, phi_parts, hess_parts,
                                  phi, hess)
                return phi, hess

            def log_sum(point: np.ndarray) -> float:
                return log_sum_parallel(self._pi, arranged.values, lo, hi, point, chunks, parts)

            row = b[i].copy()
            steps[i] = solve_heavy_row(row, s, sums, log_sum)
            b[i] = row

    def solve_mode(self, mode: int, b: np.ndarray, steps: np.ndarray) -> None:
        arranged = self._modes[mode]
        heavy, light = self._split[mode]
        start = time.perf_counter()
        if heavy.size:
            self._solve_heavy(mode, heavy, b, steps)
        middle = time.perf_counter()
        if light.size:
            solve_rows(self._pi, arranged.values, arranged.starts, light, b, self._settings, steps)
        # each kernel's seconds (seed 002's Figure 4 shares), summed over the variant's runs
        self.kernel_seconds["all-node"] += middle - start
        self.kernel_seconds["team"] += time.perf_counter() - middle
