"""Every batched SpMV variant against the float64 oracle, on fresh random batches and the datasets.

Shapes are chosen to break index mappings: n = 1, 7, 33, 54 (not multiples of a warp or
of the group size m), N = 1, 5, 37, 100 (not multiples of m or of the CPU chunk), rows
holding only their diagonal next to a full row, both layouts. GPU variants are skipped
with their reason where CuPy cannot run.
"""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

from portabench.datasets.batched import BatchedSystems
from portabench.datasets.batched.systems import random_systems
from portabench.implementations import (
    PortabenchError,
    UnknownNameError,
    WrongAnswerError,
    get_kernel,
    list_variants,
)
from portabench.implementations.batched_spmv import KERNEL as PACKAGE_KERNEL
from portabench.implementations.batched_spmv import cusparse_blockdiag
from portabench.implementations.batched_spmv.cupy_staged import MAX_ENTRIES, CupyStaged, group_size, row_runs
from portabench.implementations.batched_spmv.cupy_team import BatchedSpmvCupyTeam
from portabench.implementations.batched_spmv.definition import (
    LAYOUTS,
    BatchedSpmvProblem,
    componentwise_error,
    tolerance_for,
)
from portabench.implementations.batched_spmv.numba_team import NumbaTeam, spmv_entry_major, spmv_system_major
from portabench.implementations.batched_spmv.scipy_blockdiag import ScipyBlockDiag
from portabench.implementations.batched_spmv.variant import block_diagonal_pattern
from portabench.implementations.model import max_relative_error
from portabench.implementations.verification import VariantUnavailable, prepare_verified, run_once
from portabench.reference.batched_spmv import batched_spmv, componentwise_bound

KERNEL = get_kernel("batched_spmv")
VARIANTS = [v.name for v in list_variants("batched_spmv")]
# (n, N, density of the random pattern)
SHAPES = [(1, 1, 1.0), (7, 5, 0.5), (54, 37, 0.9), (33, 100, 0.1)]


def _skip_if_unavailable(variant: str) -> None:
    reason = KERNEL.variant(variant).unavailable()
    if reason is not None:
        pytest.skip(reason)


def _run(variant, problem: BatchedSpmvProblem):
    """``run_once`` of an available variant, skipped with the reason where it does not take this problem."""
    reason = KERNEL.variant(variant)().supports(problem)
    if reason is not None:
        pytest.skip(reason)
    return run_once(KERNEL, variant, problem)


def _random_problem(seed: int, n: int, count: int, density: float, layout: str) -> BatchedSpmvProblem:
    return KERNEL.problem_from_systems(random_systems(seed, n, count, density), seed=seed, layout=layout)


def _sparse_rows_systems(seed: int, count: int) -> BatchedSystems:
    """n = 40: row 0 full, rows 1-29 only their diagonal, rows 30-39 a few entries each."""
    rng = np.random.default_rng(seed)
    n = 40
    rows = [list(range(n))] + [[i] for i in range(1, 30)]
    rows += [sorted({i, *rng.choice(n, 3, replace=False).tolist()}) for i in range(30, n)]
    row_ptr = np.r_[0, np.cumsum([len(r) for r in rows])]
    col_idx = np.concatenate(rows)
    values = rng.standard_normal((count, col_idx.size))
    values[:, col_idx == np.repeat(np.arange(n), np.diff(row_ptr))] = 1.0 + rng.random((count, n))
    return BatchedSystems(n=n, row_ptr=row_ptr, col_idx=col_idx, values=values, rhs=np.ones((count, n)))


