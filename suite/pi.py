"""Π (CP-APR's Khatri-Rao rows) through asv: every dataset x mode x variant of the device at
R = 10, on Φ's inputs, so the two halves of CP-APR MU's step sit side by side.
"""

from portabench.implementations import get_kernel, list_variants

from .prepared import TensorModeBenchmark

KERNEL = get_kernel("pi")


def _params(device: str) -> list[list[str]]:
    variants = [v.name for v in list_variants("pi", device=device)]
    return [list(KERNEL.cases), [str(n) for n in KERNEL.benchmark_sizes(device)], list(KERNEL.options["rank"]),
            list(KERNEL.options["mode"]), variants]


class _Pi(TensorModeBenchmark):
    kernel = KERNEL.name

    def time_pi(self, *params: str) -> None:
        self.variant.run()


class PiCPU(_Pi):
    params = _params("cpu")


class PiGPU(_Pi):
    params = _params("gpu")
