"""``portabench compare``: regression tracking's judge of two asv result sets: which benchmarks got slower
or faster beyond the noise of the machine they ran on, and its exit status (1 on a regression). ``check``
(tracking.py) calls it on the rounds it runs; the report's changes across commits are reports/changes.py.

Each side is a results directory (asv's layout, any number of machines), narrowed to one
commit (a hash prefix) or, by default, each benchmark's latest commit at each size, as the report does.
Rows are paired by ``ROW_KEY`` (machine, benchmark, parameters) and judged over **rounds**
(harness/statistics.py): each side's samples split into the processes that took them (``portabench run
--rounds N`` records how many each took), each round summarised by its median, and the two sides' mean log
round medians compared against the spread between rounds, from the rounds themselves and from the
machine's noise record (``results/<machine>/portabench.noise``, written by ``portabench noise`` and by
two-commit checks). A pair is a regression or an improvement when its change exceeds the comparison's
threshold (a t-test at ``alpha``) and, if given, ``factor``. A pair gets no verdict where its run was
disturbed (``DISTURBED``, written "noisy"): other processes took ``CONTENDED`` of the CPU during a round,
or its rounds spread far beyond the machine's record (``VARIANCE_DIFFERS``, an F-test). One round a side
on a machine without a record is "unjudged".

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

from portabench.implementations import PortabenchError

from portabench.reports.metrics import latest
from portabench.reports.results import load_results
from portabench.harness.statistics import (CONTENDED, CONTENTION, DEFAULT_ALPHA, DISTURBED, IMPROVEMENT, REGRESSION,
                                           ROW_KEY, UNCHANGED, UNJUDGED, VARIANCE_DIFFERS, NoiseRecord, round_medians,
                                           verdict)

STATUS_ORDER = [REGRESSION, IMPROVEMENT, DISTURBED, UNJUDGED, UNCHANGED]


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
    records: dict[str, NoiseRecord]  # machine -> its noise record, where it has one

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
    return rows.drop_duplicates(ROW_KEY).reset_index(drop=True), loaded.problems


def _pct(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    """% of peak as the report rates it (theoretical where known, else measured), that peak, and
    whether it is the measured one."""
    known = rows.peak_gbs.notna()
    return (rows.pct_peak.where(known, rows.pct_measured_peak),
            rows.peak_gbs.where(known, rows.measured_peak_gbs), ~known & rows.measured_peak_gbs.notna())


def _one_measured_peak(both: pd.DataFrame) -> None:
    """Rate both sides of a pair against one measured peak, the higher of the two: each side's own is
    the best STREAM median of its run, which moves between runs of the same code (a machine whose
    processes fall into bandwidth modes), and would show a change of % of peak where there is none."""
    measured = both.measured_base & both.measured_cont
    common = np.fmax(both.peak_base, both.peak_cont)
    for side in ("base", "cont"):
        both[f"pct_{side}"] = both[f"pct_{side}"].where(~measured, both[f"pct_{side}"] * both[f"peak_{side}"] / common)
        both[f"peak_{side}"] = both[f"peak_{side}"].where(~measured, common)


def noise_records(results: Path, machines: set[str]) -> dict[str, NoiseRecord]:
    """Each machine's noise record in a results directory, where it has one."""
    found = {m: NoiseRecord.load(Path(results) / m) for m in sorted(machines)}
    return {m: r for m, r in found.items() if r is not None}


def side_rounds(samples: tuple[float, ...], counts: tuple[int, ...], time_s: float) -> list[float]:
    """One side's round medians: its samples split by round, or its median where no sample was kept."""
    return round_medians(samples, counts) if samples else [time_s]


