"""CP-APR PDNR (paper [002]): the oracle against pyttb's PDNR, every variant against the oracle on fresh
random count tensors (3-, 4- and 5-way) and the shipped real tensors, the check's teeth, the objective's
descent over outer iterations, bad input, lbnl's skew, the studies and the published ratios."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from portabench.datasets.tensors import SparseTensor
from portabench.implementations import get_kernel
from portabench.implementations.cpapr_pdnr.definition import floored_objective, pack, unpack
from portabench.implementations.model import PortabenchError
from portabench.implementations.verification import run_once
from portabench.reference.cpapr import poisson_objective
from portabench.reference.cpapr_pdnr import PdnrSettings, mode_kkt, pdnr, row_gradient, row_kkt, solve_row

KERNEL = get_kernel("cpapr_pdnr")
CPU = [v.name for v in KERNEL.variants if v.runs_on("cpu") and v.name != "pyttb"]
GPU = [v.name for v in KERNEL.variants if v.runs_on("gpu")]
SHIPPED = Path(__file__).resolve().parents[1] / "datasets" / "data"
SHAPES = [(9, 7, 8), (6, 5, 4, 7), (4, 5, 3, 4, 6)]


def count_tensor(rng: np.random.Generator, dims: tuple[int, ...], nnz: int, heavy: float = 0.0) -> SparseTensor:
    """Random distinct coordinates covering every slice of every mode, counts in 1..9; ``heavy``:
    the share of nonzeros put in mode 0's slice 0 (a skewed row, as lbnl's)."""
    coords = np.stack([rng.integers(0, d, nnz) for d in dims], axis=1)
    for m, d in enumerate(dims):
        coords[:d, m] = rng.permutation(d)  # every slice gets a nonzero
    coords[max(dims): max(dims) + int(heavy * nnz), 0] = 0
    coords = np.unique(coords, axis=0)
    rng.shuffle(coords)
    return SparseTensor(dims, coords, rng.integers(1, 10, coords.shape[0]).astype(float))


def compacted(tensor: SparseTensor) -> SparseTensor:
    """``tensor`` with its empty slices dropped (indices renumbered): CP-APR refuses empty slices."""
    coords = tensor.coords.copy()
    dims = []
    for m in range(tensor.order):
        used, coords[:, m] = np.unique(coords[:, m], return_inverse=True)
        dims.append(used.size)
    keep = tensor.values > 0
    return SparseTensor(tuple(dims), coords[keep], tensor.values[keep])


def pyttb_objective(tensor: SparseTensor, weights: np.ndarray, factors: list[np.ndarray], outer: int) -> float:
    import pyttb as ttb

    s = PdnrSettings()
    x = ttb.sptensor(tensor.coords.astype(np.int64), tensor.values[:, None], tensor.dims)
    init = ttb.ktensor([a.copy() for a in factors], weights.copy(), copy=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, _, _ = ttb.cp_apr(x, weights.size, algorithm="pdnr", init=init, maxiters=outer, maxinneriters=s.max_inner,
                                 stoptol=s.row_tol, printitn=0, inexact=False)
    return poisson_objective(tensor.coords, tensor.values, model.weights, model.factor_matrices)


@pytest.mark.parametrize("dims", SHAPES)
def test_oracle_agrees_with_pyttb_and_descends(dims: tuple[int, ...], fresh_seed: int) -> None:
    """Same start, two outer iterations: the objective agrees with pyttb's to 1e-9 relatively and
    falls from the start and from one outer iteration to the next; rows that stopped before the cap
    in the last mode satisfy their KKT conditions."""
    tensor = count_tensor(np.random.default_rng(fresh_seed), dims, 120)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="3")
    weights, factors = problem.start
    result = pdnr(tensor.coords, tensor.values, weights, factors, 2)
    start = poisson_objective(tensor.coords, tensor.values, weights, factors)
    ours = result.objectives
    assert ours[0] <= start and ours[1] <= ours[0] * (1 + 1e-12) + 1e-12
    theirs = pyttb_objective(tensor, weights, factors, 2)
    assert abs(ours[1] - theirs) <= 1e-9 * abs(theirs)
    steps = result.steps[-1]
    kkt = mode_kkt(tensor.coords, tensor.values, result.weights, result.factors, tensor.order - 1)
    assert np.all(kkt[steps < 10] < 1e-4 * (1 + 1e-6))


def test_oracle_rows_in_worker_processes_give_the_serial_result(monkeypatch, fresh_seed: int) -> None:
    """Large modes go to worker processes in blocks (skewed rows included): bit for bit the serial answer."""
    import portabench.reference.cpapr_pdnr as oracle

    tensor = count_tensor(np.random.default_rng(fresh_seed), (40, 30, 20), 1500, heavy=0.3)
    weights, factors = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="4").start
    serial = pdnr(tensor.coords, tensor.values, weights, factors, 2)
    monkeypatch.setattr(oracle, "PARALLEL_ROWS", 25)  # modes of 30 and 40 rows in workers, 20 serially
    monkeypatch.setattr(oracle.os, "cpu_count", lambda: 2)
    parallel = pdnr(tensor.coords, tensor.values, weights, factors, 2)
    assert parallel.objectives == serial.objectives
    for ours, theirs in zip([parallel.weights, *parallel.factors, *parallel.steps],
                            [serial.weights, *serial.factors, *serial.steps]):
        np.testing.assert_array_equal(ours, theirs)


def test_row_solver_reaches_the_kkt_point_of_a_row() -> None:
    """One row with more nonzeros than unknowns: Newton reaches KKT < 1e-4 within the cap, and the
    solution is optimal against random feasible points."""
    rng = np.random.default_rng(5)
    pi = rng.uniform(0.1, 1.0, (40, 4))
    x = rng.integers(1, 6, 40).astype(float)
    b, steps = solve_row(np.full(4, 0.5), x, pi)
    g, _ = row_gradient(b, x, pi, 1e-10)
    assert steps < 10 and row_kkt(b, g) < 1e-4
    f = b.sum() - x @ np.log(pi @ b)
    for _ in range(50):
        c = np.maximum(b + rng.normal(0, 0.05, 4), 0)
        assert c.sum() - x @ np.log(pi @ c) >= f - 1e-9


@pytest.mark.parametrize("name", CPU + GPU)
@pytest.mark.parametrize("dims", SHAPES)
def test_variants_pass_the_check_on_random_tensors(name: str, dims: tuple[int, ...], fresh_seed: int) -> None:
    tensor = count_tensor(np.random.default_rng(fresh_seed), dims, 300, heavy=0.3)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="4")
    variant = KERNEL.variant(name)(threshold=16)  # the multi-kernel variants solve the heavy row on every core
    result = run_once(KERNEL, variant, problem)
    assert result.check.passed, f"{name}: {result.check.describe()}"


@pytest.mark.parametrize("name", ["numba-multi", "cupy-multi"])
def test_multi_kernel_heavy_rows_match_single_kernel(name: str, fresh_seed: int) -> None:
    """Every row heavy (threshold 1) or none (a huge threshold): the same model as the single kernel, up to
    rounding (the sums run in another order over the device)."""
    tensor = count_tensor(np.random.default_rng(fresh_seed), (12, 10, 9), 600, heavy=0.4)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="5")
    single = "numba-single" if name == "numba-multi" else "cupy-single"
    outputs = []
    for variant in (KERNEL.variant(single)(), KERNEL.variant(name)(threshold=1), KERNEL.variant(name)(threshold=1 << 30)):
        result = run_once(KERNEL, variant, problem)
        assert result.check.passed, result.check.describe()
        outputs.append(unpack(variant.output(), tensor.dims, 5))
    f = [floored_objective(tensor.coords, tensor.values, w, a) for w, a, _ in outputs]
    assert abs(f[1] - f[0]) <= 1e-10 * abs(f[0]) and abs(f[2] - f[0]) <= 1e-10 * abs(f[0])


@pytest.mark.usefixtures("cupy_gpu")
@pytest.mark.parametrize("short_row", [1, 8, 64])
def test_cupy_multi_short_rows_a_thread_each_or_with_the_warps(short_row: int, fresh_seed: int) -> None:
    """cupy-multi's short rows a thread each (``short_rows_min`` 0) match cupy-single up to rounding; with too
    few short rows to split off (the default: a wave of the GPU) and no heavy row, it runs cupy-single's launch."""
    from portabench.implementations.cpapr_pdnr.cupy_multi import CupyMulti

    tensor = count_tensor(np.random.default_rng(fresh_seed), (40, 30, 25), 500, heavy=0.2)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="5")
    outputs = []
    for variant in (KERNEL.variant("cupy-single")(), CupyMulti(threshold=1 << 30, short_row=short_row, short_rows_min=0),
                    CupyMulti(threshold=1 << 30, short_row=short_row)):
        result = run_once(KERNEL, variant, problem)
        assert result.check.passed, result.check.describe()
        outputs.append(variant.output())
    assert np.array_equal(outputs[2], outputs[0])
    f = [floored_objective(tensor.coords, tensor.values, w, a) for w, a, _ in
         (unpack(o, tensor.dims, 5) for o in outputs[:2])]
    assert abs(f[1] - f[0]) <= 1e-10 * abs(f[0])


