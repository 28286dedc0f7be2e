"""Float64 oracles shared by the CP-APR solvers (``cpapr_mu``, ``cpapr_pdnr``): the starting
model and the objective.

CP-APR (Chi and Kolda 2012) fits a Poisson model M = [λ; A_1, ..., A_N] of rank R to a
sparse count tensor X by minimising the negative log-likelihood

    f(M) = Σ_all m_i  -  Σ_{x_i > 0} x_i log m_i,     m_i = Σ_r λ_r Π_n A_n(i_n, r),

whose first term, over every entry of the dense model, is Σ_r λ_r Π_n (Σ_i A_n(i, r)): the
model's entries are never formed. (pyttb's ``tt_loglikelihood`` returns -f.)
"""

from __future__ import annotations

import numpy as np

_CHUNK = 1 << 20  # nonzeros per block: bounds the nnz x R temporaries


def initial_model(dims: tuple[int, ...], rank: int, seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """A seeded starting model (λ, [A_1..A_N]): entries uniform in [0.5, 1.5) (never zero: a zero
    stays zero under multiplicative updates), each column scaled to sum 1, λ_r = 1 + r / R."""
    rng = np.random.default_rng([seed, 25])  # stream 25: the tensor uses the seed itself
    factors = []
    for dim in dims:
        a = rng.uniform(0.5, 1.5, (dim, rank))
        factors.append(a / a.sum(axis=0))
    weights = 1.0 + np.arange(rank, dtype=np.float64) / rank
    return weights, factors


def model_values(coords: np.ndarray, weights: np.ndarray, factors: list[np.ndarray]) -> np.ndarray:
    """m_i at the given nonzeros' coordinates (nnz x N, any integer type)."""
    out = np.empty(coords.shape[0])
    for start in range(0, coords.shape[0], _CHUNK):
        block = coords[start:start + _CHUNK]
        rows = np.broadcast_to(weights, (block.shape[0], weights.size)).copy()
        for mode, a in enumerate(factors):
            rows *= a[block[:, mode]]
        out[start:start + _CHUNK] = rows.sum(axis=1)
    return out


def poisson_objective(coords: np.ndarray, values: np.ndarray, weights: np.ndarray,
                      factors: list[np.ndarray]) -> float:
    """f(M) above, in float64 (lower is better); +inf where a nonzero's model value is not positive."""
    m = model_values(coords, weights, factors)
    if not np.all(m > 0):
        return float("inf")
    total = float(np.sum(weights * np.prod([a.sum(axis=0) for a in factors], axis=0)))
    return total - float(np.dot(values, np.log(m)))
