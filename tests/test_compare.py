"""portabench compare: regressions beyond the machine's noise, judged over rounds (processes), from
fabricated asv result sets: one round a side needs the machine's noise record; rounds of their own
judge themselves; a disturbed run gets no verdict."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from portabench.implementations import PortabenchError
from portabench.harness.commands.cli import main
from portabench.harness.commands.compare import Side, compare
from portabench.harness.statistics import ROUNDS_KEY, Noise, NoiseRecord, combo_key
from test_reports import CPU_BENCH, write_results

N = 1_000_000
OPS = ("copy", "triad")
VARIANTS = ("numba-prange", "numpy")
BASE_TIMES = {("copy", "numba-prange"): 1e-3, ("copy", "numpy"): 1.2e-3,
              ("triad", "numba-prange"): 1.5e-3, ("triad", "numpy"): 2.0e-3}
SAMPLES = 7


def _params() -> list[list[str]]:
    return [[repr(o) for o in OPS], [repr(v) for v in VARIANTS], [repr(str(N))]]


def entry(times: dict[tuple[str, str], float], rng: np.random.Generator, rounds: int, between: float) -> list:
    """asv's result columns for ``CPU_BENCH`` (op x variant x n): ``rounds`` rounds of ``SAMPLES`` samples
    each, every round at its own level (sd ``between`` in log) with 2 % noise within."""
    combos = [(op, v) for op in OPS for v in VARIANTS]
    samples = []
    for c in combos:
        levels = times[c] * np.exp(rng.normal(0, between, rounds))
        samples.append([float(x) for level in levels for x in level * np.exp(rng.normal(0, 0.02, SAMPLES))])
    medians = [float(np.median(s)) for s in samples]
    return [medians, _params(), "v1", 1_800_000_000_000, 5.0, [min(s) for s in samples], [max(s) for s in samples],
            [float(np.percentile(s, 25)) for s in samples], [float(np.percentile(s, 75)) for s in samples],
            [1] * len(combos), [len(s) for s in samples], samples]


def result_set(root: Path, commit: str, times: dict, rng: np.random.Generator, rounds: int = 1,
               between: float = 0.02, machine: str = "box") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "benchmarks.json").write_text(json.dumps({
        CPU_BENCH: {"param_names": ["op", "variant", "n"], "type": "time"}, "version": 2}))
    path = write_results(root / machine, commit * 40, 1_800_000_000_000 + len(list(root.glob("*/*.json"))),
                         {CPU_BENCH: entry(times, rng, rounds, between)})
    if rounds > 1:  # what ``portabench run --rounds`` writes beside asv's pooled samples
        data = json.loads(path.read_text())
        data[ROUNDS_KEY] = {CPU_BENCH: {combo_key(c): [SAMPLES] * rounds
                                        for c in itertools.product(*_params())}}
        path.write_text(json.dumps(data))
    return root


def with_record(root: Path, between: float = 0.02, df: int = 10, machine: str = "box") -> Path:
    """The machine's noise record: every benchmark's rounds spread ``between`` (log sd) over ``df``."""
    record = NoiseRecord(sources=["test"])
    for op in OPS:
        for variant in VARIANTS:
            params = json.dumps({"op": op, "variant": variant, "n": str(N)}, separators=(",", ":"))
            record.add(CPU_BENCH, params, Noise(between ** 2 * df, df))
    record.save(root / machine)
    return root


def statuses(result) -> dict[tuple[str, str], str]:
    return {(r.case_base, r.variant_base): r.status for r in result.table.itertuples()}


def test_a_clear_2x_regression_exits_1(tmp_path: Path, capsys, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    base = result_set(tmp_path / "a", "a", BASE_TIMES, rng)
    slower = {**BASE_TIMES, ("triad", "numpy"): 4.0e-3}
    cont = with_record(result_set(tmp_path / "b", "b", slower, rng))
    assert main(["compare", str(base), str(cont)]) == 1
    out = capsys.readouterr().out
    assert "regression" in out and "triad" in out and "1 regression, 0 improvement, 0 noisy, 0 unjudged, 3 unchanged" in out
    result = compare(Side(base), Side(cont))
    assert statuses(result)[("triad", "numpy")] == "regression"
    assert {s for k, s in statuses(result).items() if k != ("triad", "numpy")} == {"unchanged"}
    assert result.table.ratio.max() == pytest.approx(2.0, rel=0.2)


def test_an_improvement_is_not_a_regression(tmp_path: Path, capsys, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    base = with_record(result_set(tmp_path / "a", "a", BASE_TIMES, rng))
    cont = result_set(tmp_path / "b", "b", {**BASE_TIMES, ("copy", "numba-prange"): 0.5e-3}, rng)
    assert main(["compare", str(base), str(cont)]) == 0
    assert "1 improvement" in capsys.readouterr().out
    assert statuses(compare(Side(base), Side(cont)))[("copy", "numba-prange")] == "improvement"


def test_one_round_a_side_without_a_record_is_not_judged(tmp_path: Path, capsys, fresh_seed: int) -> None:
    """Many samples of one process a side say nothing of the spread between processes."""
    rng = np.random.default_rng(fresh_seed)
    base = result_set(tmp_path / "a", "a", BASE_TIMES, rng)
    cont = result_set(tmp_path / "b", "b", {**BASE_TIMES, ("copy", "numpy"): 2.4e-3}, rng)
    assert set(statuses(compare(Side(base), Side(cont))).values()) == {"unjudged"}
    assert main(["compare", str(base), str(cont)]) == 0
    assert "portabench noise" in capsys.readouterr().out


def test_a_shift_inside_the_machines_noise_is_not_flagged(tmp_path: Path, fresh_seed: int) -> None:
    """1.25x on a machine whose rounds spread 20 %: below the threshold of one round a side."""
    rng = np.random.default_rng(fresh_seed)
    base = result_set(tmp_path / "a", "a", BASE_TIMES, rng)
    cont = with_record(result_set(tmp_path / "b", "b", {**BASE_TIMES, ("copy", "numpy"): 1.5e-3}, rng), between=0.2)
    result = compare(Side(base), Side(cont))
    row = result.table.set_index(["case_base", "variant_base"]).loc[("copy", "numpy")]
    assert row.status == "unchanged" and row.threshold > 0.25 and "threshold" in row.evidence
    assert not result.regressed


def test_rounds_judge_themselves_and_a_quiet_machines_shift_is_found(tmp_path: Path, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    root = result_set(tmp_path / "r", "a", BASE_TIMES, rng, rounds=4, between=0.01)
    result_set(root, "b", {**BASE_TIMES, ("copy", "numpy"): 1.38e-3}, rng, rounds=4, between=0.01)
    result = compare(Side(root, "aaaa"), Side(root, "bbbb"))
    row = result.table.set_index(["case_base", "variant_base"]).loc[("copy", "numpy")]
    assert row.status == "regression" and (row.rounds_base, row.rounds_cont) == (4, 4)
    assert "no record" in row.evidence
    with pytest.raises(PortabenchError, match="name the two commits"):
        compare(Side(root), Side(root))


def test_a_disturbed_run_is_called_noisy_not_a_regression(tmp_path: Path, capsys, fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    root = with_record(result_set(tmp_path / "r", "a", BASE_TIMES, rng, rounds=4, between=0.01), between=0.01)
    result_set(root, "b", {k: 1.3 * v for k, v in BASE_TIMES.items()}, rng, rounds=4, between=0.6)
    result = compare(Side(root, "aaaa"), Side(root, "bbbb"))
    assert set(statuses(result).values()) == {"noisy"}
    assert main(["compare", str(root), str(root), "--baseline-commit", "aaaa", "--contender-commit", "bbbb"]) == 0
    assert "noisy: their rounds spread far beyond" in capsys.readouterr().out


@pytest.mark.parametrize("make, needle", [
    ("missing", "does not exist"),
    ("malformed", "not valid JSON"),
    ("not-asv", "not an asv results file"),
    ("other-machine", "nothing to compare"),
    ("bad-commit", "matches no commit"),
    ("bad-factor", "--factor must be 1 or above"),
])
def test_bad_input_is_a_one_line_error_with_exit_2(tmp_path: Path, capsys, make: str, needle: str,
                                                   fresh_seed: int) -> None:
    rng = np.random.default_rng(fresh_seed)
    base = result_set(tmp_path / "a", "a", BASE_TIMES, rng)
    cont = tmp_path / "b"
    extra: list[str] = []
    if make != "missing":
        result_set(cont, "b", BASE_TIMES, rng, machine="other" if make == "other-machine" else "box")
    if make == "malformed":
        (cont / "box" / "cccccccc-env.json").write_text('{"commit_hash": "cc", "resul')
    if make == "not-asv":
        (cont / "box" / "cccccccc-env.json").write_text(json.dumps({"results": {}, "version": 1}))
    if make == "bad-commit":
        extra = ["--contender-commit", "dead"]
    if make == "bad-factor":
        extra = ["--factor", "0.9"]
    assert main(["compare", str(base), str(cont), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("portabench: error:") and needle in err and "\n" not in err and "Traceback" not in err



def test_both_sides_are_rated_against_one_measured_peak(tmp_path: Path, fresh_seed: int) -> None:
    """Each side's measured peak is its own best STREAM median; a run where copy was fast (a
    bandwidth mode of the machine) must not make an unchanged benchmark's % of peak drop."""
    rng = np.random.default_rng(fresh_seed)
    base = result_set(tmp_path / "a", "a", BASE_TIMES, rng, between=0.0)
    cont = result_set(tmp_path / "b", "b", {**BASE_TIMES, ("copy", "numba-prange"): 0.5e-3}, rng, between=0.0)
    table = compare(Side(base), Side(cont)).table
    assert table.pct_base.notna().all() and not table.peak_changed.any()
    assert (table.peak_base == table.peak_cont).all()
    same = table[table.variant_base == "numpy"]
    assert np.allclose(same.pct_cont / same.pct_base, same.time_s_base / same.time_s_cont)
    fast = table[(table.case_base == "copy") & (table.variant_base == "numba-prange")].iloc[0]
    assert fast.pct_cont == pytest.approx(100.0) and fast.pct_base == pytest.approx(50.0, rel=0.1)