@pytest.mark.parametrize("name", ["numba-single", "numpy-batched"])
def test_objective_never_rises_over_outer_iterations(name: str, fresh_seed: int) -> None:
    """Runs of 1, 2, 3 and 4 outer iterations from the same start: the float64 objective of each
    is at most the one before (rounding only)."""
    tensor = count_tensor(np.random.default_rng(fresh_seed), (10, 8, 7, 5), 400)
    objectives = []
    for outer in range(1, 5):
        problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="4", outer=str(outer))
        if outer == 1:
            objectives.append(poisson_objective(tensor.coords, tensor.values, *problem.start))
        variant = KERNEL.variant(name)()
        assert run_once(KERNEL, variant, problem).check.passed
        weights, factors, _ = unpack(variant.output(), tensor.dims, 4)
        objectives.append(poisson_objective(tensor.coords, tensor.values, weights, factors))
    assert all(b <= a + 1e-12 * abs(a) for a, b in zip(objectives, objectives[1:])), objectives


def test_pyttb_variant_passes_the_check(fresh_seed: int) -> None:
    tensor = count_tensor(np.random.default_rng(fresh_seed), (8, 6, 7), 150)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="3")
    assert run_once(KERNEL, "pyttb", problem).check.passed


@pytest.mark.parametrize("path", ["splatt/small.tns", "splatt/small4.tns", "parti/3d_3_8.tns", "parti/4d_3_16.tns",
                                  "pyttb/sptensor.tns"])
