"""Batched GMRES through asv: every variant on the PeleLM stand-ins, N systems, both orders.

``time_gmres`` is one solve of all N systems (verified before timing: every system's
recomputed residual below tol); the track benchmarks record the iterations the variant
took (mean and max over systems; NaN for direct solvers). Systems per second, % of peak
and speedups are derived from the times by ``portabench report``. ``GmresGroupSize*``
sweep the group size m of the portable variants (the seed's 1 <= m <= 50).
``$PORTABENCH_BATCHED_N`` overrides the system counts.
"""

import math

from portabench.implementations import get_kernel, list_variants
from portabench.implementations.batched_inputs import BENCHMARK_CASES

from .prepared import prepared

KERNEL = get_kernel("gmres")
ORDERS = list(KERNEL.options["order"])
GROUPED = {"cpu": "numba-batched", "gpu": "cupy-team"}  # the variants with a group size m


class _Gmres:
    param_names = ["dataset", "variant", "N", "order"]
    number = 1
    repeat = (5, 20, 10.0)
    rounds = 1
    warmup_time = 0.0
    timeout = 1200

    def setup(self, dataset: str, variant: str, N: str, order: str, *settings: str) -> None:
        extra = {"m": int(settings[0])} if settings else None
        self.variant = prepared(KERNEL.name, variant, dataset, int(N), options={"order": order}, settings=extra)

    def time_gmres(self, *params: str) -> None:
        self.variant.run()

    def track_iterations_mean(self, *params: str) -> float:
        iterations = self.variant.iterations()
        return math.nan if iterations is None else float(iterations.mean())

    def track_iterations_max(self, *params: str) -> float:
        iterations = self.variant.iterations()
        return math.nan if iterations is None else float(iterations.max())


def _params(device: str) -> list[list[str]]:
    return [list(BENCHMARK_CASES), [v.name for v in list_variants("gmres", device=device)],
            [str(n) for n in KERNEL.benchmark_sizes(device)], ORDERS]


class GmresCPU(_Gmres):
    params = _params("cpu")


class GmresGPU(_Gmres):
    params = _params("gpu")


class _GroupSize(_Gmres):
    param_names = ["dataset", "variant", "N", "order", "m"]


class GmresGroupSizeCPU(_GroupSize):
    params = [list(BENCHMARK_CASES), [GROUPED["cpu"]], [str(KERNEL.default_size("cpu"))], ORDERS, ["1", "8", "32"]]


class GmresGroupSizeGPU(_GroupSize):
    params = [list(BENCHMARK_CASES), [GROUPED["gpu"]], [str(KERNEL.default_size("gpu"))], ORDERS,
              ["1", "4", "8", "16", "32", "50"]]
