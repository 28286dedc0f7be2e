"""Batched GMRES: every variant against the float64 oracle on fresh random batches."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from portabench.datasets.batched import BatchedSystems, random_systems
from portabench.implementations import PortabenchError, WrongAnswerError, get_kernel, list_variants
from portabench.implementations.gmres.definition import RESIDUAL_SLACK, gmres_work
from portabench.implementations.verification import prepare_verified, run_once
from portabench.reference.gmres import gmres, true_residuals

KERNEL = get_kernel("gmres")
VARIANTS = [v.name for v in list_variants("gmres")]
GROUPED = {"numba-batched": [1, 3, 8], "cupy-team": [1, 3, 32, 50]}
# Variants that report the oracle's iteration counts (cupyx counts restart cycles only; direct solvers none).
COUNTING = {"numba-batched", "cupy-team", "scipy-gmres-loop"}


def _variant(name: str, **settings):
    cls = KERNEL.variant(name)
    if cls.unavailable():
        pytest.skip(cls.unavailable())
    return cls(**settings)


def _batch(seed: int, n: int, count: int, zero_rhs: bool = True) -> BatchedSystems:
    s = random_systems(seed, n=n, count=count, density=0.35)
    if zero_rhs and count > 3:
        rhs = s.rhs.copy()
        rhs[3] = 0.0  # needs no iteration: x = 0
        s = BatchedSystems(n=s.n, row_ptr=s.row_ptr, col_idx=s.col_idx, values=s.values, rhs=rhs)
    return s


def _assert_solved(result, problem, iterative: bool) -> None:
    s = problem.systems
    ref_x, ref_its = problem.reference()
    assert result.check.passed, result.check
    assert true_residuals(s, result.output).max() <= RESIDUAL_SLACK * problem.tol
    exact = np.stack([np.linalg.solve(s.dense(k), s.rhs[k]) for k in range(s.num_systems)])
    scale = np.maximum(np.linalg.norm(exact, axis=1, keepdims=True), 1e-300)
    # tol 1e-8 on the preconditioned residual; these systems are well conditioned after Jacobi
    assert np.all(np.abs(result.output - exact) <= 1e-5 * scale)
    its = result.variant.iterations()
    if iterative:
        assert its is not None and its.shape == (s.num_systems,)
        # Same algorithm as the oracle; only a residual within rounding of tol could tip a count.
        assert np.mean(its != ref_its) <= 0.02 and np.all(np.abs(its - ref_its) <= 1)
        np.testing.assert_allclose(result.output, ref_x, rtol=1e-6, atol=1e-9 * float(np.abs(ref_x).max()))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("n, count", [(1, 5), (7, 37), (33, 20), (54, 9)])
def test_variant_solves_fresh_random_batches(variant, n, count, fresh_seed):
    v = _variant(variant)
    problem = KERNEL.problem_from_systems(_batch(fresh_seed, n, count))
    result = run_once(KERNEL, v, problem)
    _assert_solved(result, problem, iterative=variant in COUNTING)


@pytest.mark.parametrize("variant", list(GROUPED))
def test_group_sizes_and_partial_groups(variant, fresh_seed):
    """N not a multiple of m, n not a multiple of the warp or of the row-lanes."""
    systems = _batch(fresh_seed, 45, 37)
    problem = KERNEL.problem_from_systems(systems)
    ref_its = problem.reference()[1]
    assert np.unique(ref_its).size > 1  # the systems converge at different iterations
    for m in GROUPED[variant]:
        result = run_once(KERNEL, _variant(variant, m=m), problem)
        _assert_solved(result, problem, iterative=True)


@pytest.mark.usefixtures("cupy_gpu")
@pytest.mark.parametrize("shared_w, shared_v", itertools.product([True, False], repeat=2))
def test_team_keeps_w_and_v_in_shared_or_global_memory(shared_w, shared_v, fresh_seed):
    """Every code path of cupy-team (w and the step's v_j in shared memory where they fit, else in
    global), with partial groups, restarts and systems converging at different steps."""
    problem = KERNEL.problem_from_systems(_batch(fresh_seed, 45, 37), restart=4)
    for m in (3, 32):
        result = run_once(KERNEL, _variant("cupy-team", m=m, shared_w=shared_w, shared_v=shared_v), problem)
        _assert_solved(result, problem, iterative=True)


def test_team_puts_w_and_v_in_shared_memory_where_they_fit():
    from portabench.implementations.gmres.cupy_team import (SHARED_W_LIMIT, launch_shape, shared_bytes, v_in_shared,
                                                            w_in_shared)

    for n in (54, 144):  # the stand-ins at the default m = 32: w and v_j in shared memory
        threads = launch_shape(32, n)[1]
        assert w_in_shared(32, threads, n) and v_in_shared(32, threads, n, True)
    assert not w_in_shared(32, 256, 2000)  # n = 2000: 500 KiB, global memory
    assert not v_in_shared(32, 256, 300, True) and w_in_shared(32, 256, 300)  # 300: room for w alone
    assert not v_in_shared(32, 256, 54, False)  # w goes first
    assert shared_bytes(32, 256, 144, True) - shared_bytes(32, 256) == 8 * 144 * 32 <= SHARED_W_LIMIT
    assert shared_bytes(32, 256, 144, True, True) - shared_bytes(32, 256, 144, True) == 8 * 144 * 32


@pytest.mark.parametrize("variant", list(GROUPED) + ["scipy-gmres-loop"])
def test_restarted_cycles_match_the_oracle(variant, fresh_seed):
    problem = KERNEL.problem_from_systems(_batch(fresh_seed, 40, 12), restart=3, max_iter=300)
    assert problem.reference()[1].max() > 3  # more than one cycle
    result = run_once(KERNEL, _variant(variant), problem)
    if variant == "scipy-gmres-loop":
        assert result.check.passed, result.check  # SciPy restarts its own way: only the answer is compared
    else:
        _assert_solved(result, problem, iterative=True)


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_system_that_does_not_converge_fails(variant, fresh_seed):
    v = _variant(variant)
    problem = KERNEL.problem_from_systems(_batch(fresh_seed, 30, 6, zero_rhs=False), max_iter=2)
    result = run_once(KERNEL, v, problem)
    if variant in ("numpy-dense-solve", "cupy-dense-solve"):
        assert result.check.passed  # a direct solve has no iteration limit
        return
    assert not result.check.passed and result.check.max_rel_error > problem.tol
    its = result.variant.iterations()
    if variant in GROUPED:
        assert np.all(its == 2)  # reported as stopped at the limit, not silently converged


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("case, bound", [("gri30", 7), ("isooctane", 17)])
def test_stand_ins_both_orders(variant, case, bound):
    v = _variant(variant)
    given = KERNEL.problem(case, 100, order="given")
    ordered = KERNEL.problem(case, 100, order="sorted")
    assert np.all(np.diff(ordered.reference()[1]) >= 0)
    assert sorted(given.reference()[1]) == list(ordered.reference()[1])
    for problem in (given, ordered):
        result = run_once(KERNEL, type(v)(), problem)
        assert result.check.passed, (case, problem.order, result.check)
        its = result.variant.iterations()
        if its is not None and variant != "scipy-gmres-loop":
            assert its.max() <= bound and np.array_equal(its, problem.reference()[1])


@pytest.mark.parametrize("variant", VARIANTS)
def test_repeated_runs_stay_correct(variant, fresh_seed):
    v = _variant(variant)
    problem = KERNEL.problem_from_systems(_batch(fresh_seed, 20, 10))
    result = run_once(KERNEL, v, problem)
    first = result.output.copy()
    v.run()
    np.testing.assert_array_equal(v.output(), first)


def test_prepare_verified_refuses_a_wrong_answer(monkeypatch):
    from portabench.implementations.gmres.numba_batched import NumbaBatched

    original = NumbaBatched.solve

    def corrupted(self):
        x, its = original(self)
        x[0, 0] *= 1.0 + 1e-3
        return x, its

    monkeypatch.setattr(NumbaBatched, "solve", corrupted)
    with pytest.raises(WrongAnswerError, match="largest relative preconditioned residual"):
        prepare_verified(KERNEL, "numba-batched", "gri30", 50)


def test_check_rejects_nan_and_wrong_shapes(fresh_seed):
    problem = KERNEL.problem_from_systems(_batch(fresh_seed, 10, 4))
    x = problem.reference()[0].copy()
    assert KERNEL.check(problem, x, x).passed
    x[1, 2] = np.nan
    assert not KERNEL.check(problem, x, x).passed
    assert not KERNEL.check(problem, x[:2], x).passed


def test_oracle_restart_converges_to_the_same_solution(fresh_seed):
    s = _batch(fresh_seed, 25, 1, zero_rhs=False)
    full = gmres(s.matrix(0), s.rhs[0])
    restarted = gmres(s.matrix(0), s.rhs[0], restart=4, max_iter=400)
    assert full.converged and restarted.converged and restarted.iterations >= full.iterations
    # Both stop at a relative residual of 1e-8: they agree normwise (to about cond(A) x 1e-8), not
    # entry by entry (a component 1e-4 of the largest differed by 8e-5 relatively, seed 2034697681).
    np.testing.assert_allclose(restarted.x, full.x, rtol=0, atol=1e-5 * np.abs(full.x).max())


def test_work_model_by_hand():
    # n = 2, nnz = 3, one system converging in 1 iteration: flops 4n + (2nnz + n + 4n + 3n + 6) + 1 + 2n
    work = gmres_work(2, 3, np.array([1]), restart=30)
    assert work.flops == 8 + (6 + 2 + 8 + 6 + 6) + 1 + 4
    assert work.bytes == 8 * 3 * 1 + 16 * 2 + 4 * (3 + 3)
    # two cycles (restart 1, 2 iterations): one extra residual SpMV, read of the values included
    two = gmres_work(2, 3, np.array([2]), restart=1)
    assert two.bytes == 8 * 3 * 3 + 16 * 2 + 4 * 6
    assert KERNEL.work("gri30", 200).flops > KERNEL.work("gri30", 100).flops > 0


@pytest.mark.parametrize("bad", [{"m": 0}, {"m": 51}, {"m": 2.5}])
def test_bad_group_size(bad):
    from portabench.implementations.gmres.numba_batched import NumbaBatched

    with pytest.raises(PortabenchError, match="group size"):
        NumbaBatched(**bad)


def test_bad_problem_parameters(fresh_seed):
    with pytest.raises(PortabenchError, match="order"):
        KERNEL.problem("gri30", 10, order="backwards")
    with pytest.raises(PortabenchError, match="number of systems"):
        KERNEL.problem("gri30", 0)
    with pytest.raises(PortabenchError, match="restart"):
        KERNEL.problem_from_systems(_batch(fresh_seed, 5, 2), restart=0)
