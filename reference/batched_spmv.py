"""Float64 oracle for batched SpMV: ``y_k = alpha_k A_k x_k + beta_k y_k`` for N systems.

The N matrices share one CSR pattern (``row_ptr``, ``col_idx``; n rows, nnz entries)
and differ in their values; every array here is *system-major* (one row per system):
``values`` (N, nnz), ``x`` and ``y`` (N, n), ``alpha`` and ``beta`` (N,). The oracle is
plain vectorized NumPy: gather ``values * x[:, col_idx]``, then sum each row's run of
entries with ``np.add.reduceat``.

``np.add.reduceat`` cannot express an empty segment: for a start index equal to the next
one it returns the element *at* that index instead of 0, and a start equal to nnz is an
error. So only the non-empty rows are reduced (their starts strictly increase, and each
segment runs exactly to the next non-empty row's start, i.e. to its own end); empty rows
keep their sum of 0.

``componentwise_bound`` gives ``|alpha| |A| |x| + |beta| |y|``, the scale against which a
computed ``y`` is checked: a floating-point sum of L products errs by at most
``L u`` times the sum of their magnitudes (u = 2^-53), whatever the summation order,
while ``|y|`` itself can be tiny through cancellation.
"""

from __future__ import annotations

import numpy as np

_CHUNK = 1 << 22  # gathered products per chunk of systems: bounds the temporaries at 32 MiB


def _row_sums(row_ptr: np.ndarray, products: np.ndarray, n: int) -> np.ndarray:
    """Sum of ``products[:, row_ptr[i]:row_ptr[i + 1]]`` for each row i (0 for an empty row)."""
    sums = np.zeros((products.shape[0], n), dtype=np.float64)
    nonempty = np.flatnonzero(np.diff(row_ptr) > 0)
    if nonempty.size:
        sums[:, nonempty] = np.add.reduceat(products, row_ptr[nonempty], axis=1)
    return sums


def _apply(row_ptr: np.ndarray, col_idx: np.ndarray, values: np.ndarray, x: np.ndarray,
           y: np.ndarray, alpha: np.ndarray, beta: np.ndarray, magnitudes: bool) -> np.ndarray:
    row_ptr = np.asarray(row_ptr, dtype=np.int64)
    col_idx = np.asarray(col_idx, dtype=np.int64)
    values, x, y = (np.asarray(a, dtype=np.float64) for a in (values, x, y))
    alpha, beta = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (alpha, beta))
    count, n = y.shape
    nnz = col_idx.size
    if row_ptr.shape != (n + 1,) or row_ptr[0] != 0 or row_ptr[-1] != nnz:
        raise ValueError(f"row_ptr must have n + 1 = {n + 1} entries from 0 to nnz = {nnz}")
    if values.shape != (count, nnz) or x.shape != (count, n) or alpha.shape != (count,) or beta.shape != (count,):
        raise ValueError(
            f"shapes disagree: values {values.shape}, x {x.shape}, y {y.shape}, alpha {alpha.shape}, "
            f"beta {beta.shape}; expected ({count}, {nnz}), ({count}, {n}), ({count}, {n}), ({count},), ({count},)"
        )
    if magnitudes:
        values, x, y, alpha, beta = (np.abs(a) for a in (values, x, y, alpha, beta))
    out = np.empty((count, n), dtype=np.float64)
    step = max(1, _CHUNK // max(1, nnz))
    for k0 in range(0, count, step):
        k = slice(k0, k0 + step)
        products = values[k] * x[k][:, col_idx]
        out[k] = alpha[k, None] * _row_sums(row_ptr, products, n) + beta[k, None] * y[k]
    return out


def batched_spmv(row_ptr: np.ndarray, col_idx: np.ndarray, values: np.ndarray, x: np.ndarray,
                 y: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """``alpha[k] * A_k @ x[k] + beta[k] * y[k]`` for every system k, as a new (N, n) array.

    System-major inputs (see the module docstring); none is modified.
    """
    return _apply(row_ptr, col_idx, values, x, y, alpha, beta, magnitudes=False)


def componentwise_bound(row_ptr: np.ndarray, col_idx: np.ndarray, values: np.ndarray, x: np.ndarray,
                        y: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """``|alpha[k]| * |A_k| @ |x[k]| + |beta[k]| * |y[k]|``, shape (N, n): the magnitude that
    bounds the rounding error of each computed entry of ``batched_spmv``."""
    return _apply(row_ptr, col_idx, values, x, y, alpha, beta, magnitudes=True)
