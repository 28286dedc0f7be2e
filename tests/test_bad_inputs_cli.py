"""Bad inputs through the real ``portabench`` entry: refused with one
line on stderr and exit 2 (before anything is allocated, written or started), or run correctly."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from portabench.datasets import cache, memory
from portabench.datasets.tensors import SparseTensor
from portabench.implementations import get_kernel
from portabench.harness.commands import results_merge, runner
from portabench.harness.commands.cli import main
from test_bad_dataset_inputs import _tns_lines
from test_cli import _one_line_error
from test_compare import BASE_TIMES, result_set
from test_reports import write_results

REPO = Path(__file__).resolve().parents[1]
MACHINE = "pytest-bad-inputs"
RUN = ["run", "--machine", MACHINE, "--device", "cpu", "--no-report"]


class AsvStarted(Exception):
    """Raised where ``portabench run`` would start asv."""


@pytest.fixture
def no_asv(monkeypatch: pytest.MonkeyPatch):
    """Every check of a run comes before asv and the inputs' prefill: reaching either raises AsvStarted
    (a refusal test then errors; a test of an accepted request expects it). Asserts no machine folder is left."""
    real_run, real_popen = subprocess.run, subprocess.Popen

    def guarded(real):
        def call(command, *args, **kwargs):
            if "asv" in [str(c) for c in command][:3]:
                raise AsvStarted(" ".join(map(str, command)))
            return real(command, *args, **kwargs)
        return call

    def prefill(*args, **kwargs):
        raise AsvStarted("prefill")

    monkeypatch.setattr(runner.subprocess, "run", guarded(real_run))
    monkeypatch.setattr(runner.subprocess, "Popen", guarded(real_popen))
    monkeypatch.setattr(runner, "prefill_plan", prefill)
    yield
    assert not (REPO / "results" / MACHINE).exists()


def _covering_tensor(rng: np.random.Generator, order: int, nnz: int) -> SparseTensor:
    """A random tensor of ``order`` modes whose every slice holds a nonzero (a count tensor for CP-APR)."""
    dims = tuple(int(d) for d in rng.integers(2, 5, order))
    coords = np.column_stack([np.arange(nnz) % d for d in dims])  # every index of every mode
    for m in range(order):
        coords[:, m] = rng.permutation(coords[:, m])
    coords = np.unique(coords, axis=0)
    return SparseTensor(dims, coords, rng.integers(1, 9, len(coords)).astype(np.float64))


def _write_tns(tensor: SparseTensor, path: Path) -> Path:
    lines = [" ".join(map(str, c)) + f" {v!r}" for c, v in zip((tensor.coords + 1).tolist(), tensor.values.tolist())]
    path.write_text("\n".join(lines) + "\n")
    return path


# --- tracebacks ----------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["peaks", "run"])
def test_a_peaks_file_that_is_not_utf8_is_named(command, tmp_path, capsys, no_asv, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    peaks = tmp_path / "peaks.toml"
    comment = "# measured on the caf\xe9 cluster, ".encode("latin-1") + bytes(rng.integers(97, 122, 8).tolist())
    peaks.write_bytes(b"[cpu]\n" + comment + f"\npeak_bandwidth_gbs = {rng.uniform(10, 500)!r}\n"
                      f"peak_fp64_gflops = {rng.uniform(100, 5000)!r}\n".encode())
    argv = ["peaks", "--peaks-file", str(peaks)] if command == "peaks" else [*RUN, "--peaks-file", str(peaks)]
    assert main(argv) == 2
    _one_line_error(capsys, str(peaks), "not UTF-8")


def _random_times(rng: np.random.Generator) -> dict:
    return {key: float(rng.uniform(0.5e-3, 3e-3)) for key in BASE_TIMES}


@pytest.mark.parametrize("where", ["results folder", "machine folder"])
@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_benchmarks_json_holding_a_list_is_noted_and_the_names_inferred(command, where, tmp_path, capsys, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    times = _random_times(rng)
    base, contender = result_set(tmp_path / "a", "a", times, rng), result_set(tmp_path / "b", "b", times, rng)
    bad = base / "benchmarks.json" if where == "results folder" else base / "box" / "benchmarks.json"
    bad.write_text(json.dumps(rng.uniform(0, 1, 3).tolist()))
    if command == "report":
        out = tmp_path / "report"
        assert main(["report", "--results", str(base), "--out", str(out)]) == 0
        assert "Traceback" not in capsys.readouterr().err
        problems = (out / "problems.txt").read_text()
    else:
        assert main(["compare", str(base), str(contender)]) == 0  # one round a side, no noise record: unjudged
        captured = capsys.readouterr()
        assert "4 paired:" in captured.out and "4 unjudged" in captured.out, captured.out
        problems = captured.err
    assert f"{bad}: not a JSON object of benchmarks" in problems, problems


@pytest.mark.parametrize("kernel", ["mttkrp", "phi", "pi", "cpapr_mu", "cpapr_pdnr"])
def test_a_tensor_of_one_mode_is_refused_by_every_tensor_kernel(kernel, tmp_path, capsys, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    dim = int(rng.integers(5, 40))
    one = tmp_path / "one.tns"
    one.write_text("".join(f"{i} {v!r}\n" for i, v in zip(range(1, dim + 1), rng.uniform(1, 9, dim).tolist())))
    assert main(["verify", "--kernel", kernel, "--tensor", str(one), "--quiet", "--seed", str(fresh_seed)]) == 2
    _one_line_error(capsys, f"{kernel}:", "1 mode", "at least 2 modes")


def _batched_files(tmp_path: Path, n: int, nnz: int, count: int, rng: np.random.Generator) -> Path:
    """A batched A file claiming ``n`` rows and ``nnz`` entries of which it holds a few, and its B file."""
    a, b = tmp_path / "A.mm", tmp_path / "B.mm"
    rows = [f"{i} {i} " + " ".join(repr(v) for v in rng.uniform(1, 2, count).tolist()) for i in range(1, 4)]
    a.write_text(f"%%MatrixMarket batched CRS matrix\n{n} {n} {nnz} {count}\n" + "\n".join(rows) + "\n")
    b.write_text(f"%%MatrixMarket 2D view\n{count} {n}\n")
    return a


@pytest.mark.parametrize("kernel", ["gmres", "batched_spmv"])
def test_a_batched_file_claiming_more_than_memory_is_refused_before_allocating(kernel, tmp_path, capsys, fresh_seed,
                                                                               monkeypatch):
    rng = np.random.default_rng(fresh_seed)
    n = int(rng.integers(1_000_000_000, 3_000_000_000))
    a = _batched_files(tmp_path, n, n + int(rng.integers(0, 1000)), int(rng.integers(2, 6)), rng)
    monkeypatch.setattr(memory, "available_host_memory_bytes", lambda: 16 << 30)
    tracemalloc.start()
    try:
        assert main(["verify", "--kernel", kernel, "--matrices", str(a), "--quiet"]) == 2
        assert tracemalloc.get_traced_memory()[1] < 64 << 20  # refused before any array of that size
    finally:
        tracemalloc.stop()
    _one_line_error(capsys, str(a), f"n = {n}", "of host memory", "16.0 GiB is available")


@pytest.mark.parametrize("kernel", ["gmres", "batched_spmv"])
def test_a_batched_header_with_fewer_entries_than_rows_is_refused(kernel, tmp_path, capsys, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    n = int(rng.integers(1_000_000_000, 3_000_000_000))
    a = _batched_files(tmp_path, n, 3, int(rng.integers(2, 6)), rng)
    assert main(["verify", "--kernel", kernel, "--matrices", str(a), "--quiet"]) == 2
    _one_line_error(capsys, f"{a}:", f"n = {n} rows", "nnz = 3", "diagonal")


@pytest.mark.parametrize("spec", ["nips", "gri30", "gt01r", "block-sweep-bs8"])
@pytest.mark.parametrize("command", ["generate", "info"])
def test_a_stand_in_too_large_for_memory_is_refused_before_allocating(command, spec, tmp_path, capsys, fresh_seed):
    scale = float(np.random.default_rng(fresh_seed).uniform(1e8, 1e10))
    argv = (["datasets", "generate", spec, "--scale", repr(scale), "--out", str(tmp_path / "x")] if command == "generate"
            else ["datasets", "info", f"{spec}@{scale!r}"])
    assert main(argv) == 2
    _one_line_error(capsys, f"{spec}@{scale:g}", "of host memory", "is available", "smaller scale")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("spec, name", [("nips", "x.tns"), ("gri30", "x.mm"), ("gt01r", "x.mtx")])
def test_generate_into_a_path_under_a_file_is_refused_before_generating(spec, name, tmp_path, capsys, fresh_seed):
    blocker = tmp_path / "a-file"
    blocker.write_text(str(fresh_seed))
    assert main(["datasets", "generate", spec, "--scale", "0.001", "--out", str(blocker / name)]) == 2
    _one_line_error(capsys, "--out", str(blocker), "is a file")
    assert blocker.read_text() == str(fresh_seed)


def test_generate_onto_a_folder_is_refused(tmp_path, capsys):
    assert main(["datasets", "generate", "nips", "--scale", "0.001", "--out", str(tmp_path)]) == 2
    _one_line_error(capsys, "--out", str(tmp_path), "is a folder")


def test_generate_makes_the_folder_it_writes_into(tmp_path, capsys, fresh_seed):
    out = tmp_path / "new" / "gri30_A.mm"
    assert main(["datasets", "generate", "gri30", "--scale", "0.001", "--seed", str(fresh_seed), "--out", str(out)]) == 0
    assert out.is_file() and (tmp_path / "new" / "gri30_B.mm").is_file()


# --- killed: a Matrix Market header beyond memory --------------------------------------------------

def _huge_mtx(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, int]:
    n = int(rng.integers(1_200_000_000, 2_100_000_000))  # its CSR row pointers alone beyond the 16 GiB the test allows
    entries = int(rng.integers(100, 300))
    rows, cols = rng.integers(1, n + 1, entries), rng.integers(1, n + 1, entries)
    body = "".join(f"{r} {c} {v!r}\n" for r, c, v in zip(rows.tolist(), cols.tolist(), rng.uniform(-2, 2, entries).tolist()))
    big = tmp_path / "big.mtx"
    big.write_text(f"%%MatrixMarket matrix coordinate real general\n{n} {n} {entries}\n{body}")
    return big, n


@pytest.mark.parametrize("argv", [["verify", "--kernel", "bcsr", "--matrix", "{big}", "--block-size", "4", "--quiet"],
                                  ["datasets", "register", "gt01r", "{big}"]])
def test_a_matrix_header_beyond_memory_is_refused_before_allocating(argv, tmp_path, capsys, fresh_seed, monkeypatch):
    big, n = _huge_mtx(tmp_path, np.random.default_rng(fresh_seed))
    monkeypatch.setenv(cache.DATA_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(memory, "available_host_memory_bytes", lambda: 16 << 30)
    tracemalloc.start()
    try:
        assert main([a.format(big=big) for a in argv]) == 2
        assert tracemalloc.get_traced_memory()[1] < 64 << 20
    finally:
        tracemalloc.stop()
    _one_line_error(capsys, str(big), f"{n} x {n}", "of host memory", "16.0 GiB is available")


# --- a variant that fails instead of skipping -----------------------------------------------------

@pytest.mark.parametrize("order", [6, 9])
def test_numba_csf_skips_tensors_beyond_its_order_and_the_others_pass(order, tmp_path, capsys, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    path = _write_tns(_covering_tensor(rng, order, int(rng.integers(60, 120))), tmp_path / f"t{order}.tns")
    mode = str(int(rng.integers(order)))
    assert main(["verify", "--kernel", "mttkrp", "--tensor", str(path), "--mode", mode, "--rank", "4", "--quiet",
                 "--seed", str(fresh_seed)]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    csf = next(line for line in out.splitlines() if " numba-csf " in line)
    assert f"skipped: tensors of order up to 5, this one has order {order}" in csf, csf
    assert "FAIL" not in out and " pass" in out
    # Asked for alone, nothing ran: one line saying why.
    assert main(["verify", "--kernel", "mttkrp", "--tensor", str(path), "--mode", mode, "--variant", "numba-csf",
                 "--quiet"]) == 2
    _one_line_error(capsys, "numba-csf", f"order {order}")


# Variants that take tensors of order up to 5 (a CSF walk or GPU kernels with five factor pointers).
ORDER_LIMITED = {"mttkrp": {"numba-csf", "cupy-segmented", "cupy-atomic"}, "pi": {"cupy-rows", "cupy-rows-sorted"},
                 "cpapr_mu": {"cupy"}, "cpapr_pdnr": {"cupy-single", "cupy-multi"}, "phi": set()}


def test_every_order_limited_variant_says_so_through_supports(fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    tensors = {order: _covering_tensor(rng, order, int(rng.integers(40, 80))) for order in (5, 6)}
    for name, limited in ORDER_LIMITED.items():
        kernel = get_kernel(name)
        for order, tensor in tensors.items():
            problem = kernel.problem_from_tensor(tensor, int(rng.integers(2**32)), rank="3")
            for cls in kernel.variants:
                reason = cls().supports(problem)
                if order > 5 and cls.name in limited:
                    assert reason == "tensors of order up to 5, this one has order 6", (name, cls.name, reason)
                else:
                    assert reason is None, (name, cls.name, order, reason)


# --- silently accepted, then a number ---------------------------------------------------------------

def _beyond(rng: np.random.Generator, low: float, high: float) -> str:
    """A value outside [low, high]: below, above, negative, infinite or NaN."""
    return str(rng.choice([repr(float(rng.uniform(0, low * 0.9))), repr(float(10 ** rng.uniform(np.log10(high) + 0.1, 308))),
                           repr(float(-rng.uniform(0, 1e6))), "inf", "-inf", "nan"]))


@pytest.mark.parametrize("command", ["peaks", "run"])
@pytest.mark.parametrize("flag, low, high, unit", [("--peak-bandwidth", 0.1, 1e6, "GB/s"),
                                                   ("--peak-flops", 0.1, 1e7, "GFLOP/s")])
def test_a_peak_outside_one_nodes_range_is_refused(command, flag, low, high, unit, capsys, no_asv, fresh_seed):
    value = _beyond(np.random.default_rng(fresh_seed), low, high)
    argv = ["peaks", f"{flag}={value}"] if command == "peaks" else [*RUN, f"{flag}={value}"]
    assert main(argv) == 2
    _one_line_error(capsys, flag, f"from {low:g} to {high:g} {unit}", value)


def test_the_peaks_file_follows_the_same_range(tmp_path, capsys, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    peaks = tmp_path / "peaks.toml"
    value = float(10 ** rng.uniform(6.1, 300))
    peaks.write_text(f"[gpu]\npeak_bandwidth_gbs = {value!r}\npeak_fp64_gflops = {rng.uniform(1e3, 1e5)!r}\n")
    assert main(["peaks", "--peaks-file", str(peaks)]) == 2
    _one_line_error(capsys, str(peaks), "[gpu] peak_bandwidth_gbs", "from 0.1 to 1e+06 GB/s")
    # 1e308 GB/s over 1e-300 GFLOP/s was a 300-digit figure
    assert main(["peaks", "--peak-bandwidth", "1e308", "--peak-flops", "1e-300"]) == 2
    _one_line_error(capsys, "--peak-bandwidth", "got 1e+308")


def _largest_nnz(kernel: str) -> int:
    from portabench.implementations.tensor_inputs import full_shape

    return max(full_shape(case)[1] for case in get_kernel(kernel).cases)


@pytest.mark.parametrize("kernel, largest_case", [("mttkrp", "nell-2"), ("pi", "nell-2"), ("cpapr_mu", "delicious-4d"),
                                                  ("cpapr_pdnr", "delicious-4d")])
@pytest.mark.parametrize("command", ["run", "verify"])
def test_a_tensor_size_beyond_the_largest_stand_in_is_refused(command, kernel, largest_case, capsys, no_asv, fresh_seed):
    largest = _largest_nnz(kernel)
    size = int(np.random.default_rng(fresh_seed).integers(largest + 1, 10**15))
    argv = [*RUN, "--size", f"{kernel}={size}"] if command == "run" else ["verify", "--kernel", kernel, "--size", str(size), "--quiet"]
    assert main(argv) == 2
    _one_line_error(capsys, "--size", f"14..{largest} nonzeros", largest_case, str(size))


@pytest.mark.parametrize("kernel", ["cpapr_mu", "mttkrp", "phi"])
@pytest.mark.parametrize("command", ["run", "verify"])
def test_a_tensor_size_below_the_smallest_stand_in_is_refused(command, kernel, capsys, no_asv, fresh_seed):
    size = int(np.random.default_rng(fresh_seed).integers(1, 14))
    argv = [*RUN, "--size", f"{kernel}={size}"] if command == "run" else ["verify", "--kernel", kernel, "--size", str(size), "--quiet"]
    assert main(argv) == 2
    _one_line_error(capsys, "--size", "14..", "at least 14 nonzeros", "lbnl-network")


def test_the_smallest_tensor_size_is_the_smallest_every_stand_in_can_be_built_at():
    """Below it some stand-in of the tensor kernels cannot be generated (and their runs failed in asv)."""
    from portabench.datasets.errors import DatasetError
    from portabench.implementations.tensor_inputs import MIN_NNZ, standin

    cases = set(get_kernel("mttkrp").cases) | set(get_kernel("cpapr_mu").cases)
    for case in sorted(cases):
        standin(case, MIN_NNZ, 0)
    with pytest.raises(DatasetError):
        standin("lbnl-network", MIN_NNZ - 1, 0)


@pytest.mark.parametrize("command", ["run", "verify"])
def test_bcsr_sizes_beyond_memory_are_refused(command, capsys, no_asv, fresh_seed, monkeypatch):
    monkeypatch.setattr(memory, "available_host_memory_bytes", lambda: 16 << 30)
    mib = int(np.random.default_rng(fresh_seed).integers(16 << 10, 10**9))  # 16 GiB of blocks and more
    argv = [*RUN, "--size", f"bcsr={mib}"] if command == "run" else ["verify", "--kernel", "bcsr", "--size", str(mib), "--quiet"]
    assert main(argv) == 2
    _one_line_error(capsys, "--size", f"bcsr at {mib} MiB of block values", "of host memory", "16.0 GiB is available")


@pytest.mark.parametrize("flag, kernel", [("--tensor", "mttkrp"), ("--matrix", "bcsr"), ("--matrices", "gmres")])
def test_verify_size_with_an_input_file_is_refused(flag, kernel, tmp_path, capsys, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    given = tmp_path / "input"
    given.write_text("\n".join(_tns_lines(rng, (5, 6, 7), 30)) + "\n")
    size = str(int(rng.integers(1000, 100000)))
    assert main(["verify", "--kernel", kernel, flag, str(given), "--size", size, "--quiet"]) == 2
    _one_line_error(capsys, "--size", flag)


@pytest.mark.parametrize("argv", [["--rank", "{a}", "--option", "rank={b}"], ["--option", "rank={a}", "--option", "rank={b}"],
                                  ["--mode", "{m}", "--option", "mode={n}"]])
def test_contradicting_problem_options_are_refused(argv, capsys, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    a, b = (str(v) for v in rng.choice(np.arange(1, 33), 2, replace=False))
    m, n = (str(v) for v in rng.choice(np.arange(4), 2, replace=False))
    given = [x.format(a=a, b=b, m=m, n=n) for x in argv]
    assert main(["verify", "--kernel", "mttkrp", "--case", "uber", "--size", "2000", *given, "--quiet"]) == 2
    first, second = (a, b) if "rank" in argv[-1] else (m, n)
    _one_line_error(capsys, "given twice", f"{first} and {second}")


def test_verify_names_the_problem_options_that_ran(capsys, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    rank, mode = int(rng.integers(2, 17)), int(rng.integers(4))
    assert main(["verify", "--kernel", "mttkrp", "--case", "uber", "--size", "2000", "--rank", str(rank),
                 "--option", f"rank={rank}", "--mode", str(mode), "--variant", "numba-segmented", "--quiet",
                 "--seed", str(fresh_seed)]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert f"seed {fresh_seed}, rank={rank}, mode={mode} " in header, header
    assert main(["verify", "--kernel", "mttkrp", "--case", "nell-2", "--size", "2000", "--variant", "numba-segmented",
                 "--quiet", "--seed", str(fresh_seed)]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "rank=16, mode=0,1,2 " in header, header  # the default rank and every mode of a 3-way tensor
    assert main(["verify", "--kernel", "batched_spmv", "--case", "gri30", "--size", "64", "--option",
                 "layout=entry-major", "--variant", "numba-team", "--quiet"]) == 0
    assert "layout=entry-major" in capsys.readouterr().out.splitlines()[0]


@pytest.mark.parametrize("argv", [["datasets", "generate", "nips", "--scale", "0.001", "--out", "{out}", "--seed", "{seed}"],
                                  ["datasets", "info", "nips@0.001", "--seed", "{seed}"],
                                  ["verify", "--kernel", "stream", "--size", "1000", "--seed", "{seed}"]])
def test_one_seed_rule_for_verify_and_datasets(argv, tmp_path, capsys, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    seed = int(rng.choice([-int(rng.integers(1, 2**40)), int(rng.integers(2**32, 2**40))]))
    assert main([a.format(out=tmp_path / "x.tns", seed=seed) for a in argv]) == 2
    err = _one_line_error(capsys)
    assert err == f"portabench: error: --seed must be an integer in 0..{2**32 - 1}, got {seed}"
    assert not (tmp_path / "x.tns").exists()


def test_verify_exits_2_when_every_variant_asked_for_was_skipped(capsys, fresh_seed, monkeypatch):
    kernel = get_kernel("batched_spmv")
    reason = f"no device here (test {fresh_seed})"
    for name in ("cupy-team", "numba-team"):
        monkeypatch.setattr(kernel.variant(name), "unavailable", classmethod(lambda cls: reason))
    assert main(["verify", "--kernel", "batched_spmv", "--variant", "cupy-team", "--size", "64", "--quiet"]) == 2
    _one_line_error(capsys, "no variant ran", f"cupy-team: {reason}")
    assert main(["verify", "--kernel", "batched_spmv", "--variant", "cupy-team", "--variant", "numba-team",
                 "--size", "64", "--quiet"]) == 2
    _one_line_error(capsys, f"cupy-team, numba-team: {reason}")
    # A plain verify where some variants skip still passes.
    assert main(["verify", "--kernel", "batched_spmv", "--size", "64", "--quiet", "--seed", str(fresh_seed)]) == 0
    assert f"skipped: {reason}" in capsys.readouterr().out


# --- late failures --------------------------------------------------------------------------------

def _asv_results(folder: Path, rng: np.random.Generator, failed_only: bool) -> Path:
    """An asv results file of this run (started now) of StreamCPU, every combination failed (None) or some timed."""
    ops, variants = ["copy", "triad"], ["numba-prange", "numpy"]
    result = [None] * 4 if failed_only else [None, *rng.uniform(1e-4, 1e-3, 3).tolist()]
    entry = [result, [[repr(o) for o in ops], [repr(v) for v in variants], ["'65536'"]], "v1",
             int(time.time() * 1000), 1.0]
    return write_results(folder, "f" * 40, int(time.time() * 1000), {"stream.StreamCPU.time_stream": entry})


@pytest.mark.parametrize("failed_only", [True, False])
def test_a_run_whose_every_benchmark_failed_writes_no_results(failed_only, tmp_path, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    scratch, results = tmp_path / "scratch", tmp_path / "results"
    started = time.time() - 1
    new = _asv_results(scratch / "box", rng, failed_only)
    (scratch / "benchmarks.json").write_text(json.dumps({"version": 2}))
    assert results_merge.write_back(scratch, "box", results, started) is not failed_only
    assert (results / "box" / new.name).exists() is not failed_only


def test_a_bench_expression_that_selects_nothing_is_refused_before_asv(capsys, no_asv, tmp_path, fresh_seed):
    name = f"NoSuchBench{fresh_seed}"
    report = tmp_path / "report"
    assert main([*RUN[:-1], "--bench", name, "--report-dir", str(report)]) == 2
    err = _one_line_error(capsys, f"--bench '{name}' selects no declared benchmark", "stream.StreamCPU",
                          "portabench list --studies")
    assert "GPU" not in err.split("declared")[-1]  # what exists on the devices asked for
    assert not report.exists()  # a failed run leaves no report folder
    # An expression over parameters (asv matches "name(param, ...)") selects: the run goes on to asv.
    with pytest.raises(AsvStarted):
        main([*RUN, "--bench", r"StreamCPU\.time_stream\('triad'", "--size", "stream=65536"])


# --- messages that mislead ------------------------------------------------------------------------

def test_a_results_path_that_is_a_file_is_named_as_such(tmp_path, capsys, fresh_seed):
    rng = np.random.default_rng(fresh_seed)
    good = result_set(tmp_path / "good", "a", _random_times(rng), rng)
    afile = tmp_path / "results.json"
    afile.write_text(json.dumps(rng.uniform(0, 1, 4).tolist()))
    for argv in (["report", "--results", str(afile), "--out", str(tmp_path / "out")], ["compare", str(afile), str(good)],
                 ["compare", str(good), str(afile)]):
        assert main(argv) == 2
        _one_line_error(capsys, str(afile), "is a file, not a results folder")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["verify", "--kernel", "mttkrp", "--tensor", "{dir}", "--quiet"],
                                  ["verify", "--kernel", "bcsr", "--matrix", "{dir}", "--block-size", "3", "--quiet"],
                                  ["verify", "--kernel", "gmres", "--matrices", "{dir}", "--quiet"],
                                  ["datasets", "register", "nell-2", "{dir}"]])
def test_a_folder_given_for_a_file_is_named_as_a_folder(argv, tmp_path, capsys, monkeypatch, fresh_seed):
    folder = tmp_path / f"inputs-{fresh_seed}"
    folder.mkdir()
    (folder / "t.tns").write_text("\n".join(_tns_lines(np.random.default_rng(fresh_seed), (4, 5, 6), 20)) + "\n")
    monkeypatch.setenv(cache.DATA_ENV, str(tmp_path / "cache"))
    assert main([a.format(dir=folder) for a in argv]) == 2
    _one_line_error(capsys, str(folder), "is a folder, not a file")


def test_an_unknown_option_name_is_named(capsys, fresh_seed):
    name = f"foo{fresh_seed % 1000}"
    assert main(["verify", "--kernel", "mttkrp", "--option", f"{name}=bar"]) == 2
    _one_line_error(capsys, f"unknown option {name}", "mttkrp's options: rank=", "mode=")
    assert main(["verify", "--kernel", "mttkrp", "--option", name]) == 2
    _one_line_error(capsys, "expected NAME=VALUE")


@pytest.mark.parametrize("name, needles", [("gri30", ["gri30 has no real data", "gri30@SCALE"]),
                                           ("kk-batched", ["kk-batched is shipped with portabench"]),
                                           ("block-sweep-bs4", ["block-sweep-bs4 has no real data"])])
def test_register_of_a_dataset_that_takes_no_file_says_what_register_takes(name, needles, tmp_path, capsys,
                                                                           monkeypatch, fresh_seed):
    monkeypatch.setenv(cache.DATA_ENV, str(tmp_path / "cache"))
    given = tmp_path / "given.mm"
    given.write_text("\n".join(_tns_lines(np.random.default_rng(fresh_seed), (4, 5, 6), 20)) + "\n")
    assert main(["datasets", "register", name, str(given)]) == 2
    _one_line_error(capsys, *needles, "register takes the real data of", "nell-2", "gt01r")


# --- left behind ----------------------------------------------------------------------------------

def test_a_failed_report_leaves_no_output_folder(tmp_path, capsys, fresh_seed):
    out = tmp_path / f"new-{fresh_seed}" / "report"
    assert main(["report", "--results", str(tmp_path / "none"), "--out", str(out)]) == 2
    _one_line_error(capsys, "portabench run")
    assert not out.parent.exists()


# --- two runs at once -----------------------------------------------------------------------------

HOLD_THE_LOCK = """
import sys, time
from pathlib import Path
from portabench.harness.commands.asv_process import run_lock
with run_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(120)
"""


def test_a_second_run_in_one_checkout_is_refused_while_the_first_holds_the_lock(capsys, no_asv):
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, str(REPO)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert main([*RUN, "--bench", r"stream\.StreamCPU", "--size", "stream=65536"]) == 2
        _one_line_error(capsys, f"another portabench run (pid {holder.pid}) is in progress in {REPO}")
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(AsvStarted):  # the lock is free again
        main([*RUN, "--bench", r"stream\.StreamCPU", "--size", "stream=65536"])
