"""The report's numbers from the tidy table: % of peak, portable-over-vendor speedups, summary."""

from __future__ import annotations

import numpy as np
import pandas as pd

from portabench.harness.statistics import ROW_KEY
from portabench.implementations import PortabenchError, get_kernel

SYSTEM = ["machine", "device"]
IN_CACHE_BASIS = "in cache"  # with_basis' basis of a row in cache: no % of peak
PCT_COLUMNS = ["machine", "device", "kernel", "study", "case", "size", "size_unit", "variant", "family", "noisy",
               "in_cache", "gbs", "peak_gbs", "pct_peak", "gbs_best", "pct_peak_best", "measured_peak_gbs", "pct_measured_peak",
               "gbs_counted", "pct_peak_counted", "noise_floor_pct"]
PREPARATION_COLUMNS = ["machine", "device", "kernel", "case", "size", "size_unit", "variant", "t_preparation_s",
                       "t_kernel_s", "preparation_in_runs", "noisy"]
SPEEDUP_COLUMNS = ["machine", "device", "kernel", "size", "size_unit", "case", "variant", "fastest_vendor",
                   "t_fastest_vendor_s", "t_portable_s", "speedup", "noisy", "n_cases"]


def latest(table: pd.DataFrame) -> pd.DataFrame:
    """Each benchmark's rows from the latest commit (by date) that ran it at each size on each machine;
    one row per benchmark and parameters. (A run of some benchmarks, ``--bench``, leaves the others'
    results shown; a run at the default size leaves an earlier run's larger size shown.)"""
    keys = ["machine", "benchmark", "size"]
    last = table.sort_values(["date", "commit"]).groupby(keys, dropna=False).commit.last().rename("_last").reset_index()
    rows = table.merge(last, on=keys)
    rows = rows[rows.commit == rows._last].drop(columns="_last")
    # Two asv environments of one commit time the same thing twice: keep the first.
    return rows.drop_duplicates(ROW_KEY).reset_index(drop=True)


