"""Float64 oracle for batched GMRES: Jacobi-preconditioned GMRES, one small system at a time.

What it computes follows Kokkos Kernels' batched GMRES (paper [004] and the TeamVector
GMRES it presents), so that a portable or vendor kernel can be checked against it
system by system, iteration counts included:

- **Left Jacobi preconditioning**, ``M = diag(A)``: the Krylov space is built from
  ``M^{-1} A`` (the paper's loop applies ``A`` then ``P`` to the same vector) and the
  residual it measures is the preconditioned one, ``r_k = M^{-1}(b - A x_k)``.
- **Arnoldi by modified Gram-Schmidt** (the paper's dot/axpy loop, one basis vector at a
  time), **Givens rotations** on the Hessenberg matrix. Without ``restart`` one cycle
  (``max_iter`` capped at n as in Kokkos Kernels); with it, cycles of at most ``restart``
  steps, each from the recomputed residual of the previous cycle's solution, ``max_iter``
  steps in all.
- **Convergence criterion**: after iteration j the rotated right-hand side gives
  ``|g_j| = ||r_j||`` (in exact arithmetic); GMRES stops at the first j with
  ``|g_j| / ||r_0|| < tol`` (strictly, as Kokkos Kernels tests it), i.e.
  ``||M^{-1}(b - A x_j)||_2 < tol * ||M^{-1}(b - A x_0)||_2``; with the default ``x_0 = 0``
  that is ``||M^{-1}(b - A x_j)|| / ||M^{-1} b|| < tol``. The iteration count is that j;
  the solution is formed at the end of each cycle from its basis vectors.
- ``b = 0`` (``r_0 = 0``) needs no iteration: ``x_0`` is returned after 0 iterations.

The residual history is the Givens estimate ``|g_j| / ||r_0||`` for j = 0..iterations
(what Kokkos Kernels' Krylov handle records); ``true_residual`` recomputes it from x.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import scipy.linalg
import scipy.sparse as sp

if TYPE_CHECKING:
    from portabench.datasets.batched.systems import BatchedSystems

DEFAULT_TOL = 1e-8  # the paper's tolerance


class GmresResult(NamedTuple):
    """One GMRES solve: ``x``, ``iterations`` (Arnoldi steps), ``residuals`` (relative, length
    iterations + 1, starting at 1) and whether the criterion was met within ``max_iter``."""

    x: np.ndarray
    iterations: int
    residuals: np.ndarray
    converged: bool


class NotConvergedError(ArithmeticError):
    """GMRES did not meet the tolerance within ``max_iter`` iterations."""


def _operator(A: np.ndarray | sp.sparray | sp.spmatrix) -> tuple[np.ndarray | sp.csr_array, np.ndarray]:
    """``A`` as something with ``@`` in float64, and its diagonal."""
    if sp.issparse(A):
        mat = sp.csr_array(A, dtype=np.float64)
        diag = np.asarray(mat.diagonal(), dtype=np.float64)
    else:
        mat = np.asarray(A, dtype=np.float64)
        if mat.ndim != 2:
            raise ValueError(f"A must be a matrix, got shape {mat.shape}")
        diag = np.diagonal(mat).copy()
    if mat.shape[0] != mat.shape[1]:
        raise ValueError(f"A must be square, got shape {mat.shape}")
    return mat, diag


def _givens(a: float, b: float) -> tuple[float, float, float]:
    """(c, s, r) with [c s; -s c] [a; b] = [r; 0]."""
    r = float(np.hypot(a, b))
    if r == 0.0:
        return 1.0, 0.0, 0.0
    return a / r, b / r, r


def gmres(
    A: np.ndarray | sp.sparray | sp.spmatrix,
    b: np.ndarray,
    tol: float = DEFAULT_TOL,
    max_iter: int | None = None,
    x0: np.ndarray | None = None,
    jacobi: bool = True,
    restart: int | None = None,
) -> GmresResult:
    """Solve ``A x = b`` by (left Jacobi-preconditioned, unless ``jacobi=False``) GMRES.

    Stops at the first iteration j with ``||M^{-1}(b - A x_j)|| < tol ||M^{-1}(b - A x_0)||``
    or after ``max_iter`` iterations in all (default n); see the module docstring.
    ``restart``: Arnoldi cycles of at most this many steps (default: one cycle of up to
    ``min(max_iter, n)`` steps), each restarted from the recomputed residual of the
    cycle's solution. ``converged`` says whether the tolerance was met.
    """
    mat, diag = _operator(A)
    n = mat.shape[0]
    b = np.asarray(b, dtype=np.float64)
    if b.shape != (n,):
        raise ValueError(f"b has shape {b.shape}, expected ({n},)")
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol}")
    if jacobi:
        if np.any(diag == 0.0):
            raise ValueError(f"zero diagonal in row {int(np.flatnonzero(diag == 0.0)[0])}: no Jacobi preconditioner")
        dinv = 1.0 / diag
    else:
        dinv = np.ones(n)
    total = n if max_iter is None else int(max_iter)
    if total < 0:
        raise ValueError(f"max_iter must be >= 0, got {max_iter}")
    if restart is not None and int(restart) < 1:
        raise ValueError(f"restart must be >= 1, got {restart}")
    if restart is None:
        total = min(total, n)  # one cycle: the Krylov space cannot grow beyond n
    cycle_max = min(int(restart) if restart is not None else total, n)
    x = np.zeros(n) if x0 is None else np.asarray(x0, dtype=np.float64).copy()

    r = dinv * (b - mat @ x)
    beta0 = float(np.linalg.norm(r))
    if beta0 == 0.0:
        return GmresResult(x, 0, np.array([0.0]), True)
    history = [1.0]
    done = 0
    converged = False
    while done < total and not converged:
        steps, converged = _cycle(mat, dinv, r, beta0, min(cycle_max, total - done), tol, x, history)
        done += steps
        if not converged and done < total:
            r = dinv * (b - mat @ x)
    return GmresResult(x, done, np.array(history), converged)


def _cycle(mat, dinv: np.ndarray, r: np.ndarray, beta0: float, m: int, tol: float, x: np.ndarray,
           history: list[float]) -> tuple[int, bool]:
    """One Arnoldi cycle of at most m steps from residual r; updates x in place."""
    n = r.size
    beta = float(np.linalg.norm(r))
    V = np.zeros((m + 1, n))  # orthonormal Krylov basis, one vector per row
    H = np.zeros((m + 1, max(m, 1)))  # Hessenberg matrix, rotated into upper triangular R
    cs = np.zeros(m)
    sn = np.zeros(m)
    g = np.zeros(m + 1)  # rotated beta * e_1: |g[j]| is the residual norm after j steps
    g[0] = beta
    V[0] = r / beta
    k = 0
    converged = False
    for j in range(m):
        w = dinv * (mat @ V[j])
        for i in range(j + 1):  # modified Gram-Schmidt
            H[i, j] = float(w @ V[i])
            w -= H[i, j] * V[i]
        H[j + 1, j] = float(np.linalg.norm(w))
        if H[j + 1, j] > 0.0:
            V[j + 1] = w / H[j + 1, j]
        for i in range(j):  # previous rotations on the new column
            a, c = H[i, j], H[i + 1, j]
            H[i, j] = cs[i] * a + sn[i] * c
            H[i + 1, j] = -sn[i] * a + cs[i] * c
        cs[j], sn[j], H[j, j] = _givens(H[j, j], H[j + 1, j])
        H[j + 1, j] = 0.0
        if H[j, j] == 0.0:
            raise ValueError("GMRES breakdown: the (preconditioned) matrix is singular")
        g[j + 1] = -sn[j] * g[j]
        g[j] = cs[j] * g[j]
        k = j + 1
        history.append(abs(g[j + 1]) / beta0)
        if history[-1] < tol:
            converged = True
            break
    if k:
        y = scipy.linalg.solve_triangular(H[:k, :k], g[:k], lower=False)
        x += V[:k].T @ y
    return k, converged


def true_residual(A: np.ndarray | sp.sparray | sp.spmatrix, b: np.ndarray, x: np.ndarray,
                  jacobi: bool = True) -> float:
    """``||M^{-1}(b - A x)|| / ||M^{-1} b||``, recomputed (M = diag(A), or I without Jacobi)."""
    mat, diag = _operator(A)
    dinv = 1.0 / diag if jacobi else np.ones(mat.shape[0])
    b = np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(dinv * (b - mat @ x)) / np.linalg.norm(dinv * b))


def true_residuals(systems: BatchedSystems, x: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """``||M^{-1}(b_k - A_k x_k)|| / ||M^{-1} b_k||`` for every system k (M = diag(A_k)),
    recomputed from x (shape (N, n)); vectorized over systems, in chunks to bound memory."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape != (systems.num_systems, systems.n):
        raise ValueError(f"x has shape {x.shape}, expected ({systems.num_systems}, {systems.n})")
    starts = systems.row_ptr[:-1]  # every row holds its diagonal: no empty segment for reduceat
    out = np.empty(systems.num_systems)
    for lo in range(0, systems.num_systems, chunk):
        hi = min(lo + chunk, systems.num_systems)
        vals = systems.values[lo:hi]
        ax = np.add.reduceat(vals * x[lo:hi][:, systems.col_idx], starts, axis=1)
        dinv = 1.0 / vals[:, systems.diagonal_positions]
        b = systems.rhs[lo:hi]
        num = np.linalg.norm(dinv * (b - ax), axis=1)
        den = np.linalg.norm(dinv * b, axis=1)
        out[lo:hi] = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.where(num > 0, np.inf, 0.0))
    return out


