"""portabench.reports: asv results of several machines -> tidy table, % of peak, speedups, pages."""

from __future__ import annotations

import itertools
import json
import math
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from portabench.implementations import PortabenchError
from portabench.reports import build_report, load_results, measured_peaks, speedup

REPO = Path(__file__).resolve().parents[1]
N_CPU, N_GPU = 1_000_000, 1 << 26
OPS = ("copy", "scale", "add", "triad", "dot", "nstream")
# BabelStream byte weights, written out here on purpose (not imported from the code under test).
BYTES_PER_ELEMENT = {"copy": 16, "scale": 16, "add": 24, "triad": 24, "dot": 16, "nstream": 32}
CPU_TIMES = {
    "numba-prange": dict(zip(OPS, (8.0e-4, 8.5e-4, 1.1e-3, 1.0e-3, 1.6e-3, 1.5e-3))),
    "numpy": dict(zip(OPS, (7.0e-4, 9.0e-4, 1.2e-3, 1.3e-3, 6.5e-4, 1.9e-3))),
}
GPU_TIMES = {
    "cupy-rawkernel": dict(zip(OPS, (3.6e-4, 3.7e-4, 5.5e-4, 5.4e-4, 4.0e-4, 7.1e-4))),
    "cupy-builtin": dict(zip(OPS, (3.5e-4, 4.1e-4, 5.9e-4, 6.6e-4, 3.9e-4, 8.3e-4))),
}
ASV_COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
               "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples", "profile"]
CPU_BENCH, GPU_BENCH = "stream.StreamCPU.time_stream", "stream.StreamGPU.time_stream"
CPU_SYSTEM = {
    "machine": "cpu-box", "hostname": "cpu-box.example", "os": "Linux-6.1", "recorded_at": "2026-11-20T10:00:00+00:00",
    "cpu": {"model": "Fancy <CPU> & Co", "physical_cores": 8, "sockets": 1, "isa_summary": "AVX2",
            "peak_bandwidth_gbs": 30.0, "peak_fp64_gflops": 500.0, "peak_source": "systems.csv"},
    "gpus": [], "threads": {"numba_num_threads": 8, "environment": {"OMP_NUM_THREADS": "8", "MKL_NUM_THREADS": None},
                            "blas": [{"internal_api": "openblas", "num_threads": 8}]},
    "software": {"numpy": "2.1.0", "numba": "0.60.0"},
}
GPU_SYSTEM = {
    "machine": "gpu-box", "hostname": "gpu-box", "os": "Linux", "cpu": {"model": "Host CPU", "peak_bandwidth_gbs": None},
    "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "sms": 132, "l2_bytes": 52428800,
              "peak_bandwidth_gbs": 3352.32, "peak_fp64_gflops": 66900.0, "peak_source": "device attributes"}],
    "threads": {"numba_num_threads": 16}, "software": {"cupy-cuda12x": "13.3.0"},
}


# ---------- fixture results in asv's layout (as results/test-tiny/*.json) ----------

def asv_entry(times: dict[str, dict[str, float]], n: int, ops=OPS) -> list:
    """One benchmark's result columns: ``times[variant][op]``; missing combinations are NaN."""
    variants = list(times)
    result = [times[v].get(op, math.nan) for op, v, _ in itertools.product(ops, variants, [n])]
    ok = [t == t for t in result]
    scaled = lambda f: [t * f if good else None for t, good in zip(result, ok)]  # noqa: E731
    samples = [[t * 1.2, t, t * 0.95, t * 1.01] if good else None for t, good in zip(result, ok)]
    params = [[repr(o) for o in ops], [repr(v) for v in variants], [repr(str(n))]]
    return [result, params, "9ae8d0bc", 1795324023489, 9.9, scaled(0.96), scaled(1.04), scaled(0.97),
            scaled(1.1), [1] * len(result), [4] * len(result), samples]


def write_results(machine_dir: Path, commit: str, date_ms: int, results: dict[str, list]) -> Path:
    machine_dir.mkdir(parents=True, exist_ok=True)
    (machine_dir / "machine.json").write_text(json.dumps({"machine": machine_dir.name, "version": 1}))
    path = machine_dir / f"{commit[:8]}-existing-py_venv_bin_python3.json"
    path.write_text(json.dumps({
        "commit_hash": commit, "env_name": "existing-py_venv_bin_python3", "date": date_ms,
        "params": {"machine": machine_dir.name}, "python": "3.12", "requirements": {}, "env_vars": {},
        "result_columns": ASV_COLUMNS, "results": results, "durations": {}, "version": 2}))
    return path


def scaled_times(times: dict[str, dict[str, float]], factor: float) -> dict[str, dict[str, float]]:
    return {v: {op: t * factor for op, t in ts.items()} for v, ts in times.items()}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """cpu-box (two commits, sidecar), gpu-box (GPU + CPU, an unknown variant), bare-box (no sidecar)."""
    root = tmp_path / "results"
    root.mkdir()
    bench = {"param_names": ["op", "variant", "n"], "type": "time", "unit": "seconds"}
    (root / "benchmarks.json").write_text(json.dumps({CPU_BENCH: bench, GPU_BENCH: bench, "version": 2}))
    write_results(root / "cpu-box", "a" * 40, 1_700_000_000_000, {CPU_BENCH: asv_entry(scaled_times(CPU_TIMES, 2.0), N_CPU)})
    write_results(root / "cpu-box", "b" * 40, 1_800_000_000_000, {CPU_BENCH: asv_entry(CPU_TIMES, N_CPU)})
    (root / "cpu-box" / "portabench.system").write_text(json.dumps(CPU_SYSTEM))
    gpu = {**GPU_TIMES, "cupy-old": {"copy": 1e-3}}  # a variant this version no longer knows
    write_results(root / "gpu-box", "c" * 40, 1_800_000_000_000, {
        GPU_BENCH: asv_entry(gpu, N_GPU), CPU_BENCH: asv_entry(scaled_times(CPU_TIMES, 0.5), N_CPU)})
    (root / "gpu-box" / "portabench.system").write_text(json.dumps(GPU_SYSTEM))
    write_results(root / "bare-box", "d" * 40, 1_800_000_000_000, {CPU_BENCH: asv_entry(CPU_TIMES, N_CPU, ops=("triad", "dot"))})
    return root


def row(table: pd.DataFrame, machine: str, variant: str, case: str) -> pd.Series:
    sel = table[(table.machine == machine) & (table.variant == variant) & (table.case == case)]
    assert len(sel) == 1, sel
    return sel.iloc[0]


# ---------- the tidy table ----------

def test_tidy_rates_and_percent_of_peak(results: Path) -> None:
    table = load_results(results).table
    latest = table[table.commit == "b" * 40]
    r = row(latest, "cpu-box", "numba-prange", "triad")
    t = CPU_TIMES["numba-prange"]["triad"]
    assert r.time_s == t and r.time_best_s == pytest.approx(0.95 * t) and r.n_samples == 4
    assert r.bytes == 24 * N_CPU and r.flops == 2 * N_CPU
    assert r.gbs == pytest.approx(24 * N_CPU / t / 1e9)
    assert r.gbs_best == pytest.approx(24 * N_CPU / (0.95 * t) / 1e9)
    assert r.gflops == pytest.approx(2 * N_CPU / t / 1e9)
    assert (r.peak_gbs, r.peak_gflops) == (30.0, 500.0)
    assert r.pct_peak == pytest.approx(100 * (24 * N_CPU / t / 1e9) / 30.0)
    assert (r.family, r.device, r["size"]) == ("portable", "cpu", N_CPU)
    assert json.loads(r.params) == {"op": "triad", "variant": "numba-prange", "n": str(N_CPU)}
    g = row(table, "gpu-box", "cupy-rawkernel", "copy")
    assert (g.device, g.family, g.peak_gbs) == ("gpu", "portable", 3352.32)
    assert g.pct_peak == pytest.approx(100 * 16 * N_GPU / GPU_TIMES["cupy-rawkernel"]["copy"] / 1e9 / 3352.32)
    # gpu-box's CPU has no theoretical peak (null in its record).
    assert math.isnan(row(table, "gpu-box", "numpy", "copy").pct_peak)


