"""GPU portable: PDNR multi-kernel (seed 002's all-node kernel): rows with more nonzeros than the
threshold are solved one at a time by device-wide kernels over the row's nonzeros (the gradient and
Hessian in one, each objective in another: grid-stride loops, warp sums, one atomic add per warp);
the Newton loop between them runs on the host (``numba_multi.solve_heavy_row``: ``numba_single``'s
compiled R-sized steps) on the R + R(R+1)/2 sums copied back. The other rows go to
``cupy_single``'s warp-per-row kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..gpu import cupy, templated_kernel
from .cupy_single import ROW_MATH, THREADS, CupySingle
from .numba_multi import solve_heavy_row
from .numba_single import EPS_DIV
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

    def solve_mode(self, mode: int, b: Any, steps: Any) -> None:
        heavy, light = self._split[mode]
        for i, lo, hi in heavy:
            row = b[i].get()
            steps[i] = solve_heavy_row(row, self._host_settings, lambda p: self._heavy_sums(mode, lo, hi, p),
                                       lambda p: self._heavy_log_sum(mode, lo, hi, p))
            b[i] = cupy().asarray(row)
        self.solve_rows(mode, light, b, steps)