def solve_batched(
    systems: BatchedSystems,
    tol: float = DEFAULT_TOL,
    max_iter: int | None = None,
    require_convergence: bool = True,
    restart: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Solve every system of ``systems``: ``(x, iterations)``, shapes (N, n) and (N,).

    Systems tiled from one pool matrix with identical values and right-hand side are
    solved once (checked, not assumed). Raises ``NotConvergedError`` if a system misses
    the tolerance within ``max_iter``, unless ``require_convergence=False``.
    """
    count = systems.num_systems
    x = np.empty((count, systems.n))
    iterations = np.empty(count, dtype=np.int64)
    if systems.pool_index is not None:
        order = np.argsort(systems.pool_index, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(systems.pool_index[order]) != 0])
        groups = np.split(order, starts[1:])
    else:
        groups = [np.array([k]) for k in range(count)]
    for group in groups:
        first = int(group[0])
        same = (np.array_equal(systems.values[group], np.broadcast_to(systems.values[first], (group.size, systems.nnz)))
                and np.array_equal(systems.rhs[group], np.broadcast_to(systems.rhs[first], (group.size, systems.n))))
        for k in ([first] if same else group.tolist()):
            result = gmres(systems.matrix(k), systems.rhs[k], tol=tol, max_iter=max_iter, restart=restart)
            if require_convergence and not result.converged:
                raise NotConvergedError(
                    f"system {k}: GMRES residual {result.residuals[-1]:.3g} after {result.iterations} iterations "
                    f"is not below tol={tol:g}"
                )
            targets = group if same else [k]
            x[targets] = result.x
            iterations[targets] = result.iterations
    return x, iterations
