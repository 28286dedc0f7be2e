"""The measured peak, one rule for the report and for ``portabench peaks --measure``.

A device's measured peak is the best median rate of any STREAM operation (copy to nstream) of any variant,
beyond the caches, over every run there is: ``measured_peaks``. Medians, as every rate rated against it is
one; every operation, as a kernel that writes no array it did not read (dot, nstream, a read-mostly kernel)
pays no write-allocate traffic that copy and triad pay uncounted on a CPU; every run, so that no STREAM
rate of the device is above it. The report reads the runs from a machine's asv results (the runs of every
commit); ``portabench peaks --measure`` times one run here, in seconds (``measure_stream_peaks``), the asv
run being the measurement of record.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from portabench.implementations import get_kernel
from portabench.implementations.verification import VariantUnavailable, prepare_verified, timed_call, timed_samples

PEAK_KERNEL = "stream"  # the kernel whose rates make the measured peak
REPEATS = 10  # runs of each operation and variant that ``measure_stream_peaks`` takes the median of


def measured_peaks(rates: pd.DataFrame, by: list[str]) -> pd.Series:
    """The measured peak of each group ``by`` (e.g. machine and device) of STREAM rates: ``rates`` has a row
    per run of an operation and variant, its median GB/s in ``gbs`` and ``in_cache`` (the in-cache rule,
    ``model.in_cache``, of its working set); rows in cache are left out (their rate may be the cache's).
    Named ``measured_peak_gbs``; a group with no row beyond the caches has none."""
    beyond = rates[~rates.in_cache.fillna(False).astype(bool)]
    return beyond.groupby(by).gbs.max().rename("measured_peak_gbs")


def measure_stream_peaks(ops: tuple[str, ...] | None = None) -> dict[str, float]:
    """Device -> measured peak on this machine now (``measured_peaks``), from ``REPEATS`` runs of each STREAM
    operation (``ops``; None: every one) of every available variant, verified, at the default sizes (beyond
    the caches by the in-cache rule)."""
    kernel = get_kernel(PEAK_KERNEL)
    rates: list[dict[str, object]] = []
    for cls, device in ((c, d) for c in kernel.variants for d in c.devices()):
        size = kernel.default_size(device)
        for op in ops or kernel.cases:
            try:
                variant = prepare_verified(kernel, cls.name, op, size)
            except VariantUnavailable:
                break
            times = [seconds for seconds, _ in timed_samples(lambda: timed_call(variant.run), REPEATS)]
            gbs = kernel.work(op, size).bytes / float(np.median(times)) / 1e9
            rates.append({"device": device, "gbs": gbs, "in_cache": False})
            del variant
    if not rates:
        return {}
    return {str(d): float(v) for d, v in measured_peaks(pd.DataFrame(rates), ["device"]).items()}