def compare(baseline: Side, contender: Side, machine: str | None = None, factor: float = 1.0,
            alpha: float = DEFAULT_ALPHA, records: dict[str, NoiseRecord] | None = None) -> Comparison:
    """Pair the two sides' rows and give each pair a status (see the module's doc); ``records``: the
    machines' noise records (default: those in the two results directories)."""
    if not factor >= 1:
        raise PortabenchError(f"--factor must be 1 or above, got {factor}")
    if not 0 < alpha < 1:
        raise PortabenchError(f"--alpha must be between 0 and 1, got {alpha}")
    if Path(baseline.results).resolve() == Path(contender.results).resolve() and (
            baseline.commit is None or contender.commit is None):
        raise PortabenchError("both sides are one results directory: name the two commits "
                              "(--baseline-commit and --contender-commit)")
    base, base_problems = select(baseline, machine)
    cont, cont_problems = select(contender, machine)
    for frame in (base, cont):
        frame["pct"], frame["peak"], frame["measured"] = _pct(frame)
    keep = ROW_KEY + ["kernel", "case", "size", "size_unit", "variant", "settings", "measure", "commit", "time_s", "samples",
                   "round_counts", "contention", "pct", "peak", "measured"]
    both = base[keep].merge(cont[keep], on=ROW_KEY, suffixes=("_base", "_cont"))
    if both.empty:
        raise PortabenchError(f"no benchmark with the same machine and parameters in {baseline.label()} "
                              f"and {contender.label()}: nothing to compare")
    # The contender's machine record where it has one (the newer), else the baseline's.
    machines = set(both.machine)
    if records is None:
        records = {**noise_records(baseline.results, machines), **noise_records(contender.results, machines)}
    verdicts = []
    for r in both.itertuples(index=False):
        a = side_rounds(r.samples_base, r.round_counts_base, r.time_s_base)
        b = side_rounds(r.samples_cont, r.round_counts_cont, r.time_s_cont)
        record = records.get(r.machine)
        v = verdict(a, b, record.get(r.benchmark, r.params) if record else None, alpha, factor,
                    np.nanmax([r.contention_base, r.contention_cont, -1.0]))
        verdicts.append((v.ratio, v.status, v.cause, v.evidence, len(a), len(b), v.threshold))
    (both["ratio"], both["status"], both["cause"], both["evidence"], both["rounds_base"], both["rounds_cont"],
     both["threshold"]) = zip(*verdicts)
    _one_measured_peak(both)
    both["peak_changed"] = ~np.isclose(both.peak_base, both.peak_cont, rtol=1e-6) & both.peak_base.notna()
    order = {s: i for i, s in enumerate(STATUS_ORDER)}
    both = both.assign(_order=both.status.map(order)).sort_values(
        ["_order", "ratio"], ascending=[True, False]).drop(columns="_order").reset_index(drop=True)
    paired = set(map(tuple, both[ROW_KEY].to_numpy()))
    only_base = sum(1 for k in map(tuple, base[ROW_KEY].to_numpy()) if k not in paired)
    only_cont = sum(1 for k in map(tuple, cont[ROW_KEY].to_numpy()) if k not in paired)
    problems = list(dict.fromkeys(base_problems + cont_problems))
    return Comparison(both, only_base, only_cont, problems, factor, alpha, records)


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
        rows.append([r.status, r.machine, r.kernel_base, case, f"{r.size_base} {r.size_unit_base}", r.variant_base,
                     human_value(r.time_s_base, "seconds"), human_value(r.time_s_cont, "seconds"),
                     f"{r.ratio:.3f}x", r.evidence, pct])
    factor, alpha = result.factor, result.alpha
    beyond = f" and a ratio beyond {factor:g}" if factor > 1 else ""
    lines = [f"baseline:  {baseline.label()}", f"contender: {contender.label()}",
             f"moved: the mean log round median changed beyond the threshold of a t-test at {alpha:g} over the "
             f"rounds (processes), their spread pooled with the machine's noise record{beyond}", ""]
    if rows:
        lines.append(tabulate(rows, headers=["status", "machine", "kernel", "case", "size", "variant", "baseline",
                                             "contender", "ratio", "evidence", "% of peak"]))
        lines.append("")
    counts = ", ".join(f"{result.count(s)} {s}" for s in STATUS_ORDER)
    lines.append(f"{len(result.table)} paired: {counts}; only in baseline: {result.only_baseline}, "
                 f"only in contender: {result.only_contender}")
    for machine in sorted(set(result.table.machine)):
        record = result.records.get(machine)
        lines.append(f"{machine}: " + (f"noise record of {len(record.benchmarks)} benchmarks ({'; '.join(record.sources[-2:])})"
                                       if record else "no noise record: verdicts rest on the rounds compared alone, "
                                       "and one round a side cannot be judged (`portabench noise` measures one)"))
    causes = result.table.cause[result.table.status == DISTURBED].value_counts()
    if causes.get(VARIANCE_DIFFERS, 0):
        lines.append(f"{causes[VARIANCE_DIFFERS]} pair(s) noisy: their rounds spread far beyond this machine's record "
                     "(unequal spread, an F-test: a neighbour?): run again on a quiet machine")
    if causes.get(CONTENTION, 0):
        lines.append(f"{causes[CONTENTION]} pair(s) noisy: contended, other processes took {CONTENDED:.0%} of the CPU "
                     "or more during a round: run again on a quiet machine")
    return "\n".join(lines)
