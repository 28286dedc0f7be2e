"""GPU portable: the seed's three algorithms, one chosen by block size.

The rule (``choose``): by-block up to bs 5 (it cannot take larger blocks), row-per-thread
beyond. Paper [001] kept by-column up to bs 15; the H100 measurements behind this rule are in
this folder's README.md.
"""

from __future__ import annotations

from typing import Any, Callable

from portabench.datasets.matrices import BlockMatrix

from .cupy_byblock import CupyByBlock
from .cupy_rowperthread import CupyRowPerThread
from .variant import CupyBcsrVariant, CupyKernelVariant

BY_BLOCK_UP_TO = 5


def choose(bs: int) -> type[CupyKernelVariant]:
    """The algorithm for block size ``bs``."""
    return CupyByBlock if bs <= BY_BLOCK_UP_TO else CupyRowPerThread


class CupyAuto(CupyBcsrVariant):
    name = "cupy-auto"
    family = "portable"
    description = f"the seed's GPU algorithm for the block size: by-block to bs {BY_BLOCK_UP_TO}, row-per-thread beyond"

    def bind(self, matrix: BlockMatrix, x: Any, y: Any) -> Callable[[], Any]:
        self.chosen = choose(matrix.bs)()
        return self.chosen.bind(matrix, x, y)
