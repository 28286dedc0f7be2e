"""Change points across commits (portabench.reports.changes): steps of known size and place in noisy
synthetic series, none in flat or short ones, and the report's history figures and changes table."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from portabench.reports import build_report, load_results
from portabench.harness.statistics import MIN_COMMITS, MIN_STEP
from portabench.reports.changes import changes, steps
from test_reports import CPU_BENCH, CPU_SYSTEM, CPU_TIMES, N_CPU, parse_site, write_results

NOISE = 0.01  # relative noise of each commit's median: a steady machine's


def noisy(rng: np.random.Generator, n: int, noise: float = NOISE, t: float = 1e-3) -> np.ndarray:
    return t * np.exp(rng.normal(0.0, noise, n))


def test_a_flat_noisy_series_has_no_step(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    for n in (MIN_COMMITS, 8, 20, 40):
        assert steps(noisy(rng, n)) == [], n


@pytest.mark.parametrize("factor", [1.15, 1 / 1.15], ids=["slower", "faster"])
def test_a_15_percent_step_is_found_at_its_commit(fresh_seed: int, factor: float) -> None:
    rng = np.random.default_rng(fresh_seed)
    times = noisy(rng, 16)
    times[9:] *= factor
    found = steps(times)
    assert [s.at for s in found] == [9]
    step = found[0]
    # The step's size: the ratio of its two sides' medians, near the true factor.
    assert step.ratio == pytest.approx(np.median(times[9:]) / np.median(times[:9]))
    assert step.ratio == pytest.approx(factor, rel=0.05) and (step.ratio > 1) == (factor > 1)
    assert step.p_value < 1e-6


def test_two_steps_and_a_step_at_either_end(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    times = noisy(rng, 24)
    times[8:] *= 1.3
    times[16:] /= 1.2
    assert [s.at for s in steps(times)] == [8, 16]
    first = noisy(rng, 12)
    first[1:] *= 0.7  # one commit before the step: the first one
    assert [s.at for s in steps(first)] == [1]


def test_a_step_below_the_minimum_or_the_noise_floor_is_not_listed(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    times = noisy(rng, 20, noise=0.002)
    times[10:] *= 1 + MIN_STEP / 2  # significant on so steady a series, but small
    assert steps(times) == []
    assert [s.at for s in steps(times, min_step=MIN_STEP / 4)] == [10]
    big = noisy(rng, 20)
    big[10:] *= 1.15
    assert [s.at for s in steps(big, min_step=0.10)] == [10] and steps(big, min_step=0.20) == []


def test_too_short_a_series_has_no_step(fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    for n in range(1, MIN_COMMITS):
        times = noisy(rng, n)
        times[n // 2:] *= 2.0
        assert steps(times) == []


def test_noise_floors_per_benchmark_row(fresh_seed: int) -> None:
    """A row's noise floor (a relative change) raises its threshold above the minimum step, not below it."""
    rng = np.random.default_rng(fresh_seed)
    rows = []
    for variant, commit in itertools.product(("numba-prange", "numpy"), range(12)):
        t = noisy(rng, 1)[0] * (1.15 if commit >= 6 else 1.0)
        rows.append({"machine": "m", "benchmark": CPU_BENCH, "params": variant, "commit": f"{commit:x}" * 40,
                     "date": pd.Timestamp(1_700_000_000 + 3600 * commit, unit="s", tz="UTC"), "time_s": t,
                     "device": "cpu", "kernel": "stream", "study": "main", "case": "triad", "size": N_CPU,
                     "size_unit": "elements per array", "variant": variant, "settings": "", "measure": "kernel"})
    table = pd.DataFrame(rows)
    assert sorted(changes(table).variant) == ["numba-prange", "numpy"]
    # The machine's noise floors (the tidy table's noise_floor_pct, from its noise record).
    found = changes(table.assign(noise_floor_pct=table.variant.map({"numpy": 25.0, "numba-prange": 1.0})))
    assert found.variant.tolist() == ["numba-prange"]
    assert found.min_step_pct.iloc[0] == pytest.approx(100 * MIN_STEP)  # the larger of floor and minimum
    assert (found.before.iloc[0], found.after.iloc[0]) == ("5" * 8, "6" * 8)


