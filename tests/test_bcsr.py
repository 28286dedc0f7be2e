"""BCSR SpMV: the oracle, every variant against it on fresh random matrices, the work model, errors, CLI."""

from __future__ import annotations

import dataclasses
import itertools
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from portabench.datasets.matrices import BlockMatrix, to_bcsr, write_mtx
from portabench.implementations import PortabenchError, get_kernel
from portabench.implementations.bcsr import definition
from portabench.implementations.bcsr.cupy_auto import choose
from portabench.implementations.bcsr.numba_blockrow import NumbaBlockRow
from portabench.implementations.bcsr.variant import balanced_bounds, csr16_arrays
from portabench.harness.commands.cli import main
from portabench.implementations.gpu import cupy_unavailable
from portabench.implementations.verification import run_once
from portabench.reference.bcsr import bcsr_matvec

KERNEL = get_kernel("bcsr")
CPU = [v.name for v in KERNEL.variants if v.runs_on("cpu") and v.unavailable() is None]
GPU = [v.name for v in KERNEL.variants if v.runs_on("gpu")]
ALL_BS = list(range(definition.MIN_BS, definition.MAX_BS + 1))
gpu = pytest.mark.skipif(cupy_unavailable() is not None, reason=str(cupy_unavailable()))


def random_block_matrix(rng: np.random.Generator, bs: int, block_rows: int, *, pad: bool = True,
                        density: float = 0.3, empty_rows: int = 1) -> BlockMatrix:
    """Random dense blocks (entries uniform in [0.5, 1.5), random signs) at random block positions;
    ``empty_rows`` block rows hold no block; ``pad``: n is not a multiple of bs (the last block row
    and column are cut short and padded)."""
    pattern = rng.random((block_rows, block_rows)) < density
    pattern[rng.choice(block_rows, size=min(empty_rows, block_rows), replace=False)] = False
    size = block_rows * bs
    dense = np.zeros((size, size))
    for i, j in np.argwhere(pattern):
        dense[i * bs:(i + 1) * bs, j * bs:(j + 1) * bs] = rng.uniform(0.5, 1.5, (bs, bs)) * rng.choice([-1.0, 1.0], (bs, bs))
    n = size - int(rng.integers(1, bs)) if pad else size
    return to_bcsr(sp.csr_array(dense[:n, :n]), bs)


def _check(names: list[str], matrix: BlockMatrix, seed: int) -> None:
    problem = KERNEL.problem_from_matrix(matrix, seed=seed)
    reference = KERNEL.oracle(problem)
    for name in names:
        cls = KERNEL.variant(name)
        if cls().supports(problem) is not None:
            continue
        result = run_once(KERNEL, name, problem, reference)
        assert result.check.passed, f"{name}, bs {matrix.bs}: {result.check.describe()} (seed {seed})"


