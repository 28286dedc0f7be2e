"""CPU portable: PDNR single-kernel: Numba ``prange`` over a mode's rows, one row subproblem per
task, each solved start to end by one thread (paper [002]'s team-based kernel, a team being a thread).

The row solver is ``row_numba.solve_row`` (shared with ``numba_multi``), here with the sums over a
row's nonzeros run serially in the row's thread.
"""

from __future__ import annotations

import numpy as np

from .row_numba import solve_rows
from .variant import NumbaPdnrVariant


class NumbaSingle(NumbaPdnrVariant):
    name = "numba-single"
    family = "portable"
    description = "Numba prange over rows: each row subproblem solved by one thread (paper [002]'s single kernel)"

    def solve_mode(self, mode: int, b: np.ndarray, steps: np.ndarray) -> None:
        arranged = self._modes[mode]
        solve_rows(self._pi, arranged.values, arranged.starts, arranged.all_rows, b, self._settings, steps)