def stream_entry(times: dict[tuple[str, str], float], ops: tuple[str, ...], rng: np.random.Generator) -> list:
    """One commit's StreamCPU result columns: ``times[(op, variant)]`` medians, with noisy samples."""
    combos = list(itertools.product(ops, CPU_TIMES))
    result = [times[c] for c in combos]
    samples = [list(t * np.exp(rng.normal(0.0, 0.01, 10))) for t in result]
    params = [[repr(o) for o in ops], [repr(str(N_CPU))], [repr(v) for v in CPU_TIMES]]
    return [result, params, "v", 1_795_324_023_489, 1.0, None, None, None, None, None, None, samples]


def test_report_shows_history_figures_and_the_changes_table(tmp_path: Path, fresh_seed: int) -> None:
    """Eight commits of one machine; numba-prange's triad gets 15 % slower from the sixth on: the system
    page has each kernel's history figure (with its numbers) and a changes table naming the commit range."""
    rng = np.random.default_rng(fresh_seed)
    ops = ("triad", "dot")
    root = tmp_path / "results"
    root.mkdir()
    (root / "benchmarks.json").write_text(json.dumps({CPU_BENCH: {"param_names": ["op", "n", "variant"]},
                                                      "version": 2}))
    commits = [f"{i:x}" * 40 for i in range(1, 9)]
    dates = [1_800_000_000_000 + 3_600_000 * i for i in range(len(commits))]  # asv's: ms since the epoch
    day = [pd.Timestamp(d, unit="ms", tz="UTC").strftime("%Y-%m-%d %H:%M") for d in dates]
    for i, commit in enumerate(commits):
        medians = {(op, v): CPU_TIMES[v][op] * math.exp(rng.normal(0.0, NOISE))
                   for op, v in itertools.product(ops, CPU_TIMES)}
        if i >= 5:
            medians[("triad", "numba-prange")] *= 1.15
        write_results(root / "box", commit, dates[i], {CPU_BENCH: stream_entry(medians, ops, rng)})
    (root / "box" / "portabench.system").write_text(json.dumps(CPU_SYSTEM))

    out = tmp_path / "out"
    report = build_report(root, out)
    found = pd.read_csv(out / "changes.csv", keep_default_na=False, dtype={"before": str, "after": str})
    assert len(found) == 1, found
    step = found.iloc[0]
    assert (step.machine, step.kernel, step.device, step.case, step.variant) == ("box", "stream", "cpu", "triad",
                                                                                 "numba-prange")
    assert (step.before, step.after, step.direction) == (commits[4][:8], commits[5][:8], "slower")
    assert step.ratio == pytest.approx(1.15, rel=0.05) and step.change_pct == pytest.approx(100 * (step.ratio - 1))
    assert (step.before_date, step.after_date) == (day[4], day[5]) and step.p_value <= 1e-3
    table = load_results(root).table
    sides = table[(table.case == "triad") & (table.variant == "numba-prange")].sort_values("date").time_s
    assert step.t_after_s / step.t_before_s == pytest.approx(step.ratio)
    assert step.t_before_s == pytest.approx(np.median(sides.iloc[:5]))

    pages = parse_site(out)
    assert "changes.csv" in pages["index.html"].refs and out / "changes.csv" in report.paths
    page = (out / "system-box.html").read_text()
    figure = "figures/box-cpu-stream-history.png"
    refs = pages["system-box.html"].refs
    assert figure in refs and "figures/box-cpu-stream-history.csv" in refs
    assert (out / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    drawn = pd.read_csv(out / "figures" / "box-cpu-stream-history.csv")
    assert len(drawn) == len(ops) * len(CPU_TIMES) and list(drawn.columns[2:]) == [c[:8] for c in commits]
    assert np.allclose(drawn[commits[-1][:8]], 1.0)  # each line relative to its latest commit
    assert "Changes across commits" in page and "1 step(s): 1 slower, 0 faster" in page
    assert "figures/box-cpu-stream-changes.csv" in refs  # a table per kernel and device
    assert f"{commits[4][:8]} ({day[4]}) .. {commits[5][:8]} ({day[5]})" in page
