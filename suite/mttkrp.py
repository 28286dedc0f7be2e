"""MTTKRP through asv: every dataset x mode x variant of the device at R = 16, an R sweep,
the preparation cost, and the GPU segmented kernel's launch settings.

``nnz`` is the nonzeros asked of each stand-in (``$PORTABENCH_TENSOR_NNZ`` overrides; a
tensor with fewer runs at full size). Modes a tensor lacks (3 and 4 of a 3-way tensor) are
skipped in ``setup``. ``time_mttkrp`` is one verified run; ``time_preparation`` is one
``arrange`` (sorting, scatter matrices) of the variants that have one, which the report
shows as a multiple of one run (the seed 003's sorting-cost table). GB/s under PASTA's and
GenTen's byte counts, % of peak and speedups are derived by ``portabench report``.
"""

from portabench.implementations import get_kernel, list_variants

from .prepared import TensorModeBenchmark

KERNEL = get_kernel("mttkrp")
MODES = list(KERNEL.options["mode"])
RANKS = list(KERNEL.options["rank"])
RANK_SWEEP_CASE = "nell-2"  # the R sweep runs on one tensor: the seeds' largest 3-way one


class _Prepared(TensorModeBenchmark):
    kernel = KERNEL.name


class _Mttkrp(_Prepared):
    def time_mttkrp(self, *params: str) -> None:
        self.variant.run()


def _params(device: str, cases: list[str], ranks: list[str], arranging_only: bool = False) -> list[list[str]]:
    variants = [v.name for v in list_variants("mttkrp", device=device) if v.arranges or not arranging_only]
    return [cases, [str(n) for n in KERNEL.benchmark_sizes(device)], ranks, MODES, variants]


class MttkrpCPU(_Mttkrp):
    params = _params("cpu", list(KERNEL.cases), RANKS[:1])


class MttkrpGPU(_Mttkrp):
    params = _params("gpu", list(KERNEL.cases), RANKS[:1])


class MttkrpRankCPU(_Mttkrp):
    params = _params("cpu", [RANK_SWEEP_CASE], RANKS[1:])


class MttkrpRankGPU(_Mttkrp):
    params = _params("gpu", [RANK_SWEEP_CASE], RANKS[1:])


class _Preparation(_Prepared):
    repeat = (3, 10, 10.0)

    def time_preparation(self, *params: str) -> None:
        self.variant.rearrange()


class MttkrpPreparationCPU(_Preparation):
    params = _params("cpu", list(KERNEL.cases), RANKS[:1], arranging_only=True)


class MttkrpPreparationGPU(_Preparation):
    params = _params("gpu", list(KERNEL.cases), RANKS[:1], arranging_only=True)


class MttkrpLaunchGPU(_Mttkrp):
    """The segmented GPU kernel's launch settings on nell-2: nonzeros per warp (its default: 1024),
    and a factor staged in shared memory or not (its default, "auto", stages on mode 2 only)."""

    param_names = _Mttkrp.param_names + ["per_warp", "stage"]
    params = (_params("gpu", [RANK_SWEEP_CASE], RANKS[:1])[:3]
              + [["0", "2"], ["cupy-segmented"], ["256", "1024", "4096"], ["none", "always"]])

    def setup(self, dataset: str, nnz: str, rank: str, mode: str, variant: str, per_warp: str, stage: str) -> None:
        self.prepare_tensor(dataset, nnz, rank, mode, variant, settings={"per_warp": int(per_warp), "stage": stage})
