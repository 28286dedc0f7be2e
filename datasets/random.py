"""Seeded random arrays, generated in parallel chunks.

Benchmark inputs reach gigabytes (STREAM on a GPU: 3 x 2 GiB); one NumPy generator
is slow at that size, page faults included. Each fixed-size chunk gets its own child
of ``SeedSequence(seed)``, so the values depend only on (seed, n), never on the
number of threads that filled them.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .errors import DatasetError

CHUNK = 1 << 22


def uniform(n: int, seed: int | np.random.SeedSequence, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """``n`` float64 values uniform in [low, high), reproducible from ``seed``."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    out = np.empty(n, dtype=np.float64)
    chunks = -(-n // CHUNK)
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    children = root.spawn(chunks)

    def fill(k: int) -> None:
        part = out[k * CHUNK : (k + 1) * CHUNK]
        np.random.default_rng(children[k]).random(out=part)  # releases the GIL
        part *= high - low
        part += low

    if chunks <= 1:
        for k in range(chunks):
            fill(k)
    else:
        with ThreadPoolExecutor(max_workers=min(chunks, os.cpu_count() or 1)) as pool:
            list(pool.map(fill, range(chunks)))
    return out


SEED_MAX = 2**32 - 1  # 32 bits, as the fresh seeds `verify` draws and prints


def check_seed(seed: int, flag: str = "--seed") -> int:
    """``seed`` if it lies in 0..SEED_MAX, else a one-line error naming ``flag``: one rule for every command."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= SEED_MAX:
        raise DatasetError(f"{flag} must be an integer in 0..{SEED_MAX}, got {seed}")
    return int(seed)