def test_measured_peak_is_best_stream_rate_per_machine_device(results: Path) -> None:
    table = load_results(results).table
    # The best median of any commit of cpu-box (the latest: the older one is twice as slow), not the best sample.
    expected = max(BYTES_PER_ELEMENT[op] * N_CPU / t / 1e9 for ts in CPU_TIMES.values() for op, t in ts.items())
    cpu = table[table.machine == "cpu-box"]
    assert cpu.measured_peak_gbs.unique().tolist() == [pytest.approx(expected)]
    r = row(cpu[cpu.commit == "b" * 40], "cpu-box", "numpy", "copy")
    assert r.pct_measured_peak == pytest.approx(100 * r.gbs / expected)
    gpu_expected = max(BYTES_PER_ELEMENT[op] * N_GPU / t / 1e9 for ts in GPU_TIMES.values() for op, t in ts.items())
    assert measured_peaks(results, "gpu-box") == {"cpu": pytest.approx(2 * expected), "gpu": pytest.approx(gpu_expected)}


def test_measured_peak_is_the_best_median_of_any_commit_not_a_fast_sample(tmp_path: Path, fresh_seed: int) -> None:
    """An older commit's faster medians set the measured peak (the best median STREAM rate of any run: what
    `portabench peaks --machine` prints and % of measured peak divides by), so that no STREAM row of any
    commit is above it; its one very fast sample does not (medians, as every rate rated against it)."""
    rng = np.random.default_rng(fresh_seed)
    ops, n = ("copy", "triad"), N_CPU
    root = tmp_path / "results"
    root.mkdir()
    names = {CPU_BENCH: {"param_names": ["op", "variant", "n"]}, "version": 2}
    (root / "benchmarks.json").write_text(json.dumps(names))
    medians = {}
    for commit, date, scale in (("a" * 40, 1_700_000_000_000, 0.8), ("b" * 40, 1_800_000_000_000, 1.0)):
        entry = asv_entry(scaled_times(CPU_TIMES, scale), n, ops=ops)
        samples = [list(t * (1 + 0.02 * rng.standard_normal(9))) for t in entry[0]]
        if commit == "a" * 40:
            samples[0][3] = entry[0][0] / 10  # one sample ten times faster than its run
        entry[0] = [float(np.median(s)) for s in samples]
        entry[11] = samples
        medians[commit] = dict(zip(itertools.product(ops, CPU_TIMES), entry[0]))
        write_results(root / "box", commit, date, {CPU_BENCH: entry})
    latest_best = max(BYTES_PER_ELEMENT[op] * n / t / 1e9 for (op, _), t in medians["b" * 40].items())
    old_best = max(BYTES_PER_ELEMENT[op] * n / t / 1e9 for (op, _), t in medians["a" * 40].items())
    assert old_best > latest_best  # the older commit's medians are faster still: they set the peak
    assert measured_peaks(root, "box") == {"cpu": pytest.approx(old_best)}
    table = load_results(root).table
    older = table[table.commit == "a" * 40]
    assert (older.bytes / older.samples.map(min) / 1e9).max() > 5 * old_best  # ... and not its fast sample
    assert table.pct_measured_peak.max() == pytest.approx(100.0) and (table.pct_measured_peak <= 100 + 1e-9).all()
    latest = table[table.commit == "b" * 40]
    assert np.allclose(latest.pct_measured_peak, 100 * latest.gbs / old_best)


def test_recorded_work_and_family_come_before_the_work_model(tmp_path: Path) -> None:
    """A combination whose run recorded what it moved and computed and its variant's family (``WORK_KEY``) is
    rated by that; the others (results older than the record) by this version's work model and classes."""
    from portabench.harness.statistics import combo_key
    from portabench.reports.results import WORK_KEY

    root = tmp_path / "results"
    root.mkdir()
    names = {CPU_BENCH: {"param_names": ["op", "variant", "n"]}, "version": 2}
    (root / "benchmarks.json").write_text(json.dumps(names))
    entry = asv_entry(CPU_TIMES, N_CPU)
    path = write_results(root / "box", "a" * 40, 1_800_000_000_000, {CPU_BENCH: entry})
    data = json.loads(path.read_text())
    recorded = ["'copy'", "'numpy'", repr(str(N_CPU))]
    assert tuple(recorded) in set(itertools.product(*entry[1]))
    data[WORK_KEY] = {CPU_BENCH: {combo_key(recorded): {"family": "portable", "bytes": 3e9, "flops": 1e9,
                                                        "bytes_counted": None, "working_set": None},
                                  combo_key(["'dot'", "'numpy'", repr(str(N_CPU))]): {"family": "?", "bytes": "x"}}}
    path.write_text(json.dumps(data))
    table = load_results(root).table
    r = row(table, "box", "numpy", "copy")
    assert (r.bytes, r.flops, r.working_set, r.family) == (3e9, 1e9, 3e9, "portable")
    assert r.gbs == pytest.approx(3e9 / CPU_TIMES["numpy"]["copy"] / 1e9)
    # A record without numbers, and the combinations without one: the work model and the variant's class.
    for case in ("dot", "triad"):
        r = row(table, "box", "numpy", case)
        assert r.bytes == BYTES_PER_ELEMENT[case] * N_CPU and r.family == "vendor", case


def test_the_report_marks_in_cache_by_the_kernels_rule() -> None:
    from portabench.implementations import model
    from portabench.reports import results

    assert results.in_cache is model.in_cache and not hasattr(results, "IN_CACHE_FACTOR")


def test_nan_rows_dropped_and_unknown_variant_reported(results: Path) -> None:
    loaded = load_results(results)
    gpu = loaded.table[loaded.table.machine == "gpu-box"]
    assert "cupy-old" not in set(gpu.variant) and len(gpu[gpu.device == "gpu"]) == 12
    assert any("unknown variant 'cupy-old'" in p and "1 row(s)" in p for p in loaded.problems)
    # cupy-old has a time only for copy: its 5 other combinations are NaN and counted as skipped.
    assert loaded.n_skipped == 5
    assert len(loaded.table) == 2 * 12 + 12 + 12 + 4



def test_failed_benchmarks_are_reported_but_unavailable_ones_are_not(results: Path) -> None:
    path = next((results / "cpu-box").glob("bbbbbbbb-*.json"))
    data = json.loads(path.read_text())
    entry = data["results"][CPU_BENCH]
    entry[0][0] = None  # asv: the benchmark raised (e.g. a wrong answer)
    entry[0][1] = math.nan  # asv: skipped in setup (variant unavailable here)
    path.write_text(json.dumps(data))
    loaded = load_results(results)
    failed = [p for p in loaded.problems if "failed in asv" in p]
    assert len(failed) == 1 and "cpu-box" in failed[0] and "1 parameter combination(s)" in failed[0]
    assert not any("NaN" in p or "unavailable" in p for p in loaded.problems)
    assert loaded.n_skipped == 5 + 2

# ---------- speedups ----------

