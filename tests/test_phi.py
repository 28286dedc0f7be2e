"""Φ (CP-APR MU): the oracle, every variant against it on fresh random tensors, pressure points,
work models, errors, pyttb, CLI."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from portabench.datasets import load
from portabench.datasets.tensors import SparseTensor
from portabench.implementations import PortabenchError, get_kernel
from portabench.harness.commands.cli import main
from portabench.implementations.gpu import cupy_unavailable
from portabench.implementations.phi import definition, variant
from portabench.implementations.phi.definition import PhiProblem
from portabench.implementations.verification import prepare_verified, run_once
from portabench.reference.phi import phi
from portabench.reference.pi import pi_rows

KERNEL = get_kernel("phi")
CPU = [v.name for v in KERNEL.variants if v.runs_on("cpu") and v.unavailable() is None]
GPU = [v.name for v in KERNEL.variants if v.runs_on("gpu")]
gpu = pytest.mark.skipif(cupy_unavailable() is not None, reason=str(cupy_unavailable()))


def random_tensor(rng: np.random.Generator, dims: tuple[int, ...], nnz: int, heavy: float = 0.0) -> SparseTensor:
    """Random coordinates (repeats allowed) with some indices of every mode unused (empty rows),
    count-like values in [1, 5); ``heavy``: share of nonzeros in mode 0's row 1."""
    coords = np.stack([rng.integers(0, max(1, d - 2), nnz) for d in dims], axis=1)
    coords[: int(heavy * nnz), 0] = 1
    return SparseTensor(dims, coords, rng.integers(1, 5, nnz).astype(float))


def dense_phi(tensor: SparseTensor, factors: list[np.ndarray], mode: int, epsilon: float) -> np.ndarray:
    """The paper's Algorithm 2 on dense matrices: Φ = (X_(n) ⊘ max(B Π^T, ε)) Π over the nonzeros,
    each nonzero its own column (so repeated coordinates count separately, as in COO)."""
    pi = np.ones((tensor.nnz, factors[0].shape[1]))
    for m, u in enumerate(factors):
        if m != mode:
            pi *= u[tensor.coords[:, m]]
    rows = tensor.coords[:, mode]
    xn = np.zeros((tensor.dims[mode], tensor.nnz))
    xn[rows, np.arange(tensor.nnz)] = tensor.values
    w = np.where(xn != 0, xn / np.maximum(factors[mode] @ pi.T, epsilon), 0.0)
    return w @ pi


@pytest.mark.parametrize("dims", [(7, 5, 6), (4, 6, 3, 5), (3, 4, 2, 5, 3)])
def test_oracle_matches_the_dense_definition(dims: tuple[int, ...], fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, dims, 80)
    factors = [rng.uniform(0.1, 1.0, (d, 4)) for d in dims]
    for mode in range(len(dims)):
        pi = pi_rows(tensor.coords, factors, mode)
        for epsilon in (1e-10, 0.5):  # 0.5: many dots fall below ε
            expected = dense_phi(tensor, factors, mode, epsilon)
            ours = phi(tensor.coords[:, mode], tensor.values, factors[mode], pi, epsilon)
            np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-14)


def _check_all_modes(names: list[str], tensor: SparseTensor, rank: int, seed: int, epsilon: float = definition.EPSILON,
                     **settings) -> None:
    for mode in range(tensor.order):
        problem = KERNEL.problem_from_tensor(tensor, seed=seed, rank=str(rank), mode=str(mode))
        if epsilon != definition.EPSILON:
            problem = PhiProblem(case=problem.case, size=problem.size, rank=rank, mode=mode, seed=seed,
                                 epsilon=epsilon, given=tensor)
        reference = KERNEL.oracle(problem)
        assert np.abs(reference).max() > 0
        for name in names:
            instance = KERNEL.variant(name)(**settings.get(name, {}))
            result = run_once(KERNEL, instance, problem, reference)
            assert result.check.passed, f"{name} mode {mode}: {result.check.describe()}"


@pytest.mark.parametrize("dims", [(40, 30, 50), (20, 9, 30, 12), (8, 10, 6, 12, 30)])
@pytest.mark.parametrize("rank", [3, 10])
def test_cpu_variants_match_the_oracle(dims: tuple[int, ...], rank: int, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    _check_all_modes(CPU, random_tensor(rng, dims, 3000), rank, fresh_seed)


def test_dots_below_epsilon(fresh_seed: int) -> None:
    """With ε above many of the dots, max(dot, ε) decides: every variant must clamp like the oracle."""
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, (30, 20, 25), 2000)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="4", mode="0")
    dots = np.einsum("jr,jr->j", problem.b[problem.rows], problem.pi)
    epsilon = float(np.median(dots))
    _check_all_modes(CPU, tensor, 4, fresh_seed, epsilon=epsilon)


