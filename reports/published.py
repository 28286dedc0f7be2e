"""The papers' published figures (``reference/published.csv``) beside this suite's numbers.

For each published row and each system (machine, device) with results of its kernel on a
matching device, the suite's own number for the same quantity, computed from the report's
tables the way the paper computed its own (e.g. Kokkos' STREAM % of peak: the portable
variant's mean over copy, scale, add and triad). Quantities the suite does not measure the
same way (another machine's roofline, a CP-ALS iteration, iteration counts) are shown as
context, saying why there is no number beside them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from portabench.implementations import PortabenchError, get_kernel
from portabench.implementations.model import Sweep

from .metrics import SYSTEM, geomean

KERNEL_PANEL = "kernel"
# The kernel's study against one parameter (``Kernel.sweeps``): the one over its cases, or the one over the size.
CASE_SWEEP, SIZE_SWEEP = "case sweep", "size sweep"
# Which panel of a system page shows a quantity (the study's name, else the kernel's own panel).
PANEL_OF = {"launch_speedup_mean": "launch_policies", "pressure_speedup": "pressure_points",
            "roofline_bound_gflops": "roofline", "block_size_limit": CASE_SWEEP,
            "best_from_block_size": CASE_SWEEP, "iterations_max": SIZE_SWEEP}
NOT_COMPARABLE = {
    "roofline_bound_gflops": "a bound of the paper's hardware; this system's roofs are in its roofline figure",
    "iterations_max": "iteration counts are asv track_ results, which the report does not read "
                      "(asv's own pages show them)",
    "sorting_cost": "the paper divides by one CP-ALS iteration; the preparation table here divides by one "
                    "MTTKRP run",
}
BESIDE_COLUMNS = ["kernel", "device", "quantity", "detail", "paper", "context", "source", "quote", "machine",
                  "system_device", "suite", "suite_value", "panel"]


@dataclass
class SuiteNumbers:
    """The report's tables the matches are computed from."""

    pct: pd.DataFrame  # with_basis % of peak, largest size per (machine, device, kernel)
    spd: pd.DataFrame  # speedups, largest size, per case and geomean rows
    rows: pd.DataFrame  # the compared latest rows, every size
    studies: dict[str, pd.DataFrame]  # study name -> its table
    measured: dict[str, dict[str, float]]  # machine -> device -> measured peak (results.measured_peaks_by_machine)


Match = tuple[float, str]


def _of(frame: pd.DataFrame, machine: str, device: str, kernel: str | None = None) -> pd.DataFrame:
    keep = (frame.machine == machine) & (frame.device == device)
    if kernel is not None:
        keep &= frame.kernel == kernel
    return frame[keep]


def _cases(detail: str) -> list[str]:
    return [c for c in detail.split("|") if c]


def _x(value: float) -> str:
    return f"{value:.3g}×"


def _pct_peak_mean(n: SuiteNumbers, figure: pd.Series, machine: str, device: str) -> Match | None:
    p = _of(n.pct, machine, device, figure.kernel)
    p = p[(p.family == "portable") & p.pct.notna()]
    if _cases(figure.detail):
        p = p[p.case.isin(_cases(figure.detail))]
    if p.empty:
        return None
    best = p.groupby("case").pct.max()
    return float(best.mean()), (f"{best.mean():.3g} % of {p.basis.iloc[0]} peak (best portable variant, "
                                f"mean over {len(best)} cases)")


def _per_case_speedups(n: SuiteNumbers, figure: pd.Series, machine: str, device: str) -> pd.DataFrame:
    s = _of(n.spd, machine, device, figure.kernel)
    return s[s.case != "geomean"]


def _speedup_geomean(n: SuiteNumbers, figure: pd.Series, machine: str, device: str) -> Match | None:
    s = _per_case_speedups(n, figure, machine, device)
    if _cases(figure.detail):
        s = s[s.case.isin(_cases(figure.detail))]
    if s.empty:
        return None
    by_variant = s.groupby("variant").speedup.agg(geomean)
    variant = by_variant.idxmax()
    return float(by_variant.max()), (f"{_x(by_variant.max())} ({variant} over the fastest vendor variant, "
                                     f"geomean of {int((s.variant == variant).sum())} cases)")