def test_latest_commit_per_benchmark_and_size() -> None:
    """A later run of some benchmarks (--bench) replaces theirs and leaves the others' shown; a later
    run at one size leaves an earlier run's other size shown."""
    from portabench.reports.metrics import latest

    rows = pd.DataFrame([
        {"machine": "m", "benchmark": "stream", "size": 8, "params": "p", "commit": "a", "date": 1, "time_s": 2.0},
        {"machine": "m", "benchmark": "gmres", "size": 8, "params": "p", "commit": "a", "date": 1, "time_s": 3.0},
        {"machine": "m", "benchmark": "gmres", "size": 8, "params": "p", "commit": "b", "date": 2, "time_s": 1.0},
        {"machine": "n", "benchmark": "gmres", "size": 8, "params": "p", "commit": "c", "date": 3, "time_s": 5.0},
        {"machine": "m", "benchmark": "pdnr", "size": 8, "params": "p8", "commit": "a", "date": 1, "time_s": 1.0},
        {"machine": "m", "benchmark": "pdnr", "size": 64, "params": "p64", "commit": "a", "date": 1, "time_s": 9.0},
        {"machine": "m", "benchmark": "pdnr", "size": 8, "params": "p8", "commit": "b", "date": 2, "time_s": 2.0},
    ])
    kept = latest(rows).set_index(["machine", "benchmark", "size"]).commit.to_dict()
    assert kept == {("m", "stream", 8): "a", ("m", "gmres", 8): "b", ("n", "gmres", 8): "c",
                    ("m", "pdnr", 8): "b", ("m", "pdnr", 64): "a"}


def test_speedup_against_fastest_vendor_and_geomean() -> None:
    times = {("copy", "vendor-a"): 2.0, ("copy", "vendor-b"): 1.0, ("copy", "port"): 0.5,
             ("triad", "vendor-a"): 3.0, ("triad", "vendor-b"): 4.0, ("triad", "port"): 6.0}
    rows = pd.DataFrame([{"machine": "m", "device": "cpu", "kernel": "stream", "case": c, "size": 8, "variant": v,
                          "family": "portable" if v == "port" else "vendor", "time_s": t} for (c, v), t in times.items()])
    s = speedup(rows).set_index("case")
    assert s.loc["copy", "fastest_vendor"] == "vendor-b" and s.loc["copy", "speedup"] == pytest.approx(2.0)
    assert s.loc["triad", "fastest_vendor"] == "vendor-a" and s.loc["triad", "speedup"] == pytest.approx(0.5)
    assert s.loc["geomean", "speedup"] == pytest.approx(1.0) and s.loc["geomean", "n_cases"] == 2
    assert list(s.index) == ["copy", "triad", "geomean"]


def test_speedup_table_of_a_report(results: Path, tmp_path: Path) -> None:
    build_report(results, tmp_path / "out")
    s = pd.read_csv(tmp_path / "out" / "speedup.csv")
    gpu = s[(s.machine == "gpu-box") & (s.device == "gpu")].set_index("case")
    ratios = [GPU_TIMES["cupy-builtin"][op] / GPU_TIMES["cupy-rawkernel"][op] for op in OPS]
    assert gpu.loc["triad", "speedup"] == pytest.approx(6.6e-4 / 5.4e-4)
    assert gpu.loc["geomean", "speedup"] == pytest.approx(math.prod(ratios) ** (1 / 6))
    cpu = s[(s.machine == "cpu-box") & (s.case == "dot")].iloc[0]
    assert cpu.speedup == pytest.approx(6.5e-4 / 1.6e-3) and cpu.fastest_vendor == "numpy"


def test_problem_options_are_cases_and_setting_sweeps_stay_out_of_comparisons(tmp_path: Path) -> None:
    """gmres' order makes its own case (paired with the vendor's same order); a group-size
    sweep (a variant setting) is in tidy.csv but not in % of peak or speedups."""
    root = tmp_path / "results"
    root.mkdir()
    main, sweep = "gmres.GmresCPU.time_gmres", "gmres.GmresGroupSizeCPU.time_gmres"
    (root / "benchmarks.json").write_text(json.dumps({
        main: {"param_names": ["dataset", "variant", "N", "order"]},
        sweep: {"param_names": ["dataset", "variant", "N", "order", "m"]}, "version": 2}))
    times = {("numba-batched", "given"): 0.1, ("numba-batched", "sorted"): 0.08,
             ("numpy-dense-solve", "given"): 0.3, ("numpy-dense-solve", "sorted"): 0.2}
    main_params = [["'gri30'"], ["'numba-batched'", "'numpy-dense-solve'"], ["'1024'"], ["'given'", "'sorted'"]]
    main_result = [times[(v, o)] for v in ("numba-batched", "numpy-dense-solve") for o in ("given", "sorted")]
    sweep_params = [["'gri30'"], ["'numba-batched'"], ["'1024'"], ["'given'"], ["'1'", "'8'"]]
    write_results(root / "cpu-box", "a" * 40, 1_800_000_000_000, {
        main: [main_result, main_params], sweep: [[0.5, 0.12], sweep_params]})
    out = build_report(root, tmp_path / "out")
    tidy = pd.read_csv(tmp_path / "out" / "tidy.csv", keep_default_na=False)
    assert len(tidy) == 6 and set(tidy[tidy.settings != ""].settings) == {"m=1", "m=8"}
    assert set(tidy.case) == {"gri30 (order=given)", "gri30 (order=sorted)"} and set(tidy.dataset) == {"gri30"}
    spd = pd.read_csv(tmp_path / "out" / "speedup.csv").set_index("case")
    assert spd.loc["gri30 (order=given)", "speedup"] == pytest.approx(0.3 / 0.1)
    assert spd.loc["gri30 (order=sorted)", "speedup"] == pytest.approx(0.2 / 0.08)
    assert spd.loc["geomean", "n_cases"] == 2
    assert len(pd.read_csv(tmp_path / "out" / "percent_of_peak.csv")) == 4  # the sweep's two rows left out
    assert out.n_rows == 6


def test_two_byte_models_and_preparation_as_runs(tmp_path: Path) -> None:
    """MTTKRP rows carry PASTA's bytes (% of peak) and GenTen's (``*_counted``); a preparation
    time is shown as a multiple of its variant's run on the same problem, never as a rate."""
    root = tmp_path / "results"
    root.mkdir()
    names = ["dataset", "nnz", "rank", "mode", "variant"]
    run, prep = "mttkrp.MttkrpCPU.time_mttkrp", "mttkrp.MttkrpPreparationCPU.time_preparation"
    (root / "benchmarks.json").write_text(json.dumps({run: {"param_names": names}, prep: {"param_names": names},
                                                      "version": 2}))
    params = [["'nell-2'"], ["'50000'"], ["'16'"], ["'0'"], ["'numba-segmented'", "'scipy-scatter'"]]
    write_results(root / "cpu-box", "a" * 40, 1_800_000_000_000, {
        run: [[0.002, 0.010], params], prep: [[0.030, 0.020], params]})
    (root / "cpu-box" / "portabench.system").write_text(json.dumps(CPU_SYSTEM))
    build_report(root, tmp_path / "out")
    pct = pd.read_csv(tmp_path / "out" / "percent_of_peak.csv").set_index("variant")
    assert len(pct) == 2  # preparation rows are not rates
    from portabench.datasets.tensors.standin import scaled_shape

    dims, nnz = scaled_shape("nell-2", 50_000 / 76_879_419)
    pasta = (3 * 4 + 8) * nnz + 8 * 16 * sum(dims)
    genten = nnz * ((3 * 16 + 3) * 8 + 3 * 4)
    seg = pct.loc["numba-segmented"]
    assert seg.gbs == pytest.approx(pasta / 0.002 / 1e9)
    assert seg.gbs_counted == pytest.approx(genten / 0.002 / 1e9)
    assert seg.pct_peak_counted == pytest.approx(100 * genten / 0.002 / 1e9 / 30.0)
    table = pd.read_csv(tmp_path / "out" / "preparation.csv").set_index("variant")
    assert table.loc["numba-segmented", "preparation_in_runs"] == pytest.approx(15.0)
    assert table.loc["scipy-scatter", "preparation_in_runs"] == pytest.approx(2.0)
    page = (tmp_path / "out" / "system-cpu-box.html").read_text()
    assert "preparation, in runs of the kernel" in page and "cpu-box-cpu-mttkrp-preparation.csv" in page


