"""GPU portable: the seed's three algorithms, one chosen by block size.

The rule (``choose``): by-block up to bs 5 (it cannot take larger blocks), row-per-thread
beyond. The seed kept by-column up to bs 15; with this package's row-per-thread (groups of
pow2(bs) lanes, x passed by shuffles, four blocks' loads in flight, evict-first value loads)
the H100 says otherwise. Measured there (a script, 3 rounds of 30 runs,
wall-clock medians, us, by-column / row-per-thread / cuSPARSE bsrmv): the 600 MiB sweep
matrices bs 6 262 / 244 / 367, 7 294 / 231 / 302, 8 239 / 233 / 261, 12 266 / 225 / 379,
16 243 / 222 / 269, 32 272 / 230 / 309; the stand-ins bmw7st_1 (bs 6) 68.5 / 63.1 / 93.0,
pwtk (6) 80.3 / 73.7 / 108.5, rm07r (7) 266 / 221 / 278. At bs 3 and 5 by-block wins on
the stand-ins: raefsky4 and gt01r stay in the 50 MB L2 (18.4 and 13.2 us, row-per-thread 25.5
and 17.1, whose evict-first loads give that up), and audikw_1's block rows are long (27 blocks;
asv, commit 25cb2f02: 291 us, row-per-thread 319). On the sweep matrices (15 blocks per block
row, 600 MiB) row-per-thread wins at bs 2-5 too (asv: 360 / 315 / 280 / 260 us, by-block 429 /
366 / 284 / 279), so the rule trails cuSPARSE there at bs 2 and 4: a rule by block size alone
cannot serve both; it follows the stand-ins, the seed's matrices.
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
