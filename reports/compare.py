"""``portabench compare``: two asv result sets -> the benchmarks that got slower or faster beyond
their own noise.

Each side is a results directory (asv's layout, any number of machines), narrowed to one
commit (a hash prefix) or, by default, each benchmark's latest commit at each size, as the report does.
Rows are paired by (machine, benchmark, parameters). A pair moved when

- the contender's median time differs from the baseline's by more than ``factor`` (asv's
  own default 1.1: smaller moves are not worth a look on shared machines), and
- the move is larger than the runs' own noise: the middle halves of the two runs' samples
  (asv ``--record-samples``), from the first to the third quartile, do not overlap, so the
  threshold grows with the spread each run measured of itself; and
- the move is not chance: a two-sided Mann-Whitney U test on the samples at ``alpha``, asv's
  own test and threshold (0.002: a suite of hundreds of benchmarks then raises about one
  false alarm in 500). Where too few samples exist for the test to reach ``alpha`` (a
  ``--quick`` run keeps 3), asv's 99 % confidence intervals of the medians must not overlap
  instead; without samples and intervals, the factor decides alone, as in ``asv compare``.

On a shared machine the load of others moves whole runs; ``asv continuous --interleave-rounds``
spreads that over both commits (README, "Regression tracking").

% of peak is shown beside each time: with the same peak on both sides it moves exactly
inversely to the time, so time alone decides; a changed peak (the machine's record, or its
best STREAM rate for % of measured peak) is pointed out, as it re-rates without a code change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu

from portabench.implementations import PortabenchError

from .metrics import latest
from .results import iqr_percent, load_results

KEYS = ["machine", "benchmark", "params"]
REGRESSION, IMPROVEMENT, INSIGNIFICANT, UNCHANGED = "regression", "improvement", "insignificant", "unchanged"
STATUS_ORDER = [REGRESSION, IMPROVEMENT, INSIGNIFICANT, UNCHANGED]
DEFAULT_FACTOR, DEFAULT_ALPHA = 1.1, 0.002


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a results directory and, optionally, a commit hash prefix."""

    results: Path
    commit: str | None = None

    def label(self) -> str:
        return f"{self.results}" + (f" @ {self.commit}" if self.commit else "")


@dataclass
class Comparison:
    """Every paired benchmark with its verdict, and what could not be paired."""

    table: pd.DataFrame
    only_baseline: int
    only_contender: int
    problems: list[str]
    factor: float
    alpha: float

    def count(self, status: str) -> int:
        return int((self.table.status == status).sum())

    @property
    def regressed(self) -> bool:
        return self.count(REGRESSION) > 0


def select(side: Side, machine: str | None) -> tuple[pd.DataFrame, list[str]]:
    """The rows of one side: its machine (if given) and commit (if given, else each benchmark's latest)."""
    loaded = load_results(side.results)
    if loaded.unreadable:
        raise PortabenchError(f"{loaded.unreadable[0]}" + (f" (and {len(loaded.unreadable) - 1} more unreadable file(s))"
                                                           if len(loaded.unreadable) > 1 else ""))
    rows = loaded.table
    if machine is not None:
        if machine not in set(rows.machine):
            raise PortabenchError(f"no results of machine {machine!r} in {side.results}; "
                                  f"machines: {', '.join(sorted(set(rows.machine)))}")
        rows = rows[rows.machine == machine]
    if side.commit is None:
        return latest(rows), loaded.problems
    commits = sorted(c for c in set(rows.commit) if c.startswith(side.commit))
    if len(commits) != 1:
        known = ", ".join(c[:8] for c in sorted(set(rows.commit)))
        what = "matches no" if not commits else f"is ambiguous: {len(commits)}"
        raise PortabenchError(f"commit {side.commit!r} {what} commit(s) of {side.results}; commits there: {known}")
    rows = rows[rows.commit == commits[0]]
    # Two asv environments of one commit time the same thing twice: keep the first, as the report does.
    return rows.drop_duplicates(KEYS).reset_index(drop=True), loaded.problems