def _speedup_case(n: SuiteNumbers, figure: pd.Series, machine: str, device: str) -> Match | None:
    s = _per_case_speedups(n, figure, machine, device)
    s = s[s.case.str.split(" (", regex=False).str[0] == figure.detail]
    if s.empty:
        return None
    best = s.groupby("case").speedup.max()
    return geomean(best), (f"{_x(best.min())} to {_x(best.max())} over {len(best)} cases "
                           f"(best portable variant per case; geomean {_x(geomean(best))})")


def _stream_measured_gbs(n: SuiteNumbers, figure: pd.Series, machine: str, device: str) -> Match | None:
    gbs = n.measured.get(machine, {}).get(device)
    if gbs is None:
        return None
    peaks = _of(n.pct, machine, device).peak_gbs.dropna()
    share = f" = {100 * gbs / peaks.iloc[0]:.3g} % of {peaks.iloc[0]:.4g} GB/s theoretical" if len(peaks) else ""
    return gbs, f"{gbs:.4g} GB/s (best STREAM median of any run{share})"


def _study(n: SuiteNumbers, name: str, machine: str, device: str, kernel: str) -> pd.DataFrame:
    table = n.studies.get(name)
    return pd.DataFrame() if table is None else _of(table, machine, device, kernel)


def _sweep(kernel: str, kind: str) -> Sweep | None:
    """The kernel's declared study over its cases (``CASE_SWEEP``) or over the size (``SIZE_SWEEP``), if any."""
    try:
        sweeps = get_kernel(kernel).sweeps
    except PortabenchError:
        return None
    return next((s for s in sweeps if (s.study is not None) == (kind == CASE_SWEEP)), None)


def _case_sweep(n: SuiteNumbers, machine: str, device: str, kernel: str) -> tuple[pd.DataFrame, str]:
    """The table of the kernel's study over its cases on one system, and its axis' column."""
    sweep = _sweep(kernel, CASE_SWEEP)
    return (pd.DataFrame(), "") if sweep is None else (_study(n, sweep.name, machine, device, kernel), sweep.axis)


def _geomean_and_range(speedups: pd.Series) -> Match | None:
    if speedups.empty:
        return None
    g = geomean(speedups)
    return g, f"{_x(g)} geomean, {_x(speedups.min())} to {_x(speedups.max())} over {len(speedups)} cases x variants"


def _launch_speedup_mean(n: SuiteNumbers, figure: pd.Series, machine: str, device: str) -> Match | None:
    t = _study(n, "launch_policies", machine, device, figure.kernel)
    return None if t.empty else _geomean_and_range(t.speedup)


def _pressure_speedup(n: SuiteNumbers, figure: pd.Series, machine: str, device: str) -> Match | None:
    t = _study(n, "pressure_points", machine, device, figure.kernel)
    return None if t.empty else _geomean_and_range(t[(t.perturbation == figure.detail) & (t.case != "geomean")].speedup)


def _block_size_limit(n: SuiteNumbers, figure: pd.Series, machine: str, device: str) -> Match | None:
    t, axis = _case_sweep(n, machine, device, figure.kernel)
    if t.empty:
        return None
    sizes = t[t.variant == figure.detail][axis]
    if sizes.empty:
        return None
    return float(sizes.max()), f"bs {sizes.max()}: the largest block size with a {figure.detail} result"


def _best_from_block_size(n: SuiteNumbers, figure: pd.Series, machine: str, device: str) -> Match | None:
    t, axis = _case_sweep(n, machine, device, figure.kernel)
    if t.empty:
        return None
    target, *others = _cases(figure.detail)
    t = t[t.variant.isin([target, *others])]
    if t.empty or target not in set(t.variant):
        return None
    # Equal bytes at every block size: the highest GB/s is the fastest.
    winners = t.loc[t.groupby(axis).gbs.idxmax()].sort_values(axis)
    tail = []
    for bs, variant in zip(winners[axis][::-1], winners.variant[::-1]):
        if variant != target:
            break
        tail.append(bs)
    if not tail:
        last = winners.iloc[-1]
        return math.nan, f"{target} is not the fastest at bs {last[axis]} ({last.variant} is)"
    return float(min(tail)), f"bs {min(tail)}: from there on {target} is the fastest of {', '.join([target, *others])}"


