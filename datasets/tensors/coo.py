"""The in-memory sparse tensor: coordinate (COO) storage, 0-based, float64 values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DatasetError

INT64_MAX = np.iinfo(np.int64).max


def linear_keys(columns: np.ndarray, dims: tuple[int, ...]) -> np.ndarray | None:
    """Row-major linear index of each row of ``columns`` (nnz x k), or None if it would overflow int64."""
    if int(np.prod([max(d, 1) for d in dims], dtype=object)) > INT64_MAX:
        return None
    if columns.shape[1] == 0:
        return np.zeros(columns.shape[0], dtype=np.int64)
    return np.ravel_multi_index(tuple(columns.T), dims).astype(np.int64, copy=False)


def sort_order(columns: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """The permutation that sorts rows of ``columns`` lexicographically (first column slowest)."""
    keys = linear_keys(columns, dims)
    if keys is not None:
        return np.argsort(keys, kind="stable")
    return np.lexsort(columns.T[::-1])


def group_sizes(columns: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """Sizes of the groups of identical rows of ``columns``."""
    if columns.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    ordered = columns[sort_order(columns, dims)]
    starts = np.flatnonzero(np.r_[True, np.any(ordered[1:] != ordered[:-1], axis=1)])
    return np.diff(np.r_[starts, ordered.shape[0]])


def _column_reduce(ufunc: np.ufunc, coords: np.ndarray, fold: int = 64) -> np.ndarray:
    """``ufunc.reduce(coords, axis=0)`` of an (nnz, N) array, fast: NumPy reduces 3 to 5 columns
    row by row (slow at tens of millions of nonzeros); ``fold`` rows side by side make the rows long."""
    whole = coords.shape[0] - coords.shape[0] % fold
    if whole == 0:
        return ufunc.reduce(coords, axis=0)
    n = coords.shape[1]
    out = ufunc.reduce(ufunc.reduce(coords[:whole].reshape(-1, n * fold), axis=0).reshape(fold, n), axis=0)
    return ufunc(out, ufunc.reduce(coords[whole:], axis=0)) if whole < coords.shape[0] else out


@dataclass(frozen=True, eq=False)
class SparseTensor:
    """An order-N sparse tensor: ``coords`` (nnz x N, int64, 0-based) and ``values`` (nnz, float64)."""

    dims: tuple[int, ...]
    coords: np.ndarray
    values: np.ndarray

    def __post_init__(self) -> None:
        dims = tuple(int(d) for d in self.dims)
        coords = np.ascontiguousarray(self.coords, dtype=np.int64)
        values = np.ascontiguousarray(self.values, dtype=np.float64)
        if coords.ndim != 2 or coords.shape[1] != len(dims):
            raise DatasetError(f"coords must be nnz x {len(dims)}, got shape {coords.shape}")
        if values.shape != (coords.shape[0],):
            raise DatasetError(f"values must have shape ({coords.shape[0]},), got {values.shape}")
        if len(dims) < 1 or min(dims) < 1:
            raise DatasetError(f"dims must be positive, got {dims}")
        if coords.size:
            low, high = _column_reduce(np.minimum, coords), _column_reduce(np.maximum, coords)
            for m, (lo, hi, d) in enumerate(zip(low, high, dims)):
                if lo < 0 or hi >= d:
                    raise DatasetError(f"mode {m} index out of range [0, {d}): min {lo}, max {hi}")
        if not np.all(np.isfinite(values)):
            raise DatasetError("tensor values contain NaN or infinity")
        object.__setattr__(self, "dims", dims)
        object.__setattr__(self, "coords", coords)
        object.__setattr__(self, "values", values)

    @property
    def order(self) -> int:
        return len(self.dims)

    @property
    def nnz(self) -> int:
        return int(self.values.shape[0])

    def slice_counts(self, mode: int) -> np.ndarray:
        """Nonzeros in each slice of ``mode`` (length ``dims[mode]``, zeros included)."""
        return np.bincount(self.coords[:, mode], minlength=self.dims[mode])

    def fiber_lengths(self, mode: int = -1) -> np.ndarray:
        """Nonzeros in each nonempty mode-``mode`` fiber (all other indices fixed)."""
        mode = mode % self.order
        others = [m for m in range(self.order) if m != mode]
        return group_sizes(self.coords[:, others], tuple(self.dims[m] for m in others))

    def duplicate_count(self) -> int:
        """How many nonzeros repeat an earlier coordinate."""
        return self.nnz - len(group_sizes(self.coords, self.dims))

    def sorted(self) -> "SparseTensor":
        """The same tensor with nonzeros in lexicographic coordinate order."""
        order = sort_order(self.coords, self.dims)
        return SparseTensor(self.dims, self.coords[order], self.values[order])

    def equals(self, other: "SparseTensor") -> bool:
        """Same dims and the same (coordinate, value) set, in any order."""
        if self.dims != other.dims or self.nnz != other.nnz:
            return False
        a, b = self.sorted(), other.sorted()
        return bool(np.array_equal(a.coords, b.coords) and np.array_equal(a.values, b.values))
