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


def prepared(kernel: str, variant: str, case: str, size: int, options: dict[str, str] | None = None,
             settings: dict[str, object] | None = None) -> Variant:
    """The verified variant for these parameters (``options``: the kernel's problem options;
    ``settings``: the variant's constructor arguments, e.g. a group size); NotImplementedError
    (asv: skipped) if unavailable."""
    key = (kernel, variant, case, size, tuple(sorted((options or {}).items())), tuple(sorted((settings or {}).items())))
    if key not in _current:
        _current.clear()
        k = get_kernel(kernel)
        try:
            instance = k.variant(variant)(**(settings or {}))
            _current[key] = prepare_verified(k, instance, case, size, options=options)
        except VariantUnavailable as exc:
            raise NotImplementedError(str(exc)) from None
    return _current[key]


class TensorModeBenchmark:
    """Base of the sparse tensor kernels' benchmarks (MTTKRP, Φ, Π): parameters (dataset, nnz,
    rank, mode, variant, then any variant settings), modes a tensor lacks skipped in ``setup``."""

    kernel: str  # the kernel's name
    # The variant varies fastest: asv runs combinations in this order, so the stand-in on disk
    # and the page cache serve every variant of one (dataset, mode) in turn.
    param_names = ["dataset", "nnz", "rank", "mode", "variant"]
    number = 1
    repeat = (5, 20, 10.0)
    rounds = 1
    warmup_time = 0.0
    timeout = 1200  # generating a full-size stand-in (first use) dominates

    def prepare_tensor(self, dataset: str, nnz: str, rank: str, mode: str, variant: str,
                       settings: dict[str, object] | None = None) -> None:
        from portabench.implementations.tensor_inputs import order_of

        if int(mode) >= order_of(dataset):
            raise NotImplementedError(f"{dataset} has {order_of(dataset)} modes, not mode {mode}")
        self.variant = prepared(self.kernel, variant, dataset, int(nnz), options={"rank": rank, "mode": mode},
                                settings=settings)

    def setup(self, dataset: str, nnz: str, rank: str, mode: str, variant: str) -> None:
        self.prepare_tensor(dataset, nnz, rank, mode, variant)