def largest_size(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of the largest size per (machine, device, kernel): the one beyond the caches."""
    biggest = frame.groupby(SYSTEM + ["kernel"])["size"].transform("max")
    return frame[frame["size"] == biggest]


def case_rank(frame: pd.DataFrame) -> pd.Series:
    """Position of each row's case in its kernel's own order (unknown cases, e.g. geomean, last)."""
    def rank(kernel: str, case: str) -> int:
        try:  # a case with options, "gri30 (order=sorted)", ranks with its dataset
            return get_kernel(kernel).cases.index(case.split(" (")[0])
        except (PortabenchError, ValueError):
            return 10**6
    return pd.Series([rank(k, c) for k, c in zip(frame.kernel, frame.case)], index=frame.index, dtype=int)


def percent_of_peak(rows: pd.DataFrame) -> pd.DataFrame:
    """GB/s and % of theoretical and of measured peak per (machine, device, kernel, case, size, variant)."""
    out = with_in_cache(with_noisy(with_size_unit(rows))).assign(_rank=case_rank(rows))
    out = out.sort_values(SYSTEM + ["kernel", "_rank", "case", "size", "family", "variant"])
    return out.reindex(columns=PCT_COLUMNS).reset_index(drop=True)  # hand-made rows may lack the noise floor


def with_basis(pct: pd.DataFrame) -> pd.DataFrame:
    """Add ``pct`` and ``basis``: % of theoretical peak where known, else % of measured peak; none
    (basis "in cache") for a row in cache."""
    known = pct.peak_gbs.notna()
    cached = with_in_cache(pct).in_cache.to_numpy()
    return pct.assign(pct=pct.pct_peak.where(known, pct.pct_measured_peak).mask(cached),
                      basis=np.where(cached, IN_CACHE_BASIS, np.where(known, "theoretical", "measured")))


def geomean(values: pd.Series) -> float:
    """Geometric mean of positive values."""
    return float(np.exp(np.log(values.astype(float)).mean()))


def speedup(rows: pd.DataFrame) -> pd.DataFrame:
    """Per case: t of the fastest vendor variant / t of each portable variant (>1: portable faster);
    plus one ``case == "geomean"`` row per (machine, device, kernel, size, portable variant)."""
    rows = with_noisy(with_size_unit(rows))  # rows not from the tidy table (hand-made) may lack them
    keys = SYSTEM + ["kernel", "case", "size", "size_unit"]
    vendor = (rows[rows.family == "vendor"].sort_values("time_s").drop_duplicates(keys)
              [keys + ["variant", "time_s", "noisy"]].rename(columns={"variant": "fastest_vendor", "time_s": "t_fastest_vendor_s", "noisy": "noisy_fastest_vendor"}))
    portable = rows[rows.family == "portable"][keys + ["variant", "time_s", "noisy"]].rename(
        columns={"time_s": "t_portable_s"})
    per_case = portable.merge(vendor, on=keys)
    per_case["speedup"] = per_case.t_fastest_vendor_s / per_case.t_portable_s
    per_case["noisy"] = per_case.noisy | per_case.noisy_fastest_vendor  # a ratio is as noisy as either time
    per_case["n_cases"] = 1
    geo = (per_case.groupby(SYSTEM + ["kernel", "size", "size_unit", "variant"])
           .agg(speedup=("speedup", geomean), noisy=("noisy", "any"), n_cases=("case", "size"))
           .reset_index().assign(case="geomean"))
    both = pd.concat([per_case, geo], ignore_index=True).fillna({"fastest_vendor": ""})
    # case_rank puts "geomean" (no case of any kernel) after each group's cases.
    both = both.assign(_rank=case_rank(both)).sort_values(SYSTEM + ["kernel", "size", "variant", "_rank", "case"])
    return both[SPEEDUP_COLUMNS].reset_index(drop=True)


def preparation(rows: pd.DataFrame) -> pd.DataFrame:
    """Each preparation time (sorting, scatter matrices) beside its variant's kernel time on the same
    problem, and their ratio: the preparation's cost in runs of the kernel (the paper [003]'s table)."""
    rows = with_noisy(with_size_unit(rows))
    keys = SYSTEM + ["kernel", "case", "size", "size_unit", "variant", "settings"]
    prep = rows[rows.measure == "preparation"][keys + ["time_s", "noisy"]].rename(columns={"time_s": "t_preparation_s"})
    runs = rows[rows.measure == "kernel"][keys + ["time_s", "noisy"]].rename(
        columns={"time_s": "t_kernel_s", "noisy": "noisy_kernel"})
    both = prep.merge(runs, on=keys)
    both["preparation_in_runs"] = both.t_preparation_s / both.t_kernel_s
    both["noisy"] = both.noisy | both.noisy_kernel
    both = both.assign(_rank=case_rank(both)).sort_values(SYSTEM + ["kernel", "_rank", "case", "size", "variant"])
    return both[PREPARATION_COLUMNS].reset_index(drop=True)


# summary's columns: what the index's table and `portabench run`'s headline show, per kernel and system.
PORTABLE_PCT, VENDOR_PCT = "portable % of peak", "vendor % of peak"
SPEEDUP, WORST_SPEEDUP, WORST_CASE = "speedup (geomean)", "worst case speedup", "worst case"
BEST_WORST_SPEEDUP, BEST_WORST_CASE = "worst case speedup, best portable per case", "worst case, best portable per case"
SUMMARY_COLUMNS = ["kernel", *SYSTEM, "size", "size_unit", "peak basis", "rows in cache", "cases", "portable variant",
                   PORTABLE_PCT, VENDOR_PCT, "fastest vendor variant", SPEEDUP, WORST_SPEEDUP, WORST_CASE,
                   BEST_WORST_SPEEDUP, BEST_WORST_CASE]


def summary(pct: pd.DataFrame, spd: pd.DataFrame) -> pd.DataFrame:
    """One row per (kernel, machine, device), every number over the same cases: those at the kernel's largest
    size beyond the caches (all of them where every one is in cache, and then no % of peak). The portable
    variant is the one with the highest geomean speedup among those that ran the most of these cases; over
    its cases: the geomean of its % of peak, the geomean of the fastest vendor variant's % of peak per case,
    the geomean of its speedup over that vendor variant (so speedup = portable % / vendor % where both are
    known), and its worst case's speedup, naming the case. And, taking in each case the fastest portable variant
    there (as a goal "portable wins on every case" does), the smallest of those speedups and its case."""
    based = with_basis(with_in_cache(largest_size(pct)))
    cases = largest_size(spd[spd.case != "geomean"])
    rows = []
    for (kernel, machine, device), group in based.groupby(["kernel"] + SYSTEM, sort=True):
        beyond = set(group[~group.in_cache].case)
        group = group[group.case.isin(beyond)] if beyond else group
        row = {"kernel": kernel, "machine": machine, "device": device, "size": group["size"].iloc[0],
               "size_unit": group.size_unit.iloc[0],
               "peak basis": next((b for b in group.basis if b != IN_CACHE_BASIS), IN_CACHE_BASIS),
               "rows in cache": int(based[(based.kernel == kernel) & (based.machine == machine)
                                          & (based.device == device)].in_cache.sum())}
        ratios = cases[(cases.kernel == kernel) & (cases.machine == machine) & (cases.device == device)
                       & cases.case.isin(set(group.case))]
        portable = group[group.family == "portable"]
        if len(ratios):
            best = ratios.groupby("case").speedup.max()
            row.update({BEST_WORST_SPEEDUP: float(best.min()), BEST_WORST_CASE: best.idxmin()})
        # No vendor variant to compare with: the portable variant with the best % of peak.
        variant = _best_variant(ratios, "speedup") if len(ratios) else _best_variant(portable, "pct")
        if variant is not None:
            ratios = ratios[ratios.variant == variant]
            mine = portable[portable.variant == variant]
            mine = mine[mine.case.isin(set(ratios.case))] if len(ratios) else mine
            vendor = group[(group.family == "vendor") & group.case.isin(set(mine.case))]
            row.update({"cases": len(mine), "portable variant": variant, PORTABLE_PCT: _geomean_or_nan(mine.pct),
                        VENDOR_PCT: _geomean_or_nan(vendor.groupby("case").pct.max())})
        if variant is not None and len(ratios):
            worst = ratios.loc[ratios.speedup.idxmin()]
            row.update({"fastest vendor variant": ratios.fastest_vendor.value_counts().index[0],  # the most frequent
                        SPEEDUP: geomean(ratios.speedup), WORST_SPEEDUP: float(worst.speedup), WORST_CASE: worst.case})
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=SUMMARY_COLUMNS)


def best_per_case(row: pd.Series) -> tuple[float, str] | None:
    """(speedup, case): a summary row's worst case when each case takes its fastest portable variant, where
    that beats the chosen variant's worst case (another portable variant wins there); else None."""
    best = row[BEST_WORST_SPEEDUP]
    return (float(best), str(row[BEST_WORST_CASE])) if best > row[WORST_SPEEDUP] else None