def test_summary_states_percent_and_speedup_over_the_same_cases_and_the_worst(tmp_path: Path, fresh_seed: int) -> None:
    """The index's numbers per kernel and system: one portable variant (the best geomean speedup), its geomean
    % of peak, the fastest vendor's geomean % of peak, the geomean speedup (their ratio) and the worst case,
    all over the same cases: those beyond the caches. The CLI's headline says the same."""
    from portabench.harness.commands.cli import _headline

    rng = np.random.default_rng(fresh_seed)
    bench = "batched_spmv.BatchedSpmvGPU.time_batched_spmv"
    datasets, layouts = ("gri30", "isooctane"), ("system-major", "entry-major")
    variants = ("cupy-team", "cupy-base", "cusparse-blockdiag")
    cases = [f"{d} (layout={lay})" for d in datasets for lay in layouts]
    loser = cases[rng.integers(len(cases))]
    # cupy-team beats the vendor by 1.3-1.7x but on one case, where it loses; cupy-base loses everywhere.
    ratio = {("cupy-team", c): rng.uniform(0.6, 0.8) if c == loser else rng.uniform(1.3, 1.7) for c in cases}
    ratio |= {("cupy-base", c): rng.uniform(0.4, 0.9) for c in cases} | {("cusparse-blockdiag", c): 1.0 for c in cases}
    vendor = {c: rng.uniform(1e-3, 3e-3) for c in cases}
    combos = list(itertools.product(datasets, ["51200"], layouts, variants))
    times = [vendor[f"{d} (layout={lay})"] / ratio[(v, f"{d} (layout={lay})")] for d, _, lay, v in combos]
    entry = [times, [[repr(x) for x in p] for p in (datasets, ["51200"], layouts, variants)]]
    root = tmp_path / "results"
    root.mkdir()
    (root / "benchmarks.json").write_text(json.dumps({bench: {"param_names": ["dataset", "N", "layout", "variant"]},
                                                      "version": 2}))
    # big-l2: gri30's working set (about 1.1 GB at this N) is under 4x its L2, isooctane's (2.7 GB) beyond it.
    for machine, l2 in (("gpu-box", 52428800), ("big-l2", 400_000_000)):
        write_results(root / machine, "c" * 40, 1_800_000_000_000, {bench: entry})
        system = {**GPU_SYSTEM, "gpus": [{**GPU_SYSTEM["gpus"][0], "l2_bytes": l2}]}
        (root / machine / "portabench.system").write_text(json.dumps(system))
    out = tmp_path / "out"
    report = build_report(root, out)
    summary = pd.read_csv(out / "summary.csv").set_index("machine")
    pct = pd.read_csv(out / "percent_of_peak.csv")
    for machine, shown in (("gpu-box", cases), ("big-l2", [c for c in cases if c.startswith("isooctane")])):
        r = summary.loc[machine]
        team = [ratio[("cupy-team", c)] for c in shown]
        assert (r["portable variant"], r["cases"], r["fastest vendor variant"]) == ("cupy-team", len(shown),
                                                                                      "cusparse-blockdiag")
        assert r["speedup (geomean)"] == pytest.approx(math.prod(team) ** (1 / len(team)))
        worst = min(shown, key=lambda c: ratio[("cupy-team", c)])
        assert r["worst case"] == worst and r["worst case speedup"] == pytest.approx(ratio[("cupy-team", worst)])
        best = {c: max(ratio[("cupy-team", c)], ratio[("cupy-base", c)]) for c in shown}  # per case, the faster
        assert r["worst case speedup, best portable per case"] == pytest.approx(min(best.values()))
        assert r["worst case, best portable per case"] == min(shown, key=best.get)
        rows = pct[(pct.machine == machine) & pct.case.isin(shown)].set_index(["variant", "case"]).pct_peak
        geo = lambda v: math.prod(rows[v]) ** (1 / len(shown))  # noqa: E731
        assert r["portable % of peak"] == pytest.approx(geo("cupy-team"))
        assert r["vendor % of peak"] == pytest.approx(geo("cusparse-blockdiag"))
        assert r["speedup (geomean)"] == pytest.approx(r["portable % of peak"] / r["vendor % of peak"])
    assert summary.loc["big-l2", "rows in cache"] == 2 * len(variants)
    index = (out / "index.html").read_text()
    r = summary.loc["gpu-box"]
    worst_cell = f'{r["worst case speedup"]:.4g}<br><small>{r["worst case"]}'
    best_note = f'best portable per case: {r["worst case speedup, best portable per case"]:.4g}'
    assert worst_cell in index and (best_note in index) == (ratio[("cupy-base", loser)] > ratio[("cupy-team", loser)])
    assert "<th colspan=4>" in index and "speedup = portable % / vendor %" in index
    headline = _headline(report, "gpu-box")
    assert f'{r["worst case speedup"]:.3g} {r["worst case"]}' in headline and "cupy-team" in headline
    best_note = f'best portable per case: {r["worst case speedup, best portable per case"]:.3g}'
    better = f'{r["worst case speedup, best portable per case"]:.3g}' != f'{r["worst case speedup"]:.3g}'
    assert (best_note in headline) == (better and ratio[("cupy-base", loser)] > ratio[("cupy-team", loser)])


# ---------- the report ----------

class Page(HTMLParser):
    """A page's tags, checked for balance, and every src/href in it."""

    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.refs: list[str] = []
        self.seen: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.seen.add(tag)
        self.refs += [v for k, v in attrs if k in ("src", "href") and v]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(f"unbalanced </{tag}>")


def parse_site(out: Path) -> dict[str, Page]:
    """Every HTML page of a report, parsed; each must be well formed and link only to files that exist."""
    pages = {}
    for path in sorted(out.glob("*.html")):
        page = Page()
        page.feed(path.read_text())
        page.close()
        assert not page.errors and not page.stack, (path.name, page.errors, page.stack)
        local = [r.split("#")[0] for r in page.refs if not r.startswith("#")]
        assert not [r for r in local if r.startswith(("http:", "https:", "//", "/"))], path.name  # no network
        missing = [r for r in local if not (out / r).is_file()]
        assert not missing, (path.name, missing)
        pages[path.name] = page
    return pages


