"""BCSR SpMV through asv: the seed's matrices and the block-size sweep, every variant of each device.

``mib`` is the MiB of block values asked of each matrix (``$PORTABENCH_BCSR_MIB`` overrides
the defaults: 64 on the CPU, 600 on the GPU, where every stand-in runs at its real size);
a stand-in runs at most at its real size, a sweep matrix at exactly ``mib``, a real matrix
(``<name>-real``) as it is, and is skipped where it is not downloaded. Variants that cannot
take a matrix (by-block beyond bs 5), and sizes too small for a generator (the bs-32 sweep
matrix needs 3.5 MiB: a smoke run's ``--bcsr-mib 1``), are skipped in ``setup``. ``time_bcsr`` is one
verified run; GB/s (x, val, col_idx, row_ptr once), % of peak and speedups are derived by
``portabench report``.
"""

from portabench.implementations import get_kernel, list_variants
from portabench.implementations.bcsr.definition import REAL, STANDINS, SWEEP, real_unavailable, too_small

from .prepared import prepared

KERNEL = get_kernel("bcsr")


class _Bcsr:
    # The variant varies fastest: asv runs combinations in this order, one process each.
    param_names = ["matrix", "mib", "variant"]
    number = 1
    repeat = (5, 20, 10.0)
    rounds = 1
    warmup_time = 0.0
    timeout = 600  # generating a 600 MiB matrix and its oracle check dominate

    def setup(self, matrix: str, mib: str, variant: str) -> None:
        reason = real_unavailable(matrix) or too_small(matrix, int(mib))
        if reason is not None:
            raise NotImplementedError(reason)
        self.variant = prepared(KERNEL.name, variant, matrix, int(mib))

    def time_bcsr(self, matrix: str, mib: str, variant: str) -> None:
        self.variant.run()


def _params(device: str, cases: tuple[str, ...]) -> list[list[str]]:
    return [list(cases), [str(m) for m in KERNEL.benchmark_sizes(device)],
            [v.name for v in list_variants("bcsr", device=device)]]


class BcsrCPU(_Bcsr):
    """The six stand-ins (each at its own block size), then the real matrices where downloaded."""

    # A variant's time on a small VM depends on the process (raefsky4, numba-blockrow, 6 processes
    # on the 2-core VM: medians 0.21 ms in five, 0.29 in one) and the VM's memory rate drifts over
    # minutes: four rounds interleave the variants and sample four processes of each.
    rounds = 4

    params = _params("cpu", STANDINS + REAL)


class BcsrGPU(_Bcsr):
    params = _params("gpu", STANDINS + REAL)


class BcsrSweepCPU(_Bcsr):
    """Block sizes 2 ... 32 at equal bytes of blocks (the seed's "variable block sizes" figures)."""

    rounds = BcsrCPU.rounds

    params = _params("cpu", SWEEP)


class BcsrSweepGPU(_Bcsr):
    params = _params("gpu", SWEEP)
