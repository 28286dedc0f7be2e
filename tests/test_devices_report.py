"""The study across devices (``portabench scale``) in the report: aggregate peaks, weak-scaling work,
in cache per device, parallel efficiency, speedup over the fastest vendor, kept out of the other tables."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from portabench.reports import build_report, load_results, measured_peaks

REPO = Path(__file__).resolve().parents[1]
MACHINE = "mpi-box"
N = 1 << 22  # STREAM elements per array: 96 MiB of triad on one device
TRIAD_BYTES = 24  # bytes per element, written out here on purpose (not imported from the code under test)
PEAK_GBS, LLC = 50.0, 8 << 20  # one CPU's; 4 x 8 MiB = 32 MiB: triad at N is in cache from 4 devices (24 MiB each)
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_q_25", "stats_q_75", "stats_number",
           "stats_repeat", "samples"]
STREAM_DEVICES, MTTKRP_DEVICES = "stream.StreamDevicesCPU.time_stream", "mttkrp.MttkrpDevicesCPU.time_mttkrp"
STREAM_MAIN = "stream.StreamCPU.time_stream"
# Median times (s): STREAM triad per (variant, scaling) and device count.
STREAM_TIMES = {
    ("numba-prange", "strong"): {1: 1.0e-2, 2: 0.6e-2, 4: 0.4e-2},
    ("numpy", "strong"): {1: 1.2e-2, 2: 0.8e-2, 4: 0.5e-2},
    ("numba-prange", "weak"): {1: 1.0e-2, 2: 1.25e-2, 4: 2.0e-2},
    ("numpy", "weak"): {1: 1.2e-2, 2: 1.5e-2, 4: 1.6e-2},
}
MAIN_TIMES = {"numba-prange": 1.0e-2, "numpy": 1.1e-2}  # asv's STREAM: the measured peak is numba-prange's
# MTTKRP per variant and device count (the nonzeros partition 10 % slower): SciPy is the fastest vendor
# variant on one device, MKL on two.
MTTKRP_TIMES = {"numba-segmented": {1: 1.8e-3, 2: 1.2e-3}, "scipy-scatter": {1: 2.0e-3, 2: 1.5e-3},
                "mkl-scatter": {1: 3.0e-3, 2: 1.0e-3}}


def _entry(grid: dict[str, tuple[str, ...]], time_of) -> list:
    """One benchmark's result columns (``COLUMNS``) over the product of ``grid``, ``time_of(combo)`` each."""
    combos = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    times = [time_of(c) for c in combos]
    return [times, [[repr(v) for v in values] for values in grid.values()], "mpi", 1_800_000_000_000, 0.0,
            [t * 0.99 for t in times], [t * 1.01 for t in times], [1] * len(times), [3] * len(times),
            [[t * 0.99, t, t * 1.01] for t in times]]


def _system() -> dict:
    """The committed record of a CPU box, with a known peak and last-level cache."""
    path = REPO / "results" / "cpu-test" / "portabench.system"
    record = json.loads(path.read_text()) if path.is_file() else {"cpu": {"model": "a CPU"}, "gpus": []}
    record["machine"] = MACHINE
    record["cpu"].update(peak_bandwidth_gbs=PEAK_GBS, peak_fp64_gflops=400.0, llc_bytes=LLC, peak_source="test")
    return record


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """One machine: STREAM and MTTKRP across 1, 2 (and 4) devices, and asv's STREAM on one."""
    root = tmp_path / "results"
    folder = root / MACHINE
    folder.mkdir(parents=True)
    stream = {"op": ("triad",), "n": (str(N),), "variant": ("numba-prange", "numpy"), "devices": ("1", "2", "4"),
              "partition": ("blocks",), "scaling": ("strong", "weak")}
    mttkrp = {"dataset": ("nell-2",), "nnz": ("200000",), "rank": ("16",), "mode": ("0",),
              "variant": tuple(MTTKRP_TIMES), "devices": ("1", "2"), "partition": ("rows", "nonzeros")}
    main = {"op": ("triad",), "n": (str(N),), "variant": tuple(MAIN_TIMES)}
    entries = {
        STREAM_DEVICES: _entry(stream, lambda c: STREAM_TIMES[c["variant"], c["scaling"]][int(c["devices"])]),
        MTTKRP_DEVICES: _entry(mttkrp, lambda c: MTTKRP_TIMES[c["variant"]][int(c["devices"])]
                               * (1.1 if c["partition"] == "nonzeros" else 1.0)),
        STREAM_MAIN: _entry(main, lambda c: MAIN_TIMES[c["variant"]]),
    }
    (folder / f"{'a' * 8}-mpi-cpu.json").write_text(json.dumps({
        "commit_hash": "a" * 40, "env_name": "mpi-cpu", "date": 1_800_000_000_000,
        "params": {"machine": MACHINE}, "python": "3.11", "requirements": {}, "env_vars": {},
        "result_columns": COLUMNS, "results": entries, "durations": {}, "version": 2}))
    names = {bench: {"param_names": list(grid)} for bench, grid in
             ((STREAM_DEVICES, stream), (MTTKRP_DEVICES, mttkrp), (STREAM_MAIN, main))}
    (folder / "benchmarks.json").write_text(json.dumps({**names, "version": 2}))
    (folder / "portabench.system").write_text(json.dumps(_system()))
    return root