def test_variants_on_shipped_tensors(path: str) -> None:
    from portabench.datasets.tensors.tns import read_tns

    tensor = compacted(read_tns(SHIPPED / path))
    problem = KERNEL.problem_from_tensor(tensor, seed=3, rank="3")
    reference = KERNEL.oracle(problem)
    for name in CPU:
        result = run_once(KERNEL, KERNEL.variant(name)(threshold=4), problem, reference)
        assert result.check.passed, f"{name} on {path}: {result.check.describe()}"


@pytest.mark.parametrize("case", ["lbnl-network", "delicious-4d"])
def test_variants_on_small_standins(case: str) -> None:
    """lbnl's skewed stand-in (rows of thousands of nonzeros beside rows of one), heavy path on; and
    delicious (paper [002]'s fourth Table I tensor, a stand-in only: 140 M nonzeros at full size)."""
    problem = KERNEL.problem(case, 3_000, seed=1)
    reference = KERNEL.oracle(problem)
    for name in CPU:
        result = run_once(KERNEL, KERNEL.variant(name)(threshold=256), problem, reference)
        assert result.check.passed, f"{name}: {result.check.describe()}"


def test_the_check_fails_wrong_answers(fresh_seed: int) -> None:
    tensor = count_tensor(np.random.default_rng(fresh_seed), (9, 8, 7), 250)
    problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="3")
    reference = KERNEL.oracle(problem)
    assert KERNEL.check(problem, reference, reference).passed
    weights, factors, steps = unpack(reference.copy(), tensor.dims, 3)
    # a converged row of the last mode moved off its KKT point
    moved = [a.copy() for a in factors]
    row = int(np.flatnonzero(steps < 10)[0])
    moved[-1][row] *= 1.5
    assert not KERNEL.check(problem, pack(weights, moved, steps), reference).passed
    # every row claimed unconverged: more rows at the cap than the oracle's
    assert not KERNEL.check(problem, pack(weights, factors, np.full(steps.size, 10)), reference).passed
    # the starting model (no work done) has a higher objective than the oracle's
    start_weights, start_factors = problem.start
    assert not KERNEL.check(problem, pack(start_weights, start_factors, np.full(steps.size, 10)), reference).passed
    # malformed
    assert not KERNEL.check(problem, reference[:-1], reference).passed
    nan = reference.copy()
    nan[0] = np.nan
    assert not KERNEL.check(problem, nan, reference).passed