def test_report_files_and_page(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = build_report(results, out)
    assert summary.machines == ["bare-box", "cpu-box", "gpu-box"] and summary.n_rows == 52
    for name in ("tidy.csv", "percent_of_peak.csv", "percent_of_peak.md", "speedup.csv", "speedup.md",
                 "problems.txt", "index.html"):
        assert (out / name) in summary.paths and (out / name).stat().st_size > 0
    figures = sorted(p.name for p in (out / "figures").glob("*.png"))
    for machine, device in (("cpu-box", "cpu"), ("gpu-box", "cpu"), ("gpu-box", "gpu"), ("bare-box", "cpu")):
        assert f"{machine}-{device}-stream-pct.png" in figures and f"{machine}-{device}-stream-speedup.png" in figures
    assert {"all-stream-pct.png", "all-stream-speedup.png"} <= set(figures)
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in (out / "figures").glob("*.png"))

    pages = parse_site(out)
    assert set(pages) == {"index.html", "system-bare-box.html", "system-cpu-box.html", "system-gpu-box.html"}
    assert summary.pages == {m: out / f"system-{m}.html" for m in summary.machines}
    index = pages["index.html"]
    assert {"html", "head", "body", "main", "section", "table", "img"} <= index.seen
    assert {f"system-{m}.html" for m in summary.machines} <= set(index.refs) and "tidy.csv" in index.refs
    refs = {r for page in pages.values() for r in page.refs}
    assert {f"figures/{f}" for f in figures} <= refs
    # Every figure has its numbers beside it as CSV.
    assert {f"figures/{f[:-4]}.csv" for f in figures} <= refs
    assert all((out / r).is_file() for r in refs if r.endswith(".csv"))
    gpu_page = (out / "system-gpu-box.html").read_text()
    cpu_page = (out / "system-cpu-box.html").read_text()
    assert "Fancy &lt;CPU&gt; &amp; Co" in cpu_page and "<CPU>" not in cpu_page
    assert all("<script" not in (out / name).read_text() for name in pages)
    assert "3352" in gpu_page and "unknown variant" in gpu_page and "unknown variant" not in cpu_page
    assert "unknown variant" in (out / "index.html").read_text()

    # The tidy CSV keeps both commits of cpu-box; the tables use the latest one only.
    tidy = pd.read_csv(out / "tidy.csv")
    assert len(tidy[tidy.machine == "cpu-box"]) == 24
    pct = pd.read_csv(out / "percent_of_peak.csv")
    r = pct[(pct.machine == "cpu-box") & (pct.variant == "numpy") & (pct.case == "scale")]
    assert len(r) == 1 and r.gbs.iloc[0] == pytest.approx(16 * N_CPU / 9.0e-4 / 1e9)
    md = (out / "percent_of_peak.md").read_text()
    assert "pct_measured_peak" in md and "| cpu-box" in md


def test_missing_sidecar_keeps_measured_percentages(results: Path, tmp_path: Path) -> None:
    summary = build_report(results, tmp_path / "out")
    pct = pd.read_csv(tmp_path / "out" / "percent_of_peak.csv")
    bare = pct[pct.machine == "bare-box"]
    assert len(bare) == 4 and bare.pct_peak.isna().all()
    # The row that sets the measured peak (the best median of any commit) is at 100 %.
    assert (bare.pct_measured_peak > 0).all() and bare.pct_measured_peak.max() == pytest.approx(100.0)
    assert any("bare-box/portabench.system" in p and "missing" in p for p in summary.problems)
    assert "bare-box/portabench.system" in (tmp_path / "out" / "problems.txt").read_text()


def test_corrupt_files_are_reported_and_skipped(results: Path, tmp_path: Path) -> None:
    (results / "cpu-box" / "deadbeef-env.json").write_text('{"commit_hash": "dead", "resul')
    entry = asv_entry(CPU_TIMES, N_CPU)
    entry[0] = entry[0][:5]  # 5 results for 12 combinations
    write_results(results / "cpu-box", "e" * 40, 1_900_000_000_000, {CPU_BENCH: entry})
    write_results(results / "gpu-box", "f" * 40, 1_600_000_000_000, {}).write_text("[1, 2]")
    (results / "gpu-box" / "portabench.system").write_text("{ nope")
    summary = build_report(results, tmp_path / "out")
    text = "\n".join(summary.problems)
    assert "deadbeef-env.json: not valid JSON" in text
    assert "eeeeeeee-existing-py_venv_bin_python3.json: stream.StreamCPU.time_stream: 5 results for 12" in text
    assert "ffffffff-existing-py_venv_bin_python3.json: not an asv results file" in text
    assert "gpu-box/portabench.system: unreadable" in text
    assert summary.n_rows == 52 and summary.machines == ["bare-box", "cpu-box", "gpu-box"]
    tidy = pd.read_csv(tmp_path / "out" / "tidy.csv")
    assert tidy[tidy.machine == "gpu-box"].pct_peak.isna().all()
    assert (tidy[tidy.machine == "gpu-box"].pct_measured_peak > 0).all()
    assert "deadbeef-env.json" in (tmp_path / "out" / "index.html").read_text()
    assert "deadbeef-env.json" in (tmp_path / "out" / "system-cpu-box.html").read_text()


def test_param_names_inferred_without_benchmarks_json(results: Path) -> None:
    (results / "benchmarks.json").unlink()
    loaded = load_results(results)
    assert len(loaded.table) == 52 and any("benchmarks.json" in p for p in loaded.problems)


@pytest.mark.parametrize("make", ["missing", "empty", "machine-json-only", "all-corrupt"])
def test_no_results_is_a_one_line_error(tmp_path: Path, make: str) -> None:
    root = tmp_path / "results"
    if make != "missing":
        (root / "m").mkdir(parents=True)
    if make == "machine-json-only":
        (root / "m" / "machine.json").write_text("{}")
    if make == "all-corrupt":
        (root / "m" / "0000-env.json").write_text("garbage")
    with pytest.raises(PortabenchError, match="run `portabench run` first") as err:
        build_report(root, tmp_path / "out")
    assert "\n" not in str(err.value) and str(root) in str(err.value)




def test_committed_fixtures_of_a_cpu_box_and_an_h100(tmp_path: Path) -> None:
    """Real asv runs (tests/fixtures/README.md): every kernel row, peaks from each machine's own record."""
    root = REPO / "tests" / "fixtures" / "results"
    summary = build_report(root, tmp_path / "out")
    assert summary.machines == ["cpu-2core", "h100"]
    assert not [p for p in summary.problems if "failed" in p or "unreadable" in p], summary.problems
    pct = pd.read_csv(tmp_path / "out" / "percent_of_peak.csv")
    gpu = pct[(pct.machine == "h100") & (pct.device == "gpu")]
    assert len(gpu) == 12 and set(gpu.variant) == {"cupy-rawkernel", "cupy-builtin"}
    assert (gpu.peak_gbs.round(0) == 3352).all()  # from the H100 record, not this machine
    assert gpu.pct_peak.between(40, 100).all() and gpu.pct_peak_best.ge(gpu.pct_peak - 1e-9).all()
    for machine in ("cpu-2core", "h100"):
        cpu = pct[(pct.machine == machine) & (pct.device == "cpu")]
        assert len(cpu) == 12 and cpu.peak_gbs.isna().all()  # unknown VM CPUs: measured peak only
        assert cpu.pct_measured_peak.between(0, 100).all() and (cpu.pct_measured_peak.max() > 60)
    spd = pd.read_csv(tmp_path / "out" / "speedup.csv")
    assert len(spd[spd.case == "geomean"]) == 3  # numba on 2 CPUs, raw kernels on the H100


