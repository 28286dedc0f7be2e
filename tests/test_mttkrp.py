"""MTTKRP: the oracle, every variant against it on fresh random tensors, work models, errors, CLI."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from portabench.datasets import load
from portabench.datasets.tensors import SparseTensor
from portabench.implementations import PortabenchError, get_kernel
from portabench.harness.commands.cli import main
from portabench.implementations.gpu import cupy_unavailable
from portabench.implementations import tensor_inputs
from portabench.implementations.mttkrp import definition, variant
from portabench.implementations.verification import run_once
from portabench.reference.mttkrp import mttkrp

KERNEL = get_kernel("mttkrp")
CPU = [v.name for v in KERNEL.variants if v.runs_on("cpu") and v.unavailable() is None]
GPU = [v.name for v in KERNEL.variants if v.runs_on("gpu")]
gpu = pytest.mark.skipif(cupy_unavailable() is not None, reason=str(cupy_unavailable()))


def random_tensor(rng: np.random.Generator, dims: tuple[int, ...], nnz: int, heavy: float = 0.0) -> SparseTensor:
    """Random coordinates (repeats allowed: they sum) with some indices of every mode unused (empty
    rows), values uniform in [0.5, 1.5) with random signs; ``heavy``: share of nonzeros in mode 0's row 1."""
    coords = np.stack([rng.integers(0, max(1, d - 2), nnz) for d in dims], axis=1)
    coords[: int(heavy * nnz), 0] = 1
    values = rng.uniform(0.5, 1.5, nnz) * rng.choice([-1.0, 1.0], nnz)
    return SparseTensor(dims, coords, values)


def dense_mttkrp(tensor: SparseTensor, factors: list[np.ndarray], mode: int) -> np.ndarray:
    """The definition on the dense tensor: V = X_(n) (Khatri-Rao), by einsum."""
    dense = np.zeros(tensor.dims)
    np.add.at(dense, tuple(tensor.coords.T), tensor.values)
    letters = "abcde"[: tensor.order]
    operands = [dense] + [u for m, u in enumerate(factors) if m != mode]
    spec = letters + "," + ",".join(f"{c}r" for m, c in enumerate(letters) if m != mode) + f"->{letters[mode]}r"
    return np.einsum(spec, *operands)


@pytest.mark.parametrize("dims", [(7, 5, 6), (4, 6, 3, 5), (3, 4, 2, 5, 3)])
def test_oracle_matches_the_dense_definition(dims: tuple[int, ...], fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, dims, 60)
    factors = [rng.standard_normal((d, 4)) for d in dims]
    for mode in range(len(dims)):
        expected = dense_mttkrp(tensor, factors, mode)
        np.testing.assert_allclose(mttkrp(tensor.coords, tensor.values, factors, mode), expected, rtol=1e-12, atol=1e-12)
        bound = mttkrp(tensor.coords, tensor.values, factors, mode, absolute=True)
        assert (bound >= np.abs(expected) - 1e-12).all()


def _check_all_modes(names: list[str], tensor: SparseTensor, rank: int, seed: int, **settings) -> None:
    for mode in range(tensor.order):
        problem = KERNEL.problem_from_tensor(tensor, seed=seed, rank=str(rank), mode=str(mode))
        reference = KERNEL.oracle(problem)
        assert np.abs(reference).max() > 0
        assert (np.abs(reference).sum(axis=1) == 0).any(), "the test tensor should have empty output rows"
        for name in names:
            result = run_once(KERNEL, KERNEL.variant(name)(**settings.get(name, {})), problem, reference)
            assert result.check.passed, f"{name} mode {mode}: {result.check.describe()} (seed {seed})"


@pytest.mark.parametrize("dims", [(40, 30, 50), (20, 9, 30, 12), (8, 10, 6, 12, 30)])
@pytest.mark.parametrize("rank", [3, 16])
def test_cpu_variants_match_the_oracle(dims: tuple[int, ...], rank: int, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    _check_all_modes(CPU, random_tensor(rng, dims, 3000), rank, fresh_seed)


def test_a_heavy_row_split_across_chunks(fresh_seed: int) -> None:
    """Half the nonzeros in one output row: it spans several chunks of the segmented variant."""
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, (50, 40, 30), 5000, heavy=0.5)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="8", mode="0")
    for name in CPU:
        assert run_once(KERNEL, name, problem).check.passed, name


