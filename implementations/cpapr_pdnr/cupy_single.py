"""GPU portable: PDNR single-kernel: one CuPy RawKernel, a warp per row subproblem (paper [002]'s
team-based kernel, a team being a warp).

The warp's 32 lanes share the row's nonzeros (lane l takes l, l + 32, ...) for the gradient, the
Hessian's upper triangle and each objective, summed across the warp by butterfly shuffles so that
every lane holds the same totals; every lane then does the R-sized step (active set, Cholesky solve
of the shifted system, trial point, damping) on identical data, so the warp never diverges. The
row math is ``row_cuda.ROW_MATH`` (shared with ``cupy_multi``; ``row_numba``'s, line for line, only the
summation order differs). Π comes from the ``pi`` kernel's ``cupy-rows`` on the row-sorted indices. R is a
template parameter.
"""

from __future__ import annotations

from typing import Any

from ..gpu import cupy, templated_kernel
from ..pi.cupy_rows import SOURCE as PI_SOURCE
from ..tensor_inputs import UpToMaxOrder, factor_arguments
from .row_cuda import ROW_MATH
from .variant import CupyPdnrVariant, settings_vector

SOURCE = ROW_MATH + r"""
template <int R>
__global__ void pdnr_rows(const double* __restrict__ pi, const double* __restrict__ x,
                          const long long* __restrict__ starts, const long long* __restrict__ rows,
                          const long long nrows, double* __restrict__ B, long long* __restrict__ steps,
                          const double* __restrict__ s) {
    const int lane = threadIdx.x % PDNR_WARP;
    const long long warp = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / PDNR_WARP;
    if (warp >= nrows) return;  // the whole warp leaves together
    const long long i = rows[warp];
    const long long lo = starts[i], hi = starts[i + 1];
    double b[R], phi[R], g[R], d[R], trial[R], hess[R * (R + 1) / 2];
    for (int r = 0; r < R; ++r) b[r] = B[i * R + r];
    double mu = s[5];
    const int max_inner = (int)s[0];
    int step = 0;
    for (; step < max_inner; ++step) {
        partial_sums<R>(pi, x, lo, hi, lane, PDNR_WARP, b, s[3], phi, hess);
        for (int r = 0; r < R; ++r) phi[r] = warp_sum(phi[r]);
        for (int t = 0; t < R * (R + 1) / 2; ++t) hess[t] = warp_sum(hess[t]);
        if (kkt_and_gradient<R>(b, phi, g) < s[2]) break;
        const double predicted = direction<R>(b, g, hess, mu, s[4], d);
        const double f_old = row_sum<R>(b) - warp_sum(partial_log_sum<R>(pi, x, lo, hi, lane, PDNR_WARP, b));
        double alpha = 1.0, f_unit = INFINITY, f_new = INFINITY, total = 0.0;
        int count = 1;
        while (count <= s[1]) {
            const double descent = trial_point<R>(b, d, alpha, g, trial, total);
            if (REJECTED_OUTRIGHT(descent, total, s)) f_new = INFINITY;
            else f_new = total - warp_sum(partial_log_sum<R>(pi, x, lo, hi, lane, PDNR_WARP, trial));
            if (accepted(f_new, f_old, descent, f_unit, count, s)) break;
            backtrack(alpha, count, s);
        }
        end_step<R>(b, trial, phi, count, f_old, f_new, f_unit, total, predicted, mu, s);
    }
    if (lane == 0) {
        for (int r = 0; r < R; ++r) B[i * R + r] = b[r];
        steps[i] = step;
    }
}
"""

THREADS = 256  # 8 rows per block
THREAD_PER_ROW = "#define PDNR_WARP 1\n"  # the kernel with one lane per row (cupy-multi's short rows)


class CupySingle(UpToMaxOrder, CupyPdnrVariant):
    name = "cupy-single"
    family = "portable"
    description = "CuPy RawKernel: a warp per row subproblem, lanes sharing its nonzeros (paper [002]'s single kernel)"

    def prepare_solver(self, problem) -> None:
        cp = cupy()
        self._settings = cp.asarray(settings_vector(problem.settings))
        self._pi_out = cp.empty((problem.tensor.nnz, problem.rank))
        self._pi_kernel = templated_kernel(PI_SOURCE, "pi_rows", problem.tensor.order, problem.rank, 0)
        self._row_kernel = templated_kernel(SOURCE, "pdnr_rows", problem.rank)
        self._thread_row_kernel = templated_kernel(THREAD_PER_ROW + SOURCE, "pdnr_rows", problem.rank)
        self._no_perm = cp.zeros(1, dtype=cp.int32)

    def khatri_rao(self, mode: int, factors: list[Any]) -> Any:
        cp = cupy()
        arranged = self._modes[mode]
        nnz, rank = self._pi_out.shape
        grid = (max(1, min(-(-nnz * rank // THREADS), 1 << 20)),)
        self._pi_kernel(grid, (THREADS,), (arranged.idx, self._no_perm, *factor_arguments(self.name, factors),
                                           self._pi_out, cp.int64(nnz), cp.int32(mode)))
        return self._pi_out

    def solve_rows(self, mode: int, rows: Any, b: Any, steps: Any, lanes: int = 32) -> None:
        """The single kernel on the rows ``rows`` (device int64) of ``mode``: a warp per row, or a
        thread per row (``lanes`` 1: the same source with one lane per row)."""
        cp = cupy()
        count = int(rows.shape[0])
        if count == 0:
            return
        arranged = self._modes[mode]
        kernel = self._row_kernel if lanes == 32 else self._thread_row_kernel
        grid = (-(-count * lanes // THREADS),)
        kernel(grid, (THREADS,), (self._pi, arranged.values, arranged.starts, rows, cp.int64(count), b, steps,
                                  self._settings))

    def solve_mode(self, mode: int, b: Any, steps: Any) -> None:
        self.solve_rows(mode, self._modes[mode].all_rows, b, steps)