@pytest.mark.parametrize("fault", ["negative", "nan", "empty slice"])
def test_bad_tensors_get_one_line_errors(fault: str) -> None:
    tensor = count_tensor(np.random.default_rng(1), (5, 4, 3), 40)
    values, dims = tensor.values.copy(), tensor.dims
    if fault == "negative":
        values[3] = -1.0
    elif fault == "nan":
        values[3] = np.nan
    else:
        dims = (6, 4, 3)
    with pytest.raises(PortabenchError) as info:
        KERNEL.problem_from_tensor(SparseTensor(dims, tensor.coords, values))
    assert "\n" not in str(info.value) and str(info.value)


@pytest.mark.parametrize("option", [{"rank": "0"}, {"rank": "x"}, {"outer": "0"}, {"outer": "two"}])
def test_bad_options_get_one_line_errors(option: dict[str, str]) -> None:
    with pytest.raises(PortabenchError) as info:
        KERNEL.problem_options(option)
    assert "\n" not in str(info.value)


def test_lbnl_standin_keeps_table_ii_skew() -> None:
    """paper [002]'s Table II, lbnl mode 1: mean 1058, max 397 413 of 1 698 825 nonzeros (23.4 %) per row.
    A 2 % stand-in keeps the largest row's share and a max/mean ratio of hundreds (it scales with the rows)."""
    from portabench.datasets.tensors.standin import skew_summary

    tensor = KERNEL.problem("lbnl-network", 34_000, seed=2).tensor
    mode1 = skew_summary(tensor)["mode 1"]
    assert mode1["max_share"] == pytest.approx(397_413 / 1_698_825, abs=0.01)
    assert mode1["max"] / mode1["mean"] > 100
    lengths = np.diff(np.searchsorted(np.sort(tensor.coords[:, 0]), np.arange(tensor.dims[0] + 1)))
    assert int(np.sum(lengths > 1 << 12)) >= 1  # heavy rows for the multi-kernel scheme at this size


def test_work_model_and_studies() -> None:
    small, large = KERNEL.work("nell-2", 10_000), KERNEL.work("nell-2", 100_000)
    assert 5 < large.flops / small.flops < 15 and large.bytes > small.bytes > 0
    assert KERNEL.work("nell-2", 10_000, outer="10").flops == pytest.approx(10 * small.flops)
    studies = {s.name: s for s in KERNEL.studies("cpu")}
    assert set(studies) >= {"main", "threshold", "outer-10", "datasets", "iterations", "pyttb"}
    assert studies["threshold"].settings["threshold"][0] == "256" and studies["threshold"].settings["threshold"][-1] == "262144"
    assert "pyttb" not in studies["main"].variants and "pyttb" in studies["pyttb"].variants
    assert {s.name for s in KERNEL.studies("gpu")} >= {"main", "threshold"}


def test_published_ratios_are_listed() -> None:
    from portabench.reference.published import load_published

    rows = load_published()
    ours = rows[rows.kernel == "cpapr_pdnr"]
    assert {"cpu", "gpu"} <= set(ours.device) and (ours.value > 0).all()


HOST_KERNELS = {  # the GPU kernels' parameters, for the host build's entry points
    "heavy_sums": "const double* pi, const double* x, const int* bs, const long long* lo, const long long* hi, "
                  "const double* B, const long long* rows, double eps, const long long* flags, double* sums",
    "heavy_trial_log": "const double* pi, const double* x, const int* bs, const long long* lo, const long long* hi, "
                       "const long long* flags, const double* vec, double* sums",
    "heavy_begin": "const double* B, const long long* rows, long long n, const double* s, long long* flags, "
                   "double* sums, double* vec, double* scal, long long* steps, unsigned long long* counters",
    "heavy_judge": "double* B, const long long* rows, long long n, const double* s, long long* flags, double* sums, "
                   "double* vec, double* scal, long long* steps, unsigned long long* counters, int k",
}


