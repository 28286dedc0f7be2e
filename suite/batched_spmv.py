"""Batched SpMV through asv: every dataset x variant x N x layout of the device.

N is the number of systems (``PORTABENCH_BATCHED_N=1024,51200`` overrides the defaults);
the layout is the problem option ``system-major`` or ``entry-major``. Bandwidth, % of
peak and speedups are derived from these times by ``portabench report``.
"""

from portabench.implementations import get_kernel, list_variants
from portabench.implementations.batched_inputs import BENCHMARK_CASES

from .prepared import prepared

KERNEL = get_kernel("batched_spmv")
LAYOUTS = list(KERNEL.options["layout"])


class _BatchedSpmv:
    param_names = ["dataset", "variant", "N", "layout"]
    number = 1
    repeat = (10, 40, 10.0)
    rounds = 1
    warmup_time = 0.0
    timeout = 900  # generating N = 51200 systems and checking them dominates

    def setup(self, dataset: str, variant: str, N: str, layout: str) -> None:
        self.variant = prepared(KERNEL.name, variant, dataset, int(N), options={"layout": layout})

    def time_batched_spmv(self, dataset: str, variant: str, N: str, layout: str) -> None:
        self.variant.run()


class BatchedSpmvCPU(_BatchedSpmv):
    params = [
        list(BENCHMARK_CASES),
        [v.name for v in list_variants("batched_spmv", device="cpu")],
        [str(n) for n in KERNEL.benchmark_sizes("cpu")],
        LAYOUTS,
    ]


class BatchedSpmvGPU(_BatchedSpmv):
    params = [
        list(BENCHMARK_CASES),
        [v.name for v in list_variants("batched_spmv", device="gpu")],
        [str(n) for n in KERNEL.benchmark_sizes("gpu")],
        LAYOUTS,
    ]
