"""CPU vendor: PDNR with NumPy building blocks, every row of a mode at once: segment sums
(``np.add.reduceat``; CuPy: ``cupy.add.at``) for the gradient, Hessians and objectives, ``numpy.linalg.solve`` batched
over the rows' shifted R x R systems, the line search's trials over the rows still searching.

The same algorithm as ``reference.cpapr_pdnr`` (row by row) in array form: a bound variable's
row and column of the system are the identity's and its right side 0, so the batched solve
gives the free variables' direction; rows that converge leave the active set.
``cupy_batched`` runs this code with CuPy arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .variant import NumbaPdnrVariant

HESSIAN_CHUNK = 1 << 16  # nonzeros per block of the nnz x R x R outer products (52 MB at R = 10)


def segment_sums(xp: Any, rows: Any, data: Any, count: int) -> Any:
    """Σ of ``data``'s rows (nonzeros sorted by row) per row id in 0..count-1 (``rows``: each nonzero's)."""
    out = xp.zeros((count,) + data.shape[1:])
    if not data.shape[0]:
        return out
    if xp is not np:  # CuPy has no reduceat: its atomic scatter-add
        xp.add.at(out, rows, data)
        return out
    starts = xp.flatnonzero(xp.concatenate([xp.ones(1, dtype=bool), rows[1:] != rows[:-1]]))
    out[rows[starts]] = xp.add.reduceat(data, starts, axis=0)
    return out


def hessians(xp: Any, rows: Any, ups: Any, pi: Any, count: int) -> Any:
    """H_i = Σ_j ups_j π_j π_jᵀ per row, in blocks of nonzeros."""
    out = xp.zeros((count, pi.shape[1], pi.shape[1]))
    for lo in range(0, pi.shape[0], HESSIAN_CHUNK):
        hi = min(lo + HESSIAN_CHUNK, pi.shape[0])
        p = pi[lo:hi]
        outer = (ups[lo:hi, None] * p)[:, :, None] * p[:, None, :]
        out += segment_sums(xp, rows[lo:hi], outer, count)
    return out


class BatchedRows:
    """One mode's nonzeros restricted to a subset of its rows (``keep``: row ids), renumbered 0..k-1."""

    def __init__(self, xp: Any, pi: Any, values: Any, row_of: Any, keep: Any, count: int) -> None:
        self.xp = xp
        position = xp.full(count, -1, dtype=xp.int64)
        position[keep] = xp.arange(keep.shape[0])
        local = position[row_of]
        mask = local >= 0
        self.pi, self.x, self.rows, self.count = pi[mask], values[mask], local[mask], int(keep.shape[0])

    def subset(self, keep_local: Any) -> "BatchedRows":
        return BatchedRows(self.xp, self.pi, self.x, self.rows, keep_local, self.count)

    def dots(self, b: Any) -> Any:
        return self.xp.einsum("jr,jr->j", self.pi, b[self.rows])

    def log_sums(self, b: Any) -> Any:
        xp = self.xp
        v = self.dots(b)
        terms = xp.where(v > 0, self.x * xp.log(xp.where(v > 0, v, 1.0)), -xp.inf)
        return segment_sums(xp, self.rows, terms, self.count)


