"""Float64 oracle for CP-APR's multiplicative-update (MU) solver (Chi and Kolda 2012, Algorithm 3;
paper 000's Algorithm 1 with the published code's KKT check and complementary-slackness offset).

From a model M = [λ; A_1..A_N] (columns of each A_n normalised to sum 1 first, λ absorbing the
sums), each outer iteration k = 0, 1, ... and each mode n:

1. offset: where k > 0, A_n(i, r) < κ_tol and Φ_n(i, r) > 1 (Φ_n from mode n's last inner
   iteration), A_n(i, r) += κ: an entry stuck at zero that the KKT conditions want larger;
2. B = A_n Λ, λ = 1;
3. Π (nnz x R): each nonzero's product of the other factors' rows (``reference.pi.pi_rows``);
4. up to l_max times: Φ = (X_(n) ⊘ max(B Π^T, ε)) Π (only at the nonzeros); the KKT violation
   max |min(B, 1 - Φ)|; below τ (``stoptol``) the mode has converged (stop, no update), else
   B = B * Φ;
5. λ = column sums of B, A_n = B Λ^{-1} (columns with λ_r = 0 left as they are).

The solve stops after ``outer`` iterations or once an outer iteration had no update in any mode.
The model is returned with its components in decreasing λ (a stable sort), as the published code
(Tensor Toolbox's ``cp_apr``, pyttb's ``cp_apr``) ends.

pyttb (1.8.6) tests Φ > 0 in step 1 where Chi and Kolda's paper and Tensor Toolbox's MATLAB code
test Φ > 1; this oracle follows the paper. The two differ only where an entry fell below κ_tol,
which never happens within a few iterations of a start whose entries are all of order 1 / I_n.

Written for clarity in plain NumPy: Φ's row sums by ``np.bincount``, one column at a time, sharing
no code with the variants. Nonzeros go in blocks to bound the gathered rows' memory; blocks run on
every core (a full-size GPU problem has 77 M nonzeros).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .pi import pi_rows

BLOCK = 1 << 20  # nonzeros per block of gathered rows (80 MiB at R = 10)
FLOOR = 2.0**-40  # factor entries below this fraction of their column's largest compare at that scale


@dataclass(frozen=True)
class MuParameters:
    """The algorithm's parameters (the published defaults)."""

    inner: int = 10  # l_max
    stoptol: float = 1e-4  # τ
    epsilon: float = 1e-10  # epsDivZero
    kappa: float = 1e-2
    kappatol: float = 1e-10
    # The offset's test on Φ: Φ > 1 in Chi and Kolda's paper and Tensor Toolbox; pyttb 1.8.6 tests
    # Φ > 0 (kept here only to check this oracle's offset against pyttb where it fires).
    offset_phi: float = 1.0


def phi_rows(rows: np.ndarray, values: np.ndarray, b: np.ndarray, pi: np.ndarray, epsilon: float) -> np.ndarray:
    """Φ (I_n x R): s_j = x_j / max(<B(i_j, :), Π(j, :)>, ε), Φ(i, :) = Σ_{j: i_j = i} s_j Π(j, :).
    Blocks of nonzeros are summed on every core (NumPy releases the GIL), then added in block order."""

    def block_sum(start: int) -> np.ndarray:
        block = slice(start, start + BLOCK)
        s = values[block] / np.maximum(np.einsum("jr,jr->j", b[rows[block]], pi[block]), epsilon)
        return np.stack([np.bincount(rows[block], weights=s * pi[block, r], minlength=b.shape[0])
                         for r in range(b.shape[1])], axis=1)

    out = np.zeros(b.shape)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for part in pool.map(block_sum, range(0, values.size, BLOCK)):
            out += part
    return out


def _normalize_columns(a: np.ndarray) -> np.ndarray:
    """Divide each column of ``a`` by its (nonnegative) sum where positive; return the sums."""
    sums = a.sum(axis=0)
    a /= np.where(sums > 0, sums, 1.0)
    return sums


def sorted_model(weights: np.ndarray, factors: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The model with its components in decreasing λ (stable)."""
    order = np.argsort(-np.asarray(weights), kind="stable")
    return np.asarray(weights)[order], [np.asarray(a)[:, order] for a in factors]


def canonical_model(weights: np.ndarray, factors: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The same model with each factor's columns summing to 1 (λ absorbing the sums), sorted as
    above: how a model with its weights elsewhere (pyttb returns them in the first factor) compares."""
    weights = np.array(weights, dtype=np.float64)
    factors = [np.array(a, dtype=np.float64) for a in factors]
    for a in factors:
        weights *= _normalize_columns(a)
    return sorted_model(weights, factors)


def model_error(weights: np.ndarray, factors: list[np.ndarray], ref_weights: np.ndarray,
                ref_factors: list[np.ndarray]) -> float:
    """The largest |entry - reference| / scale over λ and every factor entry: the scale is |reference|,
    for a factor entry at least ``FLOOR`` times its column's largest (an entry that small carries
    under 1e-12 of its component; MU drives such entries towards zero, through subnormal numbers
    whose relative precision is lost). NaN if any shape differs or any entry is NaN."""
    if len(factors) != len(ref_factors):
        return float("nan")
    pairs = [(np.atleast_2d(np.asarray(a, dtype=np.float64)), np.atleast_2d(np.asarray(b, dtype=np.float64)))
             for a, b in zip([weights, *factors], [ref_weights, *ref_factors])]
    worst = 0.0
    for out, ref in pairs:
        if out.shape != ref.shape or np.isnan(out).any():
            return float("nan")
        if ref.size == 0:
            continue
        scale = np.maximum(np.abs(ref), FLOOR * np.abs(ref).max(axis=0))
        diff = np.abs(out - ref)
        with np.errstate(invalid="ignore", divide="ignore"):
            err = np.where(diff == 0.0, 0.0, diff / np.maximum(scale, np.finfo(np.float64).tiny))
        worst = max(worst, float(np.nan_to_num(err, nan=np.inf).max()))
    return worst


def cp_apr_mu(coords: np.ndarray, values: np.ndarray, weights: np.ndarray, factors: list[np.ndarray],
              outer: int, parameters: MuParameters = MuParameters()) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """``outer`` MU iterations from the model (``weights``, ``factors``), which is not modified.

    Returns (λ, [A_1..A_N]) sorted as above, and the inner iterations run per (outer, mode)
    (a row of zeros after an early stop)."""
    coords = np.asarray(coords)
    values = np.asarray(values, dtype=np.float64)
    p = parameters
    weights = np.array(weights, dtype=np.float64)
    factors = [np.array(a, dtype=np.float64) for a in factors]
    order = len(factors)
    for a in factors:
        weights *= _normalize_columns(a)
    phis = [np.zeros_like(a) for a in factors]
    inner_counts = np.zeros((outer, order), dtype=np.int64)
    for k in range(outer):
        converged = True
        for n in range(order):
            a = factors[n]
            if k > 0:
                a[(phis[n] > p.offset_phi) & (a < p.kappatol)] += p.kappa
            a *= weights  # B
            weights = np.ones_like(weights)
            pi = pi_rows(coords, factors, n)
            rows = coords[:, n]
            for _ in range(p.inner):
                inner_counts[k, n] += 1
                phis[n] = phi_rows(rows, values, a, pi, p.epsilon)
                if np.max(np.abs(np.minimum(a, 1.0 - phis[n]))) < p.stoptol:
                    break
                converged = False
                a *= phis[n]
            weights = _normalize_columns(a)
        if converged:
            break
    weights, factors = sorted_model(weights, factors)
    return weights, factors, inner_counts