def test_noisy_rows_are_flagged_in_tables_and_pages(tmp_path: Path, fresh_seed: int) -> None:
    """One result's samples spread widely (IQR well over 10 % of the median), the others' tightly:
    only that row, and the speedups using it, are flagged; the system page counts it."""
    rng = np.random.default_rng(fresh_seed)
    ops, variants = ("triad", "dot"), ("numba-prange", "numpy")
    entry = asv_entry(CPU_TIMES, N_CPU, ops=ops)
    combos = list(itertools.product(ops, variants))
    wide = combos.index(("triad", "numba-prange"))
    entry[11] = [list(t * (rng.uniform(0.4, 2.5, 20) if i == wide else 1 + 0.01 * rng.standard_normal(20)))
                 for i, t in enumerate(entry[0])]
    root = tmp_path / "results"
    root.mkdir()
    (root / "benchmarks.json").write_text(json.dumps({CPU_BENCH: {"param_names": ["op", "variant", "n"]}, "version": 2}))
    write_results(root / "box", "a" * 40, 1_800_000_000_000, {CPU_BENCH: entry})
    (root / "box" / "portabench.system").write_text(json.dumps(CPU_SYSTEM))

    table = load_results(root).table
    flagged = table[table.noisy]
    assert list(zip(flagged.case, flagged.variant)) == [("triad", "numba-prange")]
    assert flagged.noise_pct.iloc[0] > 10 and (table[~table.noisy].noise_pct < 10).all()
    out = tmp_path / "out"
    build_report(root, out)
    pct = pd.read_csv(out / "percent_of_peak.csv")
    assert list(pct[pct.noisy].variant + " " + pct[pct.noisy].case) == ["numba-prange triad"]
    spd = pd.read_csv(out / "speedup.csv").set_index("case")
    assert spd.noisy.to_dict() == {"triad": True, "dot": False, "geomean": True}  # a ratio is as noisy as its times
    assert "noisy" in pd.read_csv(out / "tidy.csv").columns
    md = (out / "percent_of_peak.md").read_text()
    assert md.count("⚠ noisy") == 1 and "True" not in md
    page = (out / "system-box.html").read_text()
    assert "1 of 4 results noisy" in page and page.count("<td>⚠ noisy</td>") == 1 + 2  # % of peak; triad, geomean


def test_in_cache_rows_have_no_percent_of_peak(tmp_path: Path) -> None:
    """A working set below 4x the device's cache (the CPU's LLC, the GPU's L2) is in cache: marked in the
    tidy and % of peak tables and on the system page, no % of peak and no part in the measured peak, its
    times and speedups kept. A record without the cache size marks nothing and says so in problems."""
    llc = 1 << 20  # 4 MiB threshold: triad at N_CPU (24 MB) is beyond it, at 100_000 (2.4 MB) in cache
    root = tmp_path / "results"
    root.mkdir()
    (root / "benchmarks.json").write_text(json.dumps({CPU_BENCH: {"param_names": ["op", "variant", "n"]}, "version": 2}))
    # One class at two sizes: the small one 10x faster (the cache's rate), in asv's parameter order.
    ops, sizes = ("triad", "dot"), ("100000", str(N_CPU))
    result = [CPU_TIMES[v][op] * (0.01 if n == sizes[0] else 1.0) for op, v, n in itertools.product(ops, CPU_TIMES, sizes)]
    both = [result, [[repr(o) for o in ops], [repr(v) for v in CPU_TIMES], [repr(n) for n in sizes]], "9ae8d0bc",
            1795324023489, 9.9, None, None, None, None, None, None, [[t * 1.2, t, t * 0.95, t * 1.01] for t in result]]
    write_results(root / "box", "a" * 40, 1_800_000_000_000, {CPU_BENCH: both})
    system = {**CPU_SYSTEM, "cpu": {**CPU_SYSTEM["cpu"], "llc_bytes": llc}}
    (root / "box" / "portabench.system").write_text(json.dumps(system))
    write_results(root / "old-box", "a" * 40, 1_800_000_000_000, {CPU_BENCH: both})
    (root / "old-box" / "portabench.system").write_text(json.dumps(CPU_SYSTEM))  # recorded before llc_bytes

    loaded = load_results(root)
    table = loaded.table
    box, old = table[table.machine == "box"], table[table.machine == "old-box"]
    assert len(box) == 8 and (box.in_cache == (box["size"] == 100_000)).all() and (box.cache_bytes == llc).all()
    assert box[box.in_cache][["pct_peak", "pct_peak_best", "pct_measured_peak"]].isna().all().all()
    assert box[~box.in_cache].pct_peak.notna().all() and box.gbs.notna().all() and box.time_s.notna().all()
    # The measured peak is the best STREAM rate beyond the caches, not the 10x faster cache rate.
    beyond = box[~box.in_cache]
    assert box.measured_peak_gbs.iloc[0] == pytest.approx(beyond.gbs.max())
    assert not old.in_cache.any() and old.cache_bytes.isna().all()
    assert [p for p in loaded.problems if "cache" in p] == [
        p for p in loaded.problems if "old-box/portabench.system" in p and "no last-level cache size recorded" in p]
    assert len([p for p in loaded.problems if "cache" in p]) == 1

    out = tmp_path / "out"
    build_report(root, out)
    pct = pd.read_csv(out / "percent_of_peak.csv")
    cached = pct[(pct.machine == "box") & pct.in_cache]
    assert len(cached) == 4 and cached.pct_peak.isna().all() and cached.gbs.notna().all()
    assert (pct[(pct.machine == "box") & ~pct.in_cache].pct_peak > 0).all()
    spd = pd.read_csv(out / "speedup.csv")
    assert set(spd[spd.machine == "box"]["size"]) == {100_000, N_CPU}  # speedups of in-cache cases stay
    md = (out / "percent_of_peak.md").read_text()
    assert md.count("▣ in cache") == 4 and "True" not in md
    page = (out / "system-box.html").read_text()
    assert "cpu: 4 of 8 results in cache" in page and "1 MiB" in page
    assert "last-level cache size unknown" in (out / "system-old-box.html").read_text()
    summary_ = pd.read_csv(out / "summary.csv").set_index("machine")
    assert summary_.loc["box", "rows in cache"] == 0  # the summary compares the largest size, beyond the cache


def test_committed_small_bcsr_cases_are_in_cache(committed_report) -> None:
    """The 2-core VM's BCSR rows at 64 MiB (2x its 32 MiB L3) are in cache: no % of peak above 100."""
    out, _ = committed_report
    tidy = pd.read_csv(out / "tidy.csv")
    bcsr = tidy[(tidy.machine == "cpu-2core") & (tidy.kernel == "bcsr") & (tidy["size"] == 64)]
    assert {"gt01r", "raefsky4"} <= set(bcsr.case) and bcsr.in_cache.all() and bcsr.pct_measured_peak.isna().all()
    stream = tidy[(tidy.machine == "cpu-2core") & (tidy.kernel == "stream")]
    assert len(stream) and not stream.in_cache.any()
    pct = pd.read_csv(out / "percent_of_peak.csv")
    # The committed machines only: CI's own run lands in results/ too, and a read-mostly kernel
    # can pass a noisy run's STREAM figure (no write-allocate traffic) without being in cache.
    committed = pct[pct.machine.isin(["cpu-2core", "h100"])]
    assert len(committed) and not (committed.pct_measured_peak > 100).any()
    page = (out / "system-cpu-2core.html").read_text()
    assert "results in cache" in page and "<td>▣ in cache</td>" in page
    assert "bcsr on cpu" in page  # the speedups of a kernel all in cache are still shown


@pytest.fixture(scope="module")
def committed_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The report of the committed results/ (every kernel, every study), and the title of every
    figure the report's own bar charts drew."""
    from portabench.reports import figures

    titles: list[str] = []
    real = figures.bar_chart

    def spy(data, x, y, ylabel, title, *args, **kwargs):
        titles.append(title)
        return real(data, x, y, ylabel, title, *args, **kwargs)

    out = tmp_path_factory.mktemp("committed") / "out"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(figures, "bar_chart", spy)
        build_report(REPO / "results", out)
    return out, titles


