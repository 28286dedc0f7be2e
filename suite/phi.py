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

from portabench.implementations import get_kernel, list_variants
from portabench.implementations.phi.variant import LAUNCH_POLICIES, policy_settings
from portabench.implementations.tensor_inputs import order_of

from .prepared import prepared

KERNEL = get_kernel("phi")
MODES = list(KERNEL.options["mode"])
RANKS = list(KERNEL.options["rank"])
PERTURBATIONS = ["no-atomics", "reuse", "both"]
POLICY_CASES = ["chicago-crime-comm", "lbnl-network"]  # the seed's Experiment 4 tensors
def _modes_or_skip(dataset: str, mode: str) -> None:
    if int(mode) >= order_of(dataset):
        raise NotImplementedError(f"{dataset} has {order_of(dataset)} modes, not mode {mode}")


class _Prepared:
    kernel = KERNEL.name  # the kernel whose problems and variants these are (``suite/pi.py`` reuses the class)
    # The variant varies fastest: the stand-in on disk and the page cache serve every
    # variant of one (dataset, mode) in turn.
    param_names = ["dataset", "nnz", "rank", "mode", "variant"]
    number = 1
    repeat = (5, 20, 10.0)
    rounds = 1
    warmup_time = 0.0
    timeout = 1200  # generating a full-size stand-in (first use) dominates

    def setup(self, dataset: str, nnz: str, rank: str, mode: str, variant: str) -> None:
        _modes_or_skip(dataset, mode)
        self.variant = prepared(self.kernel, variant, dataset, int(nnz), options={"rank": rank, "mode": mode})


class _Phi(_Prepared):
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
        _modes_or_skip(dataset, mode)
        self.variant = prepared(KERNEL.name, variant, dataset, int(nnz), options={"rank": rank, "mode": mode},
                                settings={"perturbation": perturbation})


class PhiPressureCPU(_Pressure):
    params = _params("cpu", list(KERNEL.cases), "portable") + [PERTURBATIONS]


class PhiPressureGPU(_Pressure):
    params = _params("gpu", list(KERNEL.cases), "portable") + [PERTURBATIONS]


class _Launch(_Phi):
    param_names = _Phi.param_names + ["policy"]

    def setup(self, dataset: str, nnz: str, rank: str, mode: str, variant: str, policy: str) -> None:
        _modes_or_skip(dataset, mode)
        settings = policy_settings(policy)
        accepted = {"numba-privatized": {"threads"}, "numba-segmented": {"threads", "per_thread"}}.get(variant)
        if accepted is not None and not set(settings) <= accepted:
            raise NotImplementedError(f"{variant} takes no {', '.join(sorted(set(settings) - accepted))}")
        self.variant = prepared(KERNEL.name, variant, dataset, int(nnz), options={"rank": rank, "mode": mode},
                                settings=settings)


class PhiLaunchCPU(_Launch):
    params = _params("cpu", POLICY_CASES, "portable")[:3] + [["0"], ["numba-segmented", "numba-privatized"],
                                                               list(LAUNCH_POLICIES["cpu"])]


class PhiLaunchGPU(_Launch):
    params = _params("gpu", POLICY_CASES, "portable")[:3] + [["0"], ["cupy-segmented", "cupy-atomic"], list(LAUNCH_POLICIES["gpu"])]