def _variant_speedup_max(n: SuiteNumbers, figure: pd.Series, machine: str, device: str) -> Match | None:
    variant, baseline = _cases(figure.detail)
    r = _of(n.rows, machine, device, figure.kernel)
    r = r[r["size"] == r["size"].max()]
    times = r.pivot_table(index="case", columns="variant", values="time_s")
    if variant not in times or baseline not in times:
        return None
    ratio = (times[baseline] / times[variant]).dropna()
    if ratio.empty:
        return None
    return float(ratio.max()), (f"{_x(ratio.max())} at most ({_x(ratio.min())} at least) over {len(ratio)} cases, "
                                f"N = {r['size'].max()}")


MATCHERS: dict[str, Callable[[SuiteNumbers, pd.Series, str, str], Match | None]] = {
    "pct_peak_mean": _pct_peak_mean, "speedup_geomean": _speedup_geomean, "speedup_case": _speedup_case,
    "stream_measured_gbs": _stream_measured_gbs, "launch_speedup_mean": _launch_speedup_mean,
    "pressure_speedup": _pressure_speedup, "block_size_limit": _block_size_limit,
    "best_from_block_size": _best_from_block_size, "variant_speedup_max": _variant_speedup_max,
}


def paper_text(figure: pd.Series) -> str:
    """The paper's number as stated: value, range, or both."""
    unit = "×" if figure.unit == "x" else f" {figure.unit}" if figure.unit != "%" else " %"
    value = "" if math.isnan(figure.value) else f"{figure.value:g}{unit}"
    span = "" if math.isnan(figure.low) else f"{figure.low:g} to {figure.high:g}{unit}"
    return f"{value} ({span})" if value and span else value or span


def beside(published: pd.DataFrame, numbers: SuiteNumbers) -> pd.DataFrame:
    """One row per (published figure, system with results of its kernel on a matching device):
    the paper's number and the suite's (``suite``: text; ``suite_value``: NaN where none)."""
    systems = pd.concat([numbers.pct[SYSTEM + ["kernel"]], numbers.rows[SYSTEM + ["kernel"]]]).drop_duplicates()
    out = []
    for _, figure in published.iterrows():
        here = systems[systems.kernel == figure.kernel]
        if figure.device:
            here = here[here.device == figure.device]
        found = sorted(set(zip(here.machine, here.device)))
        if not found:
            out.append(_row(figure, "", "", math.nan, "no system in these results runs this kernel on such a device"))
        for machine, device in found:
            matcher = MATCHERS.get(figure.quantity)
            if matcher is None:
                value, text = math.nan, f"not comparable: {NOT_COMPARABLE[figure.quantity]}"
            else:
                value, text = matcher(numbers, figure, machine, device) or (math.nan, "no results of this kind here")
            out.append(_row(figure, machine, device, value, text))
    return pd.DataFrame(out, columns=BESIDE_COLUMNS)


def _row(figure: pd.Series, machine: str, device: str, value: float, text: str) -> dict:
    return {**{k: figure[k] for k in ("kernel", "device", "quantity", "detail", "context", "source", "quote")},
            "paper": paper_text(figure), "machine": machine, "system_device": device, "suite": text,
            "suite_value": value, "panel": _panel(figure)}


def _panel(figure: pd.Series) -> str:
    """The panel of a system page that shows the quantity of ``figure`` (``PANEL_OF``)."""
    panel = PANEL_OF.get(figure.quantity, KERNEL_PANEL)
    if panel in (CASE_SWEEP, SIZE_SWEEP):
        sweep = _sweep(figure.kernel, panel)
        return KERNEL_PANEL if sweep is None else sweep.name
    return panel