def _host_build(tmp_path: Path):
    """The GPU variants' CUDA source compiled for the host, one lane per row and one thread per block
    (PDNR_WARP 1): its row math and lock-step heavy-row stages, checked without a GPU. Skips where no
    C++ compiler is found."""
    import ctypes
    import re
    import shutil
    import subprocess

    from portabench.implementations.cpapr_pdnr.cupy_multi import SOURCE as MULTI
    from portabench.implementations.cpapr_pdnr.cupy_single import SOURCE as SINGLE
    from portabench.implementations.cpapr_pdnr.row_cuda import ROW_MATH

    compiler = shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no C++ compiler for the host build of the CUDA source")
    prelude = r"""
#define PDNR_WARP 1
#include <cmath>
using std::isinf;
#define __device__
#define __global__
#define __forceinline__ inline
struct dim3_ { unsigned x; };
static dim3_ threadIdx, blockIdx, blockDim, gridDim;
static inline double __shfl_xor_sync(unsigned, double v, int) { return v; }
static inline double atomicAdd(double* p, double v) { double o = *p; *p += v; return o; }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    unsigned long long o = *p; *p += v; return o; }
template <typename... P, typename... A> static void launch(void (*k)(P...), long long units, A... a) {
    blockDim.x = 1; gridDim.x = (unsigned)units; threadIdx.x = 0;
    for (long long u = 0; u < units; ++u) { blockIdx.x = (unsigned)u; k(a...); }
}
"""
    harness = r"""
extern "C" void rows(const double* pi, const double* x, const long long* starts, const long long* rows, long long n,
                     double* B, long long* steps, const double* s) {
    launch(pdnr_rows<4>, n, pi, x, starts, rows, n, B, steps, s);
}
"""
    for name, params in HOST_KERNELS.items():
        names = ", ".join(re.findall(r"(\w+)(?:,|$)", params))
        harness += f'extern "C" void {name}_host(long long units, {params}) {{ launch({name}<4>, units, {names}); }}\n'
    heavy = MULTI[len(ROW_MATH):]  # the lock-step stages, after the row math both sources begin with
    source = tmp_path / "pdnr.cpp"
    source.write_text(prelude + SINGLE + heavy + harness)
    library = tmp_path / "pdnr.so"
    subprocess.run([compiler, "-O1", "-shared", "-fPIC", "-std=c++14", "-o", str(library), str(source)], check=True)
    return ctypes.CDLL(str(library))


def test_cuda_variants_share_one_row_math_source() -> None:
    """Both CuPy variants compile ``row_cuda.ROW_MATH`` (once, at the start) and their kernels build the
    Newton step from its pieces instead of spelling it again; no GPU needed."""
    from portabench.implementations.cpapr_pdnr import cupy_multi, cupy_single
    from portabench.implementations.cpapr_pdnr.row_cuda import ROW_MATH

    sources = {"cupy-single": cupy_single.SOURCE, "cupy-single (a thread per row)": cupy_single.THREAD_PER_ROW
               + cupy_single.SOURCE, "cupy-multi": cupy_multi.SOURCE}
    for name, source in sources.items():
        assert source.count(ROW_MATH) == 1, name
    for source in (cupy_single.SOURCE, cupy_multi.SOURCE):
        kernels = source[len(ROW_MATH):]
        assert source.startswith(ROW_MATH)
        for piece in ("kkt_and_gradient<R>(", "direction<R>(", "row_sum<R>(", "trial_point<R>(",
                      "REJECTED_OUTRIGHT(", "accepted(", "backtrack(", "end_step<R>("):
            assert piece in kernels, piece
        for spelled_out in ("fmax(b[r] * phi[r]", "fmax(b[r] + alpha", "s[7] *", "s[6]", "damping("):
            assert spelled_out not in kernels, spelled_out


def test_numba_variants_share_one_row_solver() -> None:
    """numba-single and numba-multi (light and heavy rows) run the same compiled row solver."""
    from portabench.implementations.cpapr_pdnr import numba_multi, numba_single, row_numba

    assert numba_single.solve_rows is row_numba.solve_rows is numba_multi.solve_rows
    assert numba_multi.solve_row is row_numba.solve_row


