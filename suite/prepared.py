"""Prepared, verified state shared by the benchmark classes.

asv_runner (>= 0.3) calls ``setup`` before every timed call, so preparation (input
generation, transfer, compilation, the oracle check) is done once per parameter
combination and kept. Only one prepared problem is kept at a time: at benchmark
sizes a second one could exhaust host or GPU memory.
"""

from __future__ import annotations

from portabench.implementations import Variant, get_kernel
from portabench.implementations.verification import VariantUnavailable, prepare_verified

_current: dict[tuple, Variant] = {}


def prepared(kernel: str, variant: str, case: str, size: int) -> Variant:
    """The verified variant for these parameters; NotImplementedError (asv: skipped) if unavailable."""
    key = (kernel, variant, case, size)
    if key not in _current:
        _current.clear()
        try:
            _current[key] = prepare_verified(get_kernel(kernel), variant, case, size)
        except VariantUnavailable as exc:
            raise NotImplementedError(str(exc)) from None
    return _current[key]
