"""GPU portable: CSR of the true nonzeros with 2-byte column offsets from each row's first column.

CSR reads 12 bytes a nonzero, a third of them the column index. Where every row's columns lie
within 65536 of each other (as in meshes numbered by neighbourhood: all six stand-ins), an
offset from the row's first column fits 16 bits, and a nonzero costs 10 bytes plus 4 a row for the
row's base column: the index compression of Kourtis, Goumas and Koziris, "Optimizing sparse
matrix-vector multiplication using index and value compression" (Computing Frontiers 2008),
without their delta coding. On raefsky4 (bs 3, blocks of six nonzeros in nine) that is fewer bytes
than bit-mask blocks can get to. The kernel is ``cupy-csr``'s, built for 2-byte indices (the
base column added once per row); the format is built once, untimed. Measured: this folder's
README.md.
"""

from __future__ import annotations

import numpy as np

from portabench.datasets.matrices import BlockMatrix

from ..model import PortabenchError
from .cupy_csr import CupyCsr
from .definition import INDEX_BYTES, VALUE_BYTES, BcsrProblem, Shape, matrix_shape
from .variant import csr_arrays

OFFSET_BYTES = 2
MAX_SPAN = 1 << (8 * OFFSET_BYTES)  # columns a row may cover: offsets 0..65535


def csr16_bytes(shape: Shape) -> float:
    """x, values, 2-byte column offsets, row pointers and base columns, each read once."""
    return (VALUE_BYTES * shape.n_padded + (VALUE_BYTES + OFFSET_BYTES) * shape.nnz
            + INDEX_BYTES * (shape.n + 1) + INDEX_BYTES * shape.n)


def takes(shape: Shape) -> bool:
    """Whether every row's offsets fit 16 bits (a row covers at most its block row's span)."""
    return shape.span is not None and shape.span <= MAX_SPAN


def csr16_arrays(matrix: BlockMatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(row_ptr int32, each row's first column int32, column offsets uint16, values float64)."""
    row_ptr, col, val = csr_arrays(matrix)
    lengths = np.diff(row_ptr)
    base = np.zeros(lengths.size, dtype=np.int32)
    filled = lengths > 0
    if col.size:
        base[filled] = np.minimum.reduceat(col, row_ptr[:-1][filled])
    offsets = col - np.repeat(base, lengths)
    if offsets.size and int(offsets.max()) >= MAX_SPAN:
        raise PortabenchError(f"a row covers {int(offsets.max()) + 1} columns; 2-byte offsets take {MAX_SPAN}")
    return row_ptr, base, offsets.astype(np.uint16), val


class CupyCsr16(CupyCsr):
    name = "cupy-csr16"
    description = ("CuPy RawModule: CSR of the true nonzeros with 2-byte column offsets from each row's first "
                   "column, a group of 4-32 lanes per row, loads in flight, values read once")

    def supports(self, problem: BcsrProblem) -> str | None:
        shape = matrix_shape(problem.matrix)
        if not takes(shape):
            return f"rows within {MAX_SPAN} columns (2-byte offsets); a block row here covers {shape.span}"
        return super().supports(problem)

    def host_arrays(self, matrix: BlockMatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return csr16_arrays(matrix)
