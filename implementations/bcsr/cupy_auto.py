"""GPU portable: the seed's three algorithms, one chosen by block size.

The rule (``choose``) is the seed's: by-block up to bs 5 (it cannot take larger blocks),
by-column up to bs 15, row-per-thread from bs 16 (where a block column fills half a warp
or more). To be confirmed on the H100 (``.wheels/bcsr_gpu_bench.py`` times all three).
"""

from __future__ import annotations

from typing import Any, Callable

from portabench.datasets.matrices import BlockMatrix

from .cupy_byblock import CupyByBlock
from .cupy_bycolumn import CupyByColumn
from .cupy_rowperthread import CupyRowPerThread
from .variant import CupyBcsrVariant, CupyKernelVariant

BY_BLOCK_UP_TO = 5
BY_COLUMN_UP_TO = 15


def choose(bs: int) -> type[CupyKernelVariant]:
    """The algorithm for block size ``bs``."""
    if bs <= BY_BLOCK_UP_TO:
        return CupyByBlock
    if bs <= BY_COLUMN_UP_TO:
        return CupyByColumn
    return CupyRowPerThread


class CupyAuto(CupyBcsrVariant):
    name = "cupy-auto"
    family = "portable"
    description = (f"the seed's GPU algorithm for the block size: by-block to bs {BY_BLOCK_UP_TO}, "
                   f"by-column to {BY_COLUMN_UP_TO}, row-per-thread beyond")

    def bind(self, matrix: BlockMatrix, x: Any, y: Any) -> Callable[[], Any]:
        self.chosen = choose(matrix.bs)()
        return self.chosen.bind(matrix, x, y)
