"""The PDNR row solver in Numba, written once for both Numba variants: projected damped Newton on one
row's nonzeros ``lo..hi`` of the row-sorted Π and values (``reference.cpapr_pdnr``'s Algorithm 2).

``solve_row`` is the whole Newton loop. Its sums over the row's nonzeros (φ and the Hessian's upper
triangle, and the objective's log term) are the only part that differs between the variants: with
``parts`` None they run serially in the calling thread (``numba_single``: one task per row, inside
``solve_rows``' ``prange``); with ``parts`` the chunk buffers of ``partials_parallel`` and
``log_sum_parallel`` every core sums a share of the row (``numba_multi``'s heavy rows). Numba prunes the
``parts is None`` branch when it compiles each specialisation, so the serial one holds no parallel
call and the loop is the same code either way. The R-sized steps (KKT check, direction, trial point,
damping) are shared as they are.
"""

from __future__ import annotations

import math

import numba
import numpy as np

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


@numba.njit(parallel=True, cache=True)
def partials_parallel(pi, x, lo, hi, b, eps, phi_parts, hess_parts, phi, hess):
    """``partials`` with every core summing a chunk of the row (one chunk per row of ``phi_parts``),
    the chunks' sums then added in chunk order."""
    chunks = phi_parts.shape[0]
    size = (hi - lo + chunks - 1) // chunks
    for c in numba.prange(chunks):
        # each chunk sums into its own local arrays (``partials``), then stores them once
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
def log_sum_parallel(pi, x, lo, hi, b, parts):
    """``log_sum`` with every core summing a chunk of the row (one chunk per entry of ``parts``)."""
    rank = b.shape[0]
    chunks = parts.shape[0]
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
def solve_row(pi, x, lo, hi, b, s, parts):
    """Projected damped Newton on the row of nonzeros lo..hi from b (updated in place); returns
    the Newton steps taken (s[MAX_INNER]: the cap). ``parts``: None to sum the row's nonzeros in this
    thread, or (φ chunks, H chunks, log-term chunks) to sum them on every core (``partials_parallel``)."""
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
        if parts is None:
            partials(pi, x, lo, hi, b, s[EPS_DIV], phi, hess)
        else:
            partials_parallel(pi, x, lo, hi, b, s[EPS_DIV], parts[0], parts[1], phi, hess)
        if kkt_and_gradient(b, phi, g) < s[ROW_TOL]:
            return step
        predicted = direction(b, g, hess, mu, s[EPS_ACTIVE], d, free, chol)
        if parts is None:
            f_old = row_sum(b) - log_sum(pi, x, lo, hi, b)
        else:
            f_old = row_sum(b) - log_sum_parallel(pi, x, lo, hi, b, parts[2])
        alpha = 1.0
        f_unit = np.inf
        f_new = np.inf
        count = 1
        total = 0.0
        while count <= s[MAX_BACKTRACK]:
            descent, total = trial_point(b, d, alpha, g, trial)
            if descent > 0.0 or total < s[MIN_DESCENT]:
                f_new = np.inf
            elif parts is None:
                f_new = total - log_sum(pi, x, lo, hi, trial)
            else:
                f_new = total - log_sum_parallel(pi, x, lo, hi, trial, parts[2])
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
        steps[i] = solve_row(pi, x, starts[i], starts[i + 1], b[i], s, None)
