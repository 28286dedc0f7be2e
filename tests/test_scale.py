"""Kernels split across devices: the splits (every share together is the problem), the check before any
timing, and ``portabench scale`` under ``mpiexec`` on 2 CPU ranks, as CI runs it."""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from portabench.implementations import get_kernel
from portabench.harness.commands.cli import main
from portabench.harness.commands.scale import device_counts
from portabench.implementations.tensor_kernel import balanced_bounds

SEED = int.from_bytes(os.urandom(4), "little")


def test_device_counts_double_up_to_the_jobs_size():
    assert device_counts(1) == (1,)
    assert device_counts(2) == (1, 2)
    assert device_counts(4) == (1, 2, 4)
    assert device_counts(6) == (1, 2, 4, 6)


@pytest.mark.parametrize("parts", [2, 3, 5])
def test_balanced_bounds_tile_the_rows_with_near_equal_nonzeros(parts):
    rng = np.random.default_rng(SEED)
    counts = rng.integers(0, 50, 1000)
    bounds = balanced_bounds(counts, parts)
    assert bounds[0] == 0 and bounds[-1] == len(counts) and (np.diff(bounds) >= 0).all()
    shares = [counts[a:b].sum() for a, b in zip(bounds[:-1], bounds[1:])]
    assert sum(shares) == counts.sum()
    assert max(shares) - counts.sum() / parts <= counts.max()


@pytest.mark.parametrize("kernel_name", ["mttkrp", "phi"])
@pytest.mark.parametrize("partition", ["rows", "nonzeros"])
def test_tensor_shares_join_to_the_whole_problems_oracle(kernel_name, partition):
    kernel = get_kernel(kernel_name)
    problem = kernel.problem("nell-2", 30_000, SEED % 1000, mode=str(SEED % 3))
    whole = kernel.oracle(problem)
    shares = [kernel.split(problem, k, 3, partition) for k in range(3)]
    assert sum(s.problem.tensor.nnz for s in shares) == problem.tensor.nnz
    joined = np.zeros_like(whole)
    for share in shares:
        out = kernel.oracle(share.problem)
        if share.combine == "sum":
            joined += out
        else:
            low, high = share.rows
            assert not out[:low].any() and not out[high:].any()  # a share writes only the rows it owns
            joined[low:high] = out[low:high]
    assert kernel.check(problem, joined, whole).passed
    assert {s.combine for s in shares} == ({"sum"} if partition == "nonzeros" else {"none"})


def test_stream_blocks_have_inputs_of_their_own():
    kernel = get_kernel("stream")
    problem = kernel.problem("dot", 10_001, SEED % 1000)
    shares = [kernel.split(problem, k, 3, "blocks") for k in range(3)]
    assert sum(s.problem.size for s in shares) == problem.size
    assert not np.array_equal(shares[0].problem.inputs()["a"][:100], shares[1].problem.inputs()["a"][:100])
    assert all(s.combine == "sum" and not s.whole for s in shares)
    assert kernel.split(problem, 0, 1, "blocks").problem is problem


def test_a_kernel_without_a_split_says_so(capsys):
    assert main(["scale", "--kernel", "gmres", "--device", "cpu"]) == 2
    assert "gmres: not split across devices" in capsys.readouterr().err


def _has_mpi() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


needs_mpi = pytest.mark.skipif(not _has_mpi() or shutil.which("mpiexec", path=str(Path(sys.executable).parent)
                                                                + os.pathsep + os.environ.get("PATH", "")) is None,
                               reason="mpi4py or mpiexec missing (pip install 'portabench[mpi]')")