# -- variants against the oracle ------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n, count, density", SHAPES)
def test_variant_matches_oracle_on_random_batches(variant, layout, n, count, density, fresh_seed):
    _skip_if_unavailable(variant)
    problem = _random_problem(fresh_seed, n, count, density, layout)
    result = _run(variant, problem)
    assert result.output.shape == (count, n) and result.output.dtype == np.float64
    assert result.check.passed, (variant, layout, n, count, fresh_seed, result.check)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_variant_matches_oracle_with_diagonal_only_rows(variant, layout, fresh_seed):
    _skip_if_unavailable(variant)
    problem = KERNEL.problem_from_systems(_sparse_rows_systems(fresh_seed, 37), seed=fresh_seed, layout=layout)
    result = _run(variant, problem)
    assert result.check.passed, (variant, layout, fresh_seed, result.check)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case, count", [("gri30", 100), ("isooctane", 37), ("kk-batched", 100)])
def test_variant_matches_oracle_on_datasets(variant, layout, case, count, fresh_seed):
    _skip_if_unavailable(variant)
    problem = KERNEL.problem(case, count, seed=fresh_seed, layout=layout)
    result = _run(variant, problem)
    assert result.check.passed, (variant, layout, case, count, fresh_seed, result.check)


@pytest.mark.usefixtures("cupy_gpu")
@pytest.mark.parametrize("m, threads", [(1, 32), (3, 256), (32, 1024), (50, 32), (50, 256)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_team_group_sizes(m, threads, layout, fresh_seed):
    """Groups of m systems, the last one short (N = 37 is no multiple of m > 1), blocks
    smaller and larger than the group's m n pairs."""
    if BatchedSpmvCupyTeam.unavailable():
        pytest.skip(BatchedSpmvCupyTeam.unavailable())
    for n, count in ((54, 37), (7, 101)):
        problem = _random_problem(fresh_seed, n, count, 0.4, layout)
        result = run_once(KERNEL, BatchedSpmvCupyTeam(m=m, threads_per_block=threads), problem)
        assert result.check.passed, (m, threads, layout, n, count, fresh_seed, result.check)


@pytest.mark.usefixtures("cupy_gpu")
@pytest.mark.parametrize("max_entries, threads", [(4096, 256), (100, 64), (60, 1024), (54, 32)])
def test_staged_runs_of_rows(max_entries, threads, fresh_seed):
    """cupy-staged with the rows cut into one run or many (a run as short as the longest row), blocks of one
    warp to 1024 threads, and lanes per row 1 (n = 7, sparse), 4, 8 (gri30-like), 16 and 32 (2: kk-batched)."""
    for systems in (random_systems(fresh_seed, 54, 37, 0.9), random_systems(fresh_seed, 7, 101, 0.4),
                    _sparse_rows_systems(fresh_seed, 20), random_systems(fresh_seed, 60, 11, 0.3),
                    random_systems(fresh_seed, 200, 9, 0.5), random_systems(fresh_seed, 300, 5, 0.9)):
        problem = KERNEL.problem_from_systems(systems, seed=fresh_seed, layout="system-major")
        variant = CupyStaged(threads_per_block=threads, max_entries=max(max_entries, int(np.diff(systems.row_ptr).max())))
        result = run_once(KERNEL, variant, problem)
        assert result.check.passed, (max_entries, threads, systems.n, fresh_seed, result.check)


def test_staged_row_runs_cover_every_row_once(fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    for _ in range(50):
        lengths = rng.integers(0, 40, rng.integers(1, 300))
        row_ptr = np.r_[0, np.cumsum(lengths)]
        cap = int(rng.integers(max(1, lengths.max()), 2 * max(1, lengths.max()) + 200))
        runs = row_runs(row_ptr, cap)
        assert runs[0] == 0 and runs[-1] == lengths.size and np.all(np.diff(runs) > 0)
        assert np.diff(row_ptr[runs]).max() <= cap
    with pytest.raises(PortabenchError, match="a row of 41 entries"):
        row_runs(np.array([0, 3, 44]), 40)
    assert group_size(np.r_[0, np.cumsum([47] * 54)]) == 8 and group_size(np.array([0, 1, 2])) == 1


def test_staged_declines_what_shared_memory_cannot_hold():
    problem = KERNEL.problem("gri30", 4)
    assert CupyStaged().supports(problem) is None
    assert "system-major only" in CupyStaged().supports(KERNEL.problem("gri30", 4, layout="entry-major"))
    assert "a row of 54 entries" in CupyStaged(max_entries=53).supports(problem)
    for bad in (0, MAX_ENTRIES + 1, 2.5, True):
        with pytest.raises(PortabenchError, match="max_entries"):
            CupyStaged(max_entries=bad)


@pytest.mark.parametrize("m", [0, 51, -1, 2.5, True])
def test_team_group_size_out_of_range_is_rejected(m):
    with pytest.raises(PortabenchError, match=r"cupy-team: m .* 1\.\.50"):
        BatchedSpmvCupyTeam(m=m)


@pytest.mark.parametrize("chunk", [1, 3, 16, 64])
def test_numba_entry_major_chunks(chunk, fresh_seed):
    """Chunks of systems, the last one short (N = 37)."""
    problem = _random_problem(fresh_seed, 33, 37, 0.3, "entry-major")
    variant = NumbaTeam(chunk=chunk)
    assert 1 <= variant.chunk_for(37) <= chunk
    result = run_once(KERNEL, variant, problem)
    assert result.check.passed, (chunk, fresh_seed, result.check)


def test_numba_chunk_choice(monkeypatch):
    import numba

    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    assert NumbaTeam().chunk_for(10240) == 512  # the cap
    assert NumbaTeam().chunk_for(100) == 16  # the floor: 100 / 8 per thread is smaller
    assert NumbaTeam().chunk_for(1000) == 125  # four chunks per thread
    assert NumbaTeam(chunk=4).chunk_for(1000) == 4
    with pytest.raises(PortabenchError, match="chunk"):
        NumbaTeam(chunk=0)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_repeated_runs_give_the_same_answer(variant, layout, fresh_seed):
    """Timing repeats run(): each run must start from the initial y, not the last output."""
    _skip_if_unavailable(variant)
    problem = _random_problem(fresh_seed, 33, 37, 0.3, layout)
    result = _run(variant, problem)
    first = result.output.copy()
    result.variant.run()
    result.variant.run()
    again = result.variant.output()
    assert KERNEL.check(problem, again, result.reference).passed
    if variant != "cusparse-blockdiag":  # cuSPARSE's default CSR SpMV need not be bitwise reproducible
        assert np.array_equal(first, again)


# -- wrong answers are caught ---------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_corrupted_output_fails_the_check(variant, monkeypatch, fresh_seed):
    _skip_if_unavailable(variant)
    problem = _random_problem(fresh_seed, 33, 37, 0.3, "system-major")
    bound = problem.error_scale()
    k, j = np.unravel_index(np.argmax(bound), bound.shape)
    cls = KERNEL.variant(variant)
    honest = cls.output

    def corrupted(self):
        out = honest(self).copy()
        out[k, j] += 1e-6  # the bound is at most ~1e5 here: an error of >= 1e-11, far above 1e-13
        return out

    assert _run(variant, problem).check.passed
    monkeypatch.setattr(cls, "output", corrupted)
    check = run_once(KERNEL, variant, problem).check
    assert not check.passed and check.max_rel_error > 1e-12, check
    assert "componentwise" in check.describe()


class _ForgetsBetaY(ScipyBlockDiag):
    """A broken variant: y_out = alpha A x, the beta y term dropped."""

    def bind(self, arrays, layout):
        run = super().bind(arrays, layout)
        y = arrays["y"]

        def broken():
            run()
            arrays["y_out"] -= arrays["beta"][:, None] * y if layout == "system-major" else arrays["beta"] * y

        return broken


class _SkipsLastSystem(ScipyBlockDiag):
    """A broken variant: the last system's output is never written (left as NaN)."""

    def bind(self, arrays, layout):
        run = super().bind(arrays, layout)

        def broken():
            run()
            if layout == "system-major":
                arrays["y_out"][-1] = np.nan
            else:
                arrays["y_out"][:, -1] = np.nan

        return broken


@pytest.mark.parametrize("broken", [_ForgetsBetaY, _SkipsLastSystem])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_wrong_answers_are_never_timed(broken, layout, monkeypatch, fresh_seed):
    monkeypatch.setitem(KERNEL._variants, "scipy-blockdiag", broken)
    with pytest.raises(WrongAnswerError, match="batched_spmv/scipy-blockdiag on kk-batched.*layout"):
        prepare_verified(KERNEL, "scipy-blockdiag", "kk-batched", 5, seed=fresh_seed, options={"layout": layout})


def test_check_rejects_nan_inf_and_wrong_shapes(fresh_seed):
    problem = _random_problem(fresh_seed, 7, 5, 0.5, "system-major")
    reference = KERNEL.oracle(problem)
    assert KERNEL.check(problem, reference.copy(), reference).passed
    for k, j, bad in ((0, 0, np.nan), (4, 6, np.inf), (2, 3, -np.inf)):
        out = reference.copy()
        out[k, j] = bad
        assert not KERNEL.check(problem, out, reference).passed, bad
    assert not KERNEL.check(problem, reference[:, :-1], reference).passed
    assert not KERNEL.check(problem, reference.T, reference).passed


def test_check_is_componentwise_not_relative():
    """Where the sum cancels, a relative error explodes; the componentwise one does not."""
    reference = np.array([[0.0, 1.0]])
    bound = np.array([[10.0, 1.0]])
    output = np.array([[1e-14, 1.0]])  # an error of 1e-15 of the terms' magnitude
    assert componentwise_error(output, reference, bound) == pytest.approx(1e-15)
    assert max_relative_error(output, reference) > 1e100
    assert componentwise_error(np.array([[0.0, 1.0 + 2e-13]]), reference, bound) > 1e-13
    assert np.isnan(componentwise_error(np.array([[np.nan, 1.0]]), reference, bound))


def test_tolerance_covers_rounding_of_long_rows():
    assert tolerance_for(54) == 1e-13
    assert tolerance_for(448) == 1e-13
    assert tolerance_for(10_000) == pytest.approx(2 * 10_002 * 2.0**-53)


# -- the oracle -----------------------------------------------------------------------

def test_oracle_on_hand_values():
    # A_0 = [[2, 0], [1, 3]], A_1 = [[-1, 0], [4, 0.5]] on the pattern {(0,0), (1,0), (1,1)}.
    row_ptr, col_idx = np.array([0, 1, 3]), np.array([0, 0, 1])
    values = np.array([[2.0, 1.0, 3.0], [-1.0, 4.0, 0.5]])
    x = np.array([[1.0, 2.0], [3.0, -1.0]])
    y = np.array([[1.0, 1.0], [2.0, 0.5]])
    alpha, beta = np.array([2.0, -1.0]), np.array([0.5, 3.0])
    # 2 [2, 7] + 0.5 [1, 1]; -1 [-3, 11.5] + 3 [2, 0.5]
    assert np.array_equal(batched_spmv(row_ptr, col_idx, values, x, y, alpha, beta), [[4.5, 14.5], [9.0, -10.0]])
    # 2 [2, 7] + 0.5 [1, 1]; 1 [3, 12.5] + 3 [2, 0.5]
    assert np.array_equal(componentwise_bound(row_ptr, col_idx, values, x, y, alpha, beta), [[4.5, 14.5], [9.0, 14.0]])


def _empty_rows_case(seed):
    """n = 5 with rows 0, 2 and 4 empty (the datasets never have one: the kernels might)."""
    rng = np.random.default_rng(seed)
    row_ptr, col_idx = np.array([0, 0, 2, 2, 3, 3], dtype=np.int32), np.array([1, 4, 0], dtype=np.int32)
    count, n = 3, 5
    values, x, y = rng.standard_normal((count, 3)), rng.standard_normal((count, n)), rng.standard_normal((count, n))
    alpha, beta = rng.uniform(0.5, 2, count), rng.uniform(0.5, 2, count)
    dense = np.zeros((count, n, n))
    dense[:, [1, 1, 3], col_idx] = values
    expected = alpha[:, None] * np.einsum("kij,kj->ki", dense, x) + beta[:, None] * y
    return row_ptr, col_idx, values, x, y, alpha, beta, expected


def test_empty_rows_in_the_oracle_and_the_numba_kernels(fresh_seed):
    row_ptr, col_idx, values, x, y, alpha, beta, expected = _empty_rows_case(fresh_seed)
    assert np.allclose(batched_spmv(row_ptr, col_idx, values, x, y, alpha, beta), expected, rtol=1e-14, atol=1e-14)
    out = np.full_like(y, np.nan)
    spmv_system_major(row_ptr, col_idx.astype(np.uint32), values, x, y, alpha, beta, out)
    assert np.allclose(out, expected, rtol=1e-14, atol=1e-14)
    out_em = np.full_like(y.T, np.nan)
    spmv_entry_major(row_ptr, col_idx.astype(np.uint32), np.ascontiguousarray(values.T), np.ascontiguousarray(x.T),
                     np.ascontiguousarray(y.T), alpha, beta, out_em, np.int64(2))
    assert np.allclose(out_em.T, expected, rtol=1e-14, atol=1e-14)
    # No entries at all: y = beta y.
    empty = batched_spmv(np.zeros(6, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros((3, 0)), x, y, alpha, beta)
    assert np.array_equal(empty, beta[:, None] * y)


def test_block_diagonal_pattern_with_empty_rows(fresh_seed):
    row_ptr, col_idx, values, *_ = _empty_rows_case(fresh_seed)
    count, n = values.shape[0], row_ptr.size - 1
    indptr, indices = block_diagonal_pattern(np, row_ptr, col_idx, count, n, np.int32)
    assert indptr.dtype == indices.dtype == np.int32
    blocks = sp.csr_array((values.reshape(-1), indices, indptr), shape=(count * n, count * n)).toarray()
    singles = [sp.csr_array((values[k], col_idx, row_ptr), shape=(n, n)).toarray() for k in range(count)]
    assert np.array_equal(blocks, scipy.linalg.block_diag(*singles))


def test_oracle_does_not_depend_on_the_layout(fresh_seed):
    sm = KERNEL.problem("gri30", 5, seed=fresh_seed)
    em = KERNEL.problem("gri30", 5, seed=fresh_seed, layout="entry-major")
    assert np.array_equal(KERNEL.oracle(sm), KERNEL.oracle(em))


# -- problems, inputs and the work model ----------------------------------------------

def test_inputs_are_random_seeded_and_in_the_layout(fresh_seed):
    count = 50
    sm = KERNEL.problem("kk-batched", count, seed=fresh_seed).inputs()
    em = KERNEL.problem("kk-batched", count, seed=fresh_seed, layout="entry-major").inputs()
    assert set(sm) == set(em) == {"row_ptr", "col_idx", "values", "x", "y", "alpha", "beta"}
    assert sm["values"].shape == (count, 1624) and sm["x"].shape == sm["y"].shape == (count, 200)
    assert em["values"].shape == (1624, count) and em["x"].shape == em["y"].shape == (200, count)
    for name in ("values", "x", "y"):
        assert em[name].flags.c_contiguous and np.array_equal(em[name], sm[name].T)
    for name, low, high in (("x", 0.5, 1.5), ("y", 0.5, 1.5), ("alpha", 0.5, 2.0), ("beta", 0.5, 2.0)):
        a = sm[name]
        assert (np.abs(a) >= low).all() and (np.abs(a) < high).all(), name
        assert (a > 0).any() and (a < 0).any(), name
        assert np.unique(a).size > 0.99 * a.size, name
        assert not np.array_equal(a, KERNEL.problem("kk-batched", count, seed=fresh_seed + 1).inputs()[name]), name
        assert np.array_equal(a, KERNEL.problem("kk-batched", count, seed=fresh_seed).inputs()[name]), name
    with pytest.raises(ValueError):
        sm["x"][0, 0] = 0.0  # shared, cached inputs are read-only
    # The stand-ins' values follow the seed too.
    gri = KERNEL.problem("gri30", 3, seed=fresh_seed).inputs()["values"]
    assert not np.array_equal(gri, KERNEL.problem("gri30", 3, seed=fresh_seed + 1).inputs()["values"])


def test_problem_from_systems_keeps_the_given_systems(fresh_seed):
    systems = random_systems(fresh_seed, 7, 5, 0.5)
    problem = KERNEL.problem_from_systems(systems, seed=fresh_seed, layout="entry-major")
    assert problem.case == "file" and problem.size == 5 and problem.systems is systems
    assert np.array_equal(problem.inputs()["values"], systems.values.T)


def test_work_model_by_hand():
    # kk-batched: n = 200, nnz = 1624. 3 (1624*8 + 200*8 + 2*200*8 + 16) + (201 + 1624) 4
    assert KERNEL.work("kk-batched", 3).bytes == 60724
    assert KERNEL.work("kk-batched", 3).flops == 3 * (2 * 1624 + 3 * 200) == 11544
    # gri30: n = 54, nnz = 2560. 10 (2560*8 + 54*8 + 2*54*8 + 16) + (55 + 2560) 4
    assert KERNEL.work("gri30", 10).bytes == 228380
    assert KERNEL.work("gri30", 10).flops == 52820
    # Given systems: n = 2, nnz = 3, N = 4. 4 (3*8 + 2*8 + 2*2*8 + 16) + (3 + 3) 4
    systems = BatchedSystems(n=2, row_ptr=[0, 1, 3], col_idx=[0, 0, 1], values=np.ones((4, 3)), rhs=np.ones((4, 2)))
    work = KERNEL.problem_from_systems(systems).work()
    assert (work.bytes, work.flops) == (376, 48)
    assert KERNEL.problem("gri30", 10).work() == KERNEL.work("gri30", 10)


def test_kernel_is_registered():
    assert get_kernel("batched_spmv") is PACKAGE_KERNEL
    assert {(v.name, *v.devices(), v.family) for v in KERNEL.variants} == {
        ("numba-team", "cpu", "portable"), ("scipy-blockdiag", "cpu", "vendor"),
        ("cupy-team", "gpu", "portable"), ("cupy-base", "gpu", "portable"), ("cupy-staged", "gpu", "portable"),
        ("cusparse-blockdiag", "gpu", "vendor"),
    }
    assert KERNEL.options == {"layout": ("system-major", "entry-major")}
    assert (KERNEL.case_param, KERNEL.size_param) == ("dataset", "N")
    assert KERNEL.case_and_size({"dataset": "gri30", "N": "1024", "variant": "numba-team"}) == ("gri30", 1024)
    assert KERNEL.problem_options({"layout": "entry-major"}) == {"layout": "entry-major"}
    assert KERNEL.problem_options({}) == {"layout": "system-major"}


def test_benchmark_sizes(monkeypatch):
    monkeypatch.setenv("PORTABENCH_BATCHED_N", "100,300")  # read by a plain asv run's suite only
    assert KERNEL.benchmark_sizes("cpu") == [10240]
    assert KERNEL.default_size("cpu") == 10240 and KERNEL.default_size("gpu") == 51200
    assert [s.sizes for s in KERNEL.studies("gpu")] == [(51200,), (1024,)]  # main, then the batch-size study
    assert KERNEL.at_sizes((100, 300)).benchmark_sizes("gpu") == [100, 300]


def test_bad_requests_are_clear_errors():
    with pytest.raises(UnknownNameError, match="unknown layout 'diagonal'.*system-major, entry-major"):
        KERNEL.problem("gri30", 10, layout="diagonal")
    with pytest.raises(UnknownNameError, match="unknown layout"):
        KERNEL.problem_options({"layout": "LayoutRight"})
    with pytest.raises(UnknownNameError, match="unknown case 'bcsstk01'"):
        KERNEL.problem("bcsstk01", 10)
    for count in (0, -3, 2.5):
        with pytest.raises(PortabenchError, match="number of systems N"):
            KERNEL.problem("gri30", count)
    with pytest.raises(PortabenchError, match="number of systems N"):
        KERNEL.work("gri30", 0)
    with pytest.raises(UnknownNameError, match="unknown case"):
        KERNEL.work("file", 10)
    systems = random_systems(1, 3, 2)
    with pytest.raises(UnknownNameError, match="unknown layout"):
        KERNEL.problem_from_systems(systems, layout="row")
    with pytest.raises(PortabenchError, match="BatchedSystems"):
        KERNEL.problem_from_systems(np.ones((2, 3)))
    with pytest.raises(UnknownNameError, match="unknown variant"):
        KERNEL.variant("mkl")


def test_too_little_host_memory_is_a_clear_error(monkeypatch):
    from portabench.datasets import memory

    monkeypatch.setattr(memory, "available_host_memory_bytes", lambda: 1 << 20)
    with pytest.raises(PortabenchError, match=r"needs .* GiB of host memory.*smaller N"):
        KERNEL.problem("isooctane", 1000).inputs()  # 1000 x 6136 values alone are 49 MB
    KERNEL.problem("gri30", 1).inputs()  # small problems still fit


# -- GPU specifics (skipped without CuPy) ---------------------------------------------

def test_gpu_variants_say_why_they_are_unavailable():
    for cls in list_variants("batched_spmv", device="gpu"):
        reason = cls.unavailable()
        if reason is not None:
            assert "CuPy" in reason or "GPU" in reason
            with pytest.raises(VariantUnavailable, match=cls.name):
                run_once(KERNEL, cls.name, KERNEL.problem("kk-batched", 4))


def test_cusparse_declines_what_32_bit_indices_cannot_hold(monkeypatch):
    problem = KERNEL.problem("kk-batched", 10)
    assert cusparse_blockdiag.CusparseBlockDiag().supports(problem) is None
    monkeypatch.setattr(cusparse_blockdiag, "INT32_MAX", 10 * 1624 - 1)
    assert "32-bit" in cusparse_blockdiag.CusparseBlockDiag().supports(problem)


@pytest.mark.parametrize("case", ["gri30", "isooctane"])
def test_the_stored_pool_tiles_to_the_generators_systems(case: str, fresh_seed: int, tmp_path, monkeypatch) -> None:
    """Processes read the stand-in's pool from the dataset cache and tile it: the same systems as generated."""
    from portabench.datasets import load
    from portabench.implementations.batched_inputs import _stored_standin

    monkeypatch.setenv("PORTABENCH_DATA", str(tmp_path))
    seed = fresh_seed % 1000
    for count in (7, 300):  # fewer systems than the pool, and several pools
        stored, generated = _stored_standin(case, count, seed), load(f"{case}@{count / 51200!r}", seed=seed)
        assert stored.n == generated.n and np.array_equal(stored.row_ptr, generated.row_ptr)
        for name in ("values", "rhs", "pool_index"):
            assert np.array_equal(getattr(stored, name), getattr(generated, name)), name
    assert list((tmp_path / "derived" / "batched-pool").glob("*.npz"))  # one pool entry, reused
