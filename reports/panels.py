"""The blocks of the report's pages: figures, the numbers each figure draws (shown as tables and
written as CSV files beside the figure) and the papers' published figures measuring the same thing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from portabench.harness.statistics import MIN_COMMITS, MIN_STEP, STEP_ALPHA as ALPHA
from portabench.implementations import list_kernels
from portabench.implementations.model import MAIN

from .changes import history_table
from .figures import slug
from .metrics import SYSTEM
from .published import KERNEL_PANEL
from .results import KERNEL_MEASURE
from .studies import StudyTable

PCT_SHOWN = SYSTEM + ["kernel", "case", "size", "size_unit", "variant", "family", "noisy", "in_cache", "gbs", "pct_peak", "pct_peak_best",
                      "pct_measured_peak", "gbs_counted", "pct_peak_counted", "noise_floor_pct"]
SPEEDUP_SHOWN = SYSTEM + ["kernel", "case", "size", "size_unit", "variant", "fastest_vendor", "t_fastest_vendor_s",
                          "t_portable_s", "speedup", "noisy"]
PREPARATION_SHOWN = SYSTEM + ["kernel", "case", "size", "size_unit", "variant", "t_preparation_s", "t_kernel_s",
                              "preparation_in_runs", "noisy"]
CHANGES_SHOWN = ["device", "kernel", "study", "case", "size", "size_unit", "variant", "settings", "measure",
                 "commit range", "t_before_s", "t_after_s", "ratio", "change_pct", "direction", "p_value"]


@dataclass
class Numbers:
    """One table of numbers, shown on the page and written as ``csv``."""

    caption: str
    frame: pd.DataFrame
    csv: Path


@dataclass
class Panel:
    """A titled block: figures, their numbers (``numbers[i]`` are what ``images[i]`` draws; any further ones
    have no figure), and the published figures shown beside them."""

    anchor: str
    title: str
    intro: str
    images: list[Path]
    numbers: list[Numbers]
    published: pd.DataFrame = field(default_factory=pd.DataFrame)


def _of(frame: pd.DataFrame, machine: str, device: str, kernel: str) -> pd.DataFrame:
    picked = frame[(frame.machine == machine) & (frame.device == device) & (frame.kernel == kernel)]
    return picked.dropna(axis=1, how="all").reset_index(drop=True)  # e.g. counted re-reads: some kernels only


def _beside(beside: pd.DataFrame, machine: str, device: str, kernel: str, panel: str) -> pd.DataFrame:
    return beside[(beside.machine == machine) & (beside.system_device == device) & (beside.kernel == kernel)
                  & (beside.panel == panel)]


def _kernel_order(key: tuple[str, str]) -> tuple[str, int]:
    device, kernel = key
    kernels = list_kernels()
    return device, kernels.index(kernel) if kernel in kernels else len(kernels)


def system_panels(machine: str, pct: pd.DataFrame, spd: pd.DataFrame, prep: pd.DataFrame,
                  kernel_figures: dict[tuple, dict[str, Path]], studies: list[StudyTable], beside: pd.DataFrame,
                  fig_dir: Path, histories: dict[tuple, Path] | None = None, points: pd.DataFrame | None = None,
                  found: pd.DataFrame | None = None) -> list[Panel]:
    """Every panel of one machine's page: the changes across commits (``found``: ``changes.changes``), then
    by device and kernel the kernel's % of peak and speedup figures, its history figure (``histories``,
    drawing ``points``: ``changes.history``) and its studies. ``pct`` and ``spd`` hold what the figures draw
    (one size per kernel)."""
    histories = histories or {}
    keys = {(d, k) for (m, d, k) in kernel_figures if m == machine}
    keys |= {(d, k) for s in studies for (m, d, k) in s.figures if m == machine}
    keys |= {(d, k) for (m, d, k) in histories if m == machine}
    panels = [] if found is None else [changes_panel(machine, found, fig_dir)]
    for device, kernel in sorted(keys, key=_kernel_order):
        stem = slug(machine, device, kernel)
        figures = kernel_figures.get((machine, device, kernel), {})
        if figures:
            rates = _of(pct, machine, device, kernel)
            # Every case in cache: no % of peak chart, its table (GB/s, marked in cache) all the same.
            numbers = [Numbers("% of peak", rates[[c for c in PCT_SHOWN if c in rates]],
                               figures.get("pct", fig_dir / f"{stem}-pct.png").with_suffix(".csv"))]
            if "speedup" in figures:
                numbers.append(Numbers("speedup over the fastest vendor variant",
                                       _of(spd, machine, device, kernel)[SPEEDUP_SHOWN], figures["speedup"].with_suffix(".csv")))
            runs = _of(prep, machine, device, kernel)
            if len(runs):
                numbers.append(Numbers("preparation, in runs of the kernel", runs[PREPARATION_SHOWN],
                                       fig_dir / f"{stem}-preparation.csv"))
            panels.append(Panel(
                stem, f"{kernel} on {device}",
                "% of peak per case (the paper [000]'s Figures 16 and 18) and the speedup of each portable variant "
                "over the fastest vendor variant (its Figures 17 and 19).",
                [figures[k] for k in ("pct", "speedup") if k in figures], numbers,
                _beside(beside, machine, device, kernel, KERNEL_PANEL)))
        path = histories.get((machine, device, kernel))
        if path is not None and points is not None:
            mine = _of(points, machine, device, kernel)
            first = mine.iloc[0]
            panels.append(Panel(
                f"{stem}-history", f"History across commits: {kernel} on {device}",
                f"Each case and variant of the main comparison at size {first['size']} {first['size_unit']}: its "
                "median time at every commit that ran it (in date order), over its time at the latest one, on a "
                "log scale. A triangle marks a step at the first commit after it (up, red: slower; down, green: "
                "faster), as listed under Changes across commits.",
                [path], [Numbers("time over the latest commit's, per commit", history_table(mine),
                                 path.with_suffix(".csv"))]))
        for study in studies:
            path = study.figures.get((machine, device, kernel))
            if path is None:
                continue
            panels.append(Panel(
                f"{stem}-{study.name}", f"{study.title}: {kernel} on {device}", study.intro, [path],
                [Numbers(study.title, _of(study.table, machine, device, kernel), path.with_suffix(".csv"))],
                _beside(beside, machine, device, kernel, study.name)))
    return panels


def cross_panels(cross_figures: dict[str, list[Path]], pct: pd.DataFrame, spd: pd.DataFrame) -> list[Panel]:
    """Per kernel, every system side by side: mean (min, max) % of peak over cases per variant, and
    the geomean speedups. ``pct`` has ``with_basis`` columns."""
    panels = []
    for kernel, paths in cross_figures.items():
        rows = pct[(pct.kernel == kernel) & pct.pct.notna()]
        spread = (rows.groupby(SYSTEM + ["variant", "family", "basis"]).pct.agg(["mean", "min", "max", "count"])
                  .reset_index().rename(columns={"mean": "mean % of peak", "min": "min", "max": "max", "count": "cases"}))
        numbers = [Numbers("% of peak over cases", spread, paths[0].with_suffix(".csv"))]
        geo = spd[(spd.kernel == kernel) & (spd.case == "geomean")]
        if len(paths) > 1 and len(geo):
            numbers.append(Numbers("geomean speedup over the fastest vendor variant",
                                   geo[SYSTEM + ["size", "size_unit", "variant", "speedup", "noisy", "n_cases"]].reset_index(drop=True),
                                   paths[1].with_suffix(".csv")))
        panels.append(Panel(slug("all", kernel), f"{kernel} on every system", "", paths, numbers))
    return panels


def changes_panel(machine: str, found: pd.DataFrame, fig_dir: Path) -> Panel:
    """The machine's steps across commits (``changes.changes``), a table per device and kernel, each step
    with its commit range."""
    mine = found[found.machine == machine]
    mine = mine.assign(**{"commit range": mine.before + " (" + mine.before_date + ") .. " + mine.after + " ("
                          + mine.after_date + ")"})
    plain = {"settings": "", "measure": KERNEL_MEASURE}  # columns shown only where a row differs
    numbers = []
    for device, kernel in sorted(set(zip(mine.device, mine.kernel)), key=_kernel_order):
        rows = mine[(mine.device == device) & (mine.kernel == kernel)]
        rows = rows.sort_values("study", key=lambda study: study != MAIN, kind="stable")  # the main comparison first
        shown = [c for c in CHANGES_SHOWN if c not in plain or (rows[c].fillna("") != plain[c]).any()]
        numbers.append(Numbers(f"{kernel} on {device}", rows[shown].reset_index(drop=True),
                               fig_dir / f"{slug(machine, device, kernel)}-changes.csv"))
    rule = (f"Per benchmark row with at least {MIN_COMMITS} commits, its median time at each commit in date order: "
            f"a step is listed where Student's t-test of the log times on its two sides gives p ≤ {ALPHA:g} and "
            f"their medians differ by at least {100 * MIN_STEP:g} % (or the row's noise floor), found by ruptures' "
            "PELT (reports/changes.py). Ratio: the median time after the step over the one before (> 1: "
            "slower), each side reaching to the neighbouring step.")
    count = (f"{len(mine)} step(s): {(mine.direction == 'slower').sum()} slower, "
             f"{(mine.direction == 'faster').sum()} faster. ")
    return Panel(f"{slug(machine)}-changes", "Changes across commits", count + rule, [], numbers)
