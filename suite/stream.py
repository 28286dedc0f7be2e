"""STREAM through asv: every operation x variant at the machine's default size.

Sizes are element counts per array, at least 4x the last-level cache (CPU) or L2
(GPU); ``PORTABENCH_STREAM_N=65536,1048576`` overrides them. Bandwidth, % of peak
and speedups are derived from these times by ``portabench report``.
"""

from portabench.implementations import get_kernel, list_variants

from .prepared import prepared

KERNEL = get_kernel("stream")


class _Stream:
    param_names = ["op", "variant", "n"]
    number = 1
    repeat = (10, 40, 10.0)
    rounds = 1
    warmup_time = 0.0
    timeout = 900  # a 2^28 GPU problem spends most of this generating and checking inputs

    def setup(self, op: str, variant: str, n: str) -> None:
        self.variant = prepared(KERNEL.name, variant, op, int(n))

    def time_stream(self, op: str, variant: str, n: str) -> None:
        self.variant.run()


class StreamCPU(_Stream):
    params = [
        list(KERNEL.cases),
        [v.name for v in list_variants("stream", device="cpu")],
        [str(n) for n in KERNEL.benchmark_sizes("cpu")],
    ]


class StreamGPU(_Stream):
    params = [
        list(KERNEL.cases),
        [v.name for v in list_variants("stream", device="gpu")],
        [str(n) for n in KERNEL.benchmark_sizes("gpu")],
    ]