def solve_mode_batched(xp: Any, pi: Any, values: Any, row_of: Any, b: Any, steps: Any, s: Any) -> None:
    """Every row subproblem of a mode (B: I_n x R, updated in place; steps: Newton steps per row)."""
    count, rank = b.shape
    active = xp.arange(count)
    mu = xp.full(count, s.mu0)
    rows = BatchedRows(xp, pi, values, row_of, active, count)
    eye = xp.eye(rank)
    steps[:] = s.max_inner
    for step in range(s.max_inner):
        if active.shape[0] == 0:
            break
        bb = b[active]
        v = rows.dots(bb)
        phi = segment_sums(xp, rows.rows, (rows.x / xp.maximum(v, s.eps_div))[:, None] * rows.pi, rows.count)
        g = 1.0 - phi
        done = xp.max(xp.abs(xp.minimum(bb, g)), axis=1) < s.row_tol
        if bool(done.any()):
            steps[active[done]] = step
            going = xp.flatnonzero(~done)
            active, bb, g, phi = active[going], bb[going], g[going], phi[going]
            rows = rows.subset(going)
            if active.shape[0] == 0:
                break
            v = rows.dots(bb)
        # direction
        w = xp.linalg.norm(bb - xp.maximum(bb - g, 0.0), axis=1)
        bound = (bb <= xp.minimum(s.eps_active, w)[:, None]) & (g > 0)
        free = ~bound
        ups = rows.x / xp.maximum(v * v, s.eps_div)
        hess = hessians(xp, rows.rows, ups, rows.pi, rows.count)
        both = free[:, :, None] & free[:, None, :]
        shifted = xp.where(both, hess + mu[active][:, None, None] * eye, 0.0) + xp.where(bound[:, :, None], eye, 0.0)
        rhs = xp.where(free, -g, 0.0)
        d_free = xp.linalg.solve(shifted, rhs[:, :, None])[:, :, 0]
        d = xp.where(free, d_free, xp.where(bb != 0, -g, 0.0))
        predicted = xp.sum(d_free * g, axis=1) + 0.5 * xp.sum(d_free * (shifted @ d_free[:, :, None])[:, :, 0], axis=1)
        d = xp.where((predicted > 0)[:, None], -g, d)
        # line search, every row at once, rows leaving as they accept
        f_old = bb.sum(axis=1) - rows.log_sums(bb)
        k = active.shape[0]
        f_unit = xp.full(k, xp.inf)
        f_new = xp.full(k, xp.inf)
        trials = xp.full(k, s.max_backtrack + 1)
        b_new = bb.copy()
        total = xp.zeros(k)
        searching = xp.arange(k)
        sub = rows
        alpha = 1.0
        for trial in range(1, s.max_backtrack + 1):
            cand = xp.maximum(bb[searching] + alpha * d[searching], 0.0)
            descent = xp.sum(g[searching] * (cand - bb[searching]), axis=1)
            cand_total = cand.sum(axis=1)
            skipped = (descent > 0) | (cand_total < s.min_descent)
            f_cand = cand_total - sub.log_sums(cand)
            f_cand = xp.where(skipped, xp.inf, f_cand)
            b_new[searching], total[searching], f_new[searching] = cand, cand_total, f_cand
            if trial == 1:
                f_unit = f_cand.copy()
            accepted = f_cand <= f_old[searching] + s.sufficient_decrease * descent
            trials[searching[accepted]] = trial
            left = xp.flatnonzero(~accepted)
            if left.shape[0] == 0:
                break
            searching = searching[left]
            sub = sub.subset(left)
            alpha *= s.step_reduction
        f_unit = xp.where(xp.isinf(f_unit), f_old, f_unit)
        fallback = ((trials >= s.max_backtrack) & (f_new > f_old)) | (total < s.small_step)
        b_new = xp.where(fallback[:, None], xp.maximum(bb * phi, 0.0), b_new)
        f_unit = xp.where(fallback, f_old, f_unit)
        b[active] = b_new
        # damping
        m = mu[active]
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = (f_old - f_unit) / -predicted
        m = xp.where(predicted == 0, m * 10.0, xp.where(rho < 0.25, m * 3.5, xp.where(rho > 0.75, m * (2.0 / 7.0), m)))
        mu[active] = m


class NumpyBatched(NumbaPdnrVariant):
    name = "numpy-batched"
    family = "vendor"
    description = "NumPy: every row at once (reduceat segment sums, numpy.linalg.solve batched over rows); Π by np.take"

    def khatri_rao(self, mode: int, factors: list[np.ndarray]) -> np.ndarray:
        from ..pi.numpy_take import take_call
        from ..tensor_inputs import TensorArrays

        arranged = self._modes[mode]
        tensor = TensorArrays(arranged.idx, arranged.values, self._problem.tensor.dims)
        take_call(np, tensor, mode, factors, self._pi_out)()
        return self._pi_out

    def solve_mode(self, mode: int, b: np.ndarray, steps: np.ndarray) -> None:
        arranged = self._modes[mode]
        solve_mode_batched(np, self._pi, arranged.values, arranged.row_of, b, steps, self._problem.settings)
