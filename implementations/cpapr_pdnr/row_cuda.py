"""The PDNR row math in CUDA, one source for both CuPy variants: ``cupy_single``'s kernel (a warp, or a
thread, per row) and ``cupy_multi``'s lock-step stages for heavy rows each prepend ``ROW_MATH`` to their
kernels and build every step from its ``__device__`` functions. The math is ``row_numba``'s, line for
line; only the summation order differs. R (the rank) is a template parameter; PDNR_WARP the lanes that
share a row's nonzeros.
"""

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

// The Newton step's line search and end, in the pieces both the one-kernel loop (pdnr_rows) and the
// lock-step stages (heavy_begin, heavy_judge) are built from. Their state is taken by reference: a
// register in the one kernel, a row's slot in global memory in the stages.

template <int R>
__device__ __forceinline__ double row_sum(const double* b) {
    double total = 0.0;
    for (int r = 0; r < R; ++r) total += b[r];
    return total;
}

// trial = P+(b + alpha d); returns g . (trial - b), with sum(trial) in total
template <int R>
__device__ __forceinline__ double trial_point(const double* b, const double* d, const double& alpha, const double* g,
                                              double* trial, double& total) {
    double descent = 0.0;
    total = 0.0;
    for (int r = 0; r < R; ++r) {
        trial[r] = fmax(b[r] + alpha * d[r], 0.0);
        descent += g[r] * (trial[r] - b[r]);
        total += trial[r];
    }
    return descent;
}

// a trial point that is no descent or too small: its objective counts as +inf, not evaluated. A macro:
// as a function returning this short-circuit test, NVRTC keeps the result in a register and branches on it.
#define REJECTED_OUTRIGHT(descent, total, s) ((descent) > 0.0 || (total) < (s)[8])

// the line search's test of a trial point's objective f_new (the first trial's is the unit step's)
template <typename Count>
__device__ __forceinline__ bool accepted(const double& f_new, const double& f_old, const double& descent,
                                         double& f_unit, const Count& count, const double* s) {
    if (count == 1) f_unit = f_new;
    return f_new <= f_old + s[7] * descent;
}

// a rejected trial: the next one is a shorter step
template <typename Count>
__device__ __forceinline__ void backtrack(double& alpha, Count& count, const double* s) {
    alpha *= s[6];
    count += 1;
}

// the step's end: b = the trial point, or the multiplicative step where the search failed or the point is
// too small, and the damping for the next step
template <int R, typename Count>
__device__ __forceinline__ void end_step(double* b, double* trial, const double* phi, const Count& count,
                                         const double& f_old, const double& f_new, double& f_unit,
                                         const double& total, const double& predicted, double& mu, const double* s) {
    if (isinf(f_unit) && f_unit > 0) f_unit = f_old;
    if ((count >= s[1] && f_new > f_old) || total < s[9]) {
        for (int r = 0; r < R; ++r) trial[r] = fmax(b[r] * phi[r], 0.0);  // the multiplicative step
        f_unit = f_old;
    }
    for (int r = 0; r < R; ++r) b[r] = trial[r];
    mu = damping(mu, predicted, f_old, f_unit);
}
"""
