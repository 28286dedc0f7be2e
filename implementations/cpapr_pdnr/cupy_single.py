"""GPU portable: PDNR single-kernel: one CuPy RawKernel, a warp per row subproblem (seed 002's
team-based kernel, a team being a warp).

The warp's 32 lanes share the row's nonzeros (lane l takes l, l + 32, ...) for the gradient, the
Hessian's upper triangle and each objective, summed across the warp by butterfly shuffles so that
every lane holds the same totals; every lane then does the R-sized step (active set, Cholesky solve
of the shifted system, trial point, damping) on identical data, so the warp never diverges. The
math is ``numba_single``'s, line for line; only the summation order differs. Π comes from the ``pi``
kernel's ``cupy-rows`` on the row-sorted indices. R is a template parameter.
"""

from __future__ import annotations

from typing import Any

from ..gpu import cupy, templated_kernel
from ..pi.cupy_rows import SOURCE as PI_SOURCE
from ..tensor_inputs import UpToMaxOrder, factor_arguments
from .variant import CupyPdnrVariant, settings_vector

ROW_MATH = r"""
#ifndef PDNR_WARP
#define PDNR_WARP 32  // lanes per row (a host build of this source for checking sets 1)
#endif
#ifndef INFINITY  // NVRTC has no <math.h>: +inf as a double constant
#define INFINITY __longlong_as_double(0x7ff0000000000000LL)
#endif
// settings s[]: max_inner, max_backtrack, row_tol, eps_div, eps_active, mu0, step_red, suff_decr, min_descent, small_step
#define TRI(r, c) ((r) * R - ((r) * ((r) - 1)) / 2 + ((c) - (r)))  // packed upper triangle, r <= c

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = PDNR_WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// phi and the Hessian's packed upper triangle over nonzeros lo + first, lo + first + stride, ... < hi;
// with LOG, also sum x_j log(b . pi_j) into *log_total (the objective at b, from the same pass)
template <int R, bool LOG = false>
__device__ void partial_sums(const double* __restrict__ pi, const double* __restrict__ x, long long lo, long long hi,
                             int first, int stride, const double* b, double eps, double* phi, double* hess,
                             double* log_total = nullptr) {
    for (int r = 0; r < R; ++r) phi[r] = 0.0;
    for (int t = 0; t < R * (R + 1) / 2; ++t) hess[t] = 0.0;
    for (long long j = lo + first; j < hi; j += stride) {
        const double* p = pi + j * R;
        double pj[R];
        double v = 0.0;
#pragma unroll
        for (int r = 0; r < R; ++r) { pj[r] = p[r]; v += b[r] * pj[r]; }
        if (LOG) *log_total += v > 0.0 ? x[j] * log(v) : -INFINITY;
        const double w = x[j] / fmax(v, eps);
        const double u = x[j] / fmax(v * v, eps);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            phi[r] += w * pj[r];
            const double up = u * pj[r];
#pragma unroll
            for (int c = r; c < R; ++c) hess[TRI(r, c)] += up * pj[c];
        }
    }
}

template <int R>
__device__ double partial_log_sum(const double* __restrict__ pi, const double* __restrict__ x, long long lo,
                                  long long hi, int first, int stride, const double* b) {
    double total = 0.0;
    for (long long j = lo + first; j < hi; j += stride) {
        const double* p = pi + j * R;
        double v = 0.0;
#pragma unroll
        for (int r = 0; r < R; ++r) v += b[r] * p[r];
        total += v > 0.0 ? x[j] * log(v) : -INFINITY;
    }
    return total;
}

template <int R>
__device__ double kkt_and_gradient(const double* b, const double* phi, double* g) {
    double worst = 0.0;
    for (int r = 0; r < R; ++r) { g[r] = 1.0 - phi[r]; worst = fmax(worst, fabs(fmin(b[r], g[r]))); }
    return worst;
}

// the damped Newton direction (bound variables along -g), returns the predicted reduction
template <int R>
__device__ double direction(const double* b, const double* g, const double* hess, double mu, double eps_active,
                            double* d) {
    bool freev[R];
    double chol[R * R];
    double y[R];
    double w = 0.0;
    for (int r = 0; r < R; ++r) { const double t = b[r] - fmax(b[r] - g[r], 0.0); w += t * t; }
    const double threshold = fmin(eps_active, sqrt(w));
    for (int r = 0; r < R; ++r) {
        freev[r] = !(b[r] <= threshold && g[r] > 0.0);
        d[r] = (!freev[r] && b[r] != 0.0) ? -g[r] : 0.0;
    }
    for (int r = 0; r < R; ++r)
        for (int c = r; c < R; ++c) {
            double a = (freev[r] && freev[c]) ? hess[TRI(r, c)] : 0.0;
            if (r == c) a = freev[r] ? a + mu : 1.0;
            chol[r * R + c] = a;
        }
    for (int r = 0; r < R; ++r) {
        double s = chol[r * R + r];
        for (int k = 0; k < r; ++k) s -= chol[k * R + r] * chol[k * R + r];
        if (!(s > 0.0)) {
            for (int q = 0; q < R; ++q) d[q] = -g[q];
            return 0.0;
        }
        s = sqrt(s);
        chol[r * R + r] = s;
        for (int c = r + 1; c < R; ++c) {
            double t = chol[r * R + c];
            for (int k = 0; k < r; ++k) t -= chol[k * R + r] * chol[k * R + c];
            chol[r * R + c] = t / s;
        }
    }
    for (int r = 0; r < R; ++r) {
        double t = freev[r] ? -g[r] : 0.0;
        for (int k = 0; k < r; ++k) t -= chol[k * R + r] * y[k];
        y[r] = t / chol[r * R + r];
    }
    for (int r = R - 1; r >= 0; --r) {
        double t = y[r];
        for (int k = r + 1; k < R; ++k) t -= freev[k] ? chol[r * R + k] * d[k] : 0.0;
        if (freev[r]) d[r] = t / chol[r * R + r];
    }
    double dg = 0.0, quad = 0.0;
    for (int r = 0; r < R; ++r) {
        if (freev[r]) {
            dg += d[r] * g[r];
            double t = 0.0;
            for (int c = r; c < R; ++c) if (freev[c]) t += chol[r * R + c] * d[c];
            quad += t * t;
        }
    }
    const double predicted = dg + 0.5 * quad;
    if (predicted > 0.0) for (int r = 0; r < R; ++r) d[r] = -g[r];
    return predicted;
}

__device__ __forceinline__ double damping(double mu, double predicted, double f_old, double f_unit) {
    if (predicted == 0.0) return mu * 10.0;
    const double rho = (f_old - f_unit) / -predicted;
    if (rho < 0.25) return mu * 3.5;
    if (rho > 0.75) return mu * (2.0 / 7.0);
    return mu;
}
"""

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
        double bsum = 0.0;
        for (int r = 0; r < R; ++r) bsum += b[r];
        const double f_old = bsum - warp_sum(partial_log_sum<R>(pi, x, lo, hi, lane, PDNR_WARP, b));
        double alpha = 1.0, f_unit = INFINITY, f_new = INFINITY, total = 0.0;
        int count = 1;
        while (count <= s[1]) {
            double descent = 0.0;
            total = 0.0;
            for (int r = 0; r < R; ++r) {
                trial[r] = fmax(b[r] + alpha * d[r], 0.0);
                descent += g[r] * (trial[r] - b[r]);
                total += trial[r];
            }
            if (descent > 0.0 || total < s[8]) f_new = INFINITY;
            else f_new = total - warp_sum(partial_log_sum<R>(pi, x, lo, hi, lane, PDNR_WARP, trial));
            if (count == 1) f_unit = f_new;
            if (f_new <= f_old + s[7] * descent) break;
            alpha *= s[6];
            ++count;
        }
        if (isinf(f_unit) && f_unit > 0) f_unit = f_old;
        if ((count >= s[1] && f_new > f_old) || total < s[9]) {
            for (int r = 0; r < R; ++r) trial[r] = fmax(b[r] * phi[r], 0.0);
            f_unit = f_old;
        }
        for (int r = 0; r < R; ++r) b[r] = trial[r];
        mu = damping(mu, predicted, f_old, f_unit);
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
    description = "CuPy RawKernel: a warp per row subproblem, lanes sharing its nonzeros (seed 002's single kernel)"

    def setup(self, problem) -> None:
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

