"""Φ (CP-APR MU) through asv: every dataset x mode x variant of the device at R = 10, the
pressure points, and the launch-policy study.

``nnz`` is the nonzeros asked of each stand-in (``$PORTABENCH_TENSOR_NNZ`` overrides; a
tensor with fewer runs at full size). Modes a tensor lacks are skipped in ``setup``.

- ``Phi{CPU,GPU}``: one verified run of each variant.
- ``PhiPressure{CPU,GPU}``: the portable variants with a perturbation (``no-atomics``,
  ``reuse``, ``both``; the seed's Experiment 1): verified unperturbed, then the perturbed
  call timed. The report shows each as a speedup over the unperturbed run, per dataset.
- ``PhiLaunch{CPU,GPU}``: the launch policies of ``phi.variant.LAUNCH_POLICIES`` on the
  seed's policy-study tensors; the report sets the best against the default.
"""

import inspect

from portabench.implementations import get_kernel, list_variants
from portabench.implementations.phi.variant import LAUNCH_POLICIES, policy_settings

from .prepared import TensorModeBenchmark

KERNEL = get_kernel("phi")
MODES = list(KERNEL.options["mode"])
RANKS = list(KERNEL.options["rank"])
PERTURBATIONS = ["no-atomics", "reuse", "both"]
POLICY_CASES = ["chicago-crime-comm", "lbnl-network"]  # the seed's Experiment 4 tensors


class _Phi(TensorModeBenchmark):
    kernel = KERNEL.name

    def time_phi(self, *params: str) -> None:
        self.variant.run()


def _params(device: str, cases: list[str], family: str | None = None) -> list[list[str]]:
    variants = [v.name for v in list_variants("phi", device=device, family=family)]
    return [cases, [str(n) for n in KERNEL.benchmark_sizes(device)], RANKS, MODES, variants]


class PhiCPU(_Phi):
    params = _params("cpu", list(KERNEL.cases))


class PhiGPU(_Phi):
    params = _params("gpu", list(KERNEL.cases))


class _Pressure(_Phi):
    param_names = _Phi.param_names + ["perturbation"]

    def setup(self, dataset: str, nnz: str, rank: str, mode: str, variant: str, perturbation: str) -> None:
        self.prepare_tensor(dataset, nnz, rank, mode, variant, settings={"perturbation": perturbation})


class PhiPressureCPU(_Pressure):
    params = _params("cpu", list(KERNEL.cases), "portable") + [PERTURBATIONS]


class PhiPressureGPU(_Pressure):
    params = _params("gpu", list(KERNEL.cases), "portable") + [PERTURBATIONS]


class _Launch(_Phi):
    param_names = _Phi.param_names + ["policy"]

    def setup(self, dataset: str, nnz: str, rank: str, mode: str, variant: str, policy: str) -> None:
        settings = policy_settings(policy)
        accepted = set(inspect.signature(KERNEL.variant(variant).__init__).parameters)
        if not set(settings) <= accepted:  # e.g. numba-privatized has no nonzeros per thread
            raise NotImplementedError(f"{variant} takes no {', '.join(sorted(set(settings) - accepted))}")
        self.prepare_tensor(dataset, nnz, rank, mode, variant, settings=settings)


class PhiLaunchCPU(_Launch):
    params = _params("cpu", POLICY_CASES, "portable")[:3] + [["0"], ["numba-segmented", "numba-privatized"],
                                                               list(LAUNCH_POLICIES["cpu"])]


class PhiLaunchGPU(_Launch):
    params = _params("gpu", POLICY_CASES, "portable")[:3] + [["0"], ["cupy-segmented", "cupy-atomic"], list(LAUNCH_POLICIES["gpu"])]