def test_oracle_matches_the_dense_product(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    for bs in (2, 3, 7):
        m = random_block_matrix(rng, bs, 9)
        x = rng.uniform(-1, 1, m.n)
        dense = m.bsr.toarray()[: m.n, : m.n]
        y = bcsr_matvec(m.bsr.indptr, m.bsr.indices, m.bsr.data, m.padded_vector(x))
        np.testing.assert_allclose(y[: m.n], dense @ x, rtol=1e-13, atol=1e-13)
        assert (y[m.n:] == 0).all()
        bound = bcsr_matvec(m.bsr.indptr, m.bsr.indices, m.bsr.data, m.padded_vector(x), absolute=True)
        np.testing.assert_allclose(bound[: m.n], np.abs(dense) @ np.abs(x), rtol=1e-13)


@pytest.mark.parametrize("bs", ALL_BS)
def test_cpu_variants_match_the_oracle_at_every_block_size(bs: int, fresh_seed: int) -> None:
    """Padded (n not a multiple of bs), with empty block rows."""
    rng = np.random.default_rng([fresh_seed, bs])
    matrix = random_block_matrix(rng, bs, int(rng.integers(6, 14)), empty_rows=2)
    assert matrix.n_padded != matrix.n and (np.diff(matrix.bsr.indptr) == 0).any()
    _check(CPU, matrix, fresh_seed)


@pytest.mark.parametrize("bs", [2, 5, 16, 32])
def test_single_block_row_and_unpadded(bs: int, fresh_seed: int) -> None:
    rng = np.random.default_rng([fresh_seed, bs])
    one = random_block_matrix(rng, bs, 1, density=1.0, empty_rows=0)  # one padded block row
    assert one.block_rows == 1 and one.nnzb == 1
    _check(CPU, one, fresh_seed)
    exact = random_block_matrix(rng, bs, 7, pad=False, empty_rows=0)
    assert exact.n == exact.n_padded
    _check(CPU, exact, fresh_seed)


def test_standins_and_sweep_through_the_framework(fresh_seed: int) -> None:
    """The benchmark cases at a small size: the stand-ins' FEM patterns, a padded one, the sweep's extremes."""
    for case in ("raefsky4", "pwtk", "rm07r", "block-sweep-bs2", "block-sweep-bs32"):
        problem = KERNEL.problem(case, 4, seed=fresh_seed)
        reference = KERNEL.oracle(problem)
        for name in CPU:
            assert run_once(KERNEL, name, problem, reference).check.passed, (case, name)


def test_many_threads_runs_split_block_rows_evenly() -> None:
    row_ptr = np.concatenate([[0], np.cumsum([0, 50, 1, 1, 1, 0, 30, 2, 2, 2, 0])])
    bounds = balanced_bounds(row_ptr, 4)
    assert bounds[0] == 0 and bounds[-1] == row_ptr.size - 1 and (np.diff(bounds) > 0).all()
    assert balanced_bounds(np.array([0]), 8).tolist() == [0]  # no block rows: no runs
    assert balanced_bounds(np.array([0, 0, 0]), 8).tolist() == [0, 2]


def test_the_check_catches_wrong_answers(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    matrix = random_block_matrix(rng, 4, 12, empty_rows=2)
    problem = KERNEL.problem_from_matrix(matrix, seed=fresh_seed)
    reference = KERNEL.oracle(problem)
    assert KERNEL.check(problem, reference.copy(), reference).passed
    # One block dropped: its block row's entries move by a sizeable part of their bound.
    k = int(rng.integers(matrix.nnzb))
    i = int(np.searchsorted(matrix.bsr.indptr, k, side="right")) - 1
    j = int(matrix.bsr.indices[k])
    block_x = problem.x_padded[j * 4:(j + 1) * 4]
    dropped = np.concatenate([reference, np.zeros(matrix.n_padded - matrix.n)])
    dropped[i * 4:(i + 1) * 4] -= matrix.bsr.data[k] @ block_x
    assert not KERNEL.check(problem, dropped[: matrix.n], reference).passed
    nudged = reference * (1 + 1e-9)
    assert not KERNEL.check(problem, nudged, reference).passed
    poisoned = reference.copy()
    poisoned[-1] = np.nan
    assert not KERNEL.check(problem, poisoned, reference).passed
    empty = int(np.flatnonzero(np.diff(matrix.bsr.indptr) == 0)[0])
    written = reference.copy()
    written[empty * 4] = 1e-300  # a row without entries must stay exactly zero
    assert not KERNEL.check(problem, written, reference).passed
    assert not KERNEL.check(problem, reference[:-1], reference).passed


def test_an_unwritten_entry_fails_the_check(monkeypatch: pytest.MonkeyPatch, fresh_seed: int) -> None:
    """y is poisoned with NaN after the warm-up run: a variant that stops writing is caught."""
    original = NumbaBlockRow.bind

    def forgetful(self, matrix, x, y):
        call = original(self, matrix, x, y)
        calls = []

        def once_then_nothing():
            if not calls:  # the warm-up run writes y; the checked run writes nothing
                calls.append(1)
                return call()
            return y

        return once_then_nothing

    monkeypatch.setattr(NumbaBlockRow, "bind", forgetful)
    matrix = random_block_matrix(np.random.default_rng(fresh_seed), 3, 8)
    problem = KERNEL.problem_from_matrix(matrix, seed=fresh_seed)
    assert not run_once(KERNEL, "numba-blockrow", problem).check.passed


def test_inputs_are_seeded_random_and_not_constant() -> None:
    a, b, c = (KERNEL.problem("gt01r", 2, seed=s) for s in (5, 5, 6))
    assert np.array_equal(a.x, b.x) and not np.array_equal(a.x, c.x)
    assert np.unique(a.x).size > a.x.size // 2 and (np.abs(a.x) >= 0.5).all()
    inputs = a.inputs()
    assert set(inputs) == {"row_ptr", "col_idx", "values", "x", "n"}
    assert inputs["values"].shape == (a.matrix.nnzb, 5, 5) and np.unique(inputs["values"]).size > 100


def test_shapes_and_work_model_match_the_generated_matrices() -> None:
    for case in definition.STANDINS + definition.SWEEP:
        problem = KERNEL.problem(case, 4, seed=1)
        assert definition.shape_of(case, 4) == problem.shape(), case
        assert KERNEL.work(case, 4) == problem.work()
    s = definition.Shape(n=10, bs=3, block_rows=4, nnzb=7)  # n_padded 12
    work = definition.work_model(s)
    assert work.bytes == 8 * 12 + 8 * 7 * 9 + 4 * 7 + 4 * 5  # x, val, col_idx, row_ptr once
    assert work.flops == 2 * 7 * 9
    # The stand-ins stop at their real size; the sweep takes exactly the MiB asked for.
    assert definition.shape_of("gt01r", 10_000) == definition.shape_of("gt01r", 600)
    assert definition.shape_of("gt01r", 600).block_rows == 1596
    audikw = definition.shape_of("audikw_1", definition.DEFAULT_MIB["gpu"])
    assert audikw.block_rows == 314_565 and audikw.nnzb == 2 * 4_471_000 - 314_565
    sweep = definition.shape_of("block-sweep-bs6", 64)
    assert abs(sweep.nnzb * 36 * 8 - 64 * 2**20) < 36 * 8 * 16
    assert KERNEL.work("pwtk-real", 64).flops == 2 * (2 * 289_300 - 36_320) * 36  # published counts


def test_a_small_case_is_replicated_block_diagonally_to_the_size(fresh_seed: int) -> None:
    """copies=to-size: ceil(mib / real MiB) copies of the real-size stand-in on the block diagonal (a padded
    one's padding rows inside, as empty rows), the work model of the replicated matrix, a fresh x throughout,
    every CPU variant passing the oracle's check."""
    one = KERNEL.problem("gt01r", 4, seed=fresh_seed)  # 3.9 MiB: the real size
    big = KERNEL.problem("gt01r", 10, seed=fresh_seed, copies="to-size")
    assert definition.copies_of("gt01r", 10, "to-size") == 3 and definition.copies_of("gt01r", 10) == 1
    m, single = big.matrix, one.matrix
    assert (m.block_rows, m.nnzb, m.n) == (3 * single.block_rows, 3 * single.nnzb, 3 * single.n)
    assert m.values_bytes >= 10 * 2**20 and big.shape() == definition.shape_of("gt01r", 10, "to-size")
    assert KERNEL.work("gt01r", 10, copies="to-size") == big.work() == definition.work_model(big.shape())
    assert big.work().bytes > 2.9 * one.work().bytes
    dense = m.bsr.tocsr()
    rows = single.n_padded
    for k in range(3):  # each copy is the stand-in, nothing off the diagonal
        part = dense[k * rows:(k + 1) * rows]
        assert (part[:, k * rows:(k + 1) * rows] != single.bsr.tocsr()).nnz == 0 and part.nnz == single.bsr.nnz
    x = big.x  # fresh random x: no copy multiplies the same x
    assert x.size == m.n and not np.array_equal(x[:rows], x[rows:2 * rows]) and np.unique(x).size > x.size // 2
    reference = KERNEL.oracle(big)
    for name in CPU:
        result = run_once(KERNEL, name, big, reference)
        assert result.check.passed, f"{name}: {result.check.describe()} (seed {fresh_seed})"
    # A padded stand-in (bmw7st_1: n mod 6 = 5): the inner copies' padding rows are empty rows of the matrix.
    padded = definition.replicate(random_block_matrix(np.random.default_rng(fresh_seed), 4, 7), 3)
    inner = definition.Shape(n=padded.n, bs=4, block_rows=padded.block_rows, nnzb=padded.nnzb)
    assert inner == definition.replicated(definition.Shape(padded.n - 2 * 28, 4, 7, padded.nnzb // 3), 3)
    _check(CPU, padded, fresh_seed)
    assert definition.shape_of("bmw7st_1", 240, "to-size").n == 2 * 23_558 * 6 + 141_347


def test_copies_keep_larger_and_sweep_cases_and_older_results() -> None:
    """A stand-in larger than the size is scaled down as before (one copy); a sweep matrix is made to size;
    results recorded without the option read as one copy; both main comparisons replicate, the real-size study not."""
    for case in ("audikw_1", "block-sweep-bs6"):
        assert definition.shape_of(case, 64, "to-size") == definition.shape_of(case, 64)
    assert definition.shape_of("gt01r", 64) == definition.shape_of("gt01r", 600)  # results of before: one copy
    assert KERNEL.work("gt01r", 64) == KERNEL.work("gt01r", 64, copies="one")
    for device in ("cpu", "gpu"):
        main, _, real_size = KERNEL.studies(device)
        assert main.options == {"copies": ("to-size",)} and real_size.options == {"copies": ("one",)}
        assert main.cases == real_size.cases and real_size.class_name == f"BcsrRealSize{device.upper()}"
    assert KERNEL.default_size("gpu") == 600
    # On the GPU every main-comparison case is at least 4x an H100's 50 MiB L2, each copy at its real size.
    for case in definition.STANDINS:
        assert KERNEL.work(case, 600, copies="to-size").working_set >= 4 * 50 * 2**20, case
        assert definition.copies_of(case, 600, "to-size") * definition.shape_of(case, 600).nnzb == \
            definition.shape_of(case, 600, "to-size").nnzb
    assert definition.cpu_default_mib(32 * 2**20) == 128 and definition.cpu_default_mib(300 * 2**20) == 1200
    with pytest.raises(PortabenchError, match="unknown copies"):
        KERNEL.problem("gt01r", 4, copies="two")
    # Every main-comparison case at the default CPU size of a 32 MiB L3 has a working set of 4x it (the
    # report's rule), its block values about that (a scaled-down stand-in's block rows are rounded).
    for case in definition.STANDINS:
        assert KERNEL.work(case, 128, copies="to-size").working_set >= 4 * 32 * 2**20, case
        assert definition.shape_of(case, 128, "to-size").nnzb * definition.block_size(case) ** 2 * 8 > 127.9 * 2**20


def test_a_real_case_reads_the_cached_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_seed: int) -> None:
    """``<name>-real`` reads the SuiteSparse archive in the cache (here a small stand-in packed as GT01R.tar.gz)."""
    import tarfile

    from portabench.datasets import get_dataset, register_local
    from portabench.datasets.matrices import standin

    monkeypatch.setenv("PORTABENCH_DATA", str(tmp_path / "cache"))
    small = standin("gt01r", 0.05, fresh_seed)
    write_mtx(small.to_csr(), tmp_path / "GT01R.mtx")
    with tarfile.open(tmp_path / "GT01R.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "GT01R.mtx", arcname="GT01R/GT01R.mtx")
    register_local(get_dataset("gt01r"), tmp_path / "GT01R.tar.gz")
    assert definition.real_unavailable("gt01r-real") is None
    problem = KERNEL.problem("gt01r-real", 4, seed=fresh_seed)
    assert problem.matrix.n == small.n and problem.bs == 5 and problem.matrix.nnzb == small.nnzb
    reference = KERNEL.oracle(problem)
    for name in CPU:
        assert run_once(KERNEL, name, problem, reference).check.passed, name
    definition.case_matrix.cache_clear()


def test_large_matrices_are_stored_and_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from portabench.datasets.matrices import store

    monkeypatch.setenv("PORTABENCH_DATA", str(tmp_path))
    monkeypatch.setattr(store, "MIN_STORED_BYTES", 1)
    calls = []

    def generate() -> BlockMatrix:
        calls.append(1)
        return random_block_matrix(np.random.default_rng(7), 3, 10)

    first = store.stored("demo", 0.5, 7, 1000, generate)
    again = store.stored("demo", 0.5, 7, 1000, generate)
    assert len(calls) == 1 and again.n == first.n and again.bs == 3
    assert (again.bsr != first.bsr).nnz == 0 and np.array_equal(again.bsr.indices, first.bsr.indices)
    (path,) = (tmp_path / "standins").glob("demo*.npz")
    path.write_bytes(b"damaged")
    store.stored("demo", 0.5, 7, 1000, generate)  # a damaged copy is generated again and replaced
    assert len(calls) == 2 and store.stored("demo", 0.5, 7, 1000, generate).n == first.n and len(calls) == 2
    store.stored("demo", 0.5, 8, 1000, generate)  # another seed: another matrix
    assert len(calls) == 3
    definition.case_matrix.cache_clear()
    stand = KERNEL.problem("pwtk", 2, seed=4).matrix  # through the store (threshold 1 byte), twice
    definition.case_matrix.cache_clear()
    assert (KERNEL.problem("pwtk", 2, seed=4).matrix.bsr != stand.bsr).nnz == 0
    definition.case_matrix.cache_clear()


def test_sizes_too_small_for_a_generator_are_named() -> None:
    assert definition.too_small("block-sweep-bs32", 1) and definition.too_small("block-sweep-bs24", 1)
    assert definition.too_small("block-sweep-bs16", 1) is None and definition.too_small("block-sweep-bs32", 4) is None
    assert all(definition.too_small(c, 1) is None for c in definition.STANDINS + definition.REAL)
    for case in definition.STANDINS + definition.SWEEP:  # every case the smoke run's 1 MiB does not skip runs
        if definition.too_small(case, 1) is None:
            assert KERNEL.problem(case, 1).matrix.nnzb == definition.shape_of(case, 1).nnzb
    with pytest.raises(PortabenchError, match="too few"):
        KERNEL.problem("block-sweep-bs32", 1).matrix


def test_block_sizes_of_cases() -> None:
    assert definition.block_size("block-sweep-bs24") == 24
    assert definition.block_size("rm07r") == 7 and definition.block_size("audikw_1-real") == 3
    assert [definition.block_size(c) for c in definition.SWEEP] == list(definition.SWEEP_BLOCK_SIZES)


def test_bad_input_gets_clear_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(PortabenchError, match="block size must be an integer in 2..32"):
        KERNEL.problem_from_matrix(sp.random(40, 40, density=0.1, random_state=1), block_size=33)
    with pytest.raises(PortabenchError, match="block size must be"):
        KERNEL.problem_from_matrix(random_block_matrix(rng, 1, 20, pad=False))
    with pytest.raises(PortabenchError, match="square"):
        KERNEL.problem_from_matrix(sp.random(40, 30, density=0.1, random_state=1), block_size=3)
    with pytest.raises(PortabenchError, match="needs a block size"):
        KERNEL.problem_from_matrix(sp.random(40, 40, density=0.1, random_state=1))
    bad = random_block_matrix(rng, 3, 6)
    bad.bsr.data[0, 0, 0] = np.nan
    with pytest.raises(PortabenchError, match="NaN"):
        KERNEL.problem_from_matrix(bad)
    with pytest.raises(PortabenchError, match="unknown case"):
        KERNEL.problem("no-such-matrix", 4)
    with pytest.raises(PortabenchError, match="positive whole number of MiB"):
        KERNEL.problem("gt01r", 0)
    with pytest.raises(PortabenchError, match="MiB of block values"):
        KERNEL.parse_sizes("lots", KERNEL.size_env)
    assert KERNEL.at_sizes(KERNEL.parse_sizes("8,16", KERNEL.size_env)).benchmark_sizes("gpu") == [8, 16]
    monkeypatch.setenv("PORTABENCH_DATA", str(tmp_path))  # an empty cache: no real matrix downloaded
    assert "portabench datasets fetch gt01r" in definition.real_unavailable("gt01r-real")
    with pytest.raises(PortabenchError, match="not downloaded"):
        KERNEL.problem("gt01r-real", 4).matrix
    assert all(p.case not in definition.REAL for p in KERNEL.verify_problems(list(KERNEL.cases), 4, 0, {}))


def test_by_block_refuses_large_blocks_and_auto_covers_every_size() -> None:
    problem = KERNEL.problem("block-sweep-bs6", 4)
    assert "up to 5" in KERNEL.variant("cupy-byblock")().supports(problem)
    l2 = 50 * 2**20

    def shape(bs: int, mib: float, per_row: float, fill: float = 1.0) -> definition.Shape:
        block_rows = max(1, round(mib * 2**20 / (8 * bs * bs * per_row)))
        return definition.Shape(block_rows * bs, bs, block_rows, round(per_row * block_rows), fill=fill)

    for bs in ALL_BS:
        for mib, per_row, fill in ((4, 12.0, 1.0), (600, 15.0, 1.0), (600, 27.0, 1.0), (4, 12.0, 1.2), (600, 15.0, 2.0)):
            assert bs <= choose(shape(bs, mib, per_row, fill), l2).max_bs
    # The measured cases (README): stored zeros beyond L2 -> the fewest bytes of bit-mask blocks, CSR16 and CSR; in L2,
    # long block rows -> by-block, stored zeros -> CSR; dense blocks beyond L2 -> row-per-thread, long block rows too.
    assert choose(shape(3, 15, 32.8, 1.465), l2).name == "cupy-byblock"  # raefsky4
    assert choose(shape(3, 609, 32.8, 1.465), l2).name == "cupy-csr"  # raefsky4 replicated, span unknown: CSR's bytes
    wide = dataclasses.replace(shape(3, 609, 32.8, 1.465), span=definition.MAX_SPAN)
    assert choose(wide, l2).name == "cupy-csr16"  # raefsky4 replicated, rows within reach: CSR16
    assert choose(dataclasses.replace(wide, span=definition.MAX_SPAN + 1), l2).name == "cupy-csr"
    assert choose(shape(5, 602, 12.8, 1.182), l2).name == "cupy-bitmask"  # gt01r replicated
    assert choose(shape(12, 600, 15.0, 2.0), l2).name == "cupy-csr"  # bs 12: no 64-bit mask
    assert choose(shape(3, 592, 27.4), l2).name == "cupy-rowperthread"  # audikw_1
    assert choose(shape(3, 40, 27.4), l2).name == "cupy-byblock"  # audikw_1's pattern in L2
    assert choose(shape(5, 3.9, 12.8, 1.182), l2).name == "cupy-csr"  # gt01r, in L2
    assert choose(shape(6, 119, 18.4, 2.132), l2).name == "cupy-bitmask"  # bmw7st_1
    assert choose(shape(6, 149, 14.9, 1.678), l2).name == "cupy-bitmask"  # pwtk
    assert choose(shape(7, 562, 27.6, 1.967), l2).name == "cupy-bitmask"  # rm07r
    assert choose(dataclasses.replace(shape(7, 562, 27.6, 1.967), span=3000), l2).name == "cupy-bitmask"
    assert choose(shape(7, 562, 27.6, 1.0), l2).name == "cupy-rowperthread"  # dense blocks: nothing to leave out
    assert choose(shape(2, 600, 15.0), l2).name == "cupy-rowperthread"  # the sweep's bs 2
    assert choose(shape(4, 4, 12.0), l2).name == "cupy-byblock"  # dense blocks in L2
    assert choose(shape(6, 4, 40.0), l2).name == "cupy-rowperthread"  # by-block cannot take bs 6


def test_row_per_thread_layouts(fresh_seed: int) -> None:
    """"auto" stores blocks row by row at bs 4 and 8 only; "row" refuses odd block sizes; a bad name is an error."""
    variant = KERNEL.variant("cupy-rowperthread")
    assert [bs for bs in ALL_BS if variant().block_order(bs) == "row"] == [4, 8]
    assert variant(layout="row").block_order(2) == "row" and variant(layout="column").block_order(4) == "column"
    rng = np.random.default_rng(fresh_seed)
    four, six = (random_block_matrix(rng, bs, 6, density=0.5) for bs in (4, 6))
    assert variant().template(four) == (4, 1, 1) and variant(columns="int32").template(six) == (6, 0, 0)
    odd = KERNEL.problem_from_matrix(random_block_matrix(rng, 3, 6, density=0.5, empty_rows=1), seed=fresh_seed)
    assert "even block size" in variant(layout="row").supports(odd)
    assert variant(layout="column").supports(odd) is None
    with pytest.raises(PortabenchError, match="layout must be one of"):
        variant(layout="diagonal")


def _wide_block_matrix(rng: np.random.Generator, bs: int, block_cols: int) -> BlockMatrix:
    """Block row 0 holds blocks in block columns 0 and ``block_cols - 1``; the diagonal is stored too."""
    n = block_cols * bs
    rows = np.concatenate([np.arange(n), np.arange(bs)])
    cols = np.concatenate([np.arange(n), n - bs + np.arange(bs)])
    return to_bcsr(sp.csr_array((rng.uniform(0.5, 1.5, rows.size), (rows, cols)), shape=(n, n)), bs)


def test_row_per_thread_block_column_offsets(fresh_seed: int) -> None:
    """``columns``: 2-byte offsets from each block row's first block column, read as the kernel reads
    them, are the block columns; "auto" takes them where every block row is within 65536 block
    columns, and int32 otherwise; "offset16" refuses a wider block row with the reason."""
    from portabench.implementations.bcsr.cupy_rowperthread import offset16_arrays

    variant = KERNEL.variant("cupy-rowperthread")
    rng = np.random.default_rng(fresh_seed)
    matrix = KERNEL.problem("block-sweep-bs4", 4, seed=fresh_seed).matrix
    row_ptr, first_col, offsets, blocks = offset16_arrays(matrix, "row")
    assert offsets.dtype == np.uint16 and first_col.size == matrix.block_rows
    block_row = np.repeat(np.arange(matrix.block_rows), np.diff(row_ptr))
    assert np.array_equal(first_col[block_row] + offsets.astype(np.int64), matrix.bsr.indices[: matrix.nnzb])
    assert np.array_equal(blocks, matrix.bsr.data[: matrix.nnzb])
    assert variant().offset16(matrix) and not variant(columns="int32").offset16(matrix)
    assert len(variant(columns="int32").kernel_arrays(matrix)) == 4
    wide = _wide_block_matrix(rng, 2, (1 << 16) + 1)
    assert not variant().offset16(wide) and variant().template(wide)[2] == 0
    reason = variant(columns="offset16").supports(KERNEL.problem_from_matrix(wide, seed=fresh_seed))
    assert "within 65536 block columns" in reason and "65537" in reason
    with pytest.raises(PortabenchError, match="2-byte offsets take 65536"):
        offset16_arrays(wide, "column")
    with pytest.raises(PortabenchError, match="columns must be one of"):
        variant(columns="int16")


def test_work_model_charges_the_smallest_storage() -> None:
    """Dense blocks: BCSR's bytes; blocks with many stored zeros: bit-mask blocks' (bs <= 8; the
    column in the mask's word to bs 6), else CSR's bytes of the true nonzeros."""
    dense = definition.Shape(n=10, bs=3, block_rows=4, nnzb=7)
    assert definition.work_model(dense).bytes == definition.bcsr_bytes(dense) < definition.bitmask_bytes(dense)
    assert definition.bcsr_bytes(dense) < definition.csr_bytes(dense)
    assert definition.work_model(dense).working_set == definition.bcsr_bytes(dense)
    sparse = definition.Shape(n=10, bs=3, block_rows=4, nnzb=7, fill=3.0)  # 21 nonzeros in 63 entries
    assert definition.csr_bytes(sparse) == 8 * 12 + 12 * 21 + 4 * 11
    assert definition.bitmask_bytes(sparse) == 8 * 12 + 8 * 21 + 8 * 7 + 12 * 5
    assert definition.work_model(sparse).bytes == definition.bitmask_bytes(sparse) < definition.csr_bytes(sparse)
    assert definition.work_model(sparse).flops == definition.work_model(dense).flops == 2 * 7 * 9
    assert definition.work_model(sparse).working_set == definition.bcsr_bytes(sparse)  # in cache: the blocks
    wide = definition.Shape(n=90, bs=9, block_rows=10, nnzb=20, fill=3.0)  # no 64-bit mask holds 81 entries
    assert definition.work_model(wide).bytes == definition.csr_bytes(wide) < definition.bcsr_bytes(wide)
    rm07r = definition.shape_of("rm07r", 600)
    assert rm07r.fill == pytest.approx(1.967, abs=1e-3)
    assert definition.bitmask_bytes(rm07r) == (8 * rm07r.n_padded + 8 * rm07r.nnz + 12 * rm07r.nnzb
                                               + 12 * (rm07r.block_rows + 1))  # bs 7: the column beside the mask
    assert KERNEL.work("rm07r", 600).bytes == pytest.approx(definition.bitmask_bytes(rm07r))
    generated = KERNEL.problem("rm07r", 4, seed=1).matrix  # the stand-in's zeros: the published fill within 2 %
    assert generated.fill == pytest.approx(rm07r.fill, rel=0.02)
    rng = np.random.default_rng(5)
    given = KERNEL.problem_from_matrix(random_block_matrix(rng, 4, 30, density=0.2, empty_rows=2))
    assert given.shape().fill == given.matrix.fill


def test_cli_verify_a_matrix_market_file(tmp_path: Path, capsys, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    matrix = random_block_matrix(rng, 5, 10)
    path = tmp_path / "a.mtx"
    write_mtx(matrix.to_csr(), path)
    from portabench.datasets.errors import BlockPaddingWarning

    with warnings.catch_warnings():  # the matrix's n is rarely a multiple of 5: padding is then noticed
        warnings.simplefilter("ignore", BlockPaddingWarning)
        code = main(["verify", "--kernel", "bcsr", "--matrix", str(path), "--block-size", "5", "--seed", "3",
                     "--variant", "numba-blockrow", "--variant", "scipy-bsr", "--save", str(tmp_path / "out"),
                     "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and out.count("pass") == 2, out
    folder = tmp_path / "out" / "bcsr" / "file"
    y = np.load(folder / "numba-blockrow.npy")
    np.testing.assert_allclose(y, matrix.matvec(KERNEL.problem_from_matrix(matrix, seed=3).x), rtol=1e-12)
    with np.load(folder / "inputs.npz") as saved:
        assert int(saved["n"]) == matrix.n and saved["values"].shape[1:] == (5, 5)


def test_cli_verify_standins_by_case(capsys) -> None:
    code = main(["verify", "--kernel", "bcsr", "--case", "bmw7st_1", "--case", "block-sweep-bs7", "--size", "4",
                 "--seed", "1", "--variant", "numba-padded", "--variant", "mkl-bsr", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and out.count("pass") + out.count("skipped") == 4, out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--block-size", "3"], "--block-size goes with --matrix"),
        (["--matrix", "{bad}"], "--matrix needs --block-size"),
        (["--matrix", "{bad}", "--block-size", "3"], "not a valid Matrix Market file"),
        (["--matrix", "{square}", "--block-size", "40"], "block size must be an integer in 2..32"),
        (["--matrix", "{rect}", "--block-size", "3"], "square"),
        (["--case", "gt01r-real"], "not downloaded"),
    ],
)
def test_cli_bad_matrices_are_one_line_errors(argv: list[str], needle: str, tmp_path: Path, capsys,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTABENCH_DATA", str(tmp_path / "cache"))
    (tmp_path / "bad.mtx").write_text("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n9 x\n")
    write_mtx(sp.identity(9, format="csr"), tmp_path / "square.mtx")
    write_mtx(sp.random(9, 6, density=0.5, random_state=2, format="csr"), tmp_path / "rect.mtx")
    files = {k: str(tmp_path / f"{k}.mtx") for k in ("bad", "square", "rect")}
    argv = [a.format(**files) for a in argv]
    assert main(["verify", "--kernel", "bcsr", "--quiet", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("portabench: error:") and "\n" not in err and needle in err, err


@pytest.mark.parametrize("name", ["mkl-bsr", "mkl-csr"])
def test_mkl_variants_load_mkl_when_prepared_first(name: str, fresh_interpreter, fresh_seed: int) -> None:
    """A fresh MKL variant prepared without ``unavailable()`` (which used to be what loaded MKL)."""
    from portabench.implementations.mkl import mkl_unavailable

    if mkl_unavailable() is not None:
        pytest.skip(mkl_unavailable())
    source = f"""
import numpy as np, scipy.sparse as sp
from portabench.datasets.matrices import to_bcsr
from portabench.implementations import get_kernel
kernel = get_kernel("bcsr")
rng = np.random.default_rng({fresh_seed})
matrix = to_bcsr(sp.random(90, 90, density=0.1, random_state=rng, data_rvs=lambda k: rng.uniform(0.5, 1.5, k)).tocsr(), 3)
problem = kernel.problem_from_matrix(matrix, seed={fresh_seed})
variant = kernel.variant({name!r})()
variant.prepare(problem)
variant.run()
check = kernel.check(problem, variant.output(), kernel.oracle(problem))
assert check.passed, check.describe()
"""
    result = fresh_interpreter(source)
    assert result.returncode == 0, result.stderr
    missing = fresh_interpreter(source, MKL_RT="/nonexistent/libmkl_rt.so")
    assert "VariantUnavailable: MKL is not usable" in missing.stderr, missing.stderr


def _popcount(words: np.ndarray) -> np.ndarray:
    return np.unpackbits(np.ascontiguousarray(words, dtype=np.uint64).view(np.uint8)).reshape(-1, 64).sum(axis=1, dtype=np.int64)


@pytest.mark.parametrize("case", ["bmw7st_1", "raefsky4", "block-sweep-bs8"])
def test_bitmask_blocks_walked_as_the_kernel_walks_them(case: str, fresh_seed: int) -> None:
    """``cupy-bitmask``'s format, read as its kernel reads it (a block row's first value, then each
    block's values after the mask's bits of the rows above), gives the oracle's y; only nonzeros
    are stored."""
    from portabench.implementations.bcsr.cupy_bitmask import bitmask_arrays

    problem = KERNEL.problem(case, 4, seed=fresh_seed)
    m, bs = problem.matrix, problem.bs
    row_ptr, start, headers, col, values = bitmask_arrays(m)
    assert values.size == m.to_csr().nnz and np.all(values != 0) and headers.dtype == np.uint64
    if bs <= 6:  # the block column above the mask's bs^2 bits
        assert col.size == 1
        masks, col = headers & np.uint64((1 << bs * bs) - 1), (headers >> np.uint64(bs * bs)).astype(np.int64)
    else:
        masks = headers
    assert np.array_equal(col, m.bsr.indices[: m.nnzb])
    counts = _popcount(masks)
    block_row = np.repeat(np.arange(m.block_rows), np.diff(row_ptr))
    first = start[block_row] + np.cumsum(counts) - counts - (np.cumsum(counts) - counts)[row_ptr[block_row]]
    x, y = problem.x_padded, np.zeros(m.block_rows * bs)
    for r in range(bs):
        for c in range(bs):
            bit = r * bs + c
            on = ((masks >> np.uint64(bit)) & np.uint64(1)).astype(bool)
            at = first + _popcount(masks & np.uint64((1 << bit) - 1))
            np.add.at(y, block_row[on] * bs + r, values[at[on]] * x[col[on] * bs + c])
    reference = KERNEL.oracle(problem)
    assert KERNEL.check(problem, y[: m.n], reference).passed
    with pytest.raises(PortabenchError, match="bs <= 8"):
        bitmask_arrays(KERNEL.problem("block-sweep-bs12", 4, seed=fresh_seed).matrix)


@pytest.mark.parametrize("case", ["raefsky4", "rm07r"])
def test_csr16_offsets_walked_as_the_kernel_walks_them(case: str, fresh_seed: int) -> None:
    """``cupy-csr16``'s format, read as its kernel reads it (x from the row's base column, a 2-byte
    offset per nonzero), gives the oracle's y; every offset fits 16 bits and the base is each row's
    first column, so a shifted base fails."""
    problem = KERNEL.problem(case, 4, seed=fresh_seed)
    row_ptr, base, offsets, values = csr16_arrays(problem.matrix)
    assert offsets.dtype == np.uint16 and base.dtype == np.int32 and values.size == problem.matrix.to_csr().nnz
    lengths = np.diff(row_ptr)
    assert np.all(np.minimum.reduceat(offsets, row_ptr[:-1][lengths > 0]) == 0)
    rows = np.repeat(np.arange(lengths.size), lengths)
    y = np.bincount(rows, weights=values * problem.x_padded[np.repeat(base, lengths) + offsets], minlength=lengths.size)
    assert KERNEL.check(problem, y, KERNEL.oracle(problem)).passed
    shape = definition.matrix_shape(problem.matrix)
    assert 0 < shape.span <= definition.MAX_SPAN and definition.fits_csr16(shape.span)


def test_csr16_refuses_rows_wider_than_its_offsets(fresh_seed: int) -> None:
    """A row whose columns lie more than 65536 apart: the span says so, ``supports`` declines with the
    reason, and building the arrays anyway is an error, not wrapped offsets."""
    n = definition.MAX_SPAN + 8
    a = sp.csr_array((np.array([1.5, -0.75, 2.0]), np.array([0, n - 1, 3]), np.array([0, 2, 3] + [3] * (n - 2))),
                     shape=(n, n))
    matrix = to_bcsr(a, 2)
    assert definition.column_span(matrix) == n
    problem = KERNEL.problem_from_matrix(matrix, seed=fresh_seed)
    for name in ("cupy-csr16", "numba-csr16"):
        assert "rows within 65536 columns" in KERNEL.variant(name)().supports(problem)
    with pytest.raises(PortabenchError, match="2-byte offsets take 65536"):
        csr16_arrays(matrix)


def test_every_pair_of_families_exists_on_each_device() -> None:
    for device, family in itertools.product(("cpu", "gpu"), ("portable", "vendor")):
        assert [v for v in KERNEL.variants if v.runs_on(device) and v.family == family]


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("bs", ALL_BS)
def test_gpu_variants_match_the_oracle_at_every_block_size(bs: int, fresh_seed: int) -> None:
    rng = np.random.default_rng([fresh_seed, bs])
    _check(GPU, random_block_matrix(rng, bs, int(rng.integers(40, 90)), density=0.1, empty_rows=3), fresh_seed)
    _check(GPU, random_block_matrix(rng, bs, 1, density=1.0, empty_rows=0), fresh_seed)


@gpu
@pytest.mark.gpu
def test_gpu_kernels_with_other_launch_shapes(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    for bs in (3, 8, 17):
        matrix = random_block_matrix(rng, bs, 50, density=0.1, empty_rows=4)
        problem = KERNEL.problem_from_matrix(matrix, seed=fresh_seed)
        variants = [KERNEL.variant(name)(threads=96) for name in ("cupy-byblock", "cupy-bycolumn", "cupy-rowperthread")]
        variants += [KERNEL.variant("cupy-rowperthread")(layout=layout, columns=columns)
                     for layout in ("row", "column") for columns in ("offset16", "int32")]
        variants += [KERNEL.variant(name)(threads=96, lanes=g) for name in ("cupy-csr", "cupy-csr16") for g in (4, 32)]
        variants += [KERNEL.variant("cupy-bitmask")(threads=96)]
        for variant in variants:
            if variant.supports(problem) is None:
                assert run_once(KERNEL, variant, problem).check.passed, (variant.name, bs)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("bs", [2, 6, 7])
def test_gpu_variants_on_a_block_row_wider_than_16_bits(bs: int, fresh_seed: int) -> None:
    """Block columns past 65535: row-per-thread's "auto" keeps int32 columns, and bit-mask blocks
    hold them above the mask (bs <= 6) or beside it."""
    _check(GPU, _wide_block_matrix(np.random.default_rng([fresh_seed, bs]), bs, (1 << 16) + 3), fresh_seed)


@gpu
@pytest.mark.gpu
def test_gpu_standins_through_the_framework(fresh_seed: int) -> None:
    for case in ("gt01r", "bmw7st_1", "block-sweep-bs12"):
        problem = KERNEL.problem(case, 4, seed=fresh_seed)
        reference = KERNEL.oracle(problem)
        for name in GPU:
            if KERNEL.variant(name)().supports(problem) is None:
                result = run_once(KERNEL, name, problem, reference)
                assert result.check.passed, (case, name)
                if name == "cupy-auto":  # blocks with stored zeros (fill 1.18, 2.13) go to CSR, dense bs 12 not
                    assert result.variant.chosen.name == ("cupy-rowperthread" if "sweep" in case else "cupy-csr")