def _one(frame: pd.DataFrame, **where) -> pd.Series:
    picked = frame
    for column, value in where.items():
        picked = picked[picked[column] == value]
    assert len(picked) == 1, (where, picked)
    return picked.iloc[0]


def _stream(table: pd.DataFrame, variant: str, scaling: str, devices: int) -> pd.Series:
    rows = table[(table.benchmark == STREAM_DEVICES) & table.settings.str.endswith(f"scaling={scaling}")]
    return _one(rows, variant=variant, devices=devices)


def _main_peak() -> float:
    return TRIAD_BYTES * N / MAIN_TIMES["numba-prange"] / 1e9


def test_rows_of_the_study_across_devices_carry_it_and_their_device_count(results: Path) -> None:
    table = load_results(results).table
    across = table[table.benchmark != STREAM_MAIN]
    assert set(across.study) == {"devices"} and set(table[table.benchmark == STREAM_MAIN].study) == {"main"}
    assert sorted(set(across.devices)) == [1, 2, 4] and (table[table.benchmark == STREAM_MAIN].devices == 1).all()
    assert len(across) == 2 * 3 * 2 + 3 * 2 * 2


def test_weak_scaling_rates_the_whole_problem_and_keeps_the_size_per_device(results: Path) -> None:
    table = load_results(results).table
    weak = _stream(table, "numba-prange", "weak", 4)
    assert weak["size"] == N  # as recorded: per device
    assert weak.bytes == TRIAD_BYTES * N * 4  # the work: the whole problem, size x devices
    assert weak.gbs == pytest.approx(TRIAD_BYTES * N * 4 / 2.0e-2 / 1e9)
    strong = _stream(table, "numba-prange", "strong", 4)
    assert strong["size"] == N and strong.bytes == TRIAD_BYTES * N  # strong: one problem of size N, split


def test_percent_of_peak_is_of_the_devices_peak_together(results: Path) -> None:
    table = load_results(results).table
    r = _stream(table, "numba-prange", "strong", 2)
    gbs = TRIAD_BYTES * N / 0.6e-2 / 1e9
    assert r.gbs == pytest.approx(gbs) and r.peak_gbs == pytest.approx(2 * PEAK_GBS)
    assert r.pct_peak == pytest.approx(100 * gbs / (2 * PEAK_GBS))
    assert r.peak_gflops == pytest.approx(2 * 400.0)
    # The measured peak is asv's STREAM on one device (not the faster aggregate rates), times the devices.
    assert r.measured_peak_gbs == pytest.approx(2 * _main_peak())
    assert r.pct_measured_peak == pytest.approx(100 * gbs / (2 * _main_peak()))
    weak = _stream(table, "numpy", "weak", 4)
    assert weak.pct_peak == pytest.approx(100 * (TRIAD_BYTES * N * 4 / 1.6e-2 / 1e9) / (4 * PEAK_GBS))
    assert measured_peaks(results, MACHINE) == {"cpu": pytest.approx(_main_peak())}
    main = _one(table[table.benchmark == STREAM_MAIN], variant="numpy")
    assert main.peak_gbs == PEAK_GBS and main.pct_peak == pytest.approx(100 * main.gbs / PEAK_GBS)
    assert main.measured_peak_gbs == pytest.approx(_main_peak())


def test_in_cache_is_judged_per_device(results: Path) -> None:
    """96 MiB of triad is beyond 4 x 8 MiB of cache whole and halved, in it split four ways (24 MiB each);
    weak scaling gives each device 96 MiB."""
    table = load_results(results).table
    assert [bool(_stream(table, "numpy", "strong", n).in_cache) for n in (1, 2, 4)] == [False, False, True]
    assert not _stream(table, "numpy", "weak", 4).in_cache
    cached = _stream(table, "numpy", "strong", 4)
    assert math.isnan(cached.pct_peak) and cached.cache_bytes == LLC and cached.gbs > 0