@needs_mpi
def test_a_wrong_share_is_never_timed():
    from mpi4py import MPI

    from portabench.harness.distributed.split_run import measure, problem_and_key
    from portabench.harness.distributed.ranks import Ranks

    kernel = get_kernel("mttkrp")
    problem, key = problem_and_key(kernel, "nell-2", 20_000, {"rank": "16", "mode": "1"}, seed=SEED % 1000)
    part = kernel.split(problem, 0, 1, "rows")
    right = measure(Ranks(MPI.COMM_SELF, "cpu"), kernel, problem, key, part, "scipy-scatter", samples=2)
    assert right.check.passed and len(right.samples) == 2
    assert all(0 < share <= total for (share,), total in zip(right.shares, right.samples))  # inside the sample
    assert right.balance()[1] == 0.0  # one rank: nothing to wait for
    wrong = kernel.split(problem, 0, 2, "nonzeros")  # half the nonzeros, no other rank to add the rest
    result = measure(Ranks(MPI.COMM_SELF, "cpu"), kernel, problem, key, wrong, "scipy-scatter", samples=2)
    assert not result.check.passed and result.samples == []


def test_balance_is_the_slowest_share_and_its_excess_over_the_mean():
    from portabench.harness.distributed.split_run import Measured

    rng = np.random.default_rng(SEED)
    shares = rng.uniform(1.0, 2.0, (5, 4))
    result = Measured(samples=list(shares.max(axis=1) + 0.1), shares=shares.tolist())
    slowest, excess = result.balance()
    assert slowest == pytest.approx(np.median(shares.max(axis=1)))
    assert excess == pytest.approx(np.median(shares.max(axis=1) / shares.mean(axis=1) - 1))
    assert all(math.isnan(x) for x in Measured().balance())


def _scale_under_mpiexec(tmp_path: Path, device: str, ranks: int, variants: list[str]) -> dict:
    """``portabench scale`` of STREAM and MTTKRP on ``ranks`` ranks: its results file, checked."""
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    command = [mpiexec, "-n", str(ranks), sys.executable, "-m", "portabench.harness.commands.cli", "scale",
               "--device", device, "--machine", "ranks", "--results", str(tmp_path), "--samples", "2",
               "--kernel", "stream", "--kernel", "mttkrp", "--kernel", "cpapr_mu", "--size", "stream=200000",
               "--size", "mttkrp=40000", "--size", "cpapr_mu=20000", "--case", "triad", "--case", "dot", "--case", "nell-2",
               *(arg for v in variants for arg in ("--variant", v))]
    # Open MPI (GPU images) refuses root without these; MPICH ignores them.
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WRONG" not in done.stdout
    files = list((tmp_path / "ranks").glob(f"*-mpi-{device}.json"))
    assert len(files) == 1
    return json.loads(files[0].read_text())


@needs_mpi
def test_scale_under_mpiexec_on_two_cpu_ranks_writes_checked_asv_results(tmp_path):
    data = _scale_under_mpiexec(tmp_path, "cpu", 2, ["numba-prange", "numpy", "numba-rows", "scipy-scatter", "numba"])
    names = json.loads((tmp_path / "ranks" / "benchmarks.json").read_text())
    for bench in ("stream.StreamDevicesCPU.time_stream", "mttkrp.MttkrpDevicesCPU.time_mttkrp",
                  "cpapr_mu.CpaprMuDevicesCPU.time_cpapr_mu"):
        result, params = data["results"][bench][:2]
        assert {"variant", "devices", "partition"} <= set(names[bench]["param_names"])
        devices = names[bench]["param_names"].index("devices")
        timed = {combo[devices]: r for combo, r in zip(itertools.product(*params), result)
                 if isinstance(r, float) and math.isfinite(r)}
        assert set(timed) == {"'1'", "'2'"} and all(t > 0 for t in timed.values()), (bench, timed)
    assert (tmp_path / "ranks" / "portabench.system").exists()


@needs_mpi
@pytest.mark.usefixtures("cupy_gpu")
def test_scale_under_mpiexec_on_the_gpus_sums_through_nccl(tmp_path, cupy_gpu):
    ranks = min(2, cupy_gpu.cuda.runtime.getDeviceCount())
    data = _scale_under_mpiexec(tmp_path, "gpu", ranks, ["cupy-rawkernel", "cupy-builtin", "cupy-segmented",
                                                         "cusparse-scatter", "cupy", "cusparse"])
    for bench in ("mttkrp.MttkrpDevicesGPU.time_mttkrp", "cpapr_mu.CpaprMuDevicesGPU.time_cpapr_mu"):
        assert any(isinstance(r, float) and r > 0 for r in data["results"][bench][0])