def _best_variant(rows: pd.DataFrame, column: str) -> str | None:
    """The variant whose ``column`` has the highest geomean among those with the most cases (one that
    skipped a case is not ranked on fewer); None where no row has a value."""
    values = rows.dropna(subset=[column]).groupby("variant")[column]
    if values.ngroups == 0:
        return None
    counts, means = values.count(), values.agg(geomean)
    return str(means[counts == counts.max()].idxmax())


def _geomean_or_nan(values: pd.Series) -> float:
    values = values.dropna()
    return geomean(values) if len(values) else float("nan")


def with_noisy(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with a boolean ``noisy`` column (False where rows without samples lack one)."""
    if "noisy" in rows.columns:
        return rows.assign(noisy=rows.noisy.fillna(False).astype(bool))
    return rows.assign(noisy=False)


def with_in_cache(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with a boolean ``in_cache`` column (False where rows not from the tidy table lack one)."""
    if "in_cache" in rows.columns:
        return rows.assign(in_cache=rows.in_cache.fillna(False).astype(bool))
    return rows.assign(in_cache=False)


def with_size_unit(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a ``size_unit`` column after its size column (``size``, or the kernel's own size
    parameter name, e.g. GMRES' ``N``), from each row's kernel; unchanged if it has one or no size."""
    if "size_unit" in frame.columns or "kernel" not in frame.columns:
        return frame
    kernels = {k: get_kernel(k) for k in set(frame.kernel)}
    names = ["size"] + sorted({k.size_param for k in kernels.values()})
    column = next((c for c in names if c in frame.columns), None)
    if column is None:
        return frame
    out = frame.copy()
    out.insert(out.columns.get_loc(column) + 1, "size_unit", out.kernel.map(lambda k: kernels[k].size_unit))
    return out
