"""CP-APR MU: the oracle against pyttb from the same start, every variant against the oracle (fresh
random count tensors of order 3, 4 and 5, the stand-ins, the shipped splatt-med), the check's
power, early stops, the offset, work model, bad input, studies, CLI."""

from __future__ import annotations

import numpy as np
import pytest

from portabench.datasets import load
from portabench.datasets.tensors import SparseTensor
from portabench.implementations import PortabenchError, get_kernel
from portabench.harness.commands.cli import main
from portabench.implementations.cpapr_inputs import MAIN_CASES, OTHER_CASES
from portabench.implementations.cpapr_mu import definition
from portabench.implementations.cpapr_mu.definition import MARGIN, MuProblem, flatten, unflatten
from portabench.implementations.verification import run_once
from portabench.reference.cpapr_mu import MuParameters, canonical_model, cp_apr_mu, model_error

KERNEL = get_kernel("cpapr_mu")
CPU = [v.name for v in KERNEL.variants if v.runs_on("cpu") and v.unavailable() is None]
SOLVERS = [name for name in CPU if name != "pyttb"]  # pyttb's offset differs from the second outer iteration on
GPU = [v.name for v in KERNEL.variants if v.runs_on("gpu")]


def count_tensor(rng: np.random.Generator, dims: tuple[int, ...], nnz: int) -> SparseTensor:
    """Random counts in 1..9 with every index of every mode used (CP-APR refuses empty slices)."""
    nnz = max(nnz, max(dims))
    coords = np.stack([np.concatenate([rng.permutation(d), rng.integers(0, d, nnz - d)]) for d in dims], axis=1)
    return SparseTensor(dims, coords, rng.integers(1, 10, nnz).astype(float))


def pyttb_mu(tensor: SparseTensor, weights: np.ndarray, factors: list[np.ndarray], outer: int,
             **options) -> tuple[np.ndarray, list[np.ndarray], dict]:
    ttb = pytest.importorskip("pyttb")
    x = ttb.sptensor(tensor.coords.astype(np.int64), tensor.values[:, None].copy(), tensor.dims)
    start = ttb.ktensor([np.array(a) for a in factors], np.array(weights))
    model, _, info = ttb.cp_apr(x, weights.size, algorithm="mu", init=start, maxiters=outer, printitn=0, **options)
    return (*canonical_model(model.weights, model.factor_matrices), info)


def spread(tensor: SparseTensor, start, outer: int, parameters: MuParameters) -> tuple[tuple, float]:
    """The oracle's model, and its distance from the oracle run with the nonzeros reversed."""
    ours = cp_apr_mu(tensor.coords, tensor.values, *start, outer, parameters)[:2]
    again = cp_apr_mu(tensor.coords[::-1], tensor.values[::-1], *start, outer, parameters)[:2]
    return ours, max(model_error(*again, *ours), 1e-15)


@pytest.mark.parametrize("outer, kappatol", [(1, 1e-10), (3, 0.0)])
@pytest.mark.parametrize("dims", [(30, 40, 20), (12, 9, 15, 10), (6, 8, 5, 7, 9)])
def test_oracle_matches_pyttb_from_the_same_start(dims, outer: int, kappatol: float, fresh_seed: int) -> None:
    """k outer iterations; κ_tol = 0 keeps the offset off, where pyttb's test (Φ > 0) differs from the paper's."""
    rng = np.random.default_rng(fresh_seed)
    tensor = count_tensor(rng, dims, 3000)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed)
    parameters = MuParameters(kappatol=kappatol)
    ours, scale = spread(tensor, problem.start, outer, parameters)
    *theirs, info = pyttb_mu(tensor, *problem.start, outer, kappatol=kappatol)
    assert info["nTotalIters"] == outer * tensor.order * 10  # no mode stopped early: the full work
    assert model_error(*theirs, *ours) <= MARGIN * scale
    assert model_error(*ours, *problem.start) > 1e-3  # the model moved


