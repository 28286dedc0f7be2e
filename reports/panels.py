"""The blocks of the report's pages: figures, the numbers each figure draws (shown as tables and
written as CSV files beside the figure) and the seeds' published figures measuring the same thing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from portabench.implementations import list_kernels

from .figures import slug
from .metrics import SYSTEM
from .published import KERNEL_PANEL
from .studies import Study

PCT_SHOWN = SYSTEM + ["kernel", "case", "size", "size_unit", "variant", "family", "noisy", "in_cache", "gbs", "pct_peak", "pct_peak_best",
                      "pct_measured_peak", "gbs_counted", "pct_peak_counted", "noise_floor_pct"]
SPEEDUP_SHOWN = SYSTEM + ["kernel", "case", "size", "size_unit", "variant", "reference", "t_reference_s",
                          "t_portable_s", "speedup", "noisy"]
PREPARATION_SHOWN = SYSTEM + ["kernel", "case", "size", "size_unit", "variant", "t_preparation_s", "t_kernel_s",
                              "preparation_in_runs", "noisy"]


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
                  kernel_figures: dict[tuple, dict[str, Path]], studies: list[Study], beside: pd.DataFrame,
                  fig_dir: Path) -> list[Panel]:
    """Every panel of one machine's page, by device then kernel: the kernel's % of peak and speedup
    figures, then its studies. ``pct`` and ``spd`` hold what the figures draw (one size per kernel)."""
    keys = {(d, k) for (m, d, k) in kernel_figures if m == machine}
    keys |= {(d, k) for s in studies for (m, d, k) in s.figures if m == machine}
    panels = []
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
                "% of peak per case (the seed 000's Figures 16 and 18) and the speedup of each portable variant "
                "over the fastest vendor variant (its Figures 17 and 19).",
                [figures[k] for k in ("pct", "speedup") if k in figures], numbers,
                _beside(beside, machine, device, kernel, KERNEL_PANEL)))
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