@pytest.mark.parametrize("pairing", [0.0, 1e9])  # never pair the last two levels, always pair them
@pytest.mark.parametrize("dims", [(50, 40, 30), (12, 9, 30, 7), (8, 10, 6, 12, 30)])
@pytest.mark.parametrize("rank", [5, 29])
def test_csf_giant_slices_split_across_chunks(monkeypatch: pytest.MonkeyPatch, dims: tuple[int, ...],
                                              pairing: float, rank: int, fresh_seed: int) -> None:
    """numba-csf: 60 % of the nonzeros in mode 0's row 1, cut into more chunks than there are
    level-1 nodes (empty chunks, a slice over many chunks, chunks holding a slice's tail and head);
    a rank of 29 takes the 16- and 8-column vector sums and 5 columns one by one."""
    from portabench.implementations.mttkrp import numba_csf

    monkeypatch.setattr(numba_csf, "CHUNKS_PER_THREAD", 200)
    monkeypatch.setattr(numba_csf, "PAIR_BELOW", pairing)
    monkeypatch.setattr(numba_csf, "PREFETCH_ABOVE", 0)  # the prefetching path too
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, dims, 4000, heavy=0.6)
    _check_all_modes(["numba-csf"], tensor, rank, fresh_seed)


@pytest.mark.parametrize("pairing", [0.0, 1e9])
def test_csf_long_repeated_fibers_and_modes_of_one(monkeypatch: pytest.MonkeyPatch, pairing: float,
                                                   fresh_seed: int) -> None:
    """numba-csf: fibers of hundreds of nonzeros with repeated coordinates (they sum), and tensors
    with modes of length 1 (one root slice, or one node per level)."""
    from portabench.implementations.mttkrp import numba_csf

    monkeypatch.setattr(numba_csf, "PAIR_BELOW", pairing)
    rng = np.random.default_rng(fresh_seed)
    long_fibers = random_tensor(rng, (6, 5, 40), 3000)  # about 200 nonzeros per (i_0, i_1) fiber, each index ~5 times
    assert np.unique(long_fibers.coords, axis=0).shape[0] < long_fibers.nnz
    _check_all_modes(["numba-csf"], long_fibers, 16, fresh_seed)
    for dims in [(1, 7, 9), (9, 1, 1, 8), (1, 1, 5, 1, 6)]:
        coords = np.stack([rng.integers(0, d, 500) for d in dims], axis=1)
        values = rng.uniform(0.5, 1.5, 500) * rng.choice([-1.0, 1.0], 500)
        tensor = SparseTensor(dims, coords, values)
        for mode in range(tensor.order):
            problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="4", mode=str(mode))
            result = run_once(KERNEL, "numba-csf", problem)
            assert result.check.passed, (dims, mode, result.check.describe())


def test_csf_tree_holds_every_nonzero_once(fresh_seed: int) -> None:
    """The tree's nodes, expanded back to coordinates, are the nonzeros sorted by the level order;
    siblings differ; pairing follows the mean fiber length."""
    from portabench.implementations.mttkrp.numba_csf import PAIR_BELOW, build_tree, level_order

    rng = np.random.default_rng(fresh_seed)
    for dims, nnz in [((30, 4, 500), 3000), ((30, 500, 20, 400), 3000), ((3, 4, 5, 6, 7), 2000)]:
        tensor = random_tensor(rng, dims, nnz)
        arrays = tensor_inputs.host_arrays("mttkrp", tensor)
        for mode in range(len(dims)):
            tree = build_tree(arrays, mode)
            assert tree.levels == level_order(dims, mode) and sorted(tree.levels) == list(range(len(dims)))
            assert [d for d in (dims[m] for m in tree.levels[1:])] == sorted(dims[m] for m in tree.levels[1:])
            expanded = [tree.ids[0]]  # each level's index, repeated down to the leaves
            for level in range(tree.depth):
                counts = np.diff(tree.ptr[level])
                assert (counts > 0).all() and tree.ptr[level][0] == 0
                expanded = [np.repeat(e, counts) for e in expanded] + [tree.ids[level + 1]]
            expanded += list(tree.ids[tree.depth + 1:])
            coords = np.stack(expanded)
            assert coords.shape == (len(dims), nnz) and all(a.dtype == np.int32 for a in tree.ids)
            key = np.lexsort(arrays.idx[list(tree.levels[::-1])])
            np.testing.assert_array_equal(coords, arrays.idx[list(tree.levels)][:, key])
            np.testing.assert_array_equal(np.sort(tree.values), np.sort(arrays.values))
            fibers = np.unique(coords[:-1], axis=1).shape[1]
            assert tree.paired == (nnz < PAIR_BELOW * fibers)
            assert tree.depth == len(dims) - 1 - int(tree.paired)
            assert set(tree.empty_rows) == set(range(dims[mode])) - set(tree.ids[0])


def test_library_formulation_in_many_chunks(monkeypatch: pytest.MonkeyPatch, fresh_seed: int) -> None:
    monkeypatch.setattr(variant, "KR_CHUNK_ELEMENTS", 8 * 97)  # 97 nonzeros per chunk at R = 8
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, (30, 20, 25, 10), 1000)
    vendor = [n for n in CPU if KERNEL.variant(n).family == "vendor"]
    assert "scipy-scatter" in vendor
    _check_all_modes(vendor, tensor, 8, fresh_seed)