def test_oracle_offset_matches_pyttb_where_it_fires(fresh_seed: int) -> None:
    """With pyttb's offset test (Φ > 0) and a κ_tol that catches entries, the oracle is pyttb's MU."""
    rng = np.random.default_rng(fresh_seed)
    tensor = count_tensor(rng, (25, 30, 20), 2000)
    start = KERNEL.problem_from_tensor(tensor, seed=fresh_seed).start
    parameters = MuParameters(kappatol=1e-3, offset_phi=0.0)
    ours, scale = spread(tensor, start, 3, parameters)
    *theirs, info = pyttb_mu(tensor, *start, 3, kappatol=1e-3)
    assert info["nViolations"][1:].sum() > 0
    assert model_error(*theirs, *ours) <= MARGIN * scale
    paper = cp_apr_mu(tensor.coords, tensor.values, *start, 3, MuParameters(kappatol=1e-3))[:2]
    assert model_error(*paper, *ours) > 1e-6  # Φ > 1 (the paper) is another algorithm where it fires


def test_oracle_matches_pyttb_on_splatt_med() -> None:
    tensor = load("splatt-med")
    problem = KERNEL.problem_from_tensor(tensor, seed=3)
    ours, scale = spread(tensor, problem.start, 1, problem.parameters)
    *theirs, _ = pyttb_mu(tensor, *problem.start, 1)
    assert model_error(*theirs, *ours) <= MARGIN * scale


def _problem(tensor: SparseTensor, seed: int, **parameters) -> MuProblem:
    return MuProblem(case="file", size=tensor.nnz, rank=int(parameters.pop("rank", 10)), seed=seed, given=tensor,
                     **parameters)


def _check(names: list[str], problem: MuProblem) -> np.ndarray:
    reference = KERNEL.oracle(problem)
    for name in names:
        result = run_once(KERNEL, name, problem, reference)
        assert result.check.passed, f"{name}: {result.check.describe()}"
    return reference


