"""portabench compare: regressions beyond the runs' own noise, from fabricated asv result sets."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from portabench.implementations import PortabenchError
from portabench.implementations.cli import main
from portabench.reports.compare import Side, compare, moved_beyond_noise
from test_reports import CPU_BENCH, write_results

N = 1_000_000
OPS = ("copy", "triad")
VARIANTS = ("numba-prange", "numpy")
BASE_TIMES = {("copy", "numba-prange"): 1e-3, ("copy", "numpy"): 1.2e-3,
              ("triad", "numba-prange"): 1.5e-3, ("triad", "numpy"): 2.0e-3}
# Ten samples around the median with a 3 % spread: a quiet machine.
QUIET = (0.97, 0.98, 0.99, 0.995, 1.0, 1.0, 1.005, 1.01, 1.02, 1.03)


def entry(times: dict[tuple[str, str], float], spread: dict[tuple[str, str], tuple[float, ...]]) -> list:
    """asv's result columns for ``CPU_BENCH`` (op x variant x n), ``spread`` scaling each median into samples."""
    combos = [(op, v) for op in OPS for v in VARIANTS]
    samples = [[times[c] * f for f in spread.get(c, QUIET)] for c in combos]
    medians = [float(np.median(s)) for s in samples]
    params = [[repr(o) for o in OPS], [repr(v) for v in VARIANTS], [repr(str(N))]]
    return [medians, params, "v1", 1_800_000_000_000, 5.0, [min(s) for s in samples], [max(s) for s in samples],
            [float(np.percentile(s, 25)) for s in samples], [float(np.percentile(s, 75)) for s in samples],
            [1] * len(combos), [len(s) for s in samples], samples]


def result_set(root: Path, commit: str, times: dict, spread: dict | None = None, machine: str = "box") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "benchmarks.json").write_text(json.dumps({
        CPU_BENCH: {"param_names": ["op", "variant", "n"], "type": "time"}, "version": 2}))
    write_results(root / machine, commit * 40, 1_800_000_000_000 + len(list(root.glob("*/*.json"))),
                  {CPU_BENCH: entry(times, spread or {})})
    return root


def statuses(result) -> dict[tuple[str, str], str]:
    return {(r.case_base, r.variant_base): r.status for r in result.table.itertuples()}


def test_a_clear_2x_regression_exits_1(tmp_path: Path, capsys) -> None:
    base = result_set(tmp_path / "a", "a", BASE_TIMES)
    slower = {**BASE_TIMES, ("triad", "numpy"): 4.0e-3}
    cont = result_set(tmp_path / "b", "b", slower)
    assert main(["compare", str(base), str(cont)]) == 1
    out = capsys.readouterr().out
    assert "regression" in out and "triad" in out and "2.000" in out
    assert "1 regression, 0 improvement, 0 insignificant, 3 unchanged" in out
    result = compare(Side(base), Side(cont))
    assert statuses(result)[("triad", "numpy")] == "regression"
    assert {s for k, s in statuses(result).items() if k != ("triad", "numpy")} == {"unchanged"}


def test_an_improvement_is_not_a_regression(tmp_path: Path, capsys) -> None:
    base = result_set(tmp_path / "a", "a", BASE_TIMES)
    cont = result_set(tmp_path / "b", "b", {**BASE_TIMES, ("copy", "numba-prange"): 0.5e-3})
    assert main(["compare", str(base), str(cont)]) == 0
    assert "1 improvement" in capsys.readouterr().out
    assert statuses(compare(Side(base), Side(cont)))[("copy", "numba-prange")] == "improvement"


def test_a_shift_inside_the_noise_is_not_flagged(tmp_path: Path) -> None:
    """A 1.25x slower median, beyond the factor, but samples spread over 0.6-1.5x: not significant."""
    noisy = (0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.1, 1.2, 1.3, 1.5)
    spread = {("copy", "numpy"): noisy}
    base = result_set(tmp_path / "a", "a", BASE_TIMES, spread)
    cont = result_set(tmp_path / "b", "b", {**BASE_TIMES, ("copy", "numpy"): 1.5e-3}, spread)
    result = compare(Side(base), Side(cont))
    row = result.table.set_index(["case_base", "variant_base"]).loc[("copy", "numpy")]
    assert row.ratio == pytest.approx(1.25) and row.status == "insignificant" and "IQRs overlap" in row.evidence
    assert not result.regressed
    assert main(["compare", str(base), str(cont)]) == 0


def test_the_same_shift_on_a_quiet_machine_is_flagged(tmp_path: Path) -> None:
    base = result_set(tmp_path / "a", "a", BASE_TIMES)
    cont = result_set(tmp_path / "b", "b", {**BASE_TIMES, ("copy", "numpy"): 1.5e-3})
    assert statuses(compare(Side(base), Side(cont)))[("copy", "numpy")] == "regression"


def test_two_commits_of_one_directory_and_quick_runs_use_confidence_intervals(tmp_path: Path) -> None:
    """Three samples each (--quick) cannot reach p < 0.002: asv's 99 % intervals decide."""
    three = (0.98, 1.0, 1.02)
    spread = {c: three for c in BASE_TIMES}
    root = result_set(tmp_path / "r", "a", BASE_TIMES, spread)
    result_set(root, "b", {**BASE_TIMES, ("copy", "numpy"): 3.0e-3}, spread)
    result = compare(Side(root, "aaaa"), Side(root, "bbbb"))
    row = result.table.set_index(["case_base", "variant_base"]).loc[("copy", "numpy")]
    assert row.status == "regression" and "CIs apart" in row.evidence
    with pytest.raises(PortabenchError, match="name the two commits"):
        compare(Side(root), Side(root))


def test_noise_test_directly() -> None:
    quiet = tuple(1.0 + 0.01 * k for k in range(10))
    assert moved_beyond_noise(quiet, tuple(2 * x for x in quiet), (0, 0), (0, 0), 0.002)[0]
    assert not moved_beyond_noise(quiet, quiet[::-1], (0, 0), (0, 0), 0.002)[0]


@pytest.mark.parametrize("make, needle", [
    ("missing", "does not exist"),
    ("malformed", "not valid JSON"),
    ("not-asv", "not an asv results file"),
    ("other-machine", "nothing to compare"),
    ("bad-commit", "matches no commit"),
    ("bad-factor", "--factor must be above 1"),
])
def test_bad_input_is_a_one_line_error_with_exit_2(tmp_path: Path, capsys, make: str, needle: str) -> None:
    base = result_set(tmp_path / "a", "a", BASE_TIMES)
    cont = tmp_path / "b"
    extra: list[str] = []
    if make != "missing":
        result_set(cont, "b", BASE_TIMES, machine="other" if make == "other-machine" else "box")
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