def test_one_nonzero_and_tiny_tensors(fresh_seed: int) -> None:
    tensor = SparseTensor((3, 4, 5), np.array([[2, 1, 3]]), np.array([1.5]))
    for mode in range(3):
        problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="5", mode=str(mode))
        for name in CPU:
            assert run_once(KERNEL, name, problem).check.passed, (name, mode)


def test_the_check_catches_wrong_answers(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    problem = KERNEL.problem_from_tensor(random_tensor(rng, (20, 30, 25), 2000), seed=fresh_seed, rank="4", mode="1")
    reference = KERNEL.oracle(problem)
    assert KERNEL.check(problem, reference.copy(), reference).passed
    dropped = reference.copy()
    row = int(np.argmax(np.abs(reference).sum(axis=1)))
    coords, values = problem.tensor.coords, problem.tensor.values
    j = int(np.flatnonzero(coords[:, 1] == row)[0])  # drop one nonzero's contribution
    u = problem.factors
    dropped[row] -= values[j] * u[0][coords[j, 0]] * u[2][coords[j, 2]]
    assert not KERNEL.check(problem, dropped, reference).passed
    poisoned = reference.copy()
    poisoned[0, 0] = np.nan
    assert not KERNEL.check(problem, poisoned, reference).passed
    empty_row = int(np.flatnonzero(np.abs(reference).sum(axis=1) == 0)[0])
    written = reference.copy()
    written[empty_row, 0] = 1e-300  # an empty row must stay exactly zero
    assert not KERNEL.check(problem, written, reference).passed
    assert not KERNEL.check(problem, reference[:-1], reference).passed


def test_segmented_gpu_arrangement_on_the_cpu(fresh_seed: int) -> None:
    """The GPU segmented variant's arrangement, with NumPy standing in for CuPy: padding adds nothing,
    each slice's run is whole warp steps of its own nonzeros, and blocks tile each slice, longest first,
    the last wave's cut into smaller ones."""
    from portabench.implementations.mttkrp import cupy_segmented as seg
    from portabench.implementations.mttkrp.sorting import sorted_tensor

    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, (30, 20, 25), 3001)
    arrays = tensor_inputs.host_arrays("mttkrp", tensor)
    factors = [rng.standard_normal((d, 3)) for d in tensor.dims]
    step, rows, per_block = 12, 4, 48
    for mode in range(tensor.order):
        staged = max(m for m in range(tensor.order) if m != mode)
        ordered, _ = sorted_tensor(np, arrays, mode, (staged, rows))
        nslices = -(-tensor.dims[staged] // rows)
        padded, counts = seg.padded_runs(np, ordered, ordered.idx[staged] // rows, nslices, step)
        assert counts.sum() == padded.nnz and (counts % step == 0).all() and padded.nnz < tensor.nnz + nslices * step
        bounds = np.append(0, np.cumsum(counts))
        for s in range(nslices):
            assert (padded.idx[staged, bounds[s]:bounds[s + 1]] // rows == s).all()
        assert np.count_nonzero(padded.values) == tensor.nnz
        coords = np.ascontiguousarray(padded.idx.T, dtype=np.int64)
        np.testing.assert_allclose(mttkrp(coords, padded.values, factors, mode),
                                   mttkrp(tensor.coords, tensor.values, factors, mode), rtol=1e-12, atol=1e-12)
        for resident in (5, 1000):  # a wave of 5 blocks: the last 5 cut; a wave of 1000: all blocks fit, none cut
            ranges, slices = seg.block_table(counts, per_block, resident, step)
            first, last = ranges.T
            tiled = np.argsort(first)
            assert first[tiled][0] == 0 and last[tiled][-1] == padded.nnz
            assert (first[tiled][1:] == last[tiled][:-1]).all()
            sizes = last - first
            assert ((sizes > 0) & (sizes <= per_block) & (first % step == 0)).all()
            assert ((bounds[slices] <= first) & (last <= bounds[slices + 1])).all()
            blocks = int((-(-counts // per_block)).sum())
            whole = blocks - resident if blocks > resident else blocks  # the blocks before the cut wave
            assert whole > 0 and (np.diff(sizes[:whole]) <= 0).all() and sizes[0] == per_block
            assert ranges.shape[0] > whole + resident if whole < blocks else ranges.shape[0] == blocks
            assert (sizes[whole:] <= per_block // seg.TAIL_PARTS + step).all()


def test_pairs_counted_in_the_order_by_second_mode_slices(fresh_seed: int) -> None:
    """Slices of the second mode keep each (row, second index) pair's nonzeros together: the pairs
    counted in that order are those of the plain order (``cupy-segmented`` counts them there)."""
    from portabench.implementations.mttkrp.sorting import row_pairs, second_mode, sorted_tensor

    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, (30, 7, 25, 9), 4001)
    arrays = tensor_inputs.host_arrays("mttkrp", tensor)
    for mode in range(tensor.order):
        plain = row_pairs(np, sorted_tensor(np, arrays, mode)[0], mode)
        sliced, _ = sorted_tensor(np, arrays, mode, (second_mode(tensor.dims, mode), 2))
        pairs = {tuple(p) for p in tensor.coords[:, [mode, second_mode(tensor.dims, mode)]]}
        assert row_pairs(np, sliced, mode) == plain == len(pairs) < tensor.nnz


def test_segmented_gpu_row_flags_give_every_row(fresh_seed: int) -> None:
    """Walking each slot's nonzeros as the kernel does (slots side by side, a batch each per warp step),
    reading an output row only where flagged, gives every nonzero's row; long rows leave few flags."""
    from portabench.implementations.mttkrp import cupy_segmented as seg

    rng = np.random.default_rng(fresh_seed)
    slots, batch, warps = 4, 3, 2
    step, per_warp = slots * batch, 3 * slots * batch
    counts = np.array([120, 48, 240, 12, 144])  # slices, each padded to whole warp steps
    lengths = rng.choice([1, 2, 5, 40, 200], size=400)  # rows of one nonzero up to several warps
    rows = np.repeat(np.arange(lengths.size), lengths)[:counts.sum()].astype(np.int32)
    ranges, _ = seg.block_table(counts, per_warp * warps, 2, step)
    flags = seg.row_flags(np, rows, ranges, warps, step, batch)
    for bstart, bstop in ranges:
        run = seg.warp_run(bstop - bstart, warps, step)
        assert bstop - bstart <= run * warps and run % step == 0
        for wstart in range(bstart, bstop, run):
            for slot in range(slots):
                row = rows[wstart + slot * batch]
                for j0 in range(wstart, min(wstart + run, bstop), step):
                    for b in range(batch):
                        e = j0 + slot * batch + b
                        row = rows[e] if flags[e] else row
                        assert row == rows[e], (e, row, rows[e])
    assert flags.sum() < rows.size
    long_rows = np.repeat(np.arange(4), 105).astype(np.int32)  # one warp of 35 steps, three row changes
    flags = seg.row_flags(np, long_rows, np.array([[0, 420]]), 1, step, batch)
    assert flags[:step].all() and flags[step:].sum() <= 3 * slots  # a row change is flagged once per slot


def test_segmented_gpu_staging_rule_and_settings() -> None:
    from portabench.implementations.mttkrp.cupy_segmented import MttkrpCupySegmented, choose_staging

    dims, nnz, cache = (12092, 9184, 28818), 76_879_419, 228 * 1024  # nell-2, an H100's shared memory per SM
    assert choose_staging(dims, 2, 16, nnz, nnz, 900, cache) == (0, 900)  # no reuse: stage the largest other
    assert choose_staging(dims, 0, 16, nnz, nnz // 8, 900, cache) is None  # fibers of 8 share a factor row
    assert choose_staging(dims, 2, 16, nnz, nnz, 0, cache) is None  # no slice fits in shared memory
    assert choose_staging(dims, 2, 2, nnz, nnz, 900, cache) is None  # U_1 (147 KB at R = 2) would stay in L1
    lbnl = (1605, 4198, 1631, 4209, 868131)
    assert choose_staging(lbnl, 4, 16, 1_698_825, 1_698_825, 900, cache) is None  # rows would fall into bits
    assert choose_staging(dims, 2, 16, nnz, nnz // 8, 900, cache, stage="always") == (0, 900)
    assert choose_staging(dims, 2, 16, nnz, nnz, 900, cache, stage="none") is None
    lbnl_nnz = 1_698_825
    wide = choose_staging(dims, 0, 32, nnz, nnz // 8, 900, cache)
    assert wide == (2, 900)  # wide rows: staged though fibers are long
    assert choose_staging(dims, 0, 32, nnz, nnz // 8, 900, cache, stage="none") is None
    assert choose_staging(lbnl, 0, 32, lbnl_nnz, lbnl_nnz, 224, cache) is None  # pieces under MIN_PIECE
    for bad in ({"stage": "sometimes"}, {"threads": 100}, {"batch": 9}, {"per_warp": 0}, {"slice_rows": -1},
                {"flag_rows": "maybe"}, {"slice_second": "often"}, {"value_type": "int8"}, {"slice_copy": "dma"}):
        with pytest.raises(PortabenchError, match="cupy-segmented"):
            MttkrpCupySegmented(**bad)


def test_segmented_gpu_slice_copy_rule() -> None:
    from portabench.implementations.mttkrp.cupy_segmented import ASYNC_COPY_ORDERS, async_copy

    assert async_copy(3) and ASYNC_COPY_ORDERS == (3,)
    assert not async_copy(4) and not async_copy(5)
    assert async_copy(5, "async") and not async_copy(3, "plain")


def test_segmented_gpu_batch_rule() -> None:
    from portabench.implementations.mttkrp.cupy_segmented import BATCH, WIDE_BATCH, batch_size

    assert batch_size(3, 16) == BATCH and batch_size(3, 31) == BATCH
    assert batch_size(3, 32) == WIDE_BATCH == batch_size(3, 64) != BATCH
    assert batch_size(4, 32) == BATCH == batch_size(5, 64)  # more factor rows: they would spill registers
    assert batch_size(3, 32, 1) == 1


def test_segmented_gpu_second_slice_rule() -> None:
    from portabench.implementations.mttkrp.cupy_segmented import SECOND_SLICE_BYTES, choose_second_slices

    dims, nnz, cache = (12092, 9184, 28818), 76_879_419, 228 * 1024  # nell-2, an H100's shared memory per SM
    rows = SECOND_SLICE_BYTES // (8 * 16)
    assert choose_second_slices(dims, 0, 16, nnz, nnz // 8, cache) == (1, rows)  # fibers of 8: slice U_1
    assert choose_second_slices(dims, 1, 16, nnz, nnz // 8, cache) == (0, rows)  # U_0 has fewer rows than U_2
    assert choose_second_slices(dims, 2, 16, nnz, nnz, cache) is None  # fibers of one: nothing to keep
    assert choose_second_slices(dims, 0, 2, nnz, nnz // 8, cache) is None  # U_1 (147 KB at R = 2) stays in L1
    assert choose_second_slices(dims, 0, 16, 2_000_000, 200_000, cache) is None  # pieces under MIN_PIECE
    assert choose_second_slices(dims, 2, 16, nnz, nnz, cache, "always") == (1, rows)
    assert choose_second_slices(dims, 0, 16, nnz, nnz // 8, cache, "none") is None
    assert choose_second_slices(dims, 0, 4096, nnz, nnz // 8, cache, "always") == (1, 1)  # at least one row


def test_segmented_gpu_value_storage(fresh_seed: int) -> None:
    """Values are read in the narrowest type that holds every one exactly, and never in a narrower one."""
    from portabench.implementations.mttkrp.cupy_segmented import value_storage

    rng = np.random.default_rng(fresh_seed)
    counts = rng.geometric(0.3, 1000).astype(np.float64)
    counts[rng.integers(1000)] = 255.0
    assert value_storage(np, counts) == "uint8"
    assert value_storage(np, np.append(counts, 256.0)) == "float32"
    assert value_storage(np, np.append(counts, -1.0)) == "float32"
    assert value_storage(np, np.append(counts, 2.0**24 + 1)) == "float64"
    assert value_storage(np, np.append(counts, 0.1)) == "float64"
    assert value_storage(np, rng.uniform(0.5, 1.5, 1000)) == "float64"
    assert value_storage(np, counts, "float64") == "float64"
    for setting, values in (("uint8", np.append(counts, 256.0)), ("float32", np.append(counts, 0.1))):
        with pytest.raises(PortabenchError, match="does not hold every value exactly"):
            value_storage(np, values, setting)


def test_segmented_gpu_index_packing_rule() -> None:
    from portabench.implementations.mttkrp.cupy_segmented import index_packing

    nell2 = (12092, 9184, 28818)
    assert [index_packing(nell2, m) for m in range(3)] == [15, 15, 14]  # bits of the last other mode
    assert index_packing((2**16, 2, 2**15), 1) == 15 and index_packing((2**16 + 1, 2, 2**15), 1) is None  # 31 bits
    assert index_packing((5, 1, 7), 2) == 0  # one index: nothing below
    assert index_packing((9, 11, 7, 12), 0) is None  # only 3-way tensors
    rng = np.random.default_rng(7)
    for dims in ((12092, 9184, 28818), (3, 2**20, 2**10), (1000, 1, 2)):
        for mode in range(3):
            shift = index_packing(dims, mode)
            high, low = (rng.integers(0, dims[m], 1000) for m in range(3) if m != mode)
            if shift is not None:
                word = (high << shift) | low
                assert word.max() < 2**31 and ((word >> shift) == high).all() and ((word & ((1 << shift) - 1)) == low).all()


def test_standin_problem_is_seeded_and_sized() -> None:
    a = KERNEL.problem("uber", 20_000, seed=3, rank="16", mode="2")
    b = KERNEL.problem("uber", 20_000, seed=3, rank="16", mode="2")
    c = KERNEL.problem("uber", 20_000, seed=4, rank="16", mode="2")
    assert a.tensor.nnz == 20_000 and a.tensor.order == 4
    assert a.tensor.equals(b.tensor) and not a.tensor.equals(c.tensor)
    assert all(np.array_equal(x, y) for x, y in zip(a.factors, b.factors))
    assert len({float(u[0, 0]) for u in a.factors}) > 1 and all(np.unique(u).size > 10 for u in a.factors)
    assert KERNEL.work("uber", 20_000, rank="16") == a.work()


def test_work_models_by_hand() -> None:
    work = definition.work_model((10, 20, 30), 1000, 16)
    assert work.bytes == (3 * 4 + 8) * 1000 + 8 * 16 * 60  # PASTA: indices and values once, factors once
    assert work.bytes_counted == 1000 * ((3 * 16 + 3) * 8 + 3 * 4)  # GenTen: N factor rows per nonzero
    assert work.flops == 3 * 16 * 1000
    four = definition.work_model((10, 20, 30, 40), 1000, 32)
    assert four.bytes == (4 * 4 + 8) * 1000 + 8 * 32 * 100 and four.flops == 4 * 32 * 1000
    # A stand-in smaller than asked runs at full size: the model sees its real nonzeros.
    full = KERNEL.work("lbnl-network", 10**9, rank="16")
    assert full.flops == 5 * 16 * 1_698_825


def test_bad_input_gets_clear_errors() -> None:
    with pytest.raises(PortabenchError, match="mode must be"):
        KERNEL.problem("nell-2", 1000, mode="3")  # nell-2 is 3-way
    with pytest.raises(PortabenchError, match="rank R must be"):
        KERNEL.problem("nell-2", 1000, rank="0")
    with pytest.raises(PortabenchError, match="rank R must be"):
        KERNEL.problem_options({"rank": "sixteen"})
    with pytest.raises(PortabenchError, match="unknown case"):
        KERNEL.problem("no-such-tensor", 1000)
    with pytest.raises(PortabenchError, match="SparseTensor"):
        KERNEL.problem_from_tensor(np.zeros((3, 3)))
    with pytest.raises(PortabenchError, match="positive nonzeros"):
        KERNEL.parse_sizes("0", KERNEL.legacy_size_env)


@pytest.mark.parametrize("fixture", ["splatt-med"])
def test_oracle_against_pyttb_on_a_shipped_tensor(fixture: str, fresh_seed: int) -> None:
    ttb = pytest.importorskip("pyttb")
    tensor = load(fixture)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="6", mode="0")
    X = ttb.sptensor(tensor.coords, tensor.values[:, None], tensor.dims)
    for mode in range(tensor.order):
        ours = mttkrp(tensor.coords, tensor.values, problem.factors, mode)
        theirs = X.mttkrp([np.array(u) for u in problem.factors], mode)
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10 * np.abs(theirs).max())


def test_oracle_against_pyttb_on_small_fixtures(fresh_seed: int) -> None:
    """pyttb and the oracle on every shipped small .tns file (3- and 4-way, 0- and 1-based)."""
    ttb = pytest.importorskip("pyttb")
    from portabench.datasets.registry import SHIPPED
    from portabench.datasets.tensors.tns import read_tns

    files = [SHIPPED / "splatt" / n for n in ("small.tns", "small4.tns")] + [SHIPPED / "parti" / "4d_3_16.tns"]
    rng = np.random.default_rng(fresh_seed)
    for path in files:
        tensor = read_tns(path)
        factors = [rng.uniform(-1, 1, (d, 5)) for d in tensor.dims]
        X = ttb.sptensor(tensor.coords, tensor.values[:, None], tensor.dims)
        for mode in range(tensor.order):
            np.testing.assert_allclose(mttkrp(tensor.coords, tensor.values, factors, mode),
                                       X.mttkrp(factors, mode), rtol=1e-10, atol=1e-12, err_msg=str(path))


def test_cli_verify_a_tensor_file_every_mode(tmp_path, capsys) -> None:
    from portabench.datasets.registry import SHIPPED

    path = SHIPPED / "splatt" / "small4.tns"
    code = main(["verify", "--kernel", "mttkrp", "--tensor", str(path), "--rank", "7", "--seed", "5",
                 "--variant", "numba-segmented", "--variant", "scipy-scatter", "--save", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count("pass") == 2 * 4  # two variants, every mode of a 4-way tensor
    for mode in range(4):
        assert (tmp_path / "mttkrp" / f"file-mode{mode}" / "numba-segmented.npy").exists()


def test_cli_verify_standins_one_mode(capsys) -> None:
    code = main(["verify", "--kernel", "mttkrp", "--case", "nips", "--size", "5000", "--mode", "3",
                 "--seed", "2", "--variant", "numba-privatized", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and out.count("pass") == 1, out


def test_cli_verify_rejects_a_mode_the_tensor_lacks(capsys) -> None:
    assert main(["verify", "--kernel", "mttkrp", "--case", "nell-2", "--mode", "4", "--quiet"]) != 0
    assert "mode must be an integer in 0..2" in capsys.readouterr().err


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dims", [(300, 200, 250), (40, 30, 50, 20), (8, 10, 6, 12, 30)])
@pytest.mark.parametrize("rank", [16, 5])
def test_gpu_variants_match_the_oracle(dims: tuple[int, ...], rank: int, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, dims, 20000, heavy=0.3)
    _check_all_modes(GPU, tensor, rank, fresh_seed)
    _check_all_modes(["cupy-atomic"], tensor, rank, fresh_seed, **{"cupy-atomic": {"threads": 96, "blocks_per_sm": 1}})


SEGMENTED_SHAPES = {
    "runs-shorter-than-a-step": {"stage": "none", "per_warp": 7, "batch": 3, "threads": 96},
    "many-slices": {"stage": "always", "slice_rows": 7, "batch": 4, "threads": 64},
    "many-slices-copied-async": {"stage": "always", "slice_rows": 7, "slice_copy": "async", "threads": 64},
    "many-slices-copied-plain": {"stage": "always", "slice_rows": 7, "slice_copy": "plain", "threads": 96},
    "one-row-slices": {"stage": "always", "slice_rows": 1, "batch": 1, "per_warp": 1, "threads": 1024},
    "long-runs": {"batch": 8, "per_warp": 5000},
    "unpacked": {"pack": False, "batch": 2},
    "rows-flagged-unpacked": {"flag_rows": "always", "pack": False, "batch": 3, "per_warp": 40},
    "rows-flagged-one-row-slices": {"flag_rows": "always", "stage": "always", "slice_rows": 1, "batch": 1,
                                    "per_warp": 1, "threads": 1024},
    "rows-read-every-nonzero": {"flag_rows": "never"},
}


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dims", [(60, 45, 50), (9, 11, 7, 12, 30)])
@pytest.mark.parametrize("rank", [16, 5, 40, 66])
@pytest.mark.parametrize("shape", list(SEGMENTED_SHAPES))
def test_gpu_segmented_launch_shapes_and_staging(dims: tuple[int, ...], rank: int, shape: str, fresh_seed: int) -> None:
    """Odd ranks (idle lanes), ranks over 64 (two column chunks per lane), padding, shared-memory slices."""
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, dims, 6000, heavy=0.3)
    _check_all_modes(["cupy-segmented"], tensor, rank, fresh_seed, **{"cupy-segmented": SEGMENTED_SHAPES[shape]})


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dims", [(60, 45, 50), (9, 11, 7, 12, 30)])
@pytest.mark.parametrize("rank", [16, 5])
@pytest.mark.parametrize("flag_rows", ["always", "never"])
def test_gpu_segmented_second_slices(monkeypatch: pytest.MonkeyPatch, dims: tuple[int, ...], rank: int,
                                     flag_rows: str, fresh_seed: int) -> None:
    """Nonzeros sorted by slices of four second-mode rows: many slices, each padded, fibers whole."""
    from portabench.implementations.mttkrp import cupy_segmented
    from portabench.implementations.mttkrp.sorting import second_mode

    monkeypatch.setattr(cupy_segmented, "SECOND_SLICE_BYTES", 8 * rank * 4)
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, dims, 6000, heavy=0.3)
    settings = {"slice_second": "always", "stage": "none", "flag_rows": flag_rows, "batch": 3, "per_warp": 40}
    _check_all_modes(["cupy-segmented"], tensor, rank, fresh_seed, **{"cupy-segmented": settings})
    segmented = cupy_segmented.MttkrpCupySegmented(**settings)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank=str(rank), mode="0")
    arranged = segmented.arrange(segmented.device_tensor(problem), 0, rank)
    second = second_mode(tensor.dims, 0)
    assert arranged["slices"] == (second, 4) and arranged["plan"] is None
    slices = arranged["tensor"].idx[second].get() // 4
    assert (np.diff(slices) >= 0).all() and slices[-1] == tensor.coords[:, second].max() // 4


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dims", [(60, 45, 50), (9, 11, 7, 12, 30)])
@pytest.mark.parametrize("flag_rows", ["always", "never"])
def test_gpu_segmented_last_wave_cut(monkeypatch: pytest.MonkeyPatch, dims: tuple[int, ...], flag_rows: str,
                                     fresh_seed: int) -> None:
    """A GPU that holds 3 blocks at once: the last 3 of many blocks are cut in pieces, launched after
    the longest, each split evenly among its warps; staged slices and flagged rows still give every row."""
    from portabench.implementations.mttkrp import cupy_segmented

    monkeypatch.setattr(cupy_segmented, "resident_blocks", lambda *_: 3)
    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, dims, 6000, heavy=0.3)
    settings = {"stage": "always", "slice_rows": 7, "flag_rows": flag_rows, "per_warp": 40, "threads": 96}
    _check_all_modes(["cupy-segmented"], tensor, 16, fresh_seed, **{"cupy-segmented": settings})
    segmented = cupy_segmented.MttkrpCupySegmented(**settings)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="16", mode="0")
    arranged = segmented.arrange(segmented.device_tensor(problem), 0, 16)
    monkeypatch.setattr(cupy_segmented, "resident_blocks", lambda *_: 10**6)
    whole = segmented.arrange(segmented.device_tensor(problem), 0, 16)  # every block fits one wave: none cut
    assert arranged["block_slice"].size > whole["block_slice"].size > 3


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("value_type", ["uint8", "float32"])
@pytest.mark.parametrize("batch", [1, 2, 3, 4])
def test_gpu_segmented_narrow_values(value_type: str, batch: int, fresh_seed: int) -> None:
    """Count values read as bytes, or signed counts over 255 as floats, in every batch's load shape."""
    from portabench.implementations.mttkrp.cupy_segmented import MttkrpCupySegmented

    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, (60, 45, 50), 6000, heavy=0.3)
    counts = rng.integers(1, 256, tensor.nnz) if value_type == "uint8" else rng.integers(-4000, 4000, tensor.nnz)
    tensor = SparseTensor(tensor.dims, tensor.coords, counts.astype(np.float64))
    settings = {"value_type": value_type, "batch": batch, "per_warp": 40}
    _check_all_modes(["cupy-segmented"], tensor, 16, fresh_seed, **{"cupy-segmented": settings})
    segmented = MttkrpCupySegmented(**settings)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="16", mode="0")
    assert segmented.arrange(segmented.device_tensor(problem), 0, 16)["tensor"].values.dtype == value_type


@gpu
@pytest.mark.gpu
def test_gpu_segmented_instances_sharing_a_kernel_keep_their_shared_memory(fresh_seed: int) -> None:
    """Two instances whose staged slices need over 48 KiB, the larger bound first: the compiled kernel
    they share must still launch the larger one's (its shared-memory limit is raised, never lowered)."""
    from portabench.implementations.mttkrp.cupy_segmented import MttkrpCupySegmented

    rng = np.random.default_rng(fresh_seed)
    tensor = random_tensor(rng, (600, 40, 30), 20000)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="16", mode="1")
    reference = KERNEL.oracle(problem)
    larger = run_once(KERNEL, MttkrpCupySegmented(stage="always", slice_rows=500), problem, reference)  # 64 000 B
    smaller = run_once(KERNEL, MttkrpCupySegmented(stage="always", slice_rows=400), problem, reference)  # 51 200 B
    assert larger.check.passed and smaller.check.passed
    larger.variant.run()
    larger.variant.synchronize()
    assert KERNEL.check(problem, larger.variant.output(), reference).passed


@gpu
@pytest.mark.gpu
def test_gpu_library_formulation_in_many_chunks(monkeypatch: pytest.MonkeyPatch, fresh_seed: int) -> None:
    monkeypatch.setattr(variant, "KR_CHUNK_ELEMENTS", 8 * 97)
    rng = np.random.default_rng(fresh_seed)
    _check_all_modes(["cusparse-scatter", "cupy-scatter-add"], random_tensor(rng, (30, 20, 25, 10), 1000), 8,
                     fresh_seed)


MKL_PREPARED_DIRECTLY = """
import sys
import numpy as np
from portabench.datasets.tensors import SparseTensor
from portabench.implementations import get_kernel
kernel = get_kernel(sys.argv[1])
rng = np.random.default_rng(int(sys.argv[2]))
dims = (30, 20, 25)
coords = np.stack([rng.integers(0, d, 500) for d in dims], axis=1)
tensor = SparseTensor(dims, coords, rng.integers(1, 5, 500).astype(float))
problem = kernel.problem_from_tensor(tensor, seed=int(sys.argv[2]), rank="6", mode="1")
variant = kernel.variant("mkl-scatter")()
variant.prepare(problem)  # on a fresh instance, unavailable() never called
variant.run()
check = kernel.check(problem, variant.output(), kernel.oracle(problem))
assert check.passed, check.describe()
"""


def mkl_prepared_directly(run, kernel: str, seed: int, **env: str):
    """Prepare and run ``kernel``'s mkl-scatter in a fresh interpreter, ``unavailable()`` never called."""
    return run(MKL_PREPARED_DIRECTLY.replace("sys.argv[1]", repr(kernel)).replace("sys.argv[2]", str(seed)), **env)


def test_mkl_scatter_loads_mkl_when_prepared_first(fresh_interpreter, fresh_seed: int) -> None:
    from portabench.implementations.mkl import mkl_unavailable

    if mkl_unavailable() is not None:
        pytest.skip(mkl_unavailable())
    result = mkl_prepared_directly(fresh_interpreter, "mttkrp", fresh_seed)
    assert result.returncode == 0, result.stderr


def test_mkl_scatter_without_mkl_is_unavailable_not_an_import_error(fresh_interpreter, tmp_path) -> None:
    result = mkl_prepared_directly(fresh_interpreter, "mttkrp", 1, MKL_RT=str(tmp_path / "libmkl_rt.so.missing"))
    assert result.returncode != 0
    assert "VariantUnavailable: MKL is not usable" in result.stderr, result.stderr


def test_every_pair_of_families_exists_on_each_device() -> None:
    for device, family in itertools.product(("cpu", "gpu"), ("portable", "vendor")):
        assert [v for v in KERNEL.variants if v.runs_on(device) and v.family == family]
