"""GPU portable: PDNR multi-kernel (seed 002's all-node kernel): rows with more nonzeros than the
threshold are solved one at a time by device-wide kernels over the row's nonzeros (the gradient and
Hessian in one, each objective in another: grid-stride loops, warp sums, one atomic add per warp);
the R-sized step between them (active set, Cholesky solve, trial point, damping) runs on the host in
``numba_single``'s compiled functions, on the R + R(R+1)/2 sums copied back. The other rows go to
``cupy_single``'s warp-per-row kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..gpu import cupy, templated_kernel
from .cupy_single import ROW_MATH, THREADS, CupySingle
from .numba_single import (EPS_ACTIVE, EPS_DIV, MAX_BACKTRACK, MAX_INNER, MIN_DESCENT, MU0, ROW_TOL, SMALL_STEP,
                           STEP_RED, SUFF_DECR, damping, direction, kkt_and_gradient, row_sum, trial_point)
from .variant import DEFAULT_THRESHOLD, settings_vector

SOURCE = ROW_MATH + r"""
template <int R>
__global__ void heavy_partials(const double* __restrict__ pi, const double* __restrict__ x, const long long lo,
                               const long long hi, const double* __restrict__ b_in, const double eps,
                               double* __restrict__ out) {
    double b[R], phi[R], hess[R * (R + 1) / 2];
    for (int r = 0; r < R; ++r) b[r] = b_in[r];
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    partial_sums<R>(pi, x, lo, hi, first, gridDim.x * blockDim.x, b, eps, phi, hess);
    for (int r = 0; r < R; ++r) {
        const double v = warp_sum(phi[r]);
        if ((threadIdx.x % PDNR_WARP) == 0) atomicAdd(out + r, v);
    }
    for (int t = 0; t < R * (R + 1) / 2; ++t) {
        const double v = warp_sum(hess[t]);
        if ((threadIdx.x % PDNR_WARP) == 0) atomicAdd(out + R + t, v);
    }
}

template <int R>
__global__ void heavy_log_sum(const double* __restrict__ pi, const double* __restrict__ x, const long long lo,
                              const long long hi, const double* __restrict__ b_in, double* __restrict__ out) {
    double b[R];
    for (int r = 0; r < R; ++r) b[r] = b_in[r];
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    const double v = warp_sum(partial_log_sum<R>(pi, x, lo, hi, first, gridDim.x * blockDim.x, b));
    if ((threadIdx.x % PDNR_WARP) == 0) atomicAdd(out, v);
}
"""
BLOCKS_PER_SM = 2


class CupyMulti(CupySingle):
    name = "cupy-multi"
    family = "portable"
    description = "CuPy: rows over the threshold one at a time by device-wide kernels, the rest a warp per row (seed 002's multi-kernel)"

    def __init__(self, threshold: int = DEFAULT_THRESHOLD) -> None:
        super().__init__(threshold)

    def setup(self, problem) -> None:
        super().setup(problem)
        cp = cupy()
        rank = problem.rank
        self._host_settings = settings_vector(problem.settings)
        self._partials = templated_kernel(SOURCE, "heavy_partials", rank)
        self._log_sum = templated_kernel(SOURCE, "heavy_log_sum", rank)
        self._sums = cp.zeros(rank + rank * (rank + 1) // 2)
        self._point = cp.zeros(rank)
        self._grid_cap = BLOCKS_PER_SM * int(cp.cuda.Device().attributes["MultiProcessorCount"])
        self._split = []
        for m in self._host_modes:
            lengths = m.lengths()
            heavy = np.flatnonzero(lengths > self.threshold)
            light = np.flatnonzero(lengths <= self.threshold)
            self._split.append(([(int(i), int(m.starts[i]), int(m.starts[i + 1])) for i in heavy],
                                cp.asarray(light.astype(np.int64))))
        iu = np.triu_indices(rank)
        self._upper = iu

    def _grid(self, lo: int, hi: int) -> tuple[int]:
        return (max(1, min(-(-(hi - lo) // THREADS), self._grid_cap)),)

    def _heavy_sums(self, mode: int, lo: int, hi: int, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cp, rank = cupy(), b.shape[0]
        self._point.set(b)
        self._sums.fill(0.0)
        self._partials(self._grid(lo, hi), (THREADS,), (self._pi, self._modes[mode].values, cp.int64(lo), cp.int64(hi),
                                                       self._point, cp.float64(self._host_settings[EPS_DIV]), self._sums))
        sums = self._sums.get()
        hess = np.zeros((rank, rank))
        hess[self._upper] = sums[rank:]
        return sums[:rank].copy(), hess

    def _heavy_log_sum(self, mode: int, lo: int, hi: int, b: np.ndarray) -> float:
        cp = cupy()
        self._point.set(b)
        out = self._sums[:1]
        out.fill(0.0)
        self._log_sum(self._grid(lo, hi), (THREADS,), (self._pi, self._modes[mode].values, cp.int64(lo), cp.int64(hi),
                                                      self._point, out))
        return float(out.get()[0])

    def _solve_heavy(self, mode: int, lo: int, hi: int, b: np.ndarray) -> int:
        """``numba_single.solve_row`` with each sum over the row's nonzeros a device-wide kernel."""
        s, rank = self._host_settings, b.shape[0]
        g, d, trial = np.empty(rank), np.empty(rank), np.empty(rank)
        free, chol = np.empty(rank, dtype=np.bool_), np.empty((rank, rank))
        mu = s[MU0]
        for step in range(int(s[MAX_INNER])):
            phi, hess = self._heavy_sums(mode, lo, hi, b)
            if kkt_and_gradient(b, phi, g) < s[ROW_TOL]:
                return step
            predicted = direction(b, g, hess, mu, s[EPS_ACTIVE], d, free, chol)
            f_old = row_sum(b) - self._heavy_log_sum(mode, lo, hi, b)
            alpha, f_unit, f_new, count, total = 1.0, np.inf, np.inf, 1, 0.0
            while count <= s[MAX_BACKTRACK]:
                descent, total = trial_point(b, d, alpha, g, trial)
                if descent > 0.0 or total < s[MIN_DESCENT]:
                    f_new = np.inf
                else:
                    f_new = total - self._heavy_log_sum(mode, lo, hi, trial)
                if count == 1:
                    f_unit = f_new
                if f_new <= f_old + s[SUFF_DECR] * descent:
                    break
                alpha *= s[STEP_RED]
                count += 1
            if f_unit == np.inf:
                f_unit = f_old
            if (count >= s[MAX_BACKTRACK] and f_new > f_old) or total < s[SMALL_STEP]:
                trial = np.maximum(b * phi, 0.0)
                f_unit = f_old
            b[:] = trial
            mu = damping(mu, predicted, f_old, f_unit)
        return int(s[MAX_INNER])

    def solve_mode(self, mode: int, b: Any, steps: Any) -> None:
        heavy, light = self._split[mode]
        for i, lo, hi in heavy:
            row = b[i].get()
            steps[i] = self._solve_heavy(mode, lo, hi, row)
            b[i] = cupy().asarray(row)
        self.solve_rows(mode, light, b, steps)
