"""Many small sparse linear systems sharing one sparsity pattern: the batched GMRES input.

Kokkos Kernels' batched solvers (paper [004]) take N systems ``A_k x_k = b_k`` of the same
size n whose matrices share one CSR pattern (``row_ptr``, ``col_idx``) and differ only
in their values, stored as an N x nnz array (one row per system), with the right-hand
sides as an N x n array. ``BatchedSystems`` holds exactly that, checked once on
construction so that every kernel and the oracle can trust it: a 0-based pattern with
sorted, unique columns and the diagonal in every row (Jacobi preconditioning divides by
it, so it must also be nonzero in every system), finite values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import DatasetError

INDEX = np.int32  # n and nnz are small (n <= a few thousand): 32-bit indices as Kokkos Kernels uses


def _first_bad(mask: np.ndarray) -> int:
    """Index of the first True in ``mask`` (which has one)."""
    return int(np.flatnonzero(mask)[0])


@dataclass(frozen=True, eq=False)
class BatchedSystems:
    """N systems of size n: ``values[k]`` and ``rhs[k]`` are system k, on the shared CSR pattern.

    ``pool_index[k]``, when given, names the distinct matrix system k was tiled from
    (stand-ins are built from a small pool of matrices, as in the Kokkos Kernels runs).
    """

    n: int
    row_ptr: np.ndarray  # (n + 1,) int32, 0-based
    col_idx: np.ndarray  # (nnz,) int32, sorted within each row
    values: np.ndarray  # (N, nnz) float64
    rhs: np.ndarray  # (N, n) float64
    pool_index: np.ndarray | None = None  # (N,) int32

    def __post_init__(self) -> None:
        n = self.n
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise DatasetError(f"batched systems: n must be a positive integer, got {n!r}")
        n = int(n)
        row_ptr = self._index_array(self.row_ptr, "row_ptr")
        col_idx = self._index_array(self.col_idx, "col_idx")
        if row_ptr.shape != (n + 1,):
            raise DatasetError(f"batched systems: row_ptr has shape {row_ptr.shape}, expected ({n + 1},) for n={n}")
        if row_ptr[0] != 0 or np.any(np.diff(row_ptr) < 0) or row_ptr[-1] != col_idx.size:
            raise DatasetError(
                f"batched systems: row_ptr must start at 0, never decrease and end at nnz={col_idx.size} "
                f"(it starts at {row_ptr[0]} and ends at {row_ptr[-1]})"
            )
        if col_idx.size and (col_idx.min() < 0 or col_idx.max() >= n):
            bad = _first_bad((col_idx < 0) | (col_idx >= n))
            raise DatasetError(f"batched systems: column index {col_idx[bad]} outside 0..{n - 1}")
        rows = np.repeat(np.arange(n), np.diff(row_ptr))
        # Within a row, columns must strictly increase (sorted, no duplicates).
        same_row = rows[1:] == rows[:-1]
        if np.any(same_row & (col_idx[1:] <= col_idx[:-1])):
            bad = _first_bad(same_row & (col_idx[1:] <= col_idx[:-1]))
            what = "duplicate" if col_idx[bad + 1] == col_idx[bad] else "unsorted"
            raise DatasetError(f"batched systems: {what} column {col_idx[bad + 1]} in row {rows[bad]}")
        is_diag = col_idx == rows
        has_diag = np.zeros(n, dtype=bool)
        has_diag[rows[is_diag]] = True
        if not has_diag.all():
            raise DatasetError(
                f"batched systems: row {_first_bad(~has_diag)} has no diagonal entry in the pattern "
                "(Jacobi preconditioning needs every diagonal)"
            )

        values = np.ascontiguousarray(self.values, dtype=np.float64)
        rhs = np.ascontiguousarray(self.rhs, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != col_idx.size or values.shape[0] < 1:
            raise DatasetError(
                f"batched systems: values has shape {values.shape}, expected (N, {col_idx.size}) with N >= 1"
            )
        count = values.shape[0]
        if rhs.shape != (count, n):
            raise DatasetError(f"batched systems: rhs has shape {rhs.shape}, expected ({count}, {n})")
        for name, arr in (("values", values), ("rhs", rhs)):
            # A NaN or inf anywhere makes the sum non-finite: one cheap pass over gigabytes,
            # then the element-wise search only when there is something to find (or an overflow).
            if not np.isfinite(arr.sum()):
                finite = np.isfinite(arr)
                if not finite.all():
                    k, j = np.unravel_index(_first_bad(~finite.ravel()), arr.shape)
                    raise DatasetError(f"batched systems: {name} of system {k} holds {arr[k, j]} (entry {j})")
        diag = values[:, is_diag]  # (N, n): columns in row order, one diagonal per row
        if np.any(diag == 0.0):
            k, i = np.unravel_index(_first_bad((diag == 0.0).ravel()), diag.shape)
            raise DatasetError(
                f"batched systems: system {k} has a zero diagonal in row {i} (Jacobi preconditioning divides by it)"
            )

        pool = self.pool_index
        if pool is not None:
            pool = self._index_array(pool, "pool_index")
            if pool.shape != (count,) or (count and pool.min() < 0):
                raise DatasetError(
                    f"batched systems: pool_index must hold {count} non-negative integers, got shape {pool.shape}"
                )
        for name, arr in (("n", n), ("row_ptr", row_ptr), ("col_idx", col_idx), ("values", values),
                          ("rhs", rhs), ("pool_index", pool)):
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "_diag_pos", np.flatnonzero(is_diag))

    @staticmethod
    def _index_array(arr: object, name: str) -> np.ndarray:
        a = np.asarray(arr)
        if a.ndim != 1:
            raise DatasetError(f"batched systems: {name} must be one-dimensional, got shape {a.shape}")
        if a.size and not np.issubdtype(a.dtype, np.integer):
            if not np.all(np.asarray(a, dtype=np.float64) == np.round(np.asarray(a, dtype=np.float64))):
                raise DatasetError(f"batched systems: {name} must hold integers")
        if a.size and (np.abs(a.astype(np.int64)).max() > np.iinfo(INDEX).max):
            raise DatasetError(f"batched systems: {name} does not fit 32-bit indices")
        return np.ascontiguousarray(a, dtype=INDEX)

    # -- sizes -----------------------------------------------------------------------
    @property
    def num_systems(self) -> int:
        """N, the number of systems."""
        return int(self.values.shape[0])

    @property
    def nnz(self) -> int:
        """Stored entries per matrix (the shared pattern's size)."""
        return int(self.col_idx.size)

    @property
    def density(self) -> float:
        """nnz / n^2."""
        return self.nnz / (self.n * self.n)

    @property
    def pool_size(self) -> int | None:
        """Number of distinct pool matrices the systems were tiled from (None if not tiled)."""
        return None if self.pool_index is None else int(self.pool_index.max()) + 1

    @property
    def diagonal_positions(self) -> np.ndarray:
        """Index into a row of ``values`` of each row's diagonal entry, shape (n,)."""
        return self._diag_pos  # type: ignore[attr-defined]

    def describe(self) -> dict[str, object]:
        """Measured facts, named like the registry's published ones."""
        diag = np.abs(self.diagonal())
        return {
            "n": self.n, "nnz": self.nnz, "density_percent": round(100 * self.density, 2), "N": self.num_systems,
            "pool": self.pool_size, "nnz_per_row": f"{np.diff(self.row_ptr).min()}..{np.diff(self.row_ptr).max()}",
            "diagonal_decades": round(float(np.log10(diag.max() / diag.min())), 1),
            "values_MiB": round(self.values.nbytes / 2**20, 2),
        }

    # -- views of one system ---------------------------------------------------------
    def diagonal(self) -> np.ndarray:
        """Diagonals of all systems, shape (N, n) (what a Jacobi preconditioner inverts)."""
        return self.values[:, self.diagonal_positions]

    def matrix(self, i: int) -> sp.csr_array:
        """System i's matrix as a SciPy CSR array (its data is a copy)."""
        return sp.csr_array((self.values[i].copy(), self.col_idx, self.row_ptr), shape=(self.n, self.n))

    def dense(self, i: int) -> np.ndarray:
        """System i's matrix as a dense (n, n) array."""
        out = np.zeros((self.n, self.n))
        rows = np.repeat(np.arange(self.n), np.diff(self.row_ptr))
        out[rows, self.col_idx] = self.values[i]
        return out

    def pattern(self) -> sp.csr_array:
        """The shared sparsity pattern as a CSR array of ones."""
        return sp.csr_array((np.ones(self.nnz), self.col_idx, self.row_ptr), shape=(self.n, self.n))

    def __repr__(self) -> str:
        pool = f", pool={self.pool_size}" if self.pool_index is not None else ""
        return (f"BatchedSystems(N={self.num_systems}, n={self.n}, nnz={self.nnz}, "
                f"density={100 * self.density:.2f} %{pool})")


def random_systems(rng: np.random.Generator | int, n: int, count: int, density: float = 0.3) -> BatchedSystems:
    """``count`` distinct random systems of size n on one random pattern (``density`` of n^2,
    full diagonal): well conditioned once Jacobi-preconditioned (off-diagonal sums well below
    the diagonal), but with rows scaled over six decades so that unpreconditioned GMRES
    struggles, as with the chemistry Jacobians. For tests and ``portabench verify``."""
    rng = np.random.default_rng(rng)
    if n < 1 or count < 1 or not 0 < density <= 1:
        raise DatasetError(f"random systems need n >= 1, count >= 1 and 0 < density <= 1; got {n}, {count}, {density}")
    mask = rng.random((n, n)) < density
    np.fill_diagonal(mask, True)
    rows, cols = np.nonzero(mask)  # row-major, sorted columns
    row_ptr = np.r_[0, np.cumsum(mask.sum(axis=1))]
    values = rng.standard_normal((count, rows.size)) * 0.5 / np.sqrt(n * density)
    values[:, rows == cols] = 1.0 + rng.random((count, n))
    scale = 10.0 ** rng.uniform(-3, 3, (count, n))
    return BatchedSystems(n=n, row_ptr=row_ptr, col_idx=cols, values=values * scale[:, rows],
                          rhs=rng.standard_normal((count, n)))