def _apart(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[1] < b[0] or b[1] < a[0]


def moved_beyond_noise(base: tuple[float, ...], cont: tuple[float, ...], base_ci: tuple[float, float],
                       cont_ci: tuple[float, float], alpha: float) -> tuple[bool, str]:
    """Whether two runs' timings differ by more than their noise (see the module's doc), and why, in words."""
    m, n = len(base), len(cont)
    if m >= 2 and n >= 2:
        quartiles = [tuple(np.percentile(s, [25, 75])) for s in (base, cont)]
        if not _apart(*quartiles):
            return False, f"within the noise: IQRs overlap ({m}+{n} samples)"
    # The smallest two-sided p-value an exact test of m and n samples can give: 2 / C(m + n, m).
    if m >= 2 and n >= 2 and 2 / math.comb(m + n, m) < alpha:
        p = float(mannwhitneyu(base, cont, alternative="two-sided").pvalue)
        return p < alpha, f"p={p:.2g} ({m}+{n} samples)"
    if all(np.isfinite(base_ci)) and all(np.isfinite(cont_ci)):
        apart = _apart(base_ci, cont_ci)
        return apart, f"99% CIs {'apart' if apart else 'overlap'} ({m}+{n} samples)"
    return True, "no samples: factor only"


def _pct(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """% of peak as the report rates it (theoretical where known, else measured) and that peak."""
    known = rows.peak_gbs.notna()
    return (rows.pct_peak.where(known, rows.pct_measured_peak),
            rows.peak_gbs.where(known, rows.measured_peak_gbs))


def compare(baseline: Side, contender: Side, machine: str | None = None, factor: float = DEFAULT_FACTOR,
            alpha: float = DEFAULT_ALPHA) -> Comparison:
    """Pair the two sides' rows and give each pair a status (see the module's doc)."""
    if not factor > 1:
        raise PortabenchError(f"--factor must be above 1, got {factor}")
    if not 0 < alpha < 1:
        raise PortabenchError(f"--alpha must be between 0 and 1, got {alpha}")
    if Path(baseline.results).resolve() == Path(contender.results).resolve() and (
            baseline.commit is None or contender.commit is None):
        raise PortabenchError("both sides are one results directory: name the two commits "
                              "(--baseline-commit and --contender-commit)")
    base, base_problems = select(baseline, machine)
    cont, cont_problems = select(contender, machine)
    for frame in (base, cont):
        frame["pct"], frame["peak"] = _pct(frame)
    keep = KEYS + ["kernel", "case", "size", "size_unit", "variant", "settings", "measure", "commit", "time_s", "samples",
                   "ci_99_low", "ci_99_high", "pct", "peak"]
    both = base[keep].merge(cont[keep], on=KEYS, suffixes=("_base", "_cont"))
    if both.empty:
        raise PortabenchError(f"no benchmark with the same machine and parameters in {baseline.label()} "
                              f"and {contender.label()}: nothing to compare")
    verdicts = []
    for r in both.itertuples(index=False):
        ratio = r.time_s_cont / r.time_s_base
        real, evidence = moved_beyond_noise(r.samples_base, r.samples_cont, (r.ci_99_low_base, r.ci_99_high_base),
                                            (r.ci_99_low_cont, r.ci_99_high_cont), alpha)
        if 1 / factor < ratio < factor:
            status = UNCHANGED
        elif not real:
            status = INSIGNIFICANT
        else:
            status = REGRESSION if ratio > 1 else IMPROVEMENT
        verdicts.append((ratio, status, evidence))
    both["ratio"], both["status"], both["evidence"] = zip(*verdicts)
    both["noise_base_pct"] = both.samples_base.map(iqr_percent)
    both["noise_cont_pct"] = both.samples_cont.map(iqr_percent)
    both["peak_changed"] = ~np.isclose(both.peak_base, both.peak_cont, rtol=1e-6) & both.peak_base.notna()
    order = {s: i for i, s in enumerate(STATUS_ORDER)}
    both = both.assign(_order=both.status.map(order)).sort_values(
        ["_order", "ratio"], ascending=[True, False]).drop(columns="_order").reset_index(drop=True)
    paired = set(map(tuple, both[KEYS].to_numpy()))
    only_base = sum(1 for k in map(tuple, base[KEYS].to_numpy()) if k not in paired)
    only_cont = sum(1 for k in map(tuple, cont[KEYS].to_numpy()) if k not in paired)
    problems = list(dict.fromkeys(base_problems + cont_problems))
    return Comparison(both, only_base, only_cont, problems, factor, alpha)


def format_comparison(result: Comparison, baseline: Side, contender: Side, show_all: bool = False) -> str:
    """The comparison as text: one table of the pairs that moved (every pair with ``show_all``), then counts."""
    from asv.util import human_value
    from tabulate import tabulate

    shown = result.table if show_all else result.table[result.table.status != UNCHANGED]
    rows = []
    for r in shown.itertuples(index=False):
        case = r.case_base + (f" [{r.settings_base}]" if r.settings_base else "") + (
            " (preparation)" if r.measure_base == "preparation" else "")
        pct = "" if math.isnan(r.pct_base) else f"{r.pct_base:.3g} -> {r.pct_cont:.3g}" + (
            " (peak changed)" if r.peak_changed else "")
        noise = "/".join("-" if math.isnan(v) else f"{v:.2g}" for v in (r.noise_base_pct, r.noise_cont_pct))
        rows.append([r.status, r.machine, r.kernel_base, case, f"{r.size_base} {r.size_unit_base}", r.variant_base,
                     human_value(r.time_s_base, "seconds"), human_value(r.time_s_cont, "seconds"),
                     f"{r.ratio:.3f}x", r.evidence, noise, pct])
    factor, alpha = result.factor, result.alpha
    lines = [f"baseline:  {baseline.label()}", f"contender: {contender.label()}",
             f"moved: time ratio beyond {factor:g} (or below 1/{factor:g}), interquartile ranges apart, and "
             f"Mann-Whitney U p < {alpha:g} (too few samples: asv's 99% CIs apart)", ""]
    if rows:
        lines.append(tabulate(rows, headers=["status", "machine", "kernel", "case", "size", "variant", "baseline",
                                             "contender", "ratio", "evidence", "IQR % (b/c)", "% of peak"]))
        lines.append("")
    counts = ", ".join(f"{result.count(s)} {s}" for s in STATUS_ORDER)
    lines.append(f"{len(result.table)} paired: {counts}; only in baseline: {result.only_baseline}, "
                 f"only in contender: {result.only_contender}")
    return "\n".join(lines)
