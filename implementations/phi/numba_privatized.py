"""CPU portable: the GPU's algorithm on the CPU (the paper [000]'s Experiment 2), made race-free.

One nonzero per iteration in file order, no sorting: SparTen's GPU Φ (Algorithm 3) run
by the CPU's threads. Numba has no atomics, so each thread adds into its own copy of Φ
(privatization, the race-free stand-in for the GPU's atomic adds) and the copies are
summed afterwards. Launch parameters: the thread count (0: Numba's current one, ``numba.get_num_threads()``).

Pressure points: ``no-atomics`` adds straight into the shared Φ (the race protection
removed, as the GPU's atomics become plain adds: the answer is then wrong), ``reuse``
reads B and Π at row 0 only, ``both`` does both.
"""

from __future__ import annotations

from typing import Any, Callable

import numba
import numpy as np

from ..backends import HOST
from ..tensor_inputs import TensorArrays
from .numba_segmented import nonzero_weight
from .variant import PhiVariant, thread_count


@numba.njit(parallel=True, cache=True)
def _privatized(rows, values, b, pi, epsilon, reuse, shared, private, out):
    nnz, rank = pi.shape[0], out.shape[1]
    parts = private.shape[0]
    for t in numba.prange(parts):
        mine = out if shared else private[t]
        if not shared:
            mine[:, :] = 0.0
        for j in range(t * nnz // parts, (t + 1) * nnz // parts):
            i = rows[j]
            bi = 0 if reuse else i
            pj = 0 if reuse else j
            s = nonzero_weight(b, pi, bi, pj, values[j], epsilon)
            for r in range(rank):
                mine[i, r] += s * pi[pj, r]
    if not shared:
        for i in numba.prange(out.shape[0]):
            for r in range(rank):
                total = 0.0
                for t in range(parts):
                    total += private[t, i, r]
                out[i, r] = total


class PhiNumbaPrivatized(PhiVariant):
    name = "numba-privatized"
    family = "portable"
    backend = HOST
    description = "Algorithm 3 on the CPU: one nonzero per iteration in file order, a private Φ per thread, summed"
    perturbations = ("none", "no-atomics", "reuse", "both")

    def __init__(self, perturbation: str = "none", threads: int = 0) -> None:
        super().__init__(perturbation)
        self.threads = int(threads)

    def arrange(self, tensor: TensorArrays, mode: int) -> tuple[Any, Any]:
        return tensor.idx[mode], tensor.values

    def bind(self, arranged: tuple[Any, Any], b: np.ndarray, pi: np.ndarray, epsilon: float,
             out: np.ndarray, perturbation: str) -> Callable[[], Any]:
        rows, values = arranged
        threads = self.threads or numba.get_num_threads()  # as set now (set_num_threads), not the pool size
        shared = perturbation in ("no-atomics", "both")
        private = np.empty((threads,) + out.shape if not shared else (threads, 0, 0))
        args = (rows, values, b, pi, float(epsilon), perturbation in ("reuse", "both"), shared, private, out)

        def call() -> None:
            if shared:
                out[...] = 0.0
            with thread_count(threads):
                _privatized(*args)

        return call