def test_heavy_rows_and_launch_settings(fresh_seed: int) -> None:
    """A row holding 60 % of the nonzeros spans many chunks; tiny chunks, one thread."""
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, (50, 40, 30), 5000, heavy=0.6)
    settings = {"numba-segmented": {"per_thread": 7, "threads": 1}, "numba-privatized": {"threads": 1}}
    _check_all_modes(list(settings), tensor, 10, fresh_seed, **settings)
    _check_all_modes(["numba-segmented"], tensor, 10, fresh_seed, **{"numba-segmented": {"per_thread": 1}})


@pytest.mark.parametrize("name, kernel_function, parts", [("numba-segmented", "_segmented", lambda args: args[9].shape[0]),
                                                         ("numba-privatized", "_privatized", lambda args: args[7].shape[0])],
                         ids=["numba-segmented", "numba-privatized"])
def test_numba_variants_follow_set_num_threads(name: str, kernel_function: str, parts, monkeypatch: pytest.MonkeyPatch,
                                               fresh_seed: int) -> None:
    """With ``numba.set_num_threads(1)`` before prepare (threads left at 0), the variant runs on one
    thread and splits the work for one: CHUNKS_PER_THREAD chunks (segmented), one private Φ (privatized)."""
    import importlib

    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one Numba thread here: set_num_threads(1) changes nothing to observe")
    module = importlib.import_module(f"portabench.implementations.phi.{name.replace('-', '_')}")
    real, seen = getattr(module, kernel_function), []

    def spy(*args):
        seen.append((numba.get_num_threads(), parts(args)))
        return real(*args)

    monkeypatch.setattr(module, kernel_function, spy)
    rng = np.random.default_rng(fresh_seed)
    problem = KERNEL.problem_from_tensor(random_tensor(rng, (40, 30, 20), 3000), seed=fresh_seed, rank="5", mode="0")
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        result = run_once(KERNEL, name, problem)
    finally:
        numba.set_num_threads(previous)
    assert result.check.passed, result.check.describe()
    chunks = module.CHUNKS_PER_THREAD if name == "numba-segmented" else 1  # the split for one thread
    assert seen and all(s == (1, chunks) for s in seen), seen


def test_one_nonzero_and_tiny_tensors(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    one = SparseTensor((3, 4, 5), np.array([[2, 1, 4]]), np.array([3.0]))
    _check_all_modes(CPU, one, 10, fresh_seed)
    _check_all_modes(CPU, random_tensor(rng, (2, 2, 2), 5), 2, fresh_seed)


def test_the_check_catches_wrong_answers(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, (30, 20, 25), 4000)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="10", mode="1")
    reference = KERNEL.oracle(problem)
    assert KERNEL.check(problem, reference, reference).passed
    dropped = phi(problem.rows[1:], tensor.values[1:], problem.b, problem.pi[1:], problem.epsilon)
    assert not KERNEL.check(problem, dropped, reference).passed
    unclamped = phi(problem.rows, tensor.values, problem.b, problem.pi, 1e-300)
    assert KERNEL.check(problem, unclamped, reference).passed  # the dots are far above ε here
    bad = reference.copy()
    bad[3, 2] = np.nan
    assert not KERNEL.check(problem, bad, reference).passed
    empty = int(np.setdiff1d(np.arange(tensor.dims[1]), problem.rows)[0])
    bad = reference.copy()
    bad[empty, 0] = 1e-3  # a row without nonzeros must stay exactly zero
    assert not KERNEL.check(problem, bad, reference).passed
    assert not KERNEL.check(problem, reference[:-1], reference).passed


def test_pressure_points_are_verified_unperturbed_then_perturbed(fresh_seed: int) -> None:
    """A perturbed variant passes the check through its unperturbed call, then times a different
    (deliberately wrong) one; a perturbation a variant lacks is a skip reason."""
    variant_cls = KERNEL.variant("numba-privatized")
    instance = prepare_verified(KERNEL, variant_cls(perturbation="reuse"), "uber", 20000, seed=fresh_seed % 1000)
    problem = KERNEL.problem("uber", 20000, seed=fresh_seed % 1000)
    instance.run()
    assert not KERNEL.check(problem, instance.output(), KERNEL.oracle(problem)).passed
    assert KERNEL.variant("numba-segmented")(perturbation="no-atomics").supports(problem) is not None
    assert KERNEL.variant("scipy-scatter")(perturbation="reuse").supports(problem) is not None
    with pytest.raises(PortabenchError, match="unknown perturbation"):
        variant_cls(perturbation="faster")


def test_standin_problem_is_seeded_and_sized() -> None:
    a = KERNEL.problem("lbnl-network", 20000, seed=4, mode="4")
    b = KERNEL.problem("lbnl-network", 20000, seed=4, mode="4")
    assert a.tensor.order == 5 and abs(a.tensor.nnz - 20000) < 200
    np.testing.assert_array_equal(a.pi, b.pi)
    assert a.pi.shape == (a.tensor.nnz, 10) and (a.pi > 0).all() and len(np.unique(a.pi[:, 0])) > 100


