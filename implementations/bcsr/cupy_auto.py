"""GPU portable: the seed's three algorithms, one chosen per matrix.

The rule (``choose``): by-block where it can take the blocks (bs <= 5) and either the matrix
stays in the L2 cache or its block rows are long (>= 20 blocks); row-per-thread otherwise.
Paper [001] kept by-column up to bs 15; the H100 measurements behind this rule are in this
folder's README.md.
"""

from __future__ import annotations

from typing import Any, Callable

from portabench.datasets.matrices import BlockMatrix

from ..gpu import cupy
from .cupy_byblock import CupyByBlock
from .cupy_rowperthread import CupyRowPerThread
from .variant import CupyBcsrVariant, CupyKernelVariant

BY_BLOCK_UP_TO = 5  # by-block's largest block size
LONG_ROWS = 20  # blocks per block row from which by-block's warp per block row pays (audikw_1: 27; the sweep: 15)


def choose(bs: int, values_bytes: int, blocks_per_row: float, l2_bytes: int) -> type[CupyKernelVariant]:
    """The algorithm for a matrix of block size ``bs``, ``values_bytes`` of blocks and ``blocks_per_row``
    blocks per block row on a GPU with ``l2_bytes`` of L2 cache."""
    if bs <= BY_BLOCK_UP_TO and (values_bytes <= l2_bytes or blocks_per_row >= LONG_ROWS):
        return CupyByBlock
    return CupyRowPerThread


class CupyAuto(CupyBcsrVariant):
    name = "cupy-auto"
    family = "portable"
    description = (f"the seed's GPU algorithm for the matrix: by-block (bs <= {BY_BLOCK_UP_TO}) where the matrix fits "
                   f"in L2 or its block rows hold >= {LONG_ROWS} blocks, row-per-thread otherwise")

    def bind(self, matrix: BlockMatrix, x: Any, y: Any) -> Callable[[], Any]:
        l2 = int(cupy().cuda.Device().attributes["L2CacheSize"])
        self.chosen = choose(matrix.bs, matrix.values_bytes, matrix.blocks_per_row, l2)()
        return self.chosen.bind(matrix, x, y)
