"""GPU portable: CSR of the true nonzeros with 2-byte column offsets from each row's first column.

CSR reads 12 bytes a nonzero, a third of them the column index. CSR16 (``variant.csr16_arrays``,
built once, untimed) keeps an offset from the row's first column in 16 bits: 10 bytes a nonzero
plus 4 a row. On raefsky4 (bs 3, blocks of six nonzeros in nine) that is fewer bytes than bit-mask
blocks get to. The kernel is ``cupy-csr``'s, built for 2-byte indices (the base column added once
per row), whose loads there also bring the 256 bytes around each miss into L2. Measured: this
folder's EXPERIMENTS.md.
"""

from __future__ import annotations

import numpy as np

from portabench.datasets.matrices import BlockMatrix

from .cupy_csr import CupyCsr
from .definition import BcsrProblem
from .variant import csr16_arrays, csr16_limit


class CupyCsr16(CupyCsr):
    name = "cupy-csr16"
    description = ("CuPy RawModule: CSR of the true nonzeros with 2-byte column offsets from each row's first "
                   "column, a group of 4-32 lanes per row, loads in flight, values read once")

    def supports(self, problem: BcsrProblem) -> str | None:
        return csr16_limit(problem) or super().supports(problem)

    def kernel_arrays(self, matrix: BlockMatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return csr16_arrays(matrix)
