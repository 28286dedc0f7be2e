"""Prepared, verified state shared by the benchmark classes.

asv_runner (>= 0.3) calls ``setup`` before every timed call, so preparation (input
generation, transfer, compilation, the oracle check) is done once per parameter
combination and kept. Only one prepared problem is kept at a time: at benchmark
sizes a second one could exhaust host or GPU memory.
"""

from __future__ import annotations

from portabench.implementations import Kernel, Variant
from portabench.implementations.verification import VariantUnavailable, prepare_verified

_current: dict[tuple, Variant] = {}


def prepared(kernel: Kernel, variant: str, case: str, size: int, options: dict[str, str] | None = None,
             settings: dict[str, object] | None = None) -> Variant:
    """The verified variant of ``kernel`` for these parameters (``options``: the kernel's problem options;
    ``settings``: the variant's constructor arguments, e.g. a group size); NotImplementedError
    (asv: skipped) if unavailable."""
    key = (kernel.name, variant, case, size, tuple(sorted((options or {}).items())),
           tuple(sorted((settings or {}).items())))
    if key not in _current:
        _current.clear()
        try:
            instance = kernel.variant(variant)(**(settings or {}))
            _current[key] = prepare_verified(kernel, instance, case, size, options=options)
        except VariantUnavailable as exc:
            raise NotImplementedError(str(exc)) from None
    return _current[key]
