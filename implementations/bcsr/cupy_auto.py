"""GPU portable: the seed's three algorithms, one chosen by block size.

The rule (``choose``): by-block up to bs 5 (it cannot take larger blocks), by-column at
bs 6, row-per-thread from bs 7. The seed kept by-column up to bs 15; with this package's
row-per-thread (groups of pow2(bs) lanes, loads ahead of the barrier) the H100 says
otherwise. Measured there (``.wheels/bcsr_gpu_bench.py``, best of 20, 600 MiB sweep-like
matrices, ms, by-block / by-column / row-per-thread): bs 2 0.422 / 0.496 / 0.429;
3 0.339 / 0.352 / 0.324; 4 0.274 / 0.276 / 0.275; 5 0.269 / 0.269 / 0.278; 6 - / 0.254 /
0.267; 7 - / 0.288 / 0.249; 8-15 row-per-thread 2-16 % faster than by-column; 16 - / 0.235 /
0.225; 24 - / 0.434 / 0.224; 32 - / 0.266 / 0.221. On the full-size stand-ins by-block beats
row-per-thread clearly at bs 3 (audikw_1 0.283 vs 0.338 ms: 27 blocks per block row, not
15) and bs 5 (gt01r), by-column beats it at bs 6 (bmw7st_1 0.060 vs 0.071, pwtk 0.073 vs
0.078), and row-per-thread wins at bs 7 (rm07r 0.236 vs 0.257).
"""

from __future__ import annotations

from typing import Any, Callable

from portabench.datasets.matrices import BlockMatrix

from .cupy_byblock import CupyByBlock
from .cupy_bycolumn import CupyByColumn
from .cupy_rowperthread import CupyRowPerThread
from .variant import CupyBcsrVariant, CupyKernelVariant

BY_BLOCK_UP_TO = 5
BY_COLUMN_UP_TO = 6


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