def test_every_table_and_figure_names_the_size_unit(committed_report) -> None:
    """Sizes count different things per kernel (nonzeros, systems, MiB of block values, elements per
    array): each table carries the kernel's unit beside its size, each header and title says it."""
    from portabench.implementations import get_kernel, list_kernels

    out, titles = committed_report
    units = {k: get_kernel(k).size_unit for k in list_kernels()}
    assert len(set(units.values())) >= 4 and all(units.values())
    tidy = pd.read_csv(out / "tidy.csv")
    assert set(tidy.kernel) == set(units)
    columns = list(tidy.columns)
    assert columns[columns.index("size") + 1] == "size_unit"
    assert (tidy.size_unit == tidy.kernel.map(units)).all()
    tables = ["percent_of_peak", "speedup", "preparation", "summary", "pressure_points", "launch_policies",
              "settings_sweeps", "roofline", "bcsr_block_sweep", "gmres_throughput"]
    for name in tables:
        frame = pd.read_csv(out / f"{name}.csv")
        size = "N" if name == "gmres_throughput" else "size"
        assert list(frame.columns)[list(frame.columns).index(size) + 1] == "size_unit", name
        assert len(frame) and (frame.size_unit == frame.kernel.map(units)).all(), name
        assert "size_unit" in (out / f"{name}.md").read_text().splitlines()[0], name
    # A page's table shows one kernel: the unit goes in the size column's header.
    pages = (out / "system-cpu-2core.html").read_text() + (out / "index.html").read_text()
    for unit in units.values():
        assert f"<th>size ({unit})</th>" in pages, unit
    assert "<th>N (systems)</th>" in pages and "<th>size</th>" not in pages and "size_unit" not in pages
    sized = [t for t in titles if ", size " in t]  # "<machine> <device>: <kernel>, size <size> <unit>"
    # A % of peak figure for every kernel with a result beyond the caches (the others have no % of peak).
    beyond = set(tidy.kernel[~tidy.in_cache.fillna(False).astype(bool) & tidy.pct_peak.notna()])
    assert {t.split(": ")[1].split(",")[0] for t in sized} == beyond and len(beyond) >= len(units) - 2
    assert all(t.endswith(" " + units[t.split(": ")[1].split(",")[0]]) for t in sized), sized


def test_studies_pressure_launch_sweeps_and_roofline(tmp_path: Path) -> None:
    """The studies from hand-made rows: speedups, best policy against the default, settings against the
    fastest of their sweep, intensities, figures."""
    from portabench.reports.studies import launch_policies, pressure_points, roofline_points, settings_sweeps, studies

    base = dict(machine="m", device="gpu", kernel="phi", size=100, family="portable", measure="kernel",
                flops=4.2e10, bytes=9.2e9, bytes_counted=4.16e10, peak_gflops=3.3e4, peak_gbs=3352.0,
                measured_peak_gbs=3100.0)
    rows = []
    for case, t in (("uber (rank=10, mode=0)", 2.0), ("lbnl-network (rank=10, mode=0)", 4.0)):
        rows.append(dict(base, case=case, variant="cupy-atomic", settings="", time_s=t, gflops=4.2e10 / t / 1e9))
        rows.append(dict(base, case=case, variant="cupy-atomic", settings="perturbation=reuse", time_s=t / 2))
        rows.append(dict(base, case=case, variant="cupy-atomic", settings="policy=t256-v0", time_s=t))
        rows.append(dict(base, case=case, variant="cupy-atomic", settings="policy=t128-v0", time_s=t / 4))
        rows.append(dict(base, case=case, variant="cupy-atomic", settings="per_warp=256, stage=none", time_s=t * 3))
        rows.append(dict(base, case=case, variant="cupy-atomic", settings="per_warp=1024, stage=none", time_s=t * 1.5))
    frame = pd.DataFrame(rows)
    pressure = pressure_points(frame)
    assert set(pressure.speedup.round(6)) == {2.0} and (pressure.case == "geomean").sum() == 1
    launch = launch_policies(frame)
    assert list(launch.best_policy) == ["t128-v0", "t128-v0"] and (launch.speedup == 4.0).all()
    sweeps = settings_sweeps(frame)  # policies and perturbations have their own studies
    assert list(sweeps.settings) == ["per_warp=256, stage=none", "per_warp=1024, stage=none"] * 2
    assert list(sweeps.case.str[:4]) == ["lbnl", "lbnl", "uber", "uber"]  # the kernel's case order
    assert list(sweeps.relative_speed) == [0.5, 1.0, 0.5, 1.0] and list(sweeps.t_default_s) == [4.0, 4.0, 2.0, 2.0]
    points = roofline_points(frame)
    assert len(points) == 2 and np.allclose(points.intensity, 4.2e10 / 9.2e9)
    made = studies(frame, tmp_path, {"cupy-atomic (portable)": (0.1, 0.2, 0.3)})
    assert [s.name for s in made] == ["pressure_points", "launch_policies", "settings_sweeps", "roofline"]
    assert all(s.figures[("m", "gpu", "phi")].exists() for s in made)


def test_palette_gives_the_variants_of_each_kernel_their_own_colours() -> None:
    from portabench.implementations import list_kernels, list_variants
    from portabench.reports.figures import palette

    variants = pd.DataFrame([{"kernel": k, "variant": v.name, "family": v.family}
                             for k in list_kernels() for v in list_variants(k)])
    colors = palette(variants)
    for kernel, rows in variants.groupby("kernel"):
        labels = set(rows.variant + " (" + rows.family + ")")
        assert len({colors[label] for label in labels}) == len(labels), kernel
    assert list(colors)[0].endswith("(portable)")


# ---------- throughput against block size (BCSR) and against N (batched GMRES) ----------

SWEEP_BS = (2, 3, 4, 5, 8, 16, 32)
STANDINS = ("gt01r", "raefsky4")
BCSR_GPU = ("cupy-byblock", "cupy-bycolumn", "cupy-rowperthread", "cusparse-bsrmv", "cusparse-csr")
GMRES_N = (1024, 51200)


def sweep_gbs(variant: str, bs: int) -> float:
    """Made-up GB/s: by-block only up to bs 5 (NaN beyond: skipped in asv), row-per-thread best from 16."""
    return {"cupy-byblock": 2400.0 if bs <= 5 else math.nan, "cupy-bycolumn": 2200.0 if bs < 16 else 2000.0,
            "cupy-rowperthread": 1500.0 if bs < 16 else 2700.0, "cusparse-bsrmv": 1800.0,
            "cusparse-csr": 1300.0}[variant]


@pytest.fixture
def scaling_results(tmp_path: Path) -> Path:
    """gpu-box: the BCSR sweep at 600 MiB and two stand-ins, batched GMRES at two N; times made up."""
    from portabench.implementations import get_kernel

    root = tmp_path / "results"
    root.mkdir()
    sweep, seeds, gmres = "bcsr.BcsrSweepGPU.time_bcsr", "bcsr.BcsrGPU.time_bcsr", "gmres.GmresGPU.time_gmres"
    (root / "benchmarks.json").write_text(json.dumps({
        sweep: {"param_names": ["matrix", "mib", "variant"]}, seeds: {"param_names": ["matrix", "mib", "variant"]},
        gmres: {"param_names": ["dataset", "variant", "N", "order"]}, "version": 2}))
    bcsr = get_kernel("bcsr")
    sweep_cases = [f"block-sweep-bs{bs}" for bs in SWEEP_BS]
    sweep_times = [bcsr.work(c, 600).bytes / sweep_gbs(v, bs) / 1e9 for c, bs in zip(sweep_cases, SWEEP_BS)
                   for v in BCSR_GPU]
    seed_times = [bcsr.work(c, 600).bytes / sweep_gbs(v, 4) / 1e9 for c in STANDINS for v in BCSR_GPU]
    gmres_params = [["'gri30'", "'isooctane'"], ["'cupy-team'", "'cupy-dense-solve'"], [f"'{n}'" for n in GMRES_N],
                    ["'given'", "'sorted'"]]
    gmres_times = [n * (2e-8 if v == "cupy-team" else 1e-7) * (2 if d == "isooctane" else 1) * (0.9 if o == "sorted" else 1)
                   for d in ("gri30", "isooctane") for v in ("cupy-team", "cupy-dense-solve") for n in GMRES_N
                   for o in ("given", "sorted")]
    write_results(root / "gpu-box", "c" * 40, 1_800_000_000_000, {
        sweep: [sweep_times, [[repr(c) for c in sweep_cases], ["'600'"], [repr(v) for v in BCSR_GPU]]],
        seeds: [seed_times, [[repr(c) for c in STANDINS], ["'600'"], [repr(v) for v in BCSR_GPU]]],
        gmres: [gmres_times, gmres_params]})
    (root / "gpu-box" / "portabench.system").write_text(json.dumps(GPU_SYSTEM))
    return root


