"""Float64 oracle of CP-APR PDNR (Hansen, Plantenga and Kolda 2015; paper [002], Algorithms 1 and 2):
plain NumPy, one row subproblem at a time, written from the papers' description.

Outer iteration: for each mode n, shift the weights into B = A_n diag(λ), form Π (each
nonzero's product of the other factors' rows), solve every row subproblem

    min_{b >= 0}  f_row(b) = Σ_r b_r - Σ_j x_j log(b · π_j)       (j: the row's nonzeros)

by projected damped Newton, then λ = column sums of B and A_n = B diag(λ)^-1.

Row subproblem (``solve_row``), at most ``max_inner`` Newton steps:

- gradient g = 1 - φ, φ = Σ_j x_j π_j / max(b · π_j, ε); stop when the row's KKT violation
  max_r |min(b_r, g_r)| is below ``row_tol`` (checked before each step);
- active set (Bertsekas): r is bound where b_r <= min(ε_active, w) and g_r > 0, with
  w = ||b - P+(b - g)||; a bound variable at zero stays, a bound positive one moves along -g_r;
- free variables: d_F = -(H_F + μ I)^-1 g_F, H = Σ_j x_j / max((b · π_j)^2, ε) π_j π_jᵀ;
  predicted reduction p = d_F · g_F + d_Fᵀ (H_F + μ I) d_F / 2 (a positive p: d = -g);
- backtracking from α = 1, halving, at most ``max_backtrack`` trials, projected onto b >= 0;
  a trial that is no descent (g · (b_new - b) > 0) or nearly zero (Σ b_new < 1e-7) is skipped
  unevaluated; accept when f_row(b_new) <= f_row(b) + 1e-4 g · (b_new - b); if every trial failed
  and the last rose above f_row(b), or Σ b_new < 1e-7: the multiplicative step P+(b * φ);
- damping: ρ = (f_row(b) - f_row(unit step)) / -p; μ *= 10 if p = 0, 7/2 if ρ < 1/4, 2/7 if ρ > 3/4;
  μ starts at ``mu0`` for every row in every mode and outer iteration.

These are the constants of pyttb's ``tt_cp_apr_pdnr`` (Sandia's MATLAB CP-APR port), with its
``inexact=False`` (one row tolerance throughout). One difference: w uses the projected gradient
step P+(b - g) as the MATLAB code does (pyttb 1.8.6 writes (b - g)(b - [g > 0])); w only lowers
the active threshold below ε_active = 1e-8 when w is that small, i.e. at a row's solution.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_all_start_methods, get_context

import numpy as np

from .cpapr import poisson_objective


@dataclass(frozen=True)
class PdnrSettings:
    """PDNR's parameters: paper [002]'s configuration (10 inner steps, 10 backtracking trials) and pyttb's constants."""

    max_inner: int = 10
    max_backtrack: int = 10
    row_tol: float = 1e-4
    eps_div: float = 1e-10
    eps_active: float = 1e-8
    mu0: float = 1e-5
    step_reduction: float = 0.5
    sufficient_decrease: float = 1e-4
    min_descent: float = 1e-7  # a trial with Σ b_new below this is skipped
    small_step: float = 1e-7  # an accepted step with Σ b_new below this falls back to the multiplicative step


@dataclass
class PdnrResult:
    """The model after the outer iterations; per outer iteration the objective after it; the Newton
    steps of every row of every mode in the last outer iteration (``max_inner``: the cap, not converged)."""

    weights: np.ndarray
    factors: list[np.ndarray]
    objectives: list[float] = field(default_factory=list)
    steps: list[np.ndarray] = field(default_factory=list)


def row_objective(b: np.ndarray, x: np.ndarray, pi: np.ndarray) -> float:
    """f_row(b) (+inf where some b · π_j <= 0)."""
    v = pi @ b
    if np.any(v <= 0):
        return float("inf")
    return float(b.sum() - x @ np.log(v))


