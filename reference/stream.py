"""Float64 oracle for STREAM: the plain NumPy meaning of each operation."""

from __future__ import annotations

import numpy as np


def stream_oracle(op: str, arrays: dict[str, np.ndarray], scalar: float) -> np.ndarray:
    """The result of one STREAM operation on ``arrays`` (not modified)."""
    a, b, c = (np.asarray(arrays[k], dtype=np.float64) if k in arrays else None for k in "abc")
    if op == "copy":
        return a.copy()
    if op == "scale":
        return scalar * c
    if op == "add":
        return a + b
    if op == "triad":
        return b + scalar * c
    if op == "dot":
        # math.fsum-accurate would cost seconds at 2^28; pairwise summation
        # (np.add.reduce) errs by O(log n * eps), far inside the tolerance.
        return np.asarray(np.add.reduce(a * b), dtype=np.float64)
    if op == "nstream":
        return a + b + scalar * c
    raise KeyError(f"unknown STREAM operation {op!r}")
