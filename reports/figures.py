"""Seaborn bar charts: % of peak per case (the paper's Figure 16) and portable speedup (Figure 17)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import inspect
import multiprocessing
import os
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

import matplotlib

matplotlib.use("Agg")  # before pyplot: reports are built on headless machines

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from .metrics import SYSTEM, case_rank  # noqa: E402

MEASURED_MARK = " *"
MAX_LABELLED_BARS = 40

_deferred: list[tuple[str, str, tuple, dict]] | None = None  # figures to draw when ``drawn_together`` ends


def deferrable(draw: Callable[..., Path]) -> Callable[..., Path]:
    """A figure function (it writes its ``path`` argument and returns it) whose calls inside
    ``drawn_together`` are only recorded, to be drawn there together."""
    signature = inspect.signature(draw)

    @functools.wraps(draw)
    def call(*args: Any, **kwargs: Any) -> Path:
        if _deferred is None:
            return draw(*args, **kwargs)
        _deferred.append((draw.__module__, draw.__qualname__, args, kwargs))
        return Path(signature.bind(*args, **kwargs).arguments["path"])

    return call


def _draw(job: tuple[str, str, tuple, dict]) -> Path:
    module, name, args, kwargs = job
    return getattr(importlib.import_module(module), name)(*args, **kwargs)


@contextlib.contextmanager
def drawn_together(workers: int | None = None) -> Iterator[None]:
    """Figures asked for in the block are drawn at its end, on every core: a report draws about a
    hundred, each a fraction of a second in Matplotlib (most of a report's time on one core)."""
    global _deferred
    _deferred = []
    try:
        yield
        jobs = _deferred
        _deferred = None
        workers = min(workers or os.cpu_count() or 1, len(jobs))
        if workers <= 1:
            for job in jobs:
                _draw(job)
        else:  # spawned, not forked: the report's process may hold threads (Numba, BLAS)
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                list(pool.map(_draw, jobs, chunksize=max(1, len(jobs) // (4 * workers))))
    finally:
        _deferred = None


def slug(*parts: str) -> str:
    """A file-name-safe name from free text (machine names come from the user)."""
    name = "-".join(parts)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_.") or "x"
    # Two names that differ only in unsafe characters must not share a file.
    return safe if safe == name else f"{safe}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


def variant_label(frame: pd.DataFrame) -> pd.Series:
    """"numba-prange (portable)": the key of a variant's colour in every figure."""
    return frame.variant + " (" + frame.family + ")"


def palette(variants: pd.DataFrame) -> dict[str, tuple]:
    """One colour per variant label, the same in every figure, and different colours for the variants of
    one kernel (a figure shows one kernel). Portable variants first: the order of every legend."""
    choices = [*sns.color_palette("tab10"), *sns.color_palette("Dark2"), *sns.color_palette("Set1")]
    labelled = variants.assign(label=variant_label(variants))
    colors: dict[str, tuple] = {}
    # A label shared by two kernels (cupy-atomic: MTTKRP and Φ) keeps its colour; the others avoid it.
    for _, labels in sorted(labelled.groupby("kernel").label):
        taken = {colors[label] for label in set(labels) if label in colors}
        for label in sorted(set(labels) - set(colors)):
            colors[label] = next(c for c in choices if c not in taken)
            taken.add(colors[label])
    return dict(sorted(colors.items(), key=lambda item: (not item[0].endswith("(portable)"), item[0])))


@deferrable
def bar_chart(data: pd.DataFrame, x: str, y: str, ylabel: str, title: str, path: Path, colors: dict,
              line: float | None = None, spread: bool = False) -> Path:
    """Bars of ``y`` per ``x``, one colour per ``data.hue`` (``colors``: hue -> colour), written to ``path``."""
    order = list(dict.fromkeys(data[x]))
    hues = [h for h in colors if h in set(data.hue)]
    width = min(18.0, 3.5 + 0.4 * len(order) * len(hues))
    fig, ax = plt.subplots(figsize=(max(width, 6.0), 4.2))
    sns.barplot(data=data, x=x, y=y, hue="hue", order=order, hue_order=hues, palette=colors, ax=ax,
                estimator="mean", errorbar=("pi", 100) if spread else None, capsize=0.15 if spread else 0)
    if line is not None:
        ax.axhline(line, color="black", linewidth=1, linestyle="--")
    # Value labels would collide with the whiskers, or with each other beyond a few dozen bars
    # (MTTKRP's cases x modes x ranks); the numbers are in the table beside the figure.
    if not spread and len(order) * len(hues) <= MAX_LABELLED_BARS:
        for bars in ax.containers:
            ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=1)
    ax.set_ylim(0, max(data[y].max() * 1.15, (line or 0) * 1.15, 1e-9))
    ax.set(xlabel="", ylabel=ylabel, title=title)
    if sum(len(str(label)) for label in order) > 8 * max(width, 6.0):  # long case names would overlap
        ax.tick_params(axis="x", labelrotation=60, labelsize=8)
        plt.setp(ax.get_xticklabels(), ha="right", rotation_mode="anchor")
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1), frameon=False, title=None, fontsize=8)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def system_figures(pct: pd.DataFrame, spd: pd.DataFrame, fig_dir: Path, colors: dict) -> dict[tuple, dict[str, Path]]:
    """Per (machine, device, kernel): the % of peak chart ("pct") and, where there is a vendor, the speedup
    chart ("speedup"). ``pct`` has ``with_basis`` columns; both tables hold one size per (machine, device, kernel)."""
    figures: dict[tuple, dict[str, Path]] = {}
    for (machine, device, kernel), every in pct.groupby(SYSTEM + ["kernel"], sort=True):
        # No peak of either kind, or in cache: no bar; the speedups are drawn all the same.
        rows = every.dropna(subset=["pct"])
        rows = rows.assign(hue=variant_label(rows), _rank=case_rank(rows)).sort_values(["_rank", "case"])
        paths = {}
        if len(rows):
            first = rows.iloc[0]
            if first.basis == "theoretical":
                ylabel = f"% of theoretical peak ({first.peak_gbs:.4g} GB/s)"
            else:
                ylabel = f"% of measured peak\n({first.measured_peak_gbs:.4g} GB/s: best STREAM median of any run)"
            title = f"{machine} {device}: {kernel}, size {first['size']} {first['size_unit']}"
            paths["pct"] = bar_chart(rows, "case", "pct", ylabel, title,
                                     fig_dir / f"{slug(machine, device, kernel)}-pct.png", colors)
        s = spd[(spd.machine == machine) & (spd.device == device) & (spd.kernel == kernel)]
        if len(s):
            s = s.assign(hue=s.variant + " (portable)")
            paths["speedup"] = bar_chart(s, "case", "speedup", "speedup over fastest vendor variant\n(>1: portable faster)",
                                         f"{machine} {device}: {kernel}, portable / vendor",
                                         fig_dir / f"{slug(machine, device, kernel)}-speedup.png", colors, line=1.0)
        if paths:
            figures[(machine, device, kernel)] = paths
    return figures


def cross_figures(pct: pd.DataFrame, spd: pd.DataFrame, fig_dir: Path, colors: dict) -> dict[str, list[Path]]:
    """Per kernel, all systems side by side: mean % of peak over cases, and geomean speedup."""
    figures: dict[str, list[Path]] = {}
    for kernel, rows in pct.dropna(subset=["pct"]).groupby("kernel", sort=True):
        mark = rows.basis.map({"theoretical": "", "measured": MEASURED_MARK})
        rows = rows.assign(hue=variant_label(rows), system=rows.machine + "\n" + rows.device + mark)
        note = f"\n({MEASURED_MARK.strip()} = of measured peak: theoretical unknown)" if mark.any() else ""
        paths = [bar_chart(rows, "system", "pct", f"% of peak, mean over cases (whiskers: min-max){note}",
                       f"{kernel}: % of peak on every system", fig_dir / f"{slug('all', kernel)}-pct.png",
                       colors, spread=True)]
        s = spd[(spd.kernel == kernel) & (spd.case == "geomean")]
        if len(s):
            s = s.assign(hue=s.variant + " (portable)", system=s.machine + "\n" + s.device)
            paths.append(bar_chart(s, "system", "speedup", "geomean speedup over fastest vendor\n(>1: portable faster)",
                               f"{kernel}: portable over vendor on every system",
                               fig_dir / f"{slug('all', kernel)}-speedup.png", colors, line=1.0))
        figures[kernel] = paths
    return figures
