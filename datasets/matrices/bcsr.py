"""Block-CSR (BCSR) matrices: a square sparse matrix cut into dense ``bs x bs`` blocks.

The BCSR SpMV kernel (paper [001]) stores every block that holds at least one stored entry
as a dense ``bs x bs`` tile, so its work depends on the block size: ``fill`` = entries
stored in blocks / true nonzeros is the price of the block layout.

When ``n`` is not a multiple of ``bs`` (bmw7st_1 and pwtk at bs=6) the matrix is padded
to ``n_padded = block_rows * bs``: the padded rows and columns are empty (all zero,
no diagonal). An SpMV then works on zero-padded vectors: ``x`` is extended with zeros
to ``n_padded`` (``padded_vector``) and the first ``n`` entries of ``y`` are the answer
(``unpadded``); the padded entries of ``y`` are zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import DatasetError


@dataclass(frozen=True, eq=False)
class BlockMatrix:
    """A square ``n x n`` matrix in BCSR form.

    ``bsr`` has shape ``(n_padded, n_padded)`` and blocksize ``(bs, bs)``; it holds the
    full matrix (both triangles, also when ``symmetric``: the mark only says that the
    matrix equals its transpose, so that it can be written as one triangle).
    """

    bsr: sp.bsr_array
    n: int
    bs: int
    symmetric: bool = False

    def __post_init__(self) -> None:
        if self.bsr.blocksize != (self.bs, self.bs):
            raise DatasetError(f"BlockMatrix: blocksize {self.bsr.blocksize} is not ({self.bs}, {self.bs})")
        n_padded = math.ceil(self.n / self.bs) * self.bs
        if self.bsr.shape != (n_padded, n_padded):
            raise DatasetError(f"BlockMatrix: shape {self.bsr.shape} is not ({n_padded}, {n_padded}) for n={self.n}")

    @property
    def n_padded(self) -> int:
        return self.bsr.shape[0]

    @property
    def block_rows(self) -> int:
        return self.n_padded // self.bs

    @property
    def nnzb(self) -> int:
        """Stored blocks (of the full matrix)."""
        return int(self.bsr.indptr[-1])

    @property
    def nnzb_lower(self) -> int:
        """Stored blocks on or below the block diagonal: the count of a stored triangle."""
        rows = np.repeat(np.arange(self.block_rows), np.diff(self.bsr.indptr))
        return int(np.count_nonzero(self.bsr.indices[: self.nnzb] <= rows))

    @property
    def blocks_per_row(self) -> float:
        """Mean stored blocks per block row."""
        return self.nnzb / self.block_rows

    @property
    def nnz(self) -> int:
        """True nonzeros (the zeros stored inside blocks not counted)."""
        return int(np.count_nonzero(self.bsr.data[: self.nnzb]))

    @property
    def fill(self) -> float:
        """Entries stored in blocks over true nonzeros (1.0: every block is dense)."""
        return self.nnzb * self.bs * self.bs / max(self.nnz, 1)

    @property
    def values_bytes(self) -> int:
        """Bytes of the stored block values."""
        return self.nnzb * self.bs * self.bs * self.bsr.data.itemsize

    def describe(self) -> dict[str, Any]:
        """Measured facts, named like the registry's published ones (``nnzb_lower``: stored-triangle count)."""
        return {
            "n": self.n, "bs": self.bs, "block_rows": self.block_rows, "padded": self.n_padded != self.n,
            "nnz": self.nnz, "nnzb": self.nnzb, "nnzb_lower": self.nnzb_lower,
            "blocks_per_row": round(self.blocks_per_row, 2),
            "blocks_per_row_lower": round(self.nnzb_lower / self.block_rows, 2),
            "fill": round(self.fill, 3), "symmetric": self.symmetric,
            "values_MiB": round(self.values_bytes / 2**20, 2),
        }

    def padded_vector(self, x: np.ndarray) -> np.ndarray:
        """``x`` (length ``n``) extended with zeros to ``n_padded``, for an SpMV with ``bsr``."""
        x = np.asarray(x)
        if x.shape[0] != self.n:
            raise DatasetError(f"vector of length {x.shape[0]} for a matrix of size {self.n}")
        out = np.zeros((self.n_padded,) + x.shape[1:], dtype=np.result_type(x.dtype, np.float64))
        out[: self.n] = x
        return out

    def unpadded(self, y: np.ndarray) -> np.ndarray:
        """The first ``n`` entries of a padded SpMV result."""
        return np.asarray(y)[: self.n]

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """``A @ x`` for ``x`` of length ``n`` (through scipy's BSR product: a reference, not a benchmark)."""
        return self.unpadded(self.bsr @ self.padded_vector(x))

    def to_csr(self) -> sp.csr_array:
        """The true ``n x n`` matrix in CSR, without padding or the zeros stored in blocks."""
        csr = sp.csr_array(self.bsr.tocsr())
        csr.eliminate_zeros()
        n = self.n
        if n < self.n_padded:
            if csr.indptr[n] == csr.nnz and (csr.nnz == 0 or int(csr.indices.max()) < n):
                # The padding holds no nonzero: drop its rows and shape, not slice columns (which
                # copies every entry through a mask).
                csr = sp.csr_array((csr.data, csr.indices, csr.indptr[: n + 1]), shape=(n, n))
            else:
                csr = sp.csr_array(csr[:n, :n])
        csr.sort_indices()
        return csr

    def lower_triangle(self) -> "BlockMatrix":
        """The lower triangle (entries with row >= col) in BCSR at the same block size.

        A symmetric Matrix Market file stores only this triangle; the paper's block
        counts for the symmetric SuiteSparse matrices are those of this triangle.
        """
        return to_bcsr(sp.tril(self.to_csr(), format="csr"), self.bs)


def _check_bs(bs: Any) -> int:
    if isinstance(bs, bool) or not isinstance(bs, (int, np.integer)) or bs < 1:
        raise DatasetError(f"block size must be an integer >= 1, not {bs!r}")
    return int(bs)


def to_bcsr(matrix: Any, bs: int, *, symmetric: bool = False) -> BlockMatrix:
    """Convert a square matrix (scipy sparse or dense) to BCSR with ``bs x bs`` blocks.

    Every block holding a stored entry is kept (explicitly stored zeros count, as they do
    in any BCSR conversion of the pattern). ``n`` not a multiple of ``bs`` is padded with
    empty rows and columns (see the module docstring). ``symmetric`` only marks the
    result (``BlockMatrix.symmetric``); it is not checked here.
    """
    bs = _check_bs(bs)
    if not sp.issparse(matrix):
        matrix = np.asarray(matrix)
        if matrix.ndim != 2:
            raise DatasetError(f"expected a 2-D matrix, got an array of shape {matrix.shape}")
    csr = sp.csr_array(matrix, dtype=np.float64)
    n, m = csr.shape
    if n != m:
        raise DatasetError(f"BCSR needs a square matrix, not {n}x{m}")
    if n == 0:
        raise DatasetError("BCSR of an empty (0x0) matrix")
    csr.sum_duplicates()
    n_padded = math.ceil(n / bs) * bs
    if n_padded != n:
        indptr = np.concatenate([csr.indptr, np.full(n_padded - n, csr.indptr[-1], dtype=csr.indptr.dtype)])
        csr = sp.csr_array((csr.data, csr.indices, indptr), shape=(n_padded, n_padded))
    bsr = sp.bsr_array(csr.tobsr(blocksize=(bs, bs)))
    bsr.sort_indices()
    return BlockMatrix(bsr=bsr, n=n, bs=bs, symmetric=symmetric)
