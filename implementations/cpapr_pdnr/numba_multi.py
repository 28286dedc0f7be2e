"""CPU portable: PDNR multi-kernel (paper [002]'s all-node kernel): rows with more nonzeros than the
threshold are solved one at a time, every core summing a share of the row's nonzeros (gradient,
Hessian, objective); the other rows as in ``numba_single``, one task per row.

Both kinds of row run ``row_numba.solve_row``, the one Numba row solver: a heavy row's with chunk
buffers, so that each sum over its nonzeros is one parallel call (per-chunk partial sums, then added
in chunk order) while its R-sized steps stay in the calling thread.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from .row_numba import solve_row, solve_rows
from .variant import DEFAULT_THRESHOLD, NumbaPdnrVariant

CHUNKS_PER_THREAD = 4


class NumbaMulti(NumbaPdnrVariant):
    name = "numba-multi"
    family = "portable"
    description = "Numba: rows over the threshold one at a time on every core, the rest one per thread (paper [002]'s multi-kernel)"

    def __init__(self, threshold: int = DEFAULT_THRESHOLD) -> None:
        super().__init__(threshold)
        self.kernel_seconds = {"all-node": 0.0, "team": 0.0}

    def prepare_solver(self, problem) -> None:
        super().prepare_solver(problem)
        self._split = []
        for m in self._host_modes:
            heavy = m.lengths() > self.threshold
            self._split.append((np.flatnonzero(heavy).astype(np.int64), np.flatnonzero(~heavy).astype(np.int64)))
        self._chunks = CHUNKS_PER_THREAD * numba.get_num_threads()

    def _solve_heavy(self, mode: int, heavy: np.ndarray, b: np.ndarray, steps: np.ndarray) -> None:
        arranged, chunks, rank = self._modes[mode], self._chunks, b.shape[1]
        parts = (np.empty((chunks, rank)), np.empty((chunks, rank, rank)), np.empty(chunks))
        for i in heavy:
            steps[i] = solve_row(self._pi, arranged.values, arranged.starts[i], arranged.starts[i + 1], b[i],
                                 self._settings, parts)

    def solve_mode(self, mode: int, b: np.ndarray, steps: np.ndarray) -> None:
        arranged = self._modes[mode]
        heavy, light = self._split[mode]
        start = time.perf_counter()
        if heavy.size:
            self._solve_heavy(mode, heavy, b, steps)
        middle = time.perf_counter()
        if light.size:
            solve_rows(self._pi, arranged.values, arranged.starts, light, b, self._settings, steps)
        # each kernel's seconds (paper [002]'s Figure 4 shares), summed over the variant's runs
        self.kernel_seconds["all-node"] += middle - start
        self.kernel_seconds["team"] += time.perf_counter() - middle