def row_gradient(b: np.ndarray, x: np.ndarray, pi: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(g, φ): the row objective's gradient 1 - φ."""
    phi = (x / np.maximum(pi @ b, eps)) @ pi
    return 1.0 - phi, phi


def row_kkt(b: np.ndarray, g: np.ndarray) -> float:
    """max_r |min(b_r, g_r)|: zero exactly at a KKT point of min f_row over b >= 0."""
    return float(np.max(np.abs(np.minimum(b, g))))


def _direction(b, g, x, pi, mu, s: PdnrSettings) -> tuple[np.ndarray, float]:
    w = np.linalg.norm(b - np.maximum(b - g, 0.0))
    bound = (b <= min(s.eps_active, w)) & (g > 0)
    free = ~bound
    d = np.where(bound & (b != 0), -g, 0.0)
    v = pi @ b
    ups = x / np.maximum(v * v, s.eps_div)
    pf = pi[:, free]
    shifted = (pf * ups[:, None]).T @ pf + mu * np.eye(int(free.sum()))
    gf = g[free]
    try:
        d[free] = np.linalg.solve(shifted, -gf)
    except np.linalg.LinAlgError:
        return -g, 0.0
    df = d[free]
    predicted = float(df @ gf + 0.5 * df @ shifted @ df)
    if predicted > 0:
        d = -g
    return d, predicted


def _line_search(b, d, g, phi, x, pi, s: PdnrSettings) -> tuple[np.ndarray, float, float]:
    """(b_new, f_row(b), f_row at the unit step or f_row(b) where that was skipped or failed)."""
    f_old = row_objective(b, x, pi)
    alpha, f_unit, f_new = 1.0, np.inf, np.inf
    trial = 1
    b_new = b
    while trial <= s.max_backtrack:
        b_new = np.maximum(b + alpha * d, 0.0)
        descent = float(g @ (b_new - b))
        skipped = descent > 0 or b_new.sum() < s.min_descent
        f_new = np.inf if skipped else row_objective(b_new, x, pi)
        if trial == 1:
            f_unit = f_new
        if f_new <= f_old + s.sufficient_decrease * descent:
            break
        alpha *= s.step_reduction
        trial += 1
    if np.isinf(f_unit):
        f_unit = f_old
    if (trial >= s.max_backtrack and f_new > f_old) or b_new.sum() < s.small_step:
        b_new = np.maximum(b * phi, 0.0)  # the multiplicative update: never increases f_row
        f_unit = f_old
    return b_new, f_old, f_unit


def solve_row(b: np.ndarray, x: np.ndarray, pi: np.ndarray, s: PdnrSettings = PdnrSettings()) -> tuple[np.ndarray, int]:
    """Projected damped Newton on one row subproblem from ``b``: (b, Newton steps taken); a row
    that took ``s.max_inner`` steps hit the cap (its KKT violation was never checked after it)."""
    b = np.array(b, dtype=np.float64)
    mu = s.mu0
    for step in range(s.max_inner):
        g, phi = row_gradient(b, x, pi, s.eps_div)
        if row_kkt(b, g) < s.row_tol:
            return b, step
        d, predicted = _direction(b, g, x, pi, mu, s)
        b, f_old, f_unit = _line_search(b, d, g, phi, x, pi, s)
        if predicted == 0:
            mu *= 10.0
        else:
            rho = (f_old - f_unit) / -predicted
            if rho < 0.25:
                mu *= 3.5
            elif rho > 0.75:
                mu *= 2.0 / 7.0
    return b, s.max_inner


def row_groups(rows: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(order, starts): the nonzeros sorted by row (stable) and each row's first position (count + 1)."""
    order = np.argsort(rows, kind="stable")
    starts = np.searchsorted(rows[order], np.arange(count + 1))
    return order, starts


def khatri_rao_rows(coords: np.ndarray, factors: list[np.ndarray], mode: int) -> np.ndarray:
    """Π: each nonzero's product of the other modes' factor rows (nnz x R)."""
    pi = np.ones((coords.shape[0], factors[0].shape[1]))
    for m, a in enumerate(factors):
        if m != mode:
            pi *= a[coords[:, m]]
    return pi


def solve_rows(b: np.ndarray, values: np.ndarray, pi: np.ndarray, starts: np.ndarray,
               settings: PdnrSettings) -> tuple[np.ndarray, np.ndarray]:
    """Every row of ``b`` by ``solve_row``: row i's nonzeros are ``values[starts[i]:starts[i + 1]]``
    (and those rows of ``pi``). Returns (the rows' solutions, their Newton steps)."""
    b = b.copy()
    steps = np.zeros(b.shape[0], dtype=np.int64)
    for i in range(b.shape[0]):
        row = slice(starts[i], starts[i + 1])
        b[i], steps[i] = solve_row(b[i], values[row], pi[row], settings)
    return b, steps


# Rows are independent, but a Python loop over them takes minutes at benchmark sizes (hundreds of
# thousands of rows): above this many rows they go to worker processes in blocks, each row still
# solved by ``solve_row`` on the same arrays, so the result does not depend on the split.
PARALLEL_ROWS = 4096
BLOCKS_PER_WORKER = 4


def _solve_mode(pool: ProcessPoolExecutor | None, b: np.ndarray, values: np.ndarray, pi: np.ndarray,
                starts: np.ndarray, settings: PdnrSettings) -> tuple[np.ndarray, np.ndarray]:
    if pool is None:
        return solve_rows(b, values, pi, starts, settings)
    rows = b.shape[0]
    # Blocks of about equal cost (a row's nonzeros, plus a fixed cost per row), so a skewed mode's
    # heavy rows do not all land in one block.
    cost = np.cumsum(np.diff(starts) + 64)
    blocks = (os.cpu_count() or 1) * BLOCKS_PER_WORKER
    edges = np.unique(np.concatenate([[0], np.searchsorted(cost, cost[-1] * np.arange(1, blocks) / blocks), [rows]]))
    futures = [pool.submit(solve_rows, b[lo:hi], values[starts[lo]:starts[hi]], pi[starts[lo]:starts[hi]],
                           starts[lo:hi + 1] - starts[lo], settings) for lo, hi in zip(edges[:-1], edges[1:])]
    parts = [f.result() for f in futures]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def pdnr(coords: np.ndarray, values: np.ndarray, weights: np.ndarray, factors: list[np.ndarray],
         outer: int, settings: PdnrSettings = PdnrSettings()) -> PdnrResult:
    """``outer`` PDNR outer iterations from (weights, factors); every slice must hold a nonzero."""
    weights = np.array(weights, dtype=np.float64)
    factors = [np.array(a, dtype=np.float64) for a in factors]
    groups = [row_groups(coords[:, m], a.shape[0]) for m, a in enumerate(factors)]
    result = PdnrResult(weights, factors)
    parallel = max(a.shape[0] for a in factors) >= PARALLEL_ROWS and (os.cpu_count() or 1) > 1
    # Forked where possible: a spawned worker would run the caller's main script again. The workers
    # only solve rows in NumPy, so a CUDA context or OpenMP runtime of the caller is never used in them.
    method = "fork" if "fork" in get_all_start_methods() else "spawn"
    pool = ProcessPoolExecutor(os.cpu_count(), mp_context=get_context(method)) if parallel else None
    try:
        for _ in range(outer):
            result.steps = []
            for mode, a in enumerate(factors):
                b = a * weights  # the weights shifted into mode n
                order, starts = groups[mode]
                pi = khatri_rao_rows(coords, factors, mode)[order]
                b, steps = _solve_mode(pool if a.shape[0] >= PARALLEL_ROWS else None, b, values[order], pi, starts,
                                       settings)
                weights = b.sum(axis=0)
                factors[mode] = b / np.where(weights > 0, weights, 1.0)  # a component zero in B stays zero
                result.steps.append(steps)
            result.objectives.append(poisson_objective(coords, values, weights, factors))
    finally:
        if pool is not None:
            pool.shutdown()
    result.weights, result.factors = weights, factors
    return result


def mode_kkt(coords: np.ndarray, values: np.ndarray, weights: np.ndarray, factors: list[np.ndarray],
             mode: int, eps_div: float = PdnrSettings.eps_div) -> np.ndarray:
    """Each row's KKT violation max_r |min(b_r, g_r)| of its subproblem in ``mode`` at the model
    (the weights shifted into that mode), computed over all rows at once."""
    b = factors[mode] * weights
    pi = khatri_rao_rows(coords, factors, mode)
    rows = coords[:, mode]
    v = np.einsum("jr,jr->j", b[rows], pi)
    phi = np.zeros_like(b)
    np.add.at(phi, rows, (values / np.maximum(v, eps_div))[:, None] * pi)
    return np.max(np.abs(np.minimum(b, 1.0 - phi)), axis=1)
