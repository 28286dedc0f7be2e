"""Π (CP-APR's Khatri-Rao rows): every variant against the oracle on fresh random tensors,
the check, the work model, CLI. (The oracle itself is checked against pyttb in test_phi.py.)"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from portabench.implementations import get_kernel
from portabench.harness.commands.cli import main
from portabench.implementations.gpu import cupy_unavailable
from portabench.implementations.model import max_relative_error
from portabench.implementations.pi import definition
from portabench.implementations.tensor_inputs import UNIT_ROUNDOFF
from portabench.implementations.verification import run_once
from portabench.reference.pi import pi_rows

from test_phi import random_tensor

KERNEL = get_kernel("pi")
CPU = [v.name for v in KERNEL.variants if v.runs_on("cpu")]
GPU = [v.name for v in KERNEL.variants if v.runs_on("gpu")]
gpu = pytest.mark.skipif(cupy_unavailable() is not None, reason=str(cupy_unavailable()))


def _check_all_modes(names: list[str], dims: tuple[int, ...], nnz: int, rank: int, seed: int) -> None:
    tensor = random_tensor(np.random.default_rng(seed), dims, nnz)
    for mode in range(tensor.order):
        problem = KERNEL.problem_from_tensor(tensor, seed=seed, rank=str(rank), mode=str(mode))
        reference = KERNEL.oracle(problem)
        direct = np.ones((tensor.nnz, rank))
        for m, u in enumerate(problem.factors):
            if m != mode:
                direct = direct * u[tensor.coords[:, m]]
        np.testing.assert_allclose(reference, direct, rtol=1e-15)
        for name in names:
            result = run_once(KERNEL, name, problem, reference)
            assert result.check.passed, f"{name} mode {mode}: {result.check.describe()}"


@pytest.mark.parametrize("dims", [(6, 4, 5), (3, 5, 2, 4), (2, 3, 4, 3, 2)])
def test_oracle_matches_a_loop_over_the_nonzeros(dims: tuple[int, ...], fresh_seed: int) -> None:
    """The oracle against Π's definition spelled out, one nonzero, mode and column at a time."""
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, dims, 40)
    factors = [rng.uniform(0.5, 1.5, (d, 3)) for d in dims]
    for mode in range(tensor.order):
        expected = np.empty((tensor.nnz, 3))
        for j in range(tensor.nnz):
            for r in range(3):
                product = 1.0
                for m in range(tensor.order):
                    if m != mode:
                        product *= float(factors[m][tensor.coords[j, m], r])
                expected[j, r] = product
        # N - 1 factors, N - 2 roundings in each order: the two orders differ by at most twice that.
        bound = 2 * (tensor.order - 2) * UNIT_ROUNDOFF
        assert max_relative_error(pi_rows(tensor.coords, factors, mode), expected) <= bound, (mode, fresh_seed)


@pytest.mark.parametrize("dims", [(40, 30, 50), (20, 9, 30, 12), (8, 10, 6, 12, 30)])
@pytest.mark.parametrize("rank", [3, 10])
def test_cpu_variants_match_the_oracle(dims: tuple[int, ...], rank: int, fresh_seed: int) -> None:
    _check_all_modes(CPU, dims, 3000, rank, fresh_seed)


def test_the_check_catches_wrong_answers(fresh_seed: int) -> None:
    tensor = random_tensor(np.random.default_rng(fresh_seed), (30, 20, 25, 6), 500)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="10", mode="2")
    reference = KERNEL.oracle(problem)
    assert KERNEL.check(problem, reference, reference).passed
    wrong_mode = pi_rows(tensor.coords, problem.factors, 1)  # the Khatri-Rao rows of another mode
    assert not KERNEL.check(problem, wrong_mode, reference).passed
    bad = reference.copy()
    bad[7, 3] *= 1 + 1e-12
    assert not KERNEL.check(problem, bad, reference).passed
    bad[7, 3] = np.nan
    assert not KERNEL.check(problem, bad, reference).passed
    assert not KERNEL.check(problem, reference[:-1], reference).passed


def test_work_model_by_hand() -> None:
    work = definition.work_model((10, 20, 30, 40), 1000, 10, 1)
    assert work.bytes == 1000 * (3 * 4 + 80) + 8 * 10 * (10 + 30 + 40)
    assert work.flops == 2 * 10 * 1000
    assert KERNEL.work("nell-2", 1000, rank="10", mode="0").flops > 0


def test_cli_verify_standins(capsys) -> None:
    code = main(["verify", "--kernel", "pi", "--case", "lbnl-network", "--size", "3000", "--seed", "4", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and out.count("pass") == 5 * len(CPU), out


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dims", [(300, 200, 250), (40, 30, 50, 20), (8, 10, 6, 12, 30)])
@pytest.mark.parametrize("rank", [10, 3])
def test_gpu_variants_match_the_oracle(dims: tuple[int, ...], rank: int, fresh_seed: int) -> None:
    _check_all_modes(GPU, dims, 20000, rank, fresh_seed)


def test_every_pair_of_families_exists_on_each_device() -> None:
    for device, family in itertools.product(("cpu", "gpu"), ("portable", "vendor")):
        assert any(v.runs_on(device) and v.family == family for v in KERNEL.variants)