def test_cuda_row_math_on_the_host(tmp_path: Path, fresh_seed: int) -> None:
    """cupy-single's kernel and cupy-multi's lock-step heavy-row path (the same host loop, the kernels
    built for the host) pass the check; every row heavy, and a threshold that leaves some light."""
    import ctypes

    from portabench.implementations.cpapr_pdnr.cupy_multi import LockstepHeavyRows
    from portabench.implementations.cpapr_pdnr.variant import NumbaPdnrVariant

    lib = _host_build(tmp_path)

    def c_argument(a):
        if isinstance(a, np.ndarray):
            assert a.flags.c_contiguous
            return a.ctypes.data_as(ctypes.c_void_p)
        return {np.float64: ctypes.c_double, np.int64: ctypes.c_longlong, np.int32: ctypes.c_int}[type(a)](a)

    class HostSingle(NumbaPdnrVariant):
        name, family = "host-cuda-single", "portable"

        def solve_rows(self, mode, rows, b, steps):
            a = self._modes[mode]
            lib.rows(*map(c_argument, (self._pi, a.values, a.starts, rows, np.int64(rows.shape[0]), b, steps,
                                       self._settings)))

        def solve_mode(self, mode, b, steps):
            self.solve_rows(mode, self._modes[mode].all_rows, b, steps)

    class HostMulti(LockstepHeavyRows, HostSingle):
        name = "host-cuda-multi"

        def prepare_solver(self, problem):
            super().prepare_solver(problem)
            self.setup_heavy(problem)

        def launch_stage(self, kernel, units, per_block, args):
            getattr(lib, f"{kernel}_host")(ctypes.c_longlong(units), *map(c_argument, args))

        def solve_mode(self, mode, b, steps):
            self.solve_rows(mode, self._light[mode], b, steps)
            self.solve_heavy(mode, b, steps)

    for dims in SHAPES:
        tensor = count_tensor(np.random.default_rng(fresh_seed), dims, 300, heavy=0.3)
        problem = KERNEL.problem_from_tensor(tensor, seed=fresh_seed, rank="4")
        reference = KERNEL.oracle(problem)
        for variant in (HostSingle(), HostMulti(threshold=0), HostMulti(threshold=40)):
            result = run_once(KERNEL, variant, problem, reference)
            assert result.check.passed, f"{variant.name} {dims}: {result.check.describe()}"


def test_quick_verify_keeps_every_variants_paths() -> None:
    """The default verify set (``quick_verify``): rows over both multi-kernel thresholds beside light rows,
    more nonzeros than numpy-batched's Hessian block, tensors of order 3, 4 and 5, lbnl's mode of fewer
    nonzeros per row than R, pyttb within its size; and at most a quarter of the full set's rows (the
    oracle and pyttb solve them one at a time in Python)."""
    from portabench.datasets.tensors.standin import scaled_shape
    from portabench.implementations.cpapr_pdnr.cupy_multi import LOCKSTEP_THRESHOLD
    from portabench.implementations.cpapr_pdnr.numpy_batched import HESSIAN_CHUNK
    from portabench.implementations.cpapr_pdnr.variant import DEFAULT_THRESHOLD
    from portabench.implementations.tensor_inputs import scale_for

    problems = KERNEL.verify_set_problems(KERNEL.verify_set(), 0, {})
    lengths = [np.bincount(p.tensor.coords[:, m], minlength=p.tensor.dims[m]) for p in problems
               for m in range(p.tensor.order)]
    for threshold in (DEFAULT_THRESHOLD, LOCKSTEP_THRESHOLD):  # numba-multi's, cupy-multi's
        assert any((rows > threshold).any() and (rows <= threshold).any() for rows in lengths), threshold
        assert any((rows <= threshold).all() for rows in lengths), threshold  # a mode without heavy rows
    assert max(p.tensor.nnz for p in problems) > HESSIAN_CHUNK
    assert sorted(p.tensor.order for p in problems) == [3, 4, 5]
    assert any(rows.mean() < p.rank for p in problems if p.case == "lbnl-network"
               for rows in [np.bincount(p.tensor.coords[:, -1])])
    assert [p.case for p in problems if KERNEL.verify_skips(KERNEL.variant("pyttb"), p) is None] == ["nell-2"]
    full = sum(sum(scaled_shape(case, scale_for(case, size))[0]) for case, size in KERNEL.verify_set(full=True).items())
    assert 4 * sum(sum(p.tensor.dims) for p in problems) <= full
