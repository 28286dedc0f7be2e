"""GPU portable: one of the portable algorithms, chosen per matrix.

The rule (``choose``), in order: for a matrix beyond the L2 cache whose blocks hold stored
zeros, the one of bit-mask blocks (5 <= bs <= 8), CSR16 (2-byte column offsets; rows within
65536 columns) and CSR of the true nonzeros that reads the fewest bytes, if fewer than the
blocks'. For a matrix in the L2: by-block where it can take the blocks (bs <= 5) and the block
rows are long (>= 20 blocks), then CSR where the blocks hold stored zeros (there fewer
multiplies pay, not fewer bytes), then by-block for other bs <= 5. Row-per-thread otherwise,
long block rows beyond the L2 included (there row-per-thread has overtaken by-block). Paper
[001] kept by-column up to bs 15; the measurements behind this rule (the six stand-ins at their
real size and replicated beyond the L2, the sweep at bs 2-6) are in this folder's
EXPERIMENTS.md.
"""

from __future__ import annotations

from typing import Any, Callable

from portabench.datasets.matrices import BlockMatrix

from ..gpu import cupy
from .cupy_bitmask import CupyBitmask
from .cupy_byblock import CupyByBlock
from .cupy_csr import CupyCsr
from .cupy_csr16 import CupyCsr16
from .cupy_rowperthread import CupyRowPerThread
from .definition import VALUE_BYTES, Shape, bcsr_bytes, bitmask_bytes, csr16_bytes, csr_bytes, fits_csr16, matrix_shape
from .variant import CupyBcsrVariant

BY_BLOCK_UP_TO = 5  # by-block's largest block size
BITMASK_FROM = 5  # bit-mask blocks from this bs (at bs 3, six nonzeros a block, the mask's 12 bytes cost more)
LONG_ROWS = 20  # blocks per block row from which by-block's warp per block row pays in the L2 (raefsky4: 32.8)


def choose(shape: Shape, l2_bytes: int) -> type[CupyBcsrVariant]:
    """The algorithm for a matrix of this shape (its fill included) on a GPU with ``l2_bytes`` of L2."""
    in_l2 = VALUE_BYTES * shape.nnzb * shape.bs**2 <= l2_bytes
    if shape.fill > 1 and not in_l2:
        reads: dict[type[CupyBcsrVariant], float] = {CupyCsr: csr_bytes(shape)}
        if BITMASK_FROM <= shape.bs <= CupyBitmask.max_bs:
            reads[CupyBitmask] = bitmask_bytes(shape)
        if fits_csr16(shape.span):
            reads[CupyCsr16] = csr16_bytes(shape)
        fewest = min(reads, key=reads.__getitem__)
        if reads[fewest] < bcsr_bytes(shape):
            return fewest
    if in_l2:
        if shape.bs <= BY_BLOCK_UP_TO and shape.nnzb >= LONG_ROWS * shape.block_rows:
            return CupyByBlock
        if shape.fill > 1:
            return CupyCsr
        if shape.bs <= BY_BLOCK_UP_TO:
            return CupyByBlock
    return CupyRowPerThread


class CupyAuto(CupyBcsrVariant):
    name = "cupy-auto"
    family = "portable"
    description = ("the portable GPU algorithm for the matrix: bit-mask blocks or CSR (2- or 4-byte indices) of the "
                   "true nonzeros (blocks with stored zeros, fewer bytes or in L2), by-block in L2 "
                   f"(bs <= {BY_BLOCK_UP_TO}), row-per-thread otherwise")

    def supports(self, problem) -> str | None:
        # CSR's 32-bit indices limit the matrices it takes; a matrix that large is never in L2.
        chosen = choose(matrix_shape(problem.matrix), l2_bytes=0)
        if issubclass(chosen, CupyCsr):
            return chosen().supports(problem)
        return super().supports(problem)

    def bind(self, matrix: BlockMatrix, x: Any, y: Any) -> Callable[[], Any]:
        self.chosen = choose(matrix_shape(matrix), int(cupy().cuda.Device().attributes["L2CacheSize"]))()
        return self.chosen.bind(matrix, x, y)
