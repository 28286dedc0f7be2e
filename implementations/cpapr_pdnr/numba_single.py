"""CPU portable: PDNR single-kernel: Numba ``prange`` over a mode's rows, one row subproblem per
task, each solved start to end by one thread (seed 002's team-based kernel, a team being a thread).

The row math is written once here, on a row's nonzeros ``lo..hi`` of the row-sorted Π and
values; the multi-kernel variant (``numba_multi``) reuses the R-sized steps and replaces only
the sums over a heavy row's nonzeros by parallel ones.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .variant import NumbaPdnrVariant

# settings vector layout (float64): see ``variant.settings_vector``
MAX_INNER, MAX_BACKTRACK, ROW_TOL, EPS_DIV, EPS_ACTIVE, MU0, STEP_RED, SUFF_DECR, MIN_DESCENT, SMALL_STEP = range(10)


@numba.njit(cache=True, inline="always")
def partials(pi, x, lo, hi, b, eps, phi, hess):
    """φ = Σ x_j π_j / max(b·π_j, ε) and H = Σ x_j / max((b·π_j)², ε) π_j π_jᵀ (upper triangle)."""
    rank = b.shape[0]
    phi[:] = 0.0
    hess[:, :] = 0.0
    for j in range(lo, hi):
        v = 0.0
        for r in range(rank):
            v += b[r] * pi[j, r]
        w = x[j] / max(v, eps)
        u = x[j] / max(v * v, eps)
        for r in range(rank):
            p = pi[j, r]
            phi[r] += w * p
            up = u * p
            for c in range(r, rank):
                hess[r, c] += up * pi[j, c]


@numba.njit(cache=True, inline="always")
def log_sum(pi, x, lo, hi, b):
    """Σ x_j log(b·π_j) (-inf where some b·π_j <= 0)."""
    rank = b.shape[0]
    total = 0.0
    for j in range(lo, hi):
        v = 0.0
        for r in range(rank):
            v += b[r] * pi[j, r]
        if v <= 0.0:
            return -np.inf
        total += x[j] * math.log(v)
    return total


@numba.njit(cache=True)
def kkt_and_gradient(b, phi, g):
    """g = 1 - φ; returns max_r |min(b_r, g_r)|."""
    worst = 0.0
    for r in range(b.shape[0]):
        g[r] = 1.0 - phi[r]
        worst = max(worst, abs(min(b[r], g[r])))
    return worst


@numba.njit(cache=True)
def direction(b, g, hess, mu, eps_active, d, free, chol):
    """The damped Newton direction on the free variables, the bound ones moved along -g (see
    ``reference.cpapr_pdnr``); returns the predicted reduction. ``hess``: upper triangle."""
    rank = b.shape[0]
    w = 0.0
    for r in range(rank):
        t = b[r] - max(b[r] - g[r], 0.0)
        w += t * t
    threshold = min(eps_active, math.sqrt(w))
    for r in range(rank):
        free[r] = not (b[r] <= threshold and g[r] > 0.0)
        d[r] = -g[r] if (not free[r] and b[r] != 0.0) else 0.0
    # H_F + μI embedded in R x R: a bound variable's row and column are the identity's, its right side 0.
    for r in range(rank):
        for c in range(r, rank):
            a = hess[r, c] if (free[r] and free[c]) else 0.0
            if r == c:
                a = a + mu if free[r] else 1.0
            chol[r, c] = a
    # Cholesky (upper, chol = Uᵀ U) of the SPD shifted Hessian
    for r in range(rank):
        s = chol[r, r]
        for k in range(r):
            s -= chol[k, r] * chol[k, r]
        if not s > 0.0:
            for q in range(rank):
                d[q] = -g[q]
            return 0.0
        s = math.sqrt(s)
        chol[r, r] = s
        for c in range(r + 1, rank):
            t = chol[r, c]
            for k in range(r):
                t -= chol[k, r] * chol[k, c]
            chol[r, c] = t / s
    # Uᵀ y = -g_F, then U d_F = y
    y = np.empty(rank)
    for r in range(rank):
        t = -g[r] if free[r] else 0.0
        for k in range(r):
            t -= chol[k, r] * y[k]
        y[r] = t / chol[r, r]
    for r in range(rank - 1, -1, -1):
        t = y[r]
        for k in range(r + 1, rank):
            t -= chol[r, k] * d[k] if free[k] else 0.0
        if free[r]:
            d[r] = t / chol[r, r]
    # predicted reduction d_F·g_F + d_Fᵀ (H_F + μI) d_F / 2 = d_F·g_F + |U d_F|² / 2
    dg = 0.0
    quad = 0.0
    for r in range(rank):
        if free[r]:
            dg += d[r] * g[r]
            t = 0.0
            for c in range(r, rank):
                if free[c]:
                    t += chol[r, c] * d[c]
            quad += t * t
    predicted = dg + 0.5 * quad
    if predicted > 0.0:
        for r in range(rank):
            d[r] = -g[r]
    return predicted


@numba.njit(cache=True)
def trial_point(b, d, alpha, g, out):
    """out = P+(b + αd); returns (g·(out - b), Σ out)."""
    descent = 0.0
    total = 0.0
    for r in range(b.shape[0]):
        out[r] = max(b[r] + alpha * d[r], 0.0)
        descent += g[r] * (out[r] - b[r])
        total += out[r]
    return descent, total


@numba.njit(cache=True)
def row_sum(b):
    total = 0.0
    for r in range(b.shape[0]):
        total += b[r]
    return total


@numba.njit(cache=True)
def damping(mu, predicted, f_old, f_unit):
    if predicted == 0.0:
        return mu * 10.0
    rho = (f_old - f_unit) / -predicted
    if rho < 0.25:
        return mu * 3.5
    if rho > 0.75:
        return mu * (2.0 / 7.0)
    return mu


@numba.njit(cache=True)
def solve_row(pi, x, lo, hi, b, s):
    """Projected damped Newton on the row of nonzeros lo..hi from b (updated in place); returns
    the Newton steps taken (s[MAX_INNER]: the cap)."""
    rank = b.shape[0]
    phi = np.empty(rank)
    g = np.empty(rank)
    d = np.empty(rank)
    trial = np.empty(rank)
    free = np.empty(rank, dtype=np.bool_)
    hess = np.empty((rank, rank))
    chol = np.empty((rank, rank))
    mu = s[MU0]
    max_inner = int(s[MAX_INNER])
    for step in range(max_inner):
        partials(pi, x, lo, hi, b, s[EPS_DIV], phi, hess)
        if kkt_and_gradient(b, phi, g) < s[ROW_TOL]:
            return step
        predicted = direction(b, g, hess, mu, s[EPS_ACTIVE], d, free, chol)
        f_old = row_sum(b) - log_sum(pi, x, lo, hi, b)
        alpha = 1.0
        f_unit = np.inf
        f_new = np.inf
        count = 1
        total = 0.0
        while count <= s[MAX_BACKTRACK]:
            descent, total = trial_point(b, d, alpha, g, trial)
            if descent > 0.0 or total < s[MIN_DESCENT]:
                f_new = np.inf
            else:
                f_new = total - log_sum(pi, x, lo, hi, trial)
            if count == 1:
                f_unit = f_new
            if f_new <= f_old + s[SUFF_DECR] * descent:
                break
            alpha *= s[STEP_RED]
            count += 1
        if f_unit == np.inf:
            f_unit = f_old
        if (count >= s[MAX_BACKTRACK] and f_new > f_old) or total < s[SMALL_STEP]:
            for r in range(rank):
                trial[r] = max(b[r] * phi[r], 0.0)  # the multiplicative step
            f_unit = f_old
        b[:] = trial
        mu = damping(mu, predicted, f_old, f_unit)
    return max_inner


@numba.njit(parallel=True, cache=True)
def solve_rows(pi, x, starts, rows, b, s, steps):
    """Every row of ``rows`` (row i: nonzeros starts[i]..starts[i+1]) solved by one task."""
    for k in numba.prange(rows.shape[0]):
        i = rows[k]
        steps[i] = solve_row(pi, x, starts[i], starts[i + 1], b[i], s)


class NumbaSingle(NumbaPdnrVariant):
    name = "numba-single"
    family = "portable"
    description = "Numba prange over rows: each row subproblem solved by one thread (seed 002's single kernel)"

    def solve_mode(self, mode: int, b: np.ndarray, steps: np.ndarray) -> None:
        arranged = self._modes[mode]
        solve_rows(self._pi, arranged.values, arranged.starts, arranged.all_rows, b, self._settings, steps)