def test_parallel_efficiency_strong_and_weak(results: Path) -> None:
    from portabench.reports.devices import devices_table
    from portabench.reports.metrics import latest

    table = devices_table(latest(load_results(results).table))
    stream = table[table.kernel == "stream"]
    efficiency = {(r.variant, r.scaling, r.devices): r.efficiency for r in stream.itertuples()}
    for (variant, scaling), times in STREAM_TIMES.items():
        for n, t in times.items():
            expected = times[1] / (n * t) if scaling == "strong" else times[1] / t
            assert efficiency[variant, scaling, n] == pytest.approx(expected), (variant, scaling, n)
    assert efficiency["numba-prange", "strong", 2] == pytest.approx(1 / 1.2)
    assert efficiency["numba-prange", "weak", 4] == pytest.approx(0.5)
    weak = _one(stream, variant="numba-prange", scaling="weak", devices=4)
    assert weak["size"] == N and weak.problem_size == 4 * N
    assert weak.aggregate_gbs == pytest.approx(TRIAD_BYTES * N * 4 / 2.0e-2 / 1e9)
    assert weak.aggregate_peak_gbs == pytest.approx(4 * PEAK_GBS) and weak.basis == "theoretical"
    assert weak.pct == pytest.approx(100 * weak.aggregate_gbs / (4 * PEAK_GBS))
    cached = _one(stream, variant="numba-prange", scaling="strong", devices=4)
    assert cached.in_cache and cached.basis == "in cache" and math.isnan(cached.pct)
    # Each partition against its own run on one device.
    mttkrp = table[table.kernel == "mttkrp"]
    for partition, factor in (("rows", 1.0), ("nonzeros", 1.1)):
        r = _one(mttkrp, variant="mkl-scatter", partition=partition, devices=2)
        assert r.efficiency == pytest.approx((3.0e-3 * factor) / (2 * 1.0e-3 * factor))
        assert r.scaling == "strong" and r.problem_size == 200000


def test_speedup_over_the_fastest_vendor_on_as_many_devices(results: Path) -> None:
    from portabench.reports.devices import devices_table
    from portabench.reports.metrics import latest

    table = devices_table(latest(load_results(results).table))
    mttkrp = table[table.kernel == "mttkrp"]
    for partition in ("rows", "nonzeros"):
        one = _one(mttkrp, variant="numba-segmented", partition=partition, devices=1)
        assert one.fastest_vendor == "scipy-scatter" and one.speedup == pytest.approx(2.0e-3 / 1.8e-3)
        two = _one(mttkrp, variant="numba-segmented", partition=partition, devices=2)
        assert two.fastest_vendor == "mkl-scatter" and two.speedup == pytest.approx(1.0e-3 / 1.2e-3)
    assert mttkrp[mttkrp.family == "vendor"].speedup.isna().all()
    stream = _one(table, variant="numba-prange", scaling="weak", devices=2)
    assert stream.fastest_vendor == "numpy" and stream.speedup == pytest.approx(1.5e-2 / 1.25e-2)


def test_report_has_an_across_devices_table_and_figures_and_nothing_else_mixes_them_in(results: Path,
                                                                                        tmp_path: Path) -> None:
    out = tmp_path / "out"
    build_report(results, out)
    across = pd.read_csv(out / "across_devices.csv")
    assert len(across) == 2 * 3 * 2 + 3 * 2 * 2
    columns = list(across.columns)
    assert columns[columns.index("size") + 1] == "size_unit"
    assert {"partition", "scaling", "devices", "problem_size", "efficiency", "aggregate_gbs", "pct", "speedup"} <= set(columns)
    r = across[(across.kernel == "stream") & (across.variant == "numpy") & (across.scaling == "strong")
               & (across.devices == 4)].iloc[0]
    assert r.efficiency == pytest.approx(1.2e-2 / (4 * 0.5e-2)) and bool(r.in_cache)
    for kernel in ("stream", "mttkrp"):
        figure = out / "figures" / f"{MACHINE}-cpu-{kernel}-devices.png"
        assert figure.read_bytes()[:4] == b"\x89PNG"
        assert len(pd.read_csv(figure.with_suffix(".csv"))) == (across.kernel == kernel).sum()
    page = (out / f"system-{MACHINE}.html").read_text()
    assert "Across devices: stream on cpu" in page and "Across devices: mttkrp on cpu" in page
    assert "<th>parallel efficiency</th>" in page and "▣ in cache" in page
    # The single-device tables hold asv's STREAM alone.
    pct = pd.read_csv(out / "percent_of_peak.csv")
    assert set(pct.kernel) == {"stream"} and len(pct) == len(MAIN_TIMES)
    assert pct.pct_peak.tolist() == pytest.approx([100 * TRIAD_BYTES * N / MAIN_TIMES[v] / 1e9 / PEAK_GBS
                                                   for v in pct.variant])
    assert len(pd.read_csv(out / "speedup.csv")) == 2  # numba-prange over numpy: the case and its geomean
    assert set(pd.read_csv(out / "summary.csv").kernel) == {"stream"}
    assert not (out / "settings_sweeps.csv").exists()  # devices and partition are no variant settings
    assert "devices" in pd.read_csv(out / "tidy.csv").columns
