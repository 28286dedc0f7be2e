"""A quick in-process STREAM measurement for ``portabench peaks --measure``.

The asv run is the measurement of record; this gives the same figure in seconds:
the best bandwidth of copy and triad over every available variant, per device.
"""

from __future__ import annotations

import time

from portabench.implementations import get_kernel
from portabench.implementations.verification import VariantUnavailable, prepare_verified

REPEATS = 10


def measure_stream_peaks(ops: tuple[str, ...] = ("copy", "triad")) -> dict[str, float]:
    """Device -> best measured STREAM GB/s on this machine (verified variants only)."""
    kernel = get_kernel("stream")
    best: dict[str, float] = {}
    for cls in kernel.variants:
        size = kernel.default_size(cls.device)
        for op in ops:
            try:
                variant = prepare_verified(kernel, cls.name, op, size)
            except VariantUnavailable:
                break
            fastest = float("inf")
            for _ in range(REPEATS):
                start = time.perf_counter()
                variant.run()
                fastest = min(fastest, time.perf_counter() - start)
            gbs = kernel.work(op, size).bytes / fastest / 1e9
            best[cls.device] = max(best.get(cls.device, 0.0), gbs)
            del variant
    return best
