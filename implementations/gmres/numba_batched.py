"""CPU portable: Numba batched GMRES, ``prange`` over groups of m systems.

Each thread takes a group of m consecutive systems and solves them one after another with
the oracle's algorithm (Jacobi, modified Gram-Schmidt, Givens, restarts) on system-major
values, its Krylov basis (at most restart + 1 vectors of n) in its own scratch. The group
is the unit of load balance: the ``sorted`` order puts systems of equal cost together.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, prange

from ..backends import HOST
from .definition import GmresProblem
from .variant import GmresVariant, check_group

_JIT: dict[str, Any] = dict(cache=True, nogil=True, fastmath={"contract"})


@njit(**_JIT)
def _spmv_row(row_ptr, col_idx, vals, v, r):
    s = 0.0
    for l in range(row_ptr[r], row_ptr[r + 1]):
        s += vals[l] * v[col_idx[l]]
    return s


@njit(**_JIT)
def _solve_one(row_ptr, col_idx, diag_pos, vals, b, x, V, H, cs, sn, g, y, w, dinv, tol, restart, max_iter):
    """One system; returns (iterations, converged). Mirrors reference.gmres step by step."""
    n = b.size
    for r in range(n):
        dinv[r] = 1.0 / vals[diag_pos[r]]
        x[r] = 0.0
    beta0 = 0.0
    for r in range(n):
        V[0, r] = dinv[r] * b[r]
        beta0 += V[0, r] * V[0, r]
    beta0 = math.sqrt(beta0)
    if beta0 == 0.0:
        return 0, True
    done = 0
    converged = False
    beta = beta0
    while done < max_iter and not converged:
        if done > 0:  # restart from the residual of the current x
            beta = 0.0
            for r in range(n):
                V[0, r] = dinv[r] * (b[r] - _spmv_row(row_ptr, col_idx, vals, x, r))
                beta += V[0, r] * V[0, r]
            beta = math.sqrt(beta)
        for r in range(n):
            V[0, r] /= beta
        g[0] = beta
        m = min(restart, max_iter - done, n)
        k = 0
        for j in range(m):
            for r in range(n):
                w[r] = dinv[r] * _spmv_row(row_ptr, col_idx, vals, V[j], r)
            for i in range(j + 1):  # modified Gram-Schmidt
                h = 0.0
                for r in range(n):
                    h += w[r] * V[i, r]
                H[i, j] = h
                for r in range(n):
                    w[r] -= h * V[i, r]
            hn = 0.0
            for r in range(n):
                hn += w[r] * w[r]
            hn = math.sqrt(hn)
            H[j + 1, j] = hn
            if hn > 0.0:
                for r in range(n):
                    V[j + 1, r] = w[r] / hn
            for i in range(j):
                a, c = H[i, j], H[i + 1, j]
                H[i, j] = cs[i] * a + sn[i] * c
                H[i + 1, j] = -sn[i] * a + cs[i] * c
            rho = math.hypot(H[j, j], H[j + 1, j])
            if rho == 0.0:
                return done + j, False  # breakdown: singular preconditioned matrix
            cs[j] = H[j, j] / rho
            sn[j] = H[j + 1, j] / rho
            H[j, j] = rho
            H[j + 1, j] = 0.0
            g[j + 1] = -sn[j] * g[j]
            g[j] = cs[j] * g[j]
            k = j + 1
            if abs(g[j + 1]) / beta0 < tol:
                converged = True
                break
        for i in range(k - 1, -1, -1):  # back substitution R y = g
            s = g[i]
            for l in range(i + 1, k):
                s -= H[i, l] * y[l]
            y[i] = s / H[i, i]
        for i in range(k):
            for r in range(n):
                x[r] += y[i] * V[i, r]
        done += k
    return done, converged


@njit(parallel=True, **_JIT)
def _solve_groups(row_ptr, col_idx, diag_pos, values, rhs, tol, restart, max_iter, m, x, iterations, converged):
    count, n = rhs.shape
    steps = min(restart, n)
    for group in prange((count + m - 1) // m):
        V = np.empty((steps + 1, n))
        H = np.empty((steps + 1, steps))
        cs = np.empty(steps)
        sn = np.empty(steps)
        g = np.empty(steps + 1)
        y = np.empty(steps)
        w = np.empty(n)
        dinv = np.empty(n)
        for k in range(group * m, min(count, (group + 1) * m)):
            its, ok = _solve_one(row_ptr, col_idx, diag_pos, values[k], rhs[k], x[k], V, H, cs, sn, g, y, w, dinv,
                                 tol, restart, max_iter)
            iterations[k] = its
            converged[k] = ok


class NumbaBatched(GmresVariant):
    name = "numba-batched"
    family = "portable"
    backend = HOST
    description = "Numba prange over groups of m systems, one GMRES per system (MGS, Givens)"

    def __init__(self, m: int = 8) -> None:
        self.m = check_group(self.name, m)

    def prepare_solver(self, problem: GmresProblem) -> None:
        s = problem.systems
        self._args = (s.row_ptr, s.col_idx, s.diagonal_positions.astype(np.int32), s.values, s.rhs,
                      float(problem.tol), int(problem.restart), int(problem.max_iter), self.m)
        self._converged = np.zeros(s.num_systems, dtype=np.bool_)
        warm = (s.row_ptr, s.col_idx, self._args[2], s.values[:1], s.rhs[:1], *self._args[5:])
        _solve_groups(*warm, np.empty((1, s.n)), np.empty(1, dtype=np.int64), np.empty(1, dtype=np.bool_))

    def solve(self) -> tuple[Any, Any]:
        s = self._problem.systems
        x = np.empty((s.num_systems, s.n))
        iterations = np.empty(s.num_systems, dtype=np.int64)
        _solve_groups(*self._args, x, iterations, self._converged)
        return x, iterations