def test_bcsr_throughput_against_block_size(scaling_results: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    build_report(scaling_results, out)
    sweep = pd.read_csv(out / "bcsr_block_sweep.csv")
    assert sorted(set(sweep.block_size)) == list(SWEEP_BS) and set(sweep["size"]) == {600}
    assert set(sweep[sweep.variant == "cupy-byblock"].block_size) == {2, 3, 4, 5}  # skipped beyond 5
    row = sweep[(sweep.variant == "cupy-rowperthread") & (sweep.block_size == 16)].iloc[0]
    assert row.gbs == pytest.approx(2700.0) and row.pct == pytest.approx(100 * 2700.0 / 3352.32)
    # Speedup over the fastest vendor variant at the same block size (cuSPARSE BSR: 1800 GB/s).
    assert row.speedup == pytest.approx(2700.0 / 1800.0) and row.fastest_vendor == "cusparse-bsrmv"
    assert sweep[sweep.family == "vendor"].speedup.isna().all()
    figure = out / "figures" / "gpu-box-gpu-bcsr-block-sweep.png"
    assert figure.read_bytes()[:4] == b"\x89PNG"
    assert len(pd.read_csv(figure.with_suffix(".csv"))) == len(sweep)
    # The paper's matrices alone make the kernel's bars and its geomean; the sweep has its own figure.
    bars = pd.read_csv(out / "figures" / "gpu-box-gpu-bcsr-pct.csv")
    assert set(bars.case) == set(STANDINS)
    spd = pd.read_csv(out / "speedup.csv")
    assert set(spd[(spd.kernel == "bcsr") & (spd.case == "geomean")].n_cases) == {len(STANDINS)}
    page = (out / "system-gpu-box.html").read_text()
    assert "BCSR throughput against block size" in page and "figures/gpu-box-gpu-bcsr-block-sweep.csv" in page
    # The paper [001]'s block-size statements, beside the sweep's own answer.
    beside = pd.read_csv(out / "published_beside.csv")
    beside = beside[beside.machine == "gpu-box"].set_index("quantity").suite
    assert beside["block_size_limit"].startswith("bs 5:") and beside["best_from_block_size"].startswith("bs 16:")


def test_gmres_throughput_against_n(scaling_results: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    build_report(scaling_results, out)
    t = pd.read_csv(out / "gmres_throughput.csv")
    assert len(t) == 2 * 2 * 2 * 2 and set(t.N) == set(GMRES_N) and set(t.order) == {"given", "sorted"}
    team = t[(t.dataset == "isooctane") & (t.variant == "cupy-team") & (t.N == 51200) & (t.order == "sorted")].iloc[0]
    assert team.systems_per_s == pytest.approx(1 / (2e-8 * 2 * 0.9))
    assert team.speedup == pytest.approx(1e-7 / 2e-8) and team.fastest_vendor == "cupy-dense-solve"
    figure = out / "figures" / "gpu-box-gpu-gmres-throughput.png"
    assert figure.is_file() and len(pd.read_csv(figure.with_suffix(".csv"))) == len(t)
    assert "Batched GMRES throughput against N" in (out / "system-gpu-box.html").read_text()


def test_every_declared_study_appears_in_the_report_when_run(tmp_path: Path, monkeypatch) -> None:
    """Results for every asv class the kernels declare (each study of each device, as `--studies all`
    runs them): each row carries its study, and the report has the studies' tables."""
    from portabench.implementations import get_kernel, list_kernels
    from portabench.implementations.gmres import definition as gmres_definition
    from portabench.implementations.model import MAIN

    from portabench.harness.plan import RunPlan

    sizes = {kernel: ({"stream": 65536, "bcsr": 4}.get(kernel, 1024),)  # small sizes: cheap work models
             for kernel in ("stream", "batched_spmv", "gmres", "mttkrp", "phi", "pi", "bcsr")}
    monkeypatch.setattr(gmres_definition, "STUDY_N", {"cpu": (300,), "gpu": (300,)})
    root = tmp_path / "results"
    entries, names, declared = {}, {}, set()
    rng = np.random.default_rng()
    plan = RunPlan.build(("cpu", "gpu"), sizes=sizes)
    for kernel in list_kernels():
        k = get_kernel(kernel)
        for study in plan.studies_of(kernel):
            device = study.device
            if True:
                grid = {k.case_param: study.cases, k.size_param: [str(n) for n in study.sizes], **study.options,
                        "variant": study.variants}
                order = k.benchmark_param_names() + list(study.settings)
                params = [list(grid[n]) if n in grid else list(study.settings[n]) for n in order]
                combos = list(itertools.product(*params))
                times = list(rng.uniform(1e-3, 2e-3, len(combos)))
                method = {"preparation": "time_preparation", "iterations": "track_iterations_mean"}.get(
                    study.measure, f"time_{kernel}")
                bench = f"{kernel}.{study.class_name}.{method}"
                entries[bench] = [times, [[repr(v) for v in p] for p in params], "v", 1, 1.0,
                                  times, times, times, times, [1] * len(times), [4] * len(times),
                                  [[t, t * 1.01, t * 0.99, t] for t in times]]
                names[bench] = {"param_names": order}
                if study.measure != "iterations":
                    declared.add((kernel, device, study.name))
    write_results(root / "every-study", "e" * 40, 1_800_000_000_000, entries)
    (root / "every-study" / "benchmarks.json").write_text(json.dumps({**names, "version": 2}))
    table = load_results(root).table
    found = set(zip(table.kernel, table.device, table.study))
    assert declared <= found, declared - found
    assert (table[table.study == MAIN].settings.fillna("") == "").all()
    out = tmp_path / "report"
    build_report(root, out)
    tidy = pd.read_csv(out / "tidy.csv")
    assert set(tidy.study) == {s for _, _, s in declared}
    for table_name in ("pressure_points", "launch_policies", "settings_sweeps", "preparation", "bcsr_block_sweep",
                       "gmres_throughput"):
        frame = pd.read_csv(out / f"{table_name}.csv")
        assert len(frame) > 0, table_name


def test_figures_asked_for_together_are_drawn_at_the_end_on_several_cores(tmp_path: Path) -> None:
    from portabench.reports.figures import bar_chart, drawn_together

    data = pd.DataFrame({"case": ["a", "b", "a", "b"], "pct": [10.0, 20.0, 30.0, 40.0],
                         "hue": ["x (portable)", "x (portable)", "y (vendor)", "y (vendor)"]})
    colors = {"x (portable)": (0.1, 0.2, 0.3), "y (vendor)": (0.4, 0.5, 0.6)}
    paths = []
    with drawn_together(workers=2):
        for k in range(3):
            paths.append(bar_chart(data, "case", "pct", "%", f"t{k}", tmp_path / f"f{k}.png", colors))
            assert not paths[-1].exists()  # only recorded so far
    assert paths == [tmp_path / f"f{k}.png" for k in range(3)]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)
    direct = bar_chart(data, "case", "pct", "%", "t0", tmp_path / "direct.png", colors)
    assert direct.read_bytes() == paths[0].read_bytes()  # the same figure as drawn in this process