@pytest.mark.parametrize("dims", [(40, 30, 50), (20, 9, 30, 12), (8, 10, 6, 12, 30), (900, 6, 5)])
@pytest.mark.parametrize("rank", [3, 10])
def test_cpu_variants_match_the_oracle(dims, rank: int, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    tensor = count_tensor(rng, dims, 3000)  # (900, 6, 5): mode 0 too long for numba's private copies
    _check(CPU, _problem(tensor, fresh_seed, rank=rank))  # one outer iteration: pyttb's too
    # Three outer iterations, with a κ_tol that makes the offset act (the oracle moves with κ).
    problem = _problem(tensor, fresh_seed, rank=rank, outer=3, kappatol=0.1)
    reference = _check(SOLVERS, problem)
    off = _problem(tensor, fresh_seed, rank=rank, outer=3, kappatol=0.1, kappa=0.0)
    assert problem.model_error(KERNEL.oracle(off), reference) > 1e-6


@pytest.mark.parametrize("case", MAIN_CASES + OTHER_CASES)
def test_cpu_variants_on_the_standins(case: str) -> None:
    _check(CPU, KERNEL.problem(case, 5000, seed=2))


def test_cpu_variants_on_splatt_med() -> None:
    _check(SOLVERS, KERNEL.problem_from_tensor(load("splatt-med"), seed=1))


def test_early_stops_follow_the_oracle(fresh_seed: int) -> None:
    """A loose τ stops modes after their first Φ (no update) and the solve once no mode updated."""
    rng = np.random.default_rng(fresh_seed)
    tensor = count_tensor(rng, (15, 12, 10), 800)
    for stoptol in (1e3, 0.5):
        problem = _problem(tensor, fresh_seed, outer=4, stoptol=stoptol)
        p = problem.parameters
        _, _, counts = cp_apr_mu(tensor.coords, tensor.values, *problem.start, 4, p)
        reference = _check(SOLVERS, problem)
        for name in SOLVERS:
            variant = KERNEL.variant(name)()
            variant.prepare(problem)
            variant.run()
            np.testing.assert_array_equal(variant.inner_iterations(), counts)
            assert problem.model_error(variant.output(), reference) <= problem.tolerance(reference)
        if stoptol == 1e3:
            assert counts[0].tolist() == [1] * 3 and not counts[1:].any()


def test_the_check_catches_wrong_answers(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    tensor = count_tensor(rng, (30, 20, 25), 4000)
    problem = _problem(tensor, fresh_seed)
    reference = KERNEL.oracle(problem)
    assert KERNEL.check(problem, reference, reference).passed
    assert problem.tolerance(reference) < 1e-9
    start = problem.start
    one_fewer = cp_apr_mu(tensor.coords, tensor.values, *start, 1, MuParameters(inner=9))
    assert not KERNEL.check(problem, flatten(*one_fewer[:2]), reference).passed
    dropped = cp_apr_mu(tensor.coords[1:], tensor.values[1:], *start, 1)
    assert not KERNEL.check(problem, flatten(*dropped[:2]), reference).passed
    bad = reference.copy()
    bad[7] = np.nan
    assert not KERNEL.check(problem, bad, reference).passed
    assert not KERNEL.check(problem, reference[:-1], reference).passed
    weights, factors = unflatten(reference, tensor.dims, 10)
    assert not KERNEL.check(problem, flatten(weights[::-1], [a[:, ::-1] for a in factors]), reference).passed


def test_work_model_by_hand() -> None:
    dims, nnz, rank = (100, 200, 300), 5000, 10
    work = definition.work_model(dims, nnz, rank)
    pi_bytes = sum(nnz * (2 * 4 + 8 * rank) + 8 * rank * (sum(dims) - d) for d in dims)
    phi_bytes = sum(nnz * (8 * rank + 8 + 4) + 16 * rank * d for d in dims)
    assert work.bytes == pi_bytes + 10 * phi_bytes
    assert work.flops == 3 * (rank * nnz + 10 * nnz * (4 * rank + 2))
    assert work.bytes_counted == pi_bytes + 10 * 3 * 8 * nnz * (5 * rank + 2)
    assert definition.work_model(dims, nnz, rank, outer=2).flops == 2 * work.flops


def test_bad_input_gets_one_line_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    coords = np.array([[0, 0, 0], [1, 1, 1], [1, 0, 1]])
    good = SparseTensor((2, 2, 2), coords, np.array([1.0, 2.0, 3.0]))
    cases = {
        "negative": ((2, 2, 2), [1.0, -2.0, 3.0]),
        "NaN|non-finite": ((2, 2, 2), [1.0, np.nan, 3.0]),
        "infinity|non-finite": ((2, 2, 2), [1.0, np.inf, 3.0]),
        "all zero": ((2, 3, 2), [1.0, 2.0, 3.0]),
    }
    for what, (dims, values) in cases.items():
        with pytest.raises(PortabenchError, match=what) as caught:  # the tensor's own check, or CP-APR's
            KERNEL.problem_from_tensor(SparseTensor(dims, coords, np.array(values)))
        assert "\n" not in str(caught.value)
    for rank in ("0", "-1", "x"):
        with pytest.raises(PortabenchError, match="rank"):
            KERNEL.problem_from_tensor(good, rank=rank)
    with pytest.raises(PortabenchError, match="l_max"):
        _problem(good, 0, inner=0)
    with pytest.raises(PortabenchError, match="epsilon"):
        _problem(good, 0, epsilon=0.0)
    monkeypatch.setattr("portabench.datasets.memory.available_host_memory_bytes", lambda: 100)
    with pytest.raises(PortabenchError, match="memory|available") as caught:
        KERNEL.problem_from_tensor(good)
    assert "\n" not in str(caught.value)
    with pytest.raises(PortabenchError, match="fewer nonzeros"):
        KERNEL.problem("nell-2", 1_000_000)


def test_studies_and_sizes() -> None:
    main_study, datasets = KERNEL.studies("cpu")
    assert main_study.cases == MAIN_CASES and datasets.cases == OTHER_CASES
    assert main_study.options == {"rank": ("10",)}
    assert {"numba", "scipy", "mkl"} <= set(main_study.variants)
    assert KERNEL.default_size("gpu") >= KERNEL.default_size("cpu")
    assert "pyttb" not in main_study.variants  # a comparison point at small sizes only
    assert "pyttb" in KERNEL.study("main", "cpu", sizes=(definition.PYTTB_MAX_NNZ,)).variants


def test_cli_verify_a_tensor_file_at_another_rank(tmp_path, capsys, fresh_seed: int) -> None:
    from portabench.datasets.tensors.tns import write_tns

    path = tmp_path / "counts.tns"
    write_tns(count_tensor(np.random.default_rng(fresh_seed), (12, 9, 7, 5), 400), path)
    code = main(["verify", "--kernel", "cpapr_mu", "--tensor", str(path), "--rank", "4", "--variant", "numba",
                 "--variant", "scipy", "--seed", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count("pass") == 2


def test_cli_verify(capsys) -> None:
    code = main(["verify", "--kernel", "cpapr_mu", "--case", "nell-2", "--size", "3000", "--seed", "4"])
    out = capsys.readouterr().out
    assert code == 0, out
    for name in CPU:
        assert name in out


@pytest.mark.parametrize("name", GPU)
@pytest.mark.parametrize("dims", [(40, 30, 50), (20, 9, 30, 12), (8, 10, 6, 12, 30)])
def test_gpu_variants_match_the_oracle(name: str, dims, fresh_seed: int) -> None:
    reason = KERNEL.variant(name).unavailable()
    if reason:
        pytest.skip(reason)
    rng = np.random.default_rng(fresh_seed)
    tensor = count_tensor(rng, dims, 3000)
    _check([name], _problem(tensor, fresh_seed))
    _check([name], _problem(tensor, fresh_seed, rank=3, outer=3, kappatol=0.1))


@pytest.mark.parametrize("name", GPU)
def test_gpu_variants_on_a_standin_and_early_stops(name: str, fresh_seed: int) -> None:
    reason = KERNEL.variant(name).unavailable()
    if reason:
        pytest.skip(reason)
    _check([name], KERNEL.problem("lbnl-network", 20000, seed=4))
    tensor = count_tensor(np.random.default_rng(fresh_seed), (15, 12, 10), 800)
    problem = _problem(tensor, fresh_seed, outer=4, stoptol=0.5)
    _, _, counts = cp_apr_mu(tensor.coords, tensor.values, *problem.start, 4, problem.parameters)
    _check([name], problem)
    variant = KERNEL.variant(name)()
    variant.prepare(problem)
    variant.run()
    np.testing.assert_array_equal(variant.inner_iterations(), counts)


@pytest.mark.usefixtures("cupy_gpu")
@pytest.mark.parametrize("rows, rank", [(1, 1), (7, 3), (1605, 10), (300_000, 10), (513, 64), (1000, 256)])
def test_cupy_reductions_over_whole_factors(rows: int, rank: int, fresh_seed: int) -> None:
    """cupy's grid-wide KKT violation and column sums against NumPy, on factors from one row to more rows than
    its grid's threads, ranks that divide its 256-thread blocks and ranks that do not."""
    import cupy as cp

    from portabench.implementations.cpapr_mu.cupy import CupyMu

    rng = np.random.default_rng(fresh_seed)
    b, phi = rng.uniform(0.0, 2.0, (rows, rank)), rng.uniform(0.0, 2.0, (rows, rank))
    variant = CupyMu()
    sums = variant.column_sums(cp.asarray(b)).get()
    np.testing.assert_allclose(sums, b.sum(axis=0), rtol=1e-12)
    worst = float(np.abs(np.minimum(b, 1.0 - phi)).max())
    on_device = cp.asarray(b)
    assert variant.kkt_update(on_device, cp.asarray(phi), stoptol=worst * 2) == worst
    np.testing.assert_array_equal(on_device.get(), b)  # under the tolerance: B unchanged
    assert variant.kkt_update(on_device, cp.asarray(phi), stoptol=worst) == worst
    np.testing.assert_array_equal(on_device.get(), b * phi)


def test_quick_verify_keeps_every_variants_paths() -> None:
    """The default verify set (``quick_verify``): tensors of order 3, 4 and 5, rows longer than numba's Φ
    chunks (a row across several threads), pyttb on the smallest problem only."""
    from portabench.implementations.phi.numba_segmented import CHUNKS_PER_THREAD

    problems = KERNEL.verify_set_problems(KERNEL.verify_set(), 0, {})
    assert sorted(p.tensor.order for p in problems) == [3, 4, 5]
    # numba's Φ cuts the nonzeros into CHUNKS_PER_THREAD chunks per thread: at two threads, such rows span several
    assert any(int(np.bincount(p.tensor.coords[:, m]).max()) > p.tensor.nnz // (2 * CHUNKS_PER_THREAD)
               for p in problems if p.tensor.order > 3 for m in range(p.tensor.order))
    pyttb = KERNEL.variant("pyttb")
    assert [p.case for p in problems if KERNEL.verify_skips(pyttb, p) is None] == [min(problems, key=lambda p: p.size).case]
    assert all(KERNEL.verify_skips(pyttb, p, full=True) is None for p in problems)