def test_work_models_by_hand() -> None:
    work = definition.work_model((10, 20, 30), 1000, 10, 1)
    assert work.flops == 1000 * 42
    assert work.bytes_counted == 8 * 1000 * 52
    assert work.bytes == 1000 * (80 + 8 + 4) + 2 * 8 * 10 * 20
    refined = definition.segmented_work(1000, 10, 5)
    assert refined.flops == 1000 * (40 + 2 + 3) and refined.bytes_counted == 8 * 1000 * (60 + 4 + 3)
    assert KERNEL.work("nell-2", 1000, rank="10", mode="2").flops > 0


def test_bad_input_gets_clear_errors() -> None:
    with pytest.raises(PortabenchError, match="mode must be an integer in 0..2"):
        KERNEL.problem("nell-2", 1000, mode="3")
    with pytest.raises(PortabenchError, match="rank R must be"):
        KERNEL.problem_options({"rank": "ten"})
    with pytest.raises(PortabenchError, match="unknown case"):
        KERNEL.problem("no-such-tensor", 1000)
    with pytest.raises(PortabenchError, match="SparseTensor"):
        KERNEL.problem_from_tensor(np.zeros((3, 3)))
    with pytest.raises(PortabenchError, match="ε must be a positive"):
        PhiProblem(case="uber", size=100, rank=3, mode=0, epsilon=0.0)


def test_oracle_against_pyttb(fresh_seed: int) -> None:
    """pyttb's calculate_phi after calculate_pi, on a model redistributed to mode n (B = A_n λ)."""
    ttb = pytest.importorskip("pyttb")
    import sys

    cp_apr = sys.modules["pyttb.cp_apr"]
    rng = np.random.default_rng(fresh_seed)
    tensor = load("splatt-med")
    rank = 5
    X = ttb.sptensor(tensor.coords, tensor.values[:, None], tensor.dims)
    model = ttb.ktensor([rng.uniform(0.1, 1.0, (d, rank)) for d in tensor.dims], rng.uniform(0.5, 2.0, rank))
    for mode in range(tensor.order):
        m = model.copy()
        m.redistribute(mode)
        factors = [np.array(u) for u in m.factor_matrices]
        pi = cp_apr.calculate_pi(X, m, rank, mode, tensor.order)
        np.testing.assert_allclose(pi_rows(tensor.coords, factors, mode), pi, rtol=1e-13)
        theirs = cp_apr.calculate_phi(X, m, rank, mode, pi, 1e-10)
        ours = phi(tensor.coords[:, mode], tensor.values, factors[mode], pi, 1e-10)
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12 * np.abs(theirs).max())


def test_cli_verify_a_tensor_file_every_mode(tmp_path, capsys) -> None:
    from portabench.datasets.registry import SHIPPED

    path = SHIPPED / "splatt" / "small4.tns"
    code = main(["verify", "--kernel", "phi", "--tensor", str(path), "--rank", "7", "--seed", "5",
                 "--variant", "numba-segmented", "--variant", "scipy-scatter", "--save", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count("pass") == 2 * 4
    saved = np.load(tmp_path / "phi" / "file-mode2" / "inputs.npz")
    assert {"coords", "values", "b", "pi", "epsilon"} <= set(saved.files)


def test_cli_verify_standins_one_mode(capsys) -> None:
    code = main(["verify", "--kernel", "phi", "--case", "nips", "--size", "5000", "--mode", "3",
                 "--seed", "2", "--variant", "numba-privatized", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and out.count("pass") == 1, out


def test_policy_strings() -> None:
    from portabench.implementations.phi.variant import LAUNCH_POLICIES, policy_settings

    assert policy_settings("t256-v8-b1056") == {"threads": 256, "per_thread": 8, "blocks": 1056}
    assert policy_settings("t0-v0") == {}
    with pytest.raises(PortabenchError, match="launch policy"):
        policy_settings("fast")
    for device, policies in LAUNCH_POLICIES.items():  # every policy parses; the defaults leave v and b to the rule
        assert all(isinstance(policy_settings(p), dict) for p in policies)
        assert set(policy_settings(policies[0])) <= {"threads"}


def test_mkl_scatter_loads_mkl_when_prepared_first(fresh_interpreter, fresh_seed: int) -> None:
    """A fresh mkl-scatter prepared without ``unavailable()`` (which used to be what loaded MKL)."""
    from portabench.implementations.mkl import mkl_unavailable

    if mkl_unavailable() is not None:
        pytest.skip(mkl_unavailable())
    result = fresh_interpreter(f"""
import numpy as np
from portabench.datasets.tensors import SparseTensor
from portabench.implementations import get_kernel
kernel = get_kernel("phi")
rng = np.random.default_rng({fresh_seed})
dims = (30, 20, 25)
coords = np.stack([rng.integers(0, d, 500) for d in dims], axis=1)
problem = kernel.problem_from_tensor(SparseTensor(dims, coords, rng.integers(1, 5, 500).astype(float)),
                                     seed={fresh_seed}, rank="6", mode="2")
variant = kernel.variant("mkl-scatter")()
variant.prepare(problem)
variant.run()
check = kernel.check(problem, variant.output(), kernel.oracle(problem))
assert check.passed, check.describe()
""")
    assert result.returncode == 0, result.stderr


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dims", [(300, 200, 250), (40, 30, 50, 20), (8, 10, 6, 12, 30)])
@pytest.mark.parametrize("rank", [10, 3])
def test_gpu_variants_match_the_oracle(dims: tuple[int, ...], rank: int, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, dims, 20000, heavy=0.3)
    settings = {"cupy-segmented": {"per_thread": 3, "threads": 96, "blocks": 5},
                "cupy-atomic": {"threads": 96, "blocks": 7, "per_thread": 4}}
    _check_all_modes(GPU, tensor, rank, fresh_seed)
    _check_all_modes(list(settings), tensor, rank, fresh_seed, **settings)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("per_thread", [1, 3, 8])
def test_gpu_segmented_rows_across_steps_and_chunks(per_thread: int, fresh_seed: int) -> None:
    """Mode 0's rows end on, just before and just after a warp's 32-nonzero steps and chunks, and run
    over many steps: the open row's sums (added without shuffles) must close where the row ends."""
    rng = np.random.default_rng(fresh_seed)
    lengths = rng.permutation([1, 2, 31, 32, 33, 63, 64, 65, 95, 96, 97, 255, 256, 257, 600, 1000, 2500] * 3)
    rows = np.repeat(np.arange(1, 2 * len(lengths), 2), lengths)  # every other row empty
    dims = (2 * len(lengths) + 1, 40, 30)
    coords = np.stack([rows] + [rng.integers(0, d, rows.size) for d in dims[1:]], axis=1)
    tensor = SparseTensor(dims, coords, rng.integers(1, 5, rows.size).astype(float))
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="10", mode="0")
    reference = KERNEL.oracle(problem)
    for name in ("cupy-segmented", "cupy-segmented-presorted"):
        instance = KERNEL.variant(name)(per_thread=per_thread, threads=64)
        result = run_once(KERNEL, instance, problem, reference)
        assert result.check.passed, f"{name}, {per_thread} a lane: {result.check.describe()}"


@gpu
@pytest.mark.gpu
def test_gpu_dots_below_epsilon_and_many_chunks(monkeypatch: pytest.MonkeyPatch, fresh_seed: int) -> None:
    monkeypatch.setattr(variant, "KR_CHUNK_ELEMENTS", 8 * 97)
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, (30, 20, 25, 10), 3000)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="4", mode="0")
    epsilon = float(np.median(np.einsum("jr,jr->j", problem.b[problem.rows], problem.pi)))
    _check_all_modes(GPU, tensor, 4, fresh_seed, epsilon=epsilon)


@gpu
@pytest.mark.gpu
def test_gpu_pressure_points_time_a_different_call(fresh_seed: int) -> None:
    for name, perturbation in itertools.product(["cupy-atomic", "cupy-segmented"], ["no-atomics", "reuse", "both"]):
        instance = prepare_verified(KERNEL, KERNEL.variant(name)(perturbation=perturbation), "uber", 20000, seed=3)
        instance.run()
        problem = KERNEL.problem("uber", 20000, seed=3)
        if perturbation != "no-atomics":  # plain adds may happen to be right
            assert not KERNEL.check(problem, instance.output(), KERNEL.oracle(problem)).passed


@gpu
@pytest.mark.gpu
def test_gpu_every_launch_policy_runs_or_skips_with_the_reason() -> None:
    from portabench.implementations.phi.variant import LAUNCH_POLICIES, policy_settings
    from portabench.implementations.verification import VariantUnavailable

    for name, policy in itertools.product(["cupy-atomic", "cupy-segmented"], LAUNCH_POLICIES["gpu"]):
        try:
            prepare_verified(KERNEL, KERNEL.variant(name)(**policy_settings(policy)), "uber", 20000, seed=5)
        except VariantUnavailable as exc:  # e.g. 1024 threads of a kernel with many registers
            assert "threads per block exceed" in str(exc), (name, policy, exc)


def test_every_pair_of_families_exists_on_each_device() -> None:
    for device, family in itertools.product(("cpu", "gpu"), ("portable", "vendor")):
        assert any(v.runs_on(device) and v.family == family for v in KERNEL.variants)
